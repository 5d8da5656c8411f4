"""Open a trace path and decode it into a :class:`TraceEvents` store."""

from __future__ import annotations

import gc
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass

from tuiprof.errors import TraceError
from tuiprof.trace.decode import DecodeReport, decode_document
from tuiprof.trace.source import TraceFile, read_trace_bytes, resolve_trace
from tuiprof.trace.store import TraceEvents


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


def _release_pages(data: bytes | mmap.mmap, upto: int) -> None:
    """Drop the mapped pages already decoded from this process's memory.

    They are clean file pages (the kernel reloads them if touched again);
    without this, a 1 GB file counts 1 GB towards peak RSS while decoding.
    """
    if isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        aligned = upto - upto % mmap.PAGESIZE
        if aligned > 0:
            data.madvise(mmap.MADV_DONTNEED, 0, aligned)


def load_trace_file(trace: TraceFile, progress: ProgressCallback | None = None) -> TraceEvents:
    source = str(trace.path)
    report = DecodeReport()
    # Decoding allocates millions of untracked structs; the cyclic GC would
    # rescan the growing heap over and over for nothing (measured 2-3x).
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        on_read = None
        if progress:
            on_read = lambda done, total: progress(LoadProgress("reading", done, total, 0))  # noqa: E731
        data = read_trace_bytes(trace, on_read)
        store = TraceEvents(source=source, header=None, report=report)  # type: ignore[arg-type]
        store.uncompressed_bytes = len(data)
        def on_decode(done: int, total: int) -> None:
            _release_pages(data, done)
            if progress:
                progress(LoadProgress("decoding", done, total, store.event_count))

        store.header = decode_document(data, store.add_batch, report, on_decode, source)
        close = getattr(data, "close", None)
        if close:
            close()
    finally:
        if gc_was_enabled:
            gc.enable()
    if store.event_count == 0:
        raise TraceError(source, "the trace holds no events", "profile at least one active step")
    return store
