"""Open a trace path and decode it into a :class:`TraceEvents` store.

Plain files are memory-mapped; a big ``.json.gz`` is inflated into a
temporary file, by a thread while workers decode what is written when there
are several cores (:mod:`tuiprof.trace.inflating`).  The event array is cut
into spans that are decoded in this process or, for big files on several
cores, in worker processes (:mod:`tuiprof.trace.parallel`), and merged in
file order.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tuiprof.cleanup import temporary_file
from tuiprof.errors import TraceError
from tuiprof.trace.cache import HashingWriter, cache_enabled, file_key, keyed_by_content, read_store
from tuiprof.trace.columns import columns_from_events
from tuiprof.trace.decode import DecodeReport, DocumentPlan, plan_document, plan_growing_document
from tuiprof.trace.inflating import InflatingFile
from tuiprof.trace.parallel import DecodeWorkers, decode_columns, decode_file_span, worker_count
from tuiprof.trace.source import (
    STDIN,
    ReadProgress,
    TraceFile,
    gzip_to_file,
    inflated_size,
    inflation_directory,
    is_gzip,
    read_trace_bytes,
    resolve_trace,
    spool_stream,
)
from tuiprof.trace.store import StoreBuilder, TraceEvents


@dataclass(frozen=True)
class LoadProgress:
    """A progress report: which phase, how far, for a progress bar."""

    phase: str  # "reading" | "decoding"
    done_bytes: int
    total_bytes: int
    events: int


ProgressCallback = Callable[[LoadProgress], None]


def load_trace(
    path: str | os.PathLike[str],
    select: str | None = None,
    progress: ProgressCallback | None = None,
) -> TraceEvents:
    """Read and decode the trace at ``path`` (a file or a run directory)."""
    trace, _ = resolve_trace(path, select)
    return load_trace_file(trace, progress)


# A gzip trace this big (compressed) is inflated into a temporary file and
# decoded from there: workers read it, and it stays out of this process.
GZIP_TO_FILE_BYTES = 4 << 20


def load_trace_file(trace: TraceFile, progress: ProgressCallback | None = None) -> TraceEvents:
    """The trace's store: from the cache when it holds this trace (:mod:`tuiprof.trace.cache`),
    else decoded, with the ``cache_key`` to save it under once it has been shown."""
    source = display_name(trace)
    on_read = None
    if progress:
        on_read = lambda done, total: progress(LoadProgress("reading", done, total, 0))  # noqa: E731
    if trace.stream:
        with spooled(trace, on_read) as plain:
            return _cached_or_decoded(source, plain, lambda: _load(source, plain, progress))
    return _cached_or_decoded(source, trace, lambda: _decoded(source, trace, progress, on_read))


def _cached_or_decoded(source: str, trace: TraceFile, decode: Callable[[], TraceEvents]) -> TraceEvents:
    key = file_key(trace)
    cached = read_store(key, source, trace)
    if cached is not None:
        return _checked(cached)
    store = decode()
    store.cache_key = key
    return store


def _decoded(
    source: str, trace: TraceFile, progress: ProgressCallback | None, on_read: ReadProgress | None
) -> TraceEvents:
    if trace.size_bytes >= GZIP_TO_FILE_BYTES and is_gzip(trace):
        expected = inflated_size(trace)
        with temporary_file(directory=inflation_directory(trace.size_bytes)) as inflated:
            if worker_count(expected) > 1:
                return _load_inflating(source, trace, inflated, expected, progress)
            gzip_to_file(trace, inflated, on_read)
            plain = TraceFile(Path(inflated.name), os.path.getsize(inflated.name), trace.rank)
            return _load(source, plain, progress)
    return _load(source, trace, progress, on_read)


def display_name(trace: TraceFile) -> str:
    """The trace as messages name it: ``stdin`` for ``-``, else the path (shown escaped by
    whoever displays it: :mod:`tuiprof.report.plain`)."""
    return "stdin" if trace.path == Path(STDIN) and trace.stream else str(trace.path)


@contextlib.contextmanager
def spooled(trace: TraceFile, on_read: ReadProgress | None = None) -> Iterator[TraceFile]:
    """A pipe's trace copied (inflated) into a temporary file, removed when the block ends;
    with the cache on, the copy is keyed by the hash of its content as read."""
    with temporary_file(prefix="tuiprof-stream-") as copy:
        writer = HashingWriter(copy) if cache_enabled() else None
        spool_stream(trace, writer or copy, on_read)
        with keyed_by_content(Path(copy.name), writer.key() if writer else None):
            yield TraceFile(Path(copy.name), os.path.getsize(copy.name), None)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Decoding allocates millions of untracked structs; the cyclic GC would
    rescan the growing heap over and over for nothing (measured 2-3x)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _load(source: str, trace: TraceFile, progress: ProgressCallback | None, on_read=None) -> TraceEvents:
    report = DecodeReport()
    with _collector_paused():
        data = read_trace_bytes(trace, on_read, source)
        try:
            workers = worker_count(len(data)) if isinstance(data, mmap.mmap) else 1
            store = _decode(
                _Decoding(source, str(trace.path), report, progress, workers, lambda: len(data)),
                lambda: plan_document(data, report, source),
                lambda start, end: decode_columns(data, start, end),
            )
        finally:
            _close(data)
    return _checked(store)


def _load_inflating(
    source: str, trace: TraceFile, target, expected: int, progress: ProgressCallback | None
) -> TraceEvents:
    """A big gzip trace decoded by workers while a thread inflates it into ``target``."""
    report = DecodeReport()
    with _collector_paused(), InflatingFile(trace, target) as document:

        def plan() -> DocumentPlan:
            growing = plan_growing_document(document, report, source)
            if growing is not None:
                return growing
            data = document.complete_bytes()  # another layout: planned once all is there
            return plan_document(data, report, source)

        def total_bytes() -> int:  # the trailer's guess until the document is complete
            return len(document) if document.complete else max(expected, len(document))

        decoding = _Decoding(
            source, document.path, report, progress, worker_count(expected), total_bytes, document.stop
        )
        store = _decode(decoding, plan, lambda start, end: decode_file_span(document.path, start, end))
    return _checked(store)


@dataclass
class _Decoding:
    """What a decode needs beside its plan: where the bytes are, who is told, how many workers."""

    source: str
    path: str
    report: DecodeReport
    progress: ProgressCallback | None
    workers: int
    total_bytes: Callable[[], int]  # for progress; known once the document is complete
    stop_source: Callable[[], None] = lambda: None  # stops a document still being written


def _decode(
    decoding: _Decoding, plan: Callable[[], DocumentPlan], decode_here: Callable[[int, int], tuple]
) -> TraceEvents:
    """Plan the document, decode its spans (in workers if several) and merge them in file order."""
    pool = None
    if decoding.workers > 1:
        try:
            pool = DecodeWorkers(decoding.workers)  # started first: their start-up overlaps the planning
        except OSError:  # no processes can be started here: decode in this one
            pool = None
    report, progress = decoding.report, decoding.progress
    try:
        planned = plan()
        store = TraceEvents(source=decoding.source, header=planned.header, report=report)
        builder = StoreBuilder(store)
        if planned.inline_events:
            builder.add(columns_from_events(planned.inline_events))
        if pool is not None:
            chunks = pool.decode(decoding.path, planned.spans)
        else:
            chunks = ((span, *decode_here(*span)) for span in planned.spans)
        for (_, end), chunk, chunk_report in chunks:
            report.merge(chunk_report)
            builder.add(chunk)
            if progress:
                progress(LoadProgress("decoding", end, max(end, decoding.total_bytes()), store.event_count))
        store.uncompressed_bytes = decoding.total_bytes()
    finally:
        decoding.stop_source()  # first: the feeder may wait for bytes that would never come
        if pool is not None:
            pool.close()  # at once when the load was aborted
    return builder.finish()


def _checked(store: TraceEvents) -> TraceEvents:
    if store.event_count == 0:
        raise TraceError(store.source, "the trace holds no events", "profile at least one active step")
    return store


def _close(data: bytes | mmap.mmap) -> None:
    if isinstance(data, mmap.mmap):
        try:
            data.close()
        except BufferError:
            pass  # a view of it is held by the traceback of a load error: unmapped with it
