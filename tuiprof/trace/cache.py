"""Decoded stores kept on disk, so the second open of a trace does not decode it again.

Users open the same trace many times (the explorer, then ``summary``, a diff, again
tomorrow).  After a first open the store's columns are written under
``$XDG_CACHE_HOME/tuiprof/stores`` (default ``~/.cache/tuiprof/stores``), one folder
per trace: every column a ``.npy`` file, read back memory-mapped
(``np.load(mmap_mode="r", allow_pickle=False)``: nothing is unpickled, nothing
copied), the input-text blob a raw ``inputs.bin`` (memory-mapped; slicing an
``mmap`` gives ``bytes``), and the rest (tables, header, report, the few structs)
in ``meta.json``, decoded by msgspec into typed structs.

The same entry keeps what the analysis derived from those columns (``store.derived``:
``derived.NAME.npy``, one-dimensional int64 or float64; ``store.derived_facts``: integers in
``meta.json``), filled by :mod:`tuiprof.analysis.reuse`, which also checks what is read back
against what the analysis guarantees (this module checks only its form) and calls
:func:`forget` when it fails: the entry is then written again once analysed.

The key (:func:`file_key`) is a hash of the engine (the cache format and the trace
layer's and the analysis package's source, so a changed decoder or analysis never reads
an old cache), the resolved
path, the size, the mtime and the first and last MB of the file.  A ``.json.gz``
on disk is keyed the same way: its last 8 bytes hold the CRC-32 and size of all
it inflates to, so its tail covers the whole content.  A trace read from a pipe
has no path: it is keyed by the hash of its content as read
(:class:`HashingWriter`, fed while the pipe is copied).

A cache file is input like any other (a damaged disk, a planted folder), so
everything read back is checked (:func:`_validated`).  First its bytes: ``meta.json`` ends
with the CRC-32 of its own bytes (:func:`seal`: its names and header are in no other file)
and holds a CRC-32 of every other file of the entry, summed while the file is read and
checked before its values are (zlib-ng, ~10 GB/s here: within the noise of a reopen, since
the pages it reads are the ones the analysis reads next; measured in docs/hostile-input.md).  Without it a bit flipped inside a column kept the file's size and,
in an id or a time, a value in range: it was believed (issue 30, fuzz seed 5).  A CRC,
not a keyed hash: it catches damage, not a planter who recomputes it (HMAC-SHA256 runs at
~0.8 GB/s here, 0.5 s a reopen; the folder is this user's own, mode 0700, so whoever can
plant there can as well run code as the user); against such a planter the values are
checked too, so that no entry can crash or hang tuiprof: against what the decoder
guarantees: dtypes, one dimension, equal lengths per table, codes within their
tables, categories and kinds in range and in the store's order, times below
2**62 ns and durations not negative, input texts inside the blob, the counts in
``meta.json`` consistent with the columns.  An entry that fails any check is
removed and the trace decoded again; the store it would have given is never
used.  ``meta.json`` is read only when a regular file of at most 8 bytes per byte of the
trace's text (:func:`meta_limit`).  The cache folder must belong to this user, be writable
(mode bits: root may write anywhere) and private, under a ``tuiprof/`` folder nobody else may
write into (:func:`folder_problem`); otherwise the cache is off and nothing in it is read or
removed, and :func:`refusal` gives the line the CLI says once on stderr (through the
plain-text filter: this layer prints nothing).

Writing never delays a first open: callers hand the store to
:func:`save_in_background` once it is shown (the explorer, after its first frame
with the model) or printed (``summary``: after the output).  The thread is not a
daemon, so the interpreter finishes the write before it exits.  An entry is
written in a ``.tmp-`` folder and renamed into place (atomic; when two processes
write the same trace, the second rename fails and its copy is dropped).  Size is
bounded (least recently used entries removed first, reads touch ``meta.json``):
``--cache-size`` / ``TUIPROF_CACHE_SIZE``, default the smaller of 4 GiB and a
quarter of the free disk.  Traces under 8 MB are not cached (they decode in
~40 ms).  ``--no-cache`` / ``TUIPROF_NO_CACHE=1``: none read, none written.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from array import array
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import IO, Any, cast

import msgspec
import numpy as np

from tuiprof.trace.columns import (
    ABSURD_NS,
    CPU_CATEGORIES,
    DEVICE_KINDS,
    NONE,
    OPERATOR_CATEGORY_CODES,
    AllocatorColumns,
    Columns,
    CpuEvents,
    DeviceEvents,
    FrameColumns,
)
from tuiprof.trace.decode import MAX_NOTES, NOTE_CHARS, DecodeReport
from tuiprof.trace.schema import NO_MEMBER, EventArgs, TimedEvent, TraceHeader
from tuiprof.trace.source import TraceFile, inflate_lib, inflated_size, is_gzip, read_regular_file
from tuiprof.trace.store import TraceEvents

FORMAT = 3  # 2: a CRC-32 per file; what the analysis derived (analysis/reuse.py) beside the columns;
# 3: meta.json sealed with the CRC-32 of its own bytes (:func:`seal`)
NO_CACHE_ENV = "TUIPROF_NO_CACHE"
CACHE_SIZE_ENV = "TUIPROF_CACHE_SIZE"
MIN_BYTES = 8 << 20  # smaller traces decode in ~40 ms: not worth a cache entry
DEFAULT_MAX_BYTES = 4 << 30
EDGE_BYTES = 1 << 20  # hashed at each end of the file
STALE_TEMPORARY_SECONDS = 3600  # a .tmp- folder this old was left by a process that died
_TABLES: dict[str, type[Columns]] = {
    "cpu": CpuEvents,
    "frames": FrameColumns,
    "device": DeviceEvents,
    "memory": AllocatorColumns,
}
_FLOAT_COLUMNS = {("device", "occupancy")}  # every other column is int64
_TRACE_SOURCES = (
    "cache.py",
    "columns.py",
    "decode.py",
    "memory.py",
    "parallel.py",
    "schema.py",
    "source.py",
    "store.py",
    "load.py",
)


class _Report(msgspec.Struct):
    repaired: int
    skipped: int
    damaged: int
    problems: list[str]


class _Derived(msgspec.Struct):
    """One array the analysis derived (``derived.NAME.npy``): its length and element type."""

    rows: int
    dtype: str  # "int64" or "float64"


class _Meta(msgspec.Struct):
    """``meta.json``: what is not a column, and a CRC-32 of every other file of the entry;
    the file ends with its own seal (:func:`seal`), which decoding ignores."""

    format: int
    key: str
    source_path: str  # for whoever looks into the folder
    rows: dict[str, int]
    inputs_bytes: int
    names: list[str]
    threads: list[int | str]
    header: TraceHeader
    live_facts: bytes  # the header's raw tuiprofLive member (b"" when absent)
    report: _Report
    gpu_annotations: list[TimedEvent]
    comms_records: list[EventArgs]
    other_events: int
    event_count: int
    uncompressed_bytes: int
    derived: dict[str, _Derived]
    derived_facts: dict[str, int]
    checksums: dict[str, int]  # file name -> CRC-32 of all its bytes


# ------------------------------------------------------------------ settings


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/tuiprof`` (default ``~/.cache/tuiprof``): stores here, run sidecars and
    the watch registry too.  A relative ``XDG_CACHE_HOME`` is ignored, as the XDG base directory
    spec says (it wrote the cache under whatever the current folder was)."""
    configured = os.environ.get("XDG_CACHE_HOME", "")
    return (Path(configured) if os.path.isabs(configured) else Path.home() / ".cache") / "tuiprof"


def stores_directory() -> Path:
    return cache_root() / "stores"


def cache_enabled() -> bool:
    return os.environ.get(NO_CACHE_ENV, "") in ("", "0")


def set_cache(enabled: bool | None = None, size: int | None = None) -> None:
    """Turn the cache on or off, or bound it, for this process and those it starts."""
    if enabled is not None:
        os.environ[NO_CACHE_ENV] = "0" if enabled else "1"
    if size is not None:
        os.environ[CACHE_SIZE_ENV] = str(size)


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)


MAX_SIZE = 1 << 62  # 4 EiB: past any disk; a float of 309 digits is inf, and int(inf) raises


def parse_size(text: str) -> int:
    """``4G``, ``500M``, ``1.5GB``, ``123456`` -> bytes (powers of 1024); ValueError past :data:`MAX_SIZE`."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(f"not a size: {text[:40]!r} (write e.g. 4G, 500M or a number of bytes)")
    number, unit = match.groups()
    size = float(number) * 1024 ** " kmgt".index(unit.lower() or " ")
    if not size <= MAX_SIZE:
        raise ValueError(f"not a size: {text[:40]!r} is more than 4 EiB (write e.g. 4G or 500M)")
    return int(size)


def size_limit(directory: Path) -> int:
    """The most the stores may take: ``TUIPROF_CACHE_SIZE``, else min(4 GiB, free disk / 4)."""
    configured = os.environ.get(CACHE_SIZE_ENV)
    if configured:
        try:
            return parse_size(configured)
        except ValueError:
            pass
    try:
        free = shutil.disk_usage(directory).free
    except OSError:
        return 0
    return min(DEFAULT_MAX_BYTES, free // 4)


_refusal: str | None = None  # why the cache is off, once the folder was found unusable
_said = False
_refusal_lock = threading.Lock()
_REMEDY = "fix it, set XDG_CACHE_HOME to a folder of your own, or pass --no-cache"


def usable_directory(create: bool) -> Path | None:
    """The stores' folder if the cache is on and the folder can be trusted (:func:`folder_problem`);
    else None, and when the folder is the reason, :func:`refusal` says why.

    Only the user could have written what is read from it: the stores and the folder above
    them must be this user's and writable by nobody else (a world-writable folder held a
    planted entry, resealed, and it was believed: issue 42).  A refused folder is not read."""
    if not cache_enabled():
        return None
    directory = stores_directory()
    try:
        if create:
            directory.parent.parent.mkdir(parents=True, exist_ok=True)
            for folder in (directory.parent, directory):  # private from the start, parents included
                folder.mkdir(mode=0o700, exist_ok=True)
        problem = folder_problem(directory)
    except FileNotFoundError:
        return None  # nothing cached yet
    except OSError as exc:
        problem = f"cannot be used ({exc.strerror})"
    if problem is not None:
        _refuse(f"cache {directory} {problem}; opening without it ({_REMEDY})")
        return None
    return directory


def folder_problem(stores: Path) -> str | None:
    """What makes ``stores`` untrustworthy, or None.  It and ``tuiprof/`` above it must be folders
    of this user's that nobody else may write into; ``stores`` private (700) and writable (on the
    mode bits: root may write anywhere, and must still leave a read-only folder alone).  Links
    are followed (a ``~/.cache`` on another disk is common): only a writer of the folder above
    could have made one.  Raises FileNotFoundError when a folder does not exist yet."""
    above = stores.parent
    for folder in (above, stores):
        status = folder.stat()
        mode = status.st_mode & 0o777
        where = "" if folder == stores else f" ({folder})"
        if not S_ISDIR(status.st_mode):
            return "is not a folder" if folder == stores else f"is not in a folder{where}"
        if status.st_uid != os.geteuid():
            return "belongs to another user" if folder == stores else f"is in another user's folder{where}"
        if mode & 0o022 and folder == stores:
            return f"is writable by other users (mode {mode:o}: they could plant entries)"
        if mode & 0o022:
            return f"is in a folder other users may write into ({folder}, mode {mode:o}: they could replace it)"
    mode = stores.stat().st_mode & 0o777
    if not mode & 0o200 or not os.access(stores, os.W_OK):
        return "is read-only"
    if mode & 0o077:
        return f"is open to other users (mode {mode:o}; tuiprof makes it 700)"
    return None


def _refuse(line: str) -> None:
    global _refusal
    with _refusal_lock:
        _refusal = _refusal or line


def refusal() -> str | None:
    """Why the cache is off (the folder; without the ``tuiprof:`` prefix), the first time it is
    asked after the folder was refused; then None.  The caller prints it through ``plain`` (the
    path is the user's environment: it may hold escapes), before the explorer takes the terminal."""
    global _said
    with _refusal_lock:
        if _refusal is None or _said:
            return None
        _said = True
        return _refusal


# ------------------------------------------------------------------ keys

_engine: str | None = None


def engine_version() -> str:
    """The cache format and a hash of the trace layer's source (whatever decodes, in any
    version or checkout: the package's ``__version__`` would import the layers above) and
    of the analysis package's (an entry holds what the analysis derived: a changed analysis
    derives anew; its files are read as bytes, not imported, so the layers stay in order)."""
    global _engine
    if _engine is None:
        digest = hashlib.blake2b(f"tuiprof-store/{FORMAT}".encode(), digest_size=16)
        here = Path(__file__).resolve().parent
        analysis = sorted((here.parent / "analysis").glob("*.py")) + sorted((here.parent / "analysis").glob("*.txt"))
        for path in [here / name for name in _TRACE_SOURCES] + analysis:
            try:
                digest.update(path.name.encode() + b"\0" + path.read_bytes())
            except OSError:
                digest.update(path.name.encode())
        _engine = digest.hexdigest()
    return _engine


_content_keys: dict[str, str] = {}  # a pipe's copy (its temporary path) -> the key of its content


def file_key(trace: TraceFile) -> str | None:
    """The cache key of the file at ``trace.path`` as it is now; None when it is not cached
    (cache off, too small, unreadable)."""
    path = str(trace.path)
    if path in _content_keys:
        return _content_keys[path]
    try:
        status = os.stat(trace.path)
        if status.st_size < MIN_BYTES and not _inflates_past_minimum(trace, status.st_size):
            return None
        digest = hashlib.blake2b(engine_version().encode(), digest_size=20)
        digest.update(
            f"\0{os.path.realpath(trace.path)}\0{status.st_size}\0{status.st_mtime_ns}\0".encode(
                errors="surrogateescape"
            )
        )
        with open(trace.path, "rb") as handle:
            digest.update(handle.read(EDGE_BYTES))
            handle.seek(max(0, status.st_size - EDGE_BYTES))
            digest.update(handle.read(EDGE_BYTES))
    except OSError:
        return None
    return "f" + digest.hexdigest()


def _inflates_past_minimum(trace: TraceFile, size: int) -> bool:
    return size >= 4096 and is_gzip(trace) and inflated_size(trace) >= MIN_BYTES


class HashingWriter:
    """A file wrapper that hashes what is written through it: a pipe's content as read."""

    def __init__(self, target: IO[bytes]) -> None:
        self.target = target
        self.digest = hashlib.sha256(engine_version().encode())  # SHA-NI: ~0.8 GB/s here, blake2b 0.4
        self.size = 0

    def write(self, data: bytes) -> int:
        self.digest.update(data)
        self.size += len(data)
        return self.target.write(data)

    def flush(self) -> None:
        self.target.flush()

    def key(self) -> str | None:
        return "c" + self.digest.hexdigest() if self.size >= MIN_BYTES else None


@contextlib.contextmanager
def keyed_by_content(copy: Path, key: str | None) -> Iterator[None]:
    """While the block runs, the temporary copy of a pipe's trace is keyed by its content
    (the explorer opens the copy by its path)."""
    if key is not None:
        _content_keys[str(copy)] = key
    try:
        yield
    finally:
        _content_keys.pop(str(copy), None)


# ------------------------------------------------------------------ reading


def read_store(key: str | None, source: str, trace: TraceFile) -> TraceEvents | None:
    """The store cached under ``key`` (of ``trace``), validated; None when there is none or it fails
    a check (then the entry is removed, and the caller decodes the trace again)."""
    if key is None:
        return None
    directory = usable_directory(create=False)
    if directory is None:
        return None
    entry = directory / key
    if not entry.is_dir():
        return None
    try:
        store = _validated(entry, key, source, meta_limit(trace))
    except Exception:  # noqa: BLE001 -- whatever a damaged file raises (np.load: EOFError too), it is not used
        store = None
    if store is None:
        shutil.rmtree(entry, ignore_errors=True)
        return None
    try:
        os.utime(entry / "meta.json")  # most recently used
    except OSError:
        pass
    store.cache_entry = key
    return store


def forget(store: TraceEvents) -> None:
    """Remove the entry ``store`` was read from, to be written again once analysed: what the
    analysis derived in it failed its checks (analysis/reuse.py) or is missing."""
    key = store.cache_entry
    directory = usable_directory(create=False)
    if key is None or directory is None:
        return
    shutil.rmtree(directory / key, ignore_errors=True)  # mapped columns stay readable (Linux keeps the pages)
    store.cache_entry, store.cache_key = None, key


_DERIVED_NAME = re.compile(r"^[a-z0-9_]+(\.[a-z0-9_]+)*$")  # no separators: a planted name stays in the entry
_DERIVED_TYPES = {"int64": np.int64, "float64": np.float64}


def _column_files() -> list[str]:
    return [f"{table}.{column.name}.npy" for table, kind in _TABLES.items() for column in fields(kind)]


# meta.json holds texts of the trace (names, threads, the header, GPU annotations, collective
# records), JSON-encoded: at most 6 bytes for one of the trace's (a control character as \u0001),
# and a struct's member names no longer than the trace's own.  A bigger file is not one tuiprof
# wrote for this trace: a planted 3 GB one was read whole (10-13 s, 3.2 GB of memory; issue 42).
META_BYTES_PER_TRACE_BYTE = 8
META_SLACK_BYTES = 1 << 20


def meta_limit(trace: TraceFile) -> int:
    """The most ``meta.json`` may hold for ``trace`` (its text: a gzip's inflated size, from its trailer)."""
    text = max(trace.size_bytes, inflated_size(trace)) if is_gzip(trace) else trace.size_bytes
    return META_BYTES_PER_TRACE_BYTE * text + META_SLACK_BYTES


def _validated(entry: Path, key: str, source: str, meta_bytes: int) -> TraceEvents | None:
    if not _regular_files(entry, ["meta.json"]):
        return None
    sealed = read_regular_file(entry / "meta.json", meta_bytes)
    if unsealed(sealed) is None:
        return None
    meta = msgspec.json.decode(sealed, type=_Meta)
    if meta.format != FORMAT or meta.key != key or set(meta.rows) != set(_TABLES):
        return None
    if any(rows < 0 for rows in meta.rows.values()) or meta.inputs_bytes < 0:
        return None
    if not all(_DERIVED_NAME.match(name) and kind.dtype in _DERIVED_TYPES for name, kind in meta.derived.items()):
        return None
    names = ["inputs.bin", *_column_files(), *(f"derived.{name}.npy" for name in meta.derived)]
    if set(meta.checksums) != set(names) or not _regular_files(entry, names):
        return None
    tables: dict[str, Any] = {}  # each table its own Columns class (_TABLES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a header numpy only warns about (Python 2's) is not one tuiprof writes
        for table, kind in _TABLES.items():
            tables[table] = _table(entry, table, kind, meta)
            if tables[table] is None:
                return None
        derived = {}
        for name, shape in meta.derived.items():
            file = f"derived.{name}.npy"
            values = _read_array(entry / file, shape.rows, _DERIVED_TYPES[shape.dtype], meta.checksums[file])
            if values is None:
                return None
            derived[name] = values
    inputs = _mapped(entry / "inputs.bin", meta.inputs_bytes, meta.checksums["inputs.bin"])
    if inputs is None or not _consistent(meta, tables):
        return None
    report = DecodeReport(meta.report.repaired, meta.report.skipped, meta.report.damaged, meta.report.problems)
    header = msgspec.structs.replace(meta.header, live_facts=msgspec.Raw(meta.live_facts), traceEvents=[])
    return TraceEvents(
        source=source,
        header=header,
        report=report,
        names=meta.names,
        threads=meta.threads,
        cpu=tables["cpu"],
        frames=tables["frames"],
        device=tables["device"],
        memory=tables["memory"],
        inputs=cast(bytes, inputs),  # an mmap: everything reads the blob by slices, and those are bytes
        gpu_annotations=meta.gpu_annotations,
        comms_records=meta.comms_records,
        other_events=meta.other_events,
        event_count=meta.event_count,
        uncompressed_bytes=meta.uncompressed_bytes,
        derived=derived,
        derived_facts=meta.derived_facts,
    )


def _checksum(path: Path) -> int:
    """CRC-32 of all the bytes of ``path``, read through a mapping (zlib-ng: ~10 GB/s here)."""
    with open(path, "rb") as handle:
        if not os.fstat(handle.fileno()).st_size:
            return inflate_lib.crc32(b"")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return inflate_lib.crc32(mapped)


def _table(entry: Path, table: str, kind: type, meta: _Meta) -> Columns | None:
    """The columns of ``table``, memory-mapped, if each has the dtype and length the store says
    and its file holds exactly its header and rows."""
    columns = {}
    for column in fields(kind):
        expected = np.float64 if (table, column.name) in _FLOAT_COLUMNS else np.int64
        file = f"{table}.{column.name}.npy"
        values = _array(entry / file, meta.rows[table], expected, meta.checksums[file])
        if values is None:
            return None
        columns[column.name] = values
    return kind(**columns)


def _array(path: Path, rows: int, dtype: type, checksum: int) -> np.ndarray | None:
    """The array in ``path``, memory-mapped, if it has one dimension, ``rows`` values of
    ``dtype`` (an empty one may be int64), its file exactly its header and values, and
    the CRC-32 of all its bytes ``checksum`` (summed through the mapping the array reads:
    one pass over the pages)."""
    loaded = np.load(path, mmap_mode="r", allow_pickle=False)
    if loaded.ndim != 1 or len(loaded) != rows:
        return None
    offset = getattr(loaded, "offset", 0)
    if path.stat().st_size != offset + loaded.nbytes:
        return None  # bytes added or removed: values shifted (ids no range check covers)
    if loaded.dtype != dtype and not (len(loaded) == 0 and loaded.dtype == np.int64):
        return None
    with open(path, "rb") as handle:
        header = handle.read(offset)
    values = np.ascontiguousarray(loaded).data.cast("B") if loaded.nbytes else b""
    return loaded if inflate_lib.crc32(values, inflate_lib.crc32(header)) == checksum else None


_BUFFER_TYPES: dict[type, str] = {np.int64: "q", np.float64: "d"}


def _read_array(path: Path, rows: int, dtype: type, checksum: int) -> np.ndarray | None:
    """The array in ``path`` as :func:`_array` checks it, but read into memory of its own: an
    ``array.array`` (``.base.obj`` of the result), which the analysis keeps without a copy."""
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        shape, _fortran_order, descr = (  # one dimension: the order is moot
            np.lib.format.read_array_header_1_0(handle)
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0(handle)
        )
        offset = handle.tell()
        if shape != (rows,) or descr != np.dtype(dtype) or os.fstat(handle.fileno()).st_size != offset + 8 * rows:
            return None
        buffer = array(_BUFFER_TYPES[dtype], [0]) * rows
        if handle.readinto(memoryview(buffer).cast("B")) != 8 * rows:
            return None
        handle.seek(0)
        header = handle.read(offset)
    if inflate_lib.crc32(buffer, inflate_lib.crc32(header)) != checksum:
        return None
    return np.frombuffer(buffer, dtype=dtype)


def _regular_files(entry: Path, names: list[str]) -> bool:
    """Whether ``entry`` and every file of it named are what tuiprof writes: a folder and regular
    files, none a link.  A planted FIFO would block the read for ever, a link to a device never end."""
    try:
        return S_ISDIR(os.lstat(entry).st_mode) and all(S_ISREG(os.lstat(entry / name).st_mode) for name in names)
    except OSError:
        return False


def _mapped(path: Path, size: int, checksum: int) -> bytes | mmap.mmap | None:
    """The input-text blob, memory-mapped (slices of an mmap are bytes); None if its size or CRC-32 is wrong."""
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size != size:
            return None
        blob = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    return blob if inflate_lib.crc32(blob) == checksum else None


def _within(column: np.ndarray, low: int, high: int) -> bool:
    """Every value in [low, high) (true for an empty column)."""
    return not len(column) or (int(column.min()) >= low and int(column.max()) < high)


def _codes(column: np.ndarray, table_size: int, optional: bool) -> bool:
    return _within(column, NONE if optional else 0, table_size)


def _times(start: np.ndarray, duration: np.ndarray | None = None) -> bool:
    ok = _within(start, -ABSURD_NS + 1, ABSURD_NS)
    return ok and (duration is None or _within(duration, 0, ABSURD_NS))


def _consistent(meta: _Meta, tables: dict[str, Columns]) -> bool:
    """What the decoder guarantees, checked on the columns read back."""
    names, threads, blob = len(meta.names), len(meta.threads), meta.inputs_bytes
    cpu, frames, device, memory = tables["cpu"], tables["frames"], tables["device"], tables["memory"]
    assert isinstance(cpu, CpuEvents) and isinstance(frames, FrameColumns)
    assert isinstance(device, DeviceEvents) and isinstance(memory, AllocatorColumns)
    launches = cpu.category > max(OPERATOR_CATEGORY_CODES)
    checks = [
        _codes(cpu.name, names, False),
        _codes(cpu.thread, threads, False),
        _within(cpu.category, 0, len(CPU_CATEGORIES)),
        not (np.diff(launches.view(np.int8)) < 0).any(),
        _times(cpu.start_ns, cpu.dur_ns),
        _codes(frames.thread, threads, False),
        _codes(frames.name, names, False),
        _codes(frames.module, names, True),
        _times(frames.start_ns) and _times(frames.end_ns) and not (frames.end_ns < frames.start_ns).any(),
        _codes(device.name, names, False),
        _within(device.kind, 0, len(DEVICE_KINDS)),
        not (np.diff(device.kind) < 0).any(),
        _times(device.start_ns, device.dur_ns),
        all(_codes(c, names, True) for c in (device.stream, device.grid, device.block)),
        _times(memory.start_ns),
        _within(memory.has_bytes, 0, 2),
        _within(memory.has_total, 0, 2),
        _within(memory.kind, NONE, 1 << 31),
        _within(memory.device_id, NONE, 1 << 31),
        meta.event_count >= sum(meta.rows.values()) + len(meta.gpu_annotations),
        min(meta.other_events, meta.uncompressed_bytes, meta.report.repaired, meta.report.skipped, meta.report.damaged)
        >= 0,
        len(meta.report.problems) <= MAX_NOTES and all(len(p) <= NOTE_CHARS for p in meta.report.problems),
        all(isinstance(t, (int, str)) for t in meta.threads),
    ]
    for at, length in ((cpu.dims_at, cpu.dims_len), (cpu.types_at, cpu.types_len), (cpu.concrete_at, cpu.concrete_len)):
        checks.append(_within(at, 0, blob + 1) and _within(length, 0, blob + 1) and _within(at + length, 0, blob + 1))
    return all(checks)


# ------------------------------------------------------------------ writing


def save(store: TraceEvents) -> bool:
    """Write ``store`` under its ``cache_key`` now (temporary folder, then rename); False when
    not written (no key: read from the cache, or not cached; the cache unusable or full)."""
    key = store.cache_key
    if key is None:
        return False
    directory = usable_directory(create=True)
    if directory is None or (directory / key).exists():
        return False
    limit = size_limit(directory)
    if _entry_bytes(store) > limit:
        return False
    try:
        temporary = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory))
    except OSError:
        return False
    try:
        _write_entry(temporary, store, key)
        os.rename(temporary, directory / key)  # fails if another process renamed its copy first
    except Exception:  # noqa: BLE001 -- a cache is an optimisation: a failed write only costs the next open
        shutil.rmtree(temporary, ignore_errors=True)
        return False
    _evict(directory, limit, keep=key)
    return True


_writers: list[threading.Thread] = []


def save_in_background(store: TraceEvents) -> None:
    """:func:`save` in a thread; the interpreter waits for it before exiting (not a daemon, said
    explicitly: a thread started from a daemon thread, as the explorer's loader is, is a daemon
    by default, and one was killed mid-write when the explorer quit)."""
    if store.cache_key is None or not cache_enabled():
        return
    writer = threading.Thread(target=save, args=(store,), name="tuiprof-cache-writer", daemon=False)
    _writers.append(writer)
    writer.start()


def wait_for_writes() -> None:
    while _writers:
        _writers.pop().join()


def _entry_bytes(store: TraceEvents) -> int:
    arrays = sum(getattr(getattr(store, t), c.name).nbytes for t, kind in _TABLES.items() for c in fields(kind))
    return arrays + len(store.inputs) + sum(values.nbytes for values in store.derived.values())


def _write_entry(folder: Path, store: TraceEvents, key: str) -> None:
    arrays = {
        f"{table}.{column.name}.npy": getattr(getattr(store, table), column.name)
        for table, kind in _TABLES.items()
        for column in fields(kind)
    }
    derived = {}
    for name, values in store.derived.items():
        dtype = str(np.asarray(values).dtype)
        if not _DERIVED_NAME.match(name) or dtype not in _DERIVED_TYPES or np.ndim(values) != 1:
            raise ValueError(f"derived array {name!r} ({dtype}) is not one the cache keeps")
        arrays[f"derived.{name}.npy"] = values
        derived[name] = _Derived(len(values), dtype)
    for name, values in arrays.items():
        np.save(folder / name, np.ascontiguousarray(values), allow_pickle=False)
    with open(folder / "inputs.bin", "wb") as out:
        out.write(store.inputs)
    checksums = {name: _checksum(folder / name) for name in [*arrays, "inputs.bin"]}
    report = store.report
    meta = _Meta(
        format=FORMAT,
        key=key,
        source_path=store.source,
        rows={table: len(getattr(store, table)) for table in _TABLES},
        inputs_bytes=len(store.inputs),
        names=store.names,
        threads=store.threads,
        header=msgspec.structs.replace(store.header, live_facts=msgspec.Raw(b"null"), traceEvents=[]),
        live_facts=bytes(store.header.live_facts),
        report=_Report(report.repaired, report.skipped, report.damaged, list(report.problems)),
        gpu_annotations=[_encodable_event(event) for event in store.gpu_annotations],
        comms_records=[_encodable_args(args) for args in store.comms_records],
        other_events=store.other_events,
        event_count=store.event_count,
        uncompressed_bytes=store.uncompressed_bytes,
        derived=derived,
        derived_facts=dict(store.derived_facts),
        checksums=checksums,
    )
    (folder / "meta.json").write_bytes(seal(msgspec.json.encode(meta)))  # last: an entry without it is incomplete


# The CRC-32 of meta.json's bytes before it, as its last member.  The names, threads, header and
# report live in meta.json, not in a checked column: one byte flipped in a name
# (``ProfilerStep#10`` to ``ProfilerStop#10``) lost a trace's steps without a word (found by
# fuzz --surface cache).  Checked on the bytes as written, so no JSON is re-encoded to check it.
_SEAL = re.compile(rb',"seal":([0-9]{1,10})\}\Z')


def seal(document: bytes) -> bytes:
    """A JSON object's bytes (ending in ``}``) with its seal added: ``,"seal":CRC}``."""
    return document[:-1] + b',"seal":%d}' % inflate_lib.crc32(document)


def unsealed(sealed: bytes) -> bytes | None:
    """The document :func:`seal` sealed, or None when the seal is absent or does not match."""
    found = _SEAL.search(sealed)
    if found is None:
        return None
    document = sealed[: found.start()] + b"}"
    return document if inflate_lib.crc32(document) == int(found.group(1)) else None


_RAW_MEMBERS = ("input_dims", "input_types", "concrete_inputs")


def _encodable_args(args: EventArgs) -> EventArgs:
    """An absent input list as the default object itself: msgspec omits a default by identity,
    and an empty ``Raw`` written out is no JSON (decode workers send back copies of it)."""
    empty = {name: NO_MEMBER for name in _RAW_MEMBERS if not getattr(args, name)}
    return msgspec.structs.replace(args, **empty) if empty else args


def _encodable_event(event: TimedEvent) -> TimedEvent:
    return event if event.args is None else msgspec.structs.replace(event, args=_encodable_args(event.args))


def _evict(directory: Path, limit: int, keep: str) -> None:
    """Remove least recently used entries until the stores take at most ``limit`` bytes,
    and temporary folders left by processes that died."""
    entries = []
    now = time.time()
    for child in directory.iterdir():
        try:
            if child.name.startswith(".tmp-"):
                if now - child.stat().st_mtime > STALE_TEMPORARY_SECONDS:
                    shutil.rmtree(child, ignore_errors=True)
                continue
            size = sum(f.stat().st_size for f in child.iterdir())
        except OSError:
            continue
        try:
            used = (child / "meta.json").stat().st_mtime
        except OSError:
            used = 0.0  # incomplete: first to go
        entries.append((used, size, child))
    total = sum(size for _, size, _ in entries)
    for _, size, child in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        if child.name != keep:
            shutil.rmtree(child, ignore_errors=True)
            total -= size
