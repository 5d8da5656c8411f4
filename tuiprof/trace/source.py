"""Where trace bytes come from: a file, a gzip file, or a run directory.

``tensorboard_trace_handler`` writes ``{worker}.{time_ns}.pt.trace.json[.gz]``
files into one directory, possibly many (ranks x steps).  Files are listed, not
merged: each keeps its own identity (HTA silently overwrote files that share a
rank; we never do).
"""

from __future__ import annotations

import gzip
import mmap
import os
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tuiprof.errors import TraceError

TRACE_SUFFIXES = (".json", ".json.gz")
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class TraceFile:
    """One trace file found at a path the user gave."""

    path: Path
    size_bytes: int
    rank: int | None

    @property
    def name(self) -> str:
        return self.path.name


def is_trace_name(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES)


def list_traces(directory: Path) -> list[TraceFile]:
    """Every trace file directly inside ``directory``, ordered by rank then name."""
    files = [p for p in directory.iterdir() if p.is_file() and is_trace_name(p)]
    found = [TraceFile(p, p.stat().st_size, _peek_rank(p)) for p in files]
    return sorted(found, key=lambda t: (t.rank is None, t.rank if t.rank is not None else 0, t.name))


def resolve_trace(path: str | os.PathLike[str], select: str | None = None) -> tuple[TraceFile, list[TraceFile]]:
    """The file to open for ``path`` and, for a directory, all its traces.

    ``select`` picks within a directory: a rank number, or a substring of a
    file name.  Without it the lowest rank (or first name) is chosen.
    """
    target = Path(path)
    if not target.exists():
        raise TraceError(str(target), "no such file or directory", "check the path")
    if target.is_file():
        trace = TraceFile(target, target.stat().st_size, None)
        return trace, [trace]
    traces = list_traces(target)
    if not traces:
        raise TraceError(
            str(target), "no trace files (*.json, *.json.gz) in this directory", "pass a trace file or a run directory"
        )
    if select is None:
        return traces[0], traces
    chosen = [t for t in traces if select.isdigit() and t.rank == int(select)]
    chosen = chosen or [t for t in traces if select in t.name]
    if not chosen:
        names = ", ".join(t.name for t in traces[:5])
        raise TraceError(str(target), f"no trace matches {select!r}", f"choose a rank or a name among: {names}")
    return chosen[0], traces


def _peek_rank(path: Path) -> int | None:
    try:
        head = read_head(path, 1 << 18)
    except (OSError, EOFError, zlib.error):
        return None
    match = _RANK.search(head)
    return int(match.group(1)) if match else None


def read_head(path: Path, size: int) -> bytes:
    with open(path, "rb") as handle:
        start = handle.read(2)
        handle.seek(0)
        if start == _GZIP_MAGIC:
            with gzip.GzipFile(fileobj=handle) as zipped:
                return zipped.read(size)
        return handle.read(size)


ReadProgress = Callable[[int, int], None]


def read_trace_bytes(trace: TraceFile, progress: ReadProgress | None = None) -> bytes | mmap.mmap:
    """The uncompressed document: an mmap for plain files, bytes for gzip."""
    source = str(trace.path)
    with _open(trace) as handle:
        magic = handle.read(2)
        if magic == _GZIP_MAGIC:
            return _gunzip(handle, trace.size_bytes, source, progress)
        if trace.size_bytes == 0:
            raise TraceError(source, "the file is empty", "pass a trace written by torch.profiler")
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)


def _open(trace: TraceFile):
    try:
        return open(trace.path, "rb")
    except OSError as exc:
        raise TraceError(str(trace.path), f"cannot be read ({exc.strerror})", "check its permissions") from None


def _gunzip(handle, compressed_size: int, source: str, progress: ReadProgress | None) -> bytes:
    parts: list[bytes] = []
    inflate_gzip(handle, compressed_size, source, parts.append, progress)
    return b"".join(parts)


def gzip_to_file(trace: TraceFile, target, progress: ReadProgress | None = None) -> None:
    """Inflate a ``.json.gz`` into the open binary file ``target``, block by block.

    Big gzip traces are decoded from such a file like a plain trace: worker
    processes can map it, and its pages are the kernel's cache, not this
    process's memory.
    """
    source = str(trace.path)
    with _open(trace) as handle:
        try:
            inflate_gzip(handle, trace.size_bytes, source, target.write, progress)
        except OSError as exc:
            raise TraceError(source, f"cannot be inflated ({exc.strerror})", "free space in the temporary folder (TMPDIR)") from None
    target.flush()


def is_gzip(trace: TraceFile) -> bool:
    try:
        with open(trace.path, "rb") as handle:
            return handle.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def inflate_gzip(
    handle, compressed_size: int, source: str, write: Callable[[bytes], object], progress: ReadProgress | None
) -> None:
    """Inflate gzip data (concatenated members too) from ``handle`` into ``write``."""
    handle.seek(0)
    inflater = zlib.decompressobj(wbits=31)
    done = 0
    try:
        while True:
            block = handle.read(8 << 20)
            if not block:
                break
            done += len(block)
            write(inflater.decompress(block))
            while inflater.unused_data:  # concatenated gzip members
                rest = inflater.unused_data
                inflater = zlib.decompressobj(wbits=31)
                write(inflater.decompress(rest))
            if progress:
                progress(done, compressed_size)
        write(inflater.flush())
    except zlib.error as exc:
        raise TraceError(source, f"the gzip data is corrupt ({exc})", "copy the file again") from None
    if not inflater.eof:
        raise TraceError(source, "the gzip file is truncated", "copy the file again, or re-export the trace")
