"""Where trace bytes come from: a file, a gzip file, or a run directory.

``tensorboard_trace_handler`` writes ``{worker}.{time_ns}.pt.trace.json[.gz]``
files into one directory, possibly many (ranks x steps).  Files are listed, not
merged: each keeps its own identity (HTA silently overwrote files that share a
rank; we never do).
"""

from __future__ import annotations

import errno
import gzip
import mmap
import os
import re
import stat
import types
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tuiprof.errors import TraceError
from tuiprof.trace.decode import not_a_trace

inflate_lib: types.ModuleType  # either module: the same API (and zlib-ng's stub types its `error` as an instance)
try:  # zlib-ng inflates 2.4x as fast as the stdlib's zlib (307 MB: 0.27 s vs 0.65 s), same API and stream
    from zlib_ng import zlib_ng as inflate_lib
except ImportError:  # a platform without its wheel (see pyproject.toml): the stdlib's
    inflate_lib = zlib
_INFLATE_ERRORS = (zlib.error, inflate_lib.error)

TRACE_SUFFIXES = (".json", ".json.gz")
_RANK = re.compile(rb'"distributedInfo"\s*:\s*\{[^}]*?"rank"\s*:\s*(\d+)')
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class TraceFile:
    """One trace found at a path the user gave.

    ``stream`` marks a pipe (``-`` for stdin, a FIFO, ``<(...)``): its bytes
    can be read once, in order, and are copied into a temporary file first.
    """

    path: Path
    size_bytes: int
    rank: int | None
    stream: bool = False

    @property
    def name(self) -> str:
        return self.path.name


STDIN = "-"


def is_trace_name(path: Path) -> bool:
    return path.name.endswith(TRACE_SUFFIXES)


def trace_entries(directory: Path) -> tuple[list[tuple[Path, os.stat_result]], list[str]]:
    """The regular files with a trace's name directly inside ``directory`` (links followed),
    in name order, and one line for every other entry with a trace's name: a link that
    loops or points at nothing, a FIFO, a device, a socket, a folder.  Never read, never
    waited on (a FIFO is only stat'ed)."""
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)
    except OSError as exc:
        raise TraceError(str(directory), f"cannot be listed ({exc.strerror})", "check its permissions") from None
    found: list[tuple[Path, os.stat_result]] = []
    skipped: list[str] = []
    for entry in entries:
        path = Path(entry.path)
        if not is_trace_name(path):
            continue
        try:
            info = entry.stat()
        except OSError as exc:
            skipped.append(f"{path}: {_unreadable_entry(entry, exc)}; skipped")
            continue
        if stat.S_ISREG(info.st_mode):
            found.append((path, info))
        else:
            link = " a symbolic link to" if entry.is_symlink() else ""
            skipped.append(f"{path}:{link} {_kind(info.st_mode)}, not a trace file; skipped")
    return found, skipped


def _unreadable_entry(entry: os.DirEntry, exc: OSError) -> str:
    if not entry.is_symlink():
        return f"cannot be read ({exc.strerror})"
    if exc.errno == errno.ELOOP:
        return "a symbolic link that loops"
    try:
        return f"a symbolic link to {os.readlink(entry.path)}, which does not exist"
    except OSError:
        return f"a symbolic link that cannot be followed ({exc.strerror})"


def _kind(mode: int) -> str:
    kinds = (
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISDIR, "a folder"),
    )
    return next((name for test, name in kinds if test(mode)), "not a regular file")


def list_traces(directory: Path) -> list[TraceFile]:
    """Every regular trace file directly inside ``directory``, ordered by rank then name."""
    found = [TraceFile(path, info.st_size, _peek_rank(path)) for path, info in trace_entries(directory)[0]]
    return sorted(found, key=lambda t: (t.rank is None, t.rank if t.rank is not None else 0, t.name))


def resolve_trace(path: str | os.PathLike[str], select: str | None = None) -> tuple[TraceFile, list[TraceFile]]:
    """The trace to open for ``path`` and, for a directory, all its traces.

    Supported: a regular file, a run directory, and a pipe (``-`` for stdin,
    a named pipe with a writer, ``<(...)``).  Anything else (a terminal,
    ``/dev/zero``, a socket...) is refused with a :class:`TraceError`.
    ``select`` picks within a directory: a rank number when it is all digits
    (an unknown rank is an error listing the ranks), else a substring of a
    file name.  Without it the lowest rank (or first name) is chosen.
    """
    text = os.fspath(path)
    if text == "":
        raise TraceError("''", "an empty path", "pass a trace file, a run directory, or - for stdin")
    if text == STDIN:
        trace = _stdin_trace()
        return trace, [trace]
    target = Path(text)
    try:
        info = target.stat()
    except FileNotFoundError:
        raise TraceError(str(target), "no such file or directory", "check the path") from None
    except OSError as exc:
        raise TraceError(str(target), f"cannot be opened ({exc.strerror})", "check the path") from None
    if stat.S_ISREG(info.st_mode):
        trace = TraceFile(target, info.st_size, None)
        return trace, [trace]
    if stat.S_ISFIFO(info.st_mode):
        trace = TraceFile(target, 0, None, stream=True)
        return trace, [trace]
    if not stat.S_ISDIR(info.st_mode):
        raise TraceError(
            str(target), "is not a file, a directory or a pipe", "pass a trace file, a run directory, or - for stdin"
        )
    traces = list_traces(target)
    if not traces:
        raise TraceError(
            str(target), "no trace files (*.json, *.json.gz) in this directory", "pass a trace file or a run directory"
        )
    if select is None:
        return traces[0], traces
    return _select(target, traces, select), traces


def _select(directory: Path, traces: list[TraceFile], select: str) -> TraceFile:
    if select.isdigit():
        chosen = [t for t in traces if t.rank == int(select)]
        if not chosen:
            ranks = sorted({t.rank for t in traces if t.rank is not None})
            known = ", ".join(map(str, ranks)) if ranks else "none (the files name no rank)"
            raise TraceError(
                str(directory), f"no trace of rank {select}", f"ranks here: {known}; or pass part of a file name"
            )
        return chosen[0]
    chosen = [t for t in traces if select in t.name]
    if not chosen:
        names = ", ".join(t.name for t in traces[:5])
        raise TraceError(str(directory), f"no trace matches {select!r}", f"choose a rank or a name among: {names}")
    return chosen[0]


def _stdin_trace() -> TraceFile:
    try:
        info = os.fstat(0)
    except OSError:
        raise TraceError("-", "there is no standard input", "pipe a trace into tuiprof, or pass a path") from None
    if os.isatty(0):
        raise TraceError(
            "-", "standard input is a terminal", "pipe a trace into it: cat trace.json.gz | tuiprof open -"
        )
    if not (stat.S_ISFIFO(info.st_mode) or stat.S_ISREG(info.st_mode) or stat.S_ISSOCK(info.st_mode)):
        raise TraceError("-", "standard input is not a file or a pipe", "pipe a trace into it, or pass a path")
    return TraceFile(Path(STDIN), 0, None, stream=True)


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


def check_trace_start(trace: TraceFile) -> None:
    """Refuse at once a file that is empty or whose first bytes cannot start a trace.

    ``tuiprof open`` calls it before the explorer takes the terminal, so
    ``tuiprof open /etc/passwd`` is one line on stderr, not a full-screen
    error page.  A file it cannot read is left to the load, which says why."""
    try:
        head = read_head(trace.path, _LEADING_SPACE + 8)
    except (OSError, EOFError, zlib.error):
        return
    if not head:
        raise TraceError(str(trace.path), "the file is empty", "pass a trace written by torch.profiler")
    start = TraceStart(str(trace.path))
    start.feed(head)
    if len(head) < _LEADING_SPACE + 8:  # the whole file
        start.finish()


ReadProgress = Callable[[int, int], None]
Write = Callable[[bytes], object]

# Decompression bombs: a 10 MB gzip of zeros inflates to 10 GB.  Output comes
# in pieces of at most INFLATE_PIECE bytes, and inflating stops when the
# output passes max_inflate_ratio() times the compressed size (real traces:
# 15-30x with gzip's default level) once it is past INFLATE_FLOOR.
INFLATE_PIECE = 16 << 20
INFLATE_FLOOR = 64 << 20
DEFAULT_MAX_INFLATE_RATIO = 100.0
_READ_BYTES = 1 << 20
_LEADING_SPACE = 1 << 16  # what may come before the first JSON token
_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


def max_inflate_ratio() -> float:
    """The ratio limit: ``TUIPROF_MAX_INFLATE_RATIO`` (0: none) or the default."""
    text = os.environ.get("TUIPROF_MAX_INFLATE_RATIO", "")
    try:
        value = float(text)
    except ValueError:
        return DEFAULT_MAX_INFLATE_RATIO
    return value if value >= 0 and value == value else DEFAULT_MAX_INFLATE_RATIO


# Where a big gzip trace is inflated when the machine has the memory to spare: tmpfs (RAM).
# Inflating into a file on disk cost ~1 CPU s a GB more, the page cache's writing out included
# (docs/big-traces.md, "What is left": gzip).
MEMORY_DIRECTORY = "/dev/shm"


def inflation_directory(compressed_size: int) -> str | None:
    """:data:`MEMORY_DIRECTORY` when the most this gzip may inflate to (its size times the
    ratio limit: a lying trailer cannot raise it) fits there and in half the memory
    available; else None (``TMPDIR``).  Never when ``TMPDIR`` is set (the user's choice) or
    the ratio limit is lifted (no bound)."""
    ratio = max_inflate_ratio()
    if (
        os.environ.get("TMPDIR")
        or not ratio
        or not os.path.isdir(MEMORY_DIRECTORY)
        or not os.access(MEMORY_DIRECTORY, os.W_OK)
    ):
        return None
    most = max(INFLATE_FLOOR, compressed_size * ratio)
    try:
        stats = os.statvfs(MEMORY_DIRECTORY)
        with open("/proc/meminfo", "rb") as meminfo:
            available = next(int(line.split()[1]) * 1024 for line in meminfo if line.startswith(b"MemAvailable:"))
    except (OSError, StopIteration, ValueError, IndexError):
        return None
    return MEMORY_DIRECTORY if most <= stats.f_bavail * stats.f_frsize and 2 * most <= available else None


def set_max_inflate_ratio(ratio: float) -> None:
    """Lift (0) or change the limit for this process and the workers it starts."""
    os.environ["TUIPROF_MAX_INFLATE_RATIO"] = repr(float(ratio))


class StartCheck(Protocol):
    """What checks an inflating document's first bytes: :class:`TraceStart` for traces."""

    def feed(self, data: bytes) -> None: ...

    def finish(self) -> None: ...


class TraceStart:
    """Watches the first bytes of a document: a trace starts ``{"`` or ``[{`` / ``[]``.

    Stops a stream of zeros, random bytes or ``[[[[`` at its first bytes
    instead of after inflating or copying all of it.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self.head = b""
        self.done = False

    def feed(self, data: bytes) -> None:
        if self.done:
            return
        self.head += data[: _LEADING_SPACE + 8]
        text = self.head
        if text.startswith(_BOM):
            text = text[len(_BOM) :]
        tokens = text.lstrip(_SPACE)
        first, rest = tokens[:1], tokens[1:].lstrip(_SPACE)
        if not rest:
            if len(text) > _LEADING_SPACE:  # only whitespace around one bracket so far: not a trace
                self._refuse()
            return
        if (first, rest[:1]) not in (
            (b"{", b'"'),
            (b"{", b"}"),
            (b"[", b"{"),
            (b"[", b"]"),
        ):  # {}: told "no traceEvents" later
            self._refuse()
        self.done = True
        self.head = b""

    def finish(self) -> None:
        if not self.done and self.head.strip(_SPACE):
            self._refuse()

    def _refuse(self) -> None:
        text = self.head[len(_BOM) :] if self.head.startswith(_BOM) else self.head
        raise not_a_trace(self.source, text.lstrip(_SPACE))


def read_trace_bytes(
    trace: TraceFile, progress: ReadProgress | None = None, source: str | None = None
) -> bytes | mmap.mmap:
    """The uncompressed document: an mmap for plain files, bytes for gzip.

    ``source`` names the trace in messages (a temporary copy's origin).
    """
    source = source or str(trace.path)
    with _open(trace) as handle:
        magic = _read(handle.read, 2, source)
        if magic == _GZIP_MAGIC:
            handle.seek(0)
            parts: list[bytes] = []
            inflate_gzip(lambda n: _read(handle.read, n, source), trace.size_bytes, source, parts.append, progress)
            return b"".join(parts)
        if trace.size_bytes == 0:
            raise TraceError(source, "the file is empty", "pass a trace written by torch.profiler")
        try:
            return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError) as exc:
            raise TraceError(source, f"cannot be mapped ({exc})", "copy it to a regular file first") from None


def _open(trace: TraceFile):
    try:
        return open(trace.path, "rb")
    except OSError as exc:
        raise TraceError(str(trace.path), f"cannot be read ({exc.strerror})", "check its permissions") from None


def _read(read: Callable[[int], bytes], size: int, source: str) -> bytes:
    try:
        return read(size)
    except OSError as exc:
        raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None


def gzip_to_file(trace: TraceFile, target, progress: ReadProgress | None = None) -> None:
    """Inflate a ``.json.gz`` into the open binary file ``target``, block by block.

    Big gzip traces are decoded from such a file like a plain trace: worker
    processes can map it, and its pages are the kernel's cache, not this
    process's memory.
    """
    source = str(trace.path)
    with _open(trace) as handle:
        inflate_gzip(
            lambda n: _read(handle.read, n, source), trace.size_bytes, source, _writer(target, source), progress
        )
    target.flush()


def _writer(target, source: str) -> Write:
    def write(data: bytes) -> None:
        try:
            target.write(data)
        except OSError as exc:
            raise TraceError(
                source, f"cannot be copied to a temporary file ({exc.strerror})", "free space in TMPDIR"
            ) from None

    return write


def spool_stream(trace: TraceFile, target, progress: ReadProgress | None = None) -> None:
    """Copy a pipe's trace (inflated if it is gzip) into the open binary file ``target``."""
    source = str(trace.path) if trace.path != Path(STDIN) else "stdin"
    fd, first = _open_stream(trace, source)
    try:
        first = first or _read(lambda n: os.read(fd, n), _READ_BYTES, source)
        pending = [first]

        def read(size: int) -> bytes:
            return pending.pop() if pending else _read(lambda n: os.read(fd, n), size, source)

        write = _writer(target, source)
        if first.startswith(_GZIP_MAGIC):
            inflate_gzip(read, None, source, write, progress)
        else:
            start, done = TraceStart(source), 0
            while block := read(_READ_BYTES):
                start.feed(block)
                write(block)
                done += len(block)
                if progress:
                    progress(done, 0)
            start.finish()
    finally:
        os.close(fd)
    target.flush()


def _open_stream(trace: TraceFile, source: str) -> tuple[int, bytes]:
    """A blocking descriptor on the pipe and the bytes already read from it.

    A named pipe is opened without waiting and read once: no data and no
    writer (end of file at once) is refused rather than waited on forever.
    """
    if trace.path == Path(STDIN):
        return os.dup(0), b""
    try:
        fd = os.open(trace.path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None
    try:
        first: bytes | None
        try:
            first = os.read(fd, _READ_BYTES)
        except BlockingIOError:  # a writer, no data yet
            first = None
        except OSError as exc:
            raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None
        if first == b"":
            raise TraceError(
                source, "a named pipe that nothing writes to", "start the writer first (cat t.json > PIPE &)"
            )
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd, first or b""


def is_gzip(trace: TraceFile) -> bool:
    try:
        with open(trace.path, "rb") as handle:
            return handle.read(2) == _GZIP_MAGIC
    except OSError:
        return False


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes; OSError otherwise.

    For the files tuiprof wrote itself (a cache entry's ``meta.json``, a sidecar, a registry
    entry), which a stranger could have replaced: a symbolic link is not followed, a FIFO not
    waited on (a read would block for ever), a device or a 3 GB sparse file not read."""
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(descriptor, "rb") as handle:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode) or status.st_size > limit:
            raise OSError(errno.EFBIG if stat.S_ISREG(status.st_mode) else errno.EINVAL, "not a file tuiprof wrote")
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, "not a file tuiprof wrote")
    return data


def inflated_size(trace: TraceFile) -> int:
    """What a gzip file should inflate to, from its trailer (the size modulo 2**32 of
    its last member): a guess, for choosing workers and showing progress."""
    try:
        with open(trace.path, "rb") as handle:
            handle.seek(-4, os.SEEK_END)
            size = int.from_bytes(handle.read(4), "little")
    except OSError:
        return trace.size_bytes
    while size < trace.size_bytes:
        size += 1 << 32
    return size


def inflate_gzip(
    read: Callable[[int], bytes],
    compressed_size: int | None,
    source: str,
    write: Write,
    progress: ReadProgress | None,
    start: StartCheck | None = None,
) -> None:
    """Inflate gzip data (concatenated members too) from ``read`` into ``write``, in bounded pieces.

    Refuses data whose first bytes cannot start a trace (or what ``start`` checks:
    an allocator snapshot's pickle, :class:`tuiprof.trace.snapshot.PickleStart`), and data that
    inflates past the ratio limit (:func:`max_inflate_ratio`) relative to
    ``compressed_size`` (for a pipe, to what was read so far).
    """
    ratio = max_inflate_ratio()
    start = start or TraceStart(source)
    inflater = inflate_lib.decompressobj(wbits=31)
    consumed = written = 0
    in_member = False
    pending = b""
    try:
        while True:
            if not pending:
                pending = read(_READ_BYTES)
                if not pending:
                    break
                consumed += len(pending)
                if progress:
                    progress(consumed, compressed_size or 0)
            in_member = True
            out = inflater.decompress(pending, INFLATE_PIECE)
            if inflater.eof:  # concatenated gzip members: the next one starts here
                pending = inflater.unused_data
                inflater = inflate_lib.decompressobj(wbits=31)
                in_member = False
            else:
                pending = inflater.unconsumed_tail
            if out:
                start.feed(out)
                written += len(out)
                if ratio and written > INFLATE_FLOOR and written > ratio * (compressed_size or consumed):
                    raise TraceError(
                        source,
                        f"inflates to more than {ratio:g} times its compressed size (a decompression bomb?)",
                        "if it is a real trace, pass --max-inflate-ratio 0 (or set TUIPROF_MAX_INFLATE_RATIO=0)",
                    )
                write(out)
        out = inflater.flush()
        if out:
            start.feed(out)
            write(out)
    except _INFLATE_ERRORS as exc:
        raise TraceError(source, f"the gzip data is corrupt ({exc})", "copy the file again") from None
    start.finish()
    if in_member and not inflater.eof:
        raise TraceError(source, "the gzip file is truncated", "copy the file again, or re-export the trace")
