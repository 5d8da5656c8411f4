"""Open a trace path and decode it into a :class:`TraceEvents` store.

Plain files are memory-mapped; a big ``.json.gz`` is first inflated into a
temporary file.  The event array is cut into spans that are decoded in this
process or, for big files on several cores, in worker processes
(:mod:`tuiprof.trace.parallel`), and merged in file order.
"""

from __future__ import annotations

import contextlib
import gc
import mmap
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tuiprof.errors import TraceError
from tuiprof.trace.columns import columns_from_events
from tuiprof.trace.decode import DecodeReport, plan_document
from tuiprof.cleanup import temporary_file
from tuiprof.trace.parallel import DecodeWorkers, decode_columns, worker_count
from tuiprof.trace.source import (
    STDIN,
    ReadProgress,
    TraceFile,
    gzip_to_file,
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
# decoded from there: workers can map it, and it stays out of this process.
GZIP_TO_FILE_BYTES = 4 << 20


def load_trace_file(trace: TraceFile, progress: ProgressCallback | None = None) -> TraceEvents:
    source = display_name(trace)
    on_read = None
    if progress:
        on_read = lambda done, total: progress(LoadProgress("reading", done, total, 0))  # noqa: E731
    if trace.stream:
        with spooled(trace, on_read) as plain:
            return _load(source, plain, progress)
    if trace.size_bytes >= GZIP_TO_FILE_BYTES and is_gzip(trace):
        with temporary_file() as inflated:
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
    """A pipe's trace copied (inflated) into a temporary file, removed when the block ends."""
    with temporary_file(prefix="tuiprof-stream-") as copy:
        spool_stream(trace, copy, on_read)
        yield TraceFile(Path(copy.name), os.path.getsize(copy.name), None)


def _load(source: str, trace: TraceFile, progress: ProgressCallback | None, on_read=None) -> TraceEvents:
    report = DecodeReport()
    # Decoding allocates millions of untracked structs; the cyclic GC would
    # rescan the growing heap over and over for nothing (measured 2-3x).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        data = read_trace_bytes(trace, on_read, source)
        try:
            store = _decode(source, trace, data, report, progress)
        finally:
            _close(data)
    finally:
        if gc_was_enabled:
            gc.enable()
    if store.event_count == 0:
        raise TraceError(source, "the trace holds no events", "profile at least one active step")
    return store


def _decode(
    source: str, trace: TraceFile, data: bytes | mmap.mmap, report: DecodeReport, progress: ProgressCallback | None
) -> TraceEvents:
    workers = worker_count(len(data)) if isinstance(data, mmap.mmap) else 1
    pool = None
    if workers > 1:
        try:
            pool = DecodeWorkers(workers)
        except OSError:  # no processes can be started here: decode in this one
            pool = None
    try:
        plan = plan_document(data, report, source)
        store = TraceEvents(source=source, header=plan.header, report=report)
        store.uncompressed_bytes = len(data)
        builder = StoreBuilder(store)
        if plan.inline_events:
            builder.add(columns_from_events(plan.inline_events))
        if pool is not None:
            chunks = pool.decode(str(trace.path), data, plan.spans)
        else:
            chunks = (decode_columns(data, start, end) for start, end in plan.spans)
        for (_, end), (chunk, chunk_report) in zip(plan.spans, chunks):
            report.merge(chunk_report)
            builder.add(chunk)
            if progress:
                progress(LoadProgress("decoding", end, len(data), store.event_count))
    finally:
        if pool is not None:
            pool.close()  # at once when the load was aborted
    return builder.finish()


def _close(data: bytes | mmap.mmap) -> None:
    if isinstance(data, mmap.mmap):
        try:
            data.close()
        except BufferError:
            pass  # a view of it is held by the traceback of a load error: unmapped with it
