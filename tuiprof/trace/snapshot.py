"""CUDA caching-allocator snapshots (``torch.cuda.memory._dump_snapshot``) -> columns.

A snapshot is a pickle, and unpickling can run code: it is read by
:class:`PlainDataUnpickler`, which builds only dict, list, tuple, str, int,
float, bool, None and bytes (big ones, with numba, by the opcode scanner of
:mod:`tuiprof.trace.snapshot_kernel` instead, straight into the columns below).  Every way a pickle reaches other code goes
through ``find_class`` (GLOBAL, STACK_GLOBAL, INST, and EXT via the copyreg
registry); REDUCE, BUILD, OBJ and NEWOBJ need an object only a global gives
(a dict or list is not callable and has no ``__setstate__``); persistent ids
are refused by the stdlib when no ``persistent_load`` is given.  So refusing
``find_class`` refuses them all, before anything is called.

The format is the one in ``torch.cuda.memory._snapshot``'s docstring:
``segments`` (each with ``blocks`` and their ``frames``) and
``device_traces`` (one list of entries per device).  Decoded into columns:
every distinct frame once (:class:`FrameTable`), stacks as ids into
:class:`StackTable` (id 0: no frames), sizes, addresses and times as numpy
arrays.  Trace entries of all devices are one table (:class:`TraceEntries`)
in file order with a device column.  Entries without ``time_us`` (the
docstring does not list it; real snapshots since torch 2.1 have it) get
their index as time.
"""

from __future__ import annotations

import io
import os
import pickle
import reprlib
import sys
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np

from tuiprof.errors import TraceError
from tuiprof.trace.source import ReadProgress, inflate_gzip

PICKLE_PROTOCOLS = range(0, 6)  # what this Python's pickle reads; torch writes 2 or 4
_PROTO = 0x80  # protocols 2-5 start with PROTO and the protocol byte
# Protocols 0 and 1 have no PROTO: a dict starts MARK DICT (0) or EMPTY_DICT (1), a list MARK LIST
# (0) or EMPTY_LIST (1).  No JSON document starts so (a text that starts "(" is not taken for one).
_OLD_PROTOCOL_STARTS = (b"(d", b"(l", b"}", b"]")
_GZIP_MAGIC = b"\x1f\x8b"
_NOT_A_SNAPSHOT_FIX = "pass a file written by torch.cuda.memory._dump_snapshot"

ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "oom",
    "snapshot",
    "annotate",
    "segment_map",
    "segment_unmap",
)
ACTION_CODE = {name: code for code, name in enumerate(ACTIONS)}
OTHER_ACTION = len(ACTIONS)  # an action this version does not know: kept, counted, never an error
# torch writes "active_pending_free" (torch/csrc/cuda/Module.cpp); its docstring says "active_awaiting_free": both are read.
BLOCK_STATES = ("active_allocated", "active_pending_free", "inactive")
BLOCK_STATE_CODE = {name: code for code, name in enumerate(BLOCK_STATES)} | {"active_awaiting_free": 1}
FX_FIELDS = ("fx_node_op", "fx_node_name", "fx_original_trace")
_INT64_MAX = (1 << 63) - 1
MAX_DEVICES = 1 << 12  # device numbers: the analysis walks every device up to the highest
# From these pickle sizes up, the opcode scanner (tuiprof/trace/snapshot_kernel.py) reads a snapshot.
# Measured on the 2-core dev VM: the unpickler path takes ~30 ms a MB, the scanner ~9 ms a MB plus
# ~0.4 s to import numba and load its cached code (break-even ~15 MB); its first compile, once per
# install (cached beside the module), takes ~30-40 s, which pays on the first open from ~1 GB.
SCAN_MIN_BYTES = 32 << 20  # the compiled kernel is cached
SCAN_COLD_MIN_BYTES = 1 << 30  # it is not: the first use compiles it
SCAN_BYTES_ENV = "TUIPROF_SNAPSHOT_SCAN_BYTES"  # overrides both (0: always, when numba is there)


class RefusedGlobal(pickle.UnpicklingError):
    """The pickle names a global (a class or function): it would run code."""

    def __init__(self, module: str, name: str) -> None:
        super().__init__(f"{module}.{name}")
        self.global_name = f"{module}.{name}"


class PlainDataUnpickler(pickle.Unpickler):
    """Builds plain data only: any global is refused before it is looked up."""

    def find_class(self, module: str, name: str) -> Any:
        raise RefusedGlobal(str(module), str(name))


class PickleStart:
    """Watches the first bytes of an inflated ``.pickle.gz``: a snapshot starts like a pickle.

    Stops a gzip of something else at its first bytes (the role
    :class:`tuiprof.trace.source.TraceStart` has for JSON traces)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.head = b""

    def feed(self, data: bytes) -> None:
        if len(self.head) < 2:
            self.head += data[: 2 - len(self.head)]
            if len(self.head) == 2:
                check_pickle_header(self.head, self.source)

    def finish(self) -> None:
        check_pickle_header(self.head, self.source)


def check_pickle_header(head: bytes, source: str) -> None:
    """Refuse bytes that do not start a pickle of protocol 0-5 (what ``pickle.loads`` reads)."""
    if len(head) < 2 or not (head[0] == _PROTO or head.startswith(_OLD_PROTOCOL_STARTS)):
        raise TraceError(source, "not an allocator snapshot (not a pickle)", _NOT_A_SNAPSHOT_FIX)
    if head[0] == _PROTO and head[1] not in PICKLE_PROTOCOLS:
        raise TraceError(
            source, f"a pickle of protocol {head[1]}, where pickle reads 0-5 (torch writes 2 or 4)", _NOT_A_SNAPSHOT_FIX
        )


def is_snapshot(path: str | os.PathLike[str]) -> bool:
    """Whether the regular file at ``path`` holds a pickle (or a gzip of one): by content, not name.

    A JSON trace starts ``{`` or ``[``; a pickle of protocol 2+ starts with the PROTO opcode,
    of protocol 0 or 1 with MARK DICT or LIST, EMPTY_DICT or EMPTY_LIST.  Only the first bytes
    are read (of a gzip: its first inflated piece)."""
    try:
        if not Path(path).is_file():
            return False
        with open(path, "rb") as handle:
            head = handle.read(2)
            if head == _GZIP_MAGIC:
                handle.seek(0)
                head = zlib.decompressobj(wbits=31).decompress(handle.read(1 << 16), 2)
    except (OSError, ValueError, zlib.error):  # unreadable or a corrupt gzip: the trace loader says what is wrong
        return False
    return head[:1] == bytes([_PROTO]) or head.startswith(_OLD_PROTOCOL_STARTS)


@dataclass
class FrameTable:
    """Every distinct frame once.  FX fields are "" where a frame has none."""

    filename: list[str] = field(default_factory=list)
    line: list[int] = field(default_factory=list)
    name: list[str] = field(default_factory=list)
    fx: dict[str, list[str]] = field(default_factory=lambda: {key: [] for key in FX_FIELDS})

    def __len__(self) -> int:
        return len(self.filename)


@dataclass
class StackTable:
    """Stacks as frame ids, innermost first (torch's order): stack ``s`` is
    ``frames[offsets[s]:offsets[s + 1]]``.  Stack 0 has no frames."""

    offsets: np.ndarray
    frames: np.ndarray

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def frame_ids(self, stack: int) -> np.ndarray:
        return self.frames[self.offsets[stack] : self.offsets[stack + 1]]


@dataclass
class TraceEntries:
    """The ``device_traces`` of every device, in file order (then by device)."""

    device: np.ndarray  # int32
    action: np.ndarray  # int8: ACTIONS index, OTHER_ACTION for unknown ones
    address: np.ndarray  # int64; 0 where absent (oom)
    size: np.ndarray  # int64
    stream: np.ndarray  # int64
    time_us: np.ndarray  # int64; the entry's index within its device when the snapshot has no times
    stack: np.ndarray  # int32 into StackTable
    device_free: np.ndarray  # int64; -1 except on oom entries
    annotations: dict[int, str]  # entry index -> user_metadata of annotate entries
    has_times: bool

    def __len__(self) -> int:
        return len(self.action)


@dataclass
class Segments:
    """The allocator's segments when the snapshot was taken, and their blocks."""

    device: np.ndarray
    address: np.ndarray
    total_size: np.ndarray
    stream: np.ndarray
    segment_type: list[str]
    block_segment: np.ndarray  # int32: the block's segment row
    block_address: np.ndarray
    block_size: np.ndarray
    block_requested: np.ndarray
    block_state: np.ndarray  # int8: BLOCK_STATES index
    block_stack: np.ndarray  # int32

    def __len__(self) -> int:
        return len(self.address)


@dataclass
class Snapshot:
    """A decoded allocator snapshot: columns only, nothing from the pickle kept."""

    source: str
    frames: FrameTable
    stacks: StackTable
    entries: TraceEntries
    segments: Segments
    device_count: int
    file_bytes: int


def read_snapshot(path: str | os.PathLike[str], progress: ReadProgress | None = None) -> Snapshot:
    """Read, check and decode the snapshot at ``path`` (a ``.pickle`` or a gzip of one);
    ``progress(bytes read, file size)`` as the file is read (of a gzip: compressed bytes).

    Every problem is a :class:`TraceError` naming the file: a refused global,
    a truncated or corrupt pickle, a pickle that is not a snapshot, a gzip bomb
    (the ratio limit of :func:`tuiprof.trace.source.inflate_gzip`).

    From ``SCAN_MIN_BYTES`` (32 MB; 1 GB while the kernel is not compiled yet), with numba, the
    opcode scanner of :mod:`tuiprof.trace.snapshot_scan` reads the file straight into columns;
    a stream in a shape it does not follow (plain data all the same) is then read here, by
    :class:`PlainDataUnpickler`, which names what is wrong."""
    source = os.fspath(path)
    size = _file_size(source)
    if _use_scanner(Path(source), size):
        from tuiprof.trace.snapshot_scan import scan_snapshot

        handle, head, size = _open_snapshot(Path(source), source)
        with handle:
            scanned = scan_snapshot(handle, head, size, source, progress)
        if scanned is not None:
            return scanned
    data = _load_plain_data(Path(source), source, progress)
    return decode_snapshot(data, source, size)


def _use_scanner(path: Path, size: int) -> bool:
    """The opcode scanner for pickles of ``SCAN_MIN_BYTES`` and more, when numba is there."""
    from tuiprof.trace.jit import jit_enabled

    try:
        threshold = int(os.environ[SCAN_BYTES_ENV])
    except (KeyError, ValueError):
        threshold = SCAN_MIN_BYTES if _kernel_cached() else SCAN_COLD_MIN_BYTES
    if size < threshold and _pickle_bytes(path, size) < threshold:
        return False
    return jit_enabled()


def _kernel_cached() -> bool:
    """Whether numba's cache (``tuiprof.trace.jit.kernel_cache_dir``: beside the scanner, or the
    user's private cache for a read-only install) holds its compiled kernel.  Only that an index is
    there: numba checks it against the module when it loads it (after an upgrade or an edit of the
    kernel, the first big snapshot pays one compile)."""
    from tuiprof.trace.jit import kernel_cache_dir

    cache = kernel_cache_dir()
    try:
        return cache is not None and any(cache.glob("snapshot_kernel.scan-*.nbi"))
    except OSError:
        return False


def _pickle_bytes(path: Path, size: int) -> int:
    """The pickle's size: the file's, or for a gzip what its trailer says it inflates to."""
    try:
        with open(path, "rb") as handle:
            if handle.read(2) != _GZIP_MAGIC or size < 4:
                return size
            handle.seek(size - 4)
            inflated = int.from_bytes(handle.read(4), "little")
    except OSError:
        return size
    while inflated < size:  # the trailer holds the size modulo 2**32
        inflated += 1 << 32
    return inflated


def refused_code(source: str, what: str) -> TraceError:
    """The one line for a pickle that would run code (``what``: the global it names, or the opcode)."""
    return TraceError(
        source,
        f"the pickle refers to {what}, which could run code; nothing was executed",
        "only plain snapshots from torch.cuda.memory._dump_snapshot are read",
    )


def _file_size(source: str) -> int:
    try:
        return os.stat(source).st_size
    except OSError:
        return 0


class _CountingReader:
    """The file as the unpickler reads it (read, readinto, readline), telling ``progress`` how far."""

    def __init__(self, handle: Any, size: int, progress: ReadProgress) -> None:
        self._handle, self._size, self._progress = handle, size, progress
        self._done = 0

    def _count(self, amount: int) -> None:
        self._done += amount
        self._progress(self._done, self._size)

    def read(self, size: int = -1) -> bytes:
        data = self._handle.read(size)
        self._count(len(data))
        return data

    def readinto(self, buffer: Any) -> int:
        amount = self._handle.readinto(buffer)
        self._count(amount or 0)
        return amount

    def readline(self) -> bytes:
        data = self._handle.readline()
        self._count(len(data))
        return data

    def peek(self, size: int = 0) -> bytes:  # lets the C unpickler prefetch an unframed pickle (protocol 2-3)
        return self._handle.peek(size)


def _open_snapshot(path: Path, source: str) -> tuple[Any, bytes, int]:
    """The open file at its start, its first two bytes and its size."""
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None
    try:
        head = handle.read(2)
        size = os.fstat(handle.fileno()).st_size
        handle.seek(0)
    except OSError as exc:
        handle.close()
        raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None
    return handle, head, size


def _load_plain_data(path: Path, source: str, progress: ReadProgress | None) -> Any:
    handle, head, size = _open_snapshot(path, source)
    with handle:
        if head == _GZIP_MAGIC:
            parts: list[bytes] = []
            inflate_gzip(handle.read, size, source, parts.append, progress, start=PickleStart(source))
            inflated = b"".join(parts)
            return _unpickle(io.BytesIO(inflated), source, len(inflated))
        check_pickle_header(head, source)
        return _unpickle(_CountingReader(handle, size, progress) if progress else handle, source, size)


UNPICKLE_MEMORY = (32, 256 << 20)  # address space the unpickler may add: 32x the pickle + 256 MB


@contextmanager
def _bounded_address_space(pickle_bytes: int) -> Iterator[None]:
    """While the unpickler runs, the process may not grow past what a pickle of this size needs.

    The C unpickler sizes some allocations from the stream before it can check them: ``LONG_BINPUT
    n`` grows its memo to 2n slots and writes each (a 10-byte file asked for 16 GB and was killed
    by the OOM killer).  Under ``RLIMIT_AS`` that allocation fails as a MemoryError instead (one
    line); a real snapshot needs ~4x its size.  32x: the memo of a key just under the pickle's
    size (16 bytes a key, read: ``_memo_past_end``) and 16x for the objects.  Not where
    ``resource`` or /proc are missing."""
    try:
        import resource

        with open("/proc/self/statm") as statm:
            mapped = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        yield
        return
    factor, extra = UNPICKLE_MEMORY
    limit = mapped + factor * pickle_bytes + extra
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY and soft <= limit:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


BYTEARRAY_REPORT = "deallocated bytearray object has exported buffers"


@contextmanager
def _no_bytearray_report() -> Iterator[None]:
    """CPython 3.11's bytearray constructor, when the buffer cannot be allocated (a BYTEARRAY8
    length past the address-space bound), frees the new object before it sets its export count;
    finding garbage there, the free prints ``SystemError: deallocated bytearray object has exported
    buffers`` through ``sys.excepthook`` before the MemoryError is raised (read as one line): a
    second line on stderr, now and then (fuzz.py --surface snapshot: 2 cases in 10,000).  While the
    unpickler runs, that report is dropped; any other passes to the hook there was."""
    previous = sys.excepthook

    def hook(kind: type[BaseException], value: BaseException, trace: Any) -> None:
        if not (kind is SystemError and str(value) == BYTEARRAY_REPORT):
            previous(kind, value, trace)

    sys.excepthook = hook
    try:
        yield
    finally:
        sys.excepthook = previous


def memory_claim(source: str) -> TraceError:
    """The one line for a pickle whose memo (or a length) needs more memory than its size allows:
    a memo key at or past the pickle's size, on both paths (the scanner's check, the unpickler's
    MemoryError or :func:`_memo_past_end`)."""
    return TraceError(source, "the pickle claims more memory than there is (corrupt?)", "copy the file again")


def _memo_past_end(unpickler: pickle.Unpickler, pickle_bytes: int) -> bool:
    """Whether the pickle stored a memo key at or past its own size, which no writer does (a
    pickle of n bytes stores fewer than n/2 objects; gaps in the keys are legal, and read).  The
    scanner refuses such a key where it reads it; here, once loaded: the C unpickler's size counts
    8 bytes for each memo slot up to its highest key, so under 8 a byte of pickle no key can be
    that far, and only above it (a gap, or a pickle of nothing but tiny objects) is the memo read."""
    if sys.getsizeof(unpickler) < 8 * pickle_bytes:
        return False
    keys = unpickler.memo.copy()
    return bool(keys) and max(keys) >= pickle_bytes


def _unpickle(stream: Any, source: str, pickle_bytes: int) -> Any:
    try:
        with _bounded_address_space(pickle_bytes), _no_bytearray_report():
            unpickler = PlainDataUnpickler(stream)
            data = unpickler.load()
            if _memo_past_end(unpickler, pickle_bytes):
                raise MemoryError
            return data
    except RefusedGlobal as exc:
        raise refused_code(source, exc.global_name) from None
    except EOFError:
        raise TraceError(source, "the pickle is truncated", "copy the file again") from None
    except MemoryError:
        raise memory_claim(source) from None
    except OSError as exc:
        raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None
    except RecursionError:
        raise TraceError(source, "the pickle is nested too deeply", _NOT_A_SNAPSHOT_FIX) from None
    except (pickle.UnpicklingError, ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as exc:
        problem = " ".join(str(exc).split())[:120] or type(exc).__name__
        raise TraceError(source, f"the pickle is corrupt ({problem})", "copy the file again") from None


class _Decoder:
    """Walks the plain data once, checking every type it relies on, and interns frames and stacks."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.frames = FrameTable()
        self.frame_ids: dict[tuple, int] = {}
        self.stack_ids: dict[tuple[int, ...], int] = {(): 0}
        self.stack_offsets: list[int] = [0, 0]
        self.stack_frames: list[int] = []
        self.by_identity: dict[int, int] = {}  # id(frames list) -> stack: a list shared in the pickle is walked once
        self.frame_by_identity: dict[int, int] = {}  # id(frame dict) -> frame
        self.by_content: dict[tuple, int] = {}  # ((filename, line, name), ...) -> stack, for stacks without FX fields

    def bad(self, where: str, what: str) -> TraceError:
        return TraceError(self.source, f"not an allocator snapshot: {where} {what}", _NOT_A_SNAPSHOT_FIX)

    def integer(self, value: Any, where: str) -> int:
        if type(value) is not int or not -_INT64_MAX <= value <= _INT64_MAX:
            raise self.bad(where, "is not a 64-bit integer")
        return value

    def text(self, value: Any, where: str) -> str:
        if type(value) is not str:
            raise self.bad(where, "is not text")
        return value

    def record(self, value: Any, where: str) -> dict:
        if type(value) is not dict:
            raise self.bad(where, "is not a dict")
        return value

    def sequence(self, value: Any, where: str) -> list | tuple:
        if type(value) not in (list, tuple):
            raise self.bad(where, "is not a list")
        return value

    def stack(self, frames: Any, where: str) -> int:
        if frames is None:
            return 0
        known = self.by_identity.get(id(frames))
        if known is not None:
            return known
        if type(frames) in (list, tuple):  # torch shares each distinct frame dict: a stack of frames already seen
            seen = tuple(map(self.frame_by_identity.get, map(id, frames)))
            known = self.stack_ids.get(cast(tuple[int, ...], seen)) if None not in seen else None
            if known is not None:
                self.by_identity[id(frames)] = known
                return known
        try:  # frames written out again (not shared), in C loops: a stack already seen, without FX fields
            content = tuple([(f["filename"], f["line"], f["name"]) for f in frames if len(f) == 3])
            known = self.by_content.get(content) if len(content) == len(frames) else None
        except (TypeError, KeyError):  # not a list of plain frames: the checks below say what is wrong
            known = None
        if known is not None:
            self.by_identity[id(frames)] = known
            return known
        ids = tuple(self.frame(frame, where) for frame in self.sequence(frames, where))
        stack = self.stack_ids.get(ids)
        if stack is None:
            stack = self.stack_ids[ids] = len(self.stack_offsets) - 1
            self.stack_frames.extend(ids)
            self.stack_offsets.append(len(self.stack_frames))
        self.by_identity[id(frames)] = stack
        if all(not any(self.frames.fx[key][i] for key in FX_FIELDS) for i in ids):
            self.by_content[tuple((self.frames.filename[i], self.frames.line[i], self.frames.name[i]) for i in ids)] = (
                stack
            )
        return stack

    def frame(self, frame: Any, where: str) -> int:
        frame = self.record(frame, f"a frame of {where}")
        filename = self.text(frame.get("filename", ""), f"a frame's filename in {where}")
        name = self.text(frame.get("name", ""), f"a frame's name in {where}")
        line = self.integer(frame.get("line", 0), f"a frame's line in {where}")
        fx = tuple(self.text(frame.get(key, ""), f"a frame's {key} in {where}") for key in FX_FIELDS)
        key = (filename, line, name, *fx)
        found = self.frame_ids.get(key)
        if found is None:
            found = self.frame_ids[key] = len(self.frames)
            self.frames.filename.append(filename)
            self.frames.line.append(line)
            self.frames.name.append(name)
            for fx_key, value in zip(FX_FIELDS, fx):
                self.frames.fx[fx_key].append(value)
        self.frame_by_identity[id(frame)] = found
        return found

    def stack_table(self) -> StackTable:
        return StackTable(np.asarray(self.stack_offsets, dtype=np.int64), np.asarray(self.stack_frames, dtype=np.int32))


def decode_snapshot(data: Any, source: str, file_bytes: int = 0) -> Snapshot:
    """Columns from the plain data of a snapshot (what :class:`PlainDataUnpickler` returned)."""
    decoder = _Decoder(source)
    top = decoder.record(data, "the top level")
    if "segments" not in top and "device_traces" not in top:
        raise decoder.bad("the top level", "has neither segments nor device_traces")
    traces = decoder.sequence(top.get("device_traces", []), "device_traces")
    if len(traces) > MAX_DEVICES:
        raise decoder.bad("device_traces", f"has {len(traces):,} devices, more than {MAX_DEVICES:,}")
    entries = _decode_entries(decoder, traces)
    segments = _decode_segments(decoder, decoder.sequence(top.get("segments", []), "segments"))
    devices = max(len(traces), int(segments.device.max()) + 1 if len(segments) else 0)
    return Snapshot(source, decoder.frames, decoder.stack_table(), entries, segments, devices, file_bytes)


_ENTRY_COLUMNS = ("action", "address", "size", "stream", "time_us", "stack", "device_free")


def _decode_entries(decoder: _Decoder, traces: list | tuple) -> TraceEntries:
    per_device: list[dict[str, np.ndarray]] = []
    annotations: dict[int, str] = {}
    for device, trace in enumerate(traces):
        trace = decoder.sequence(trace, f"device_traces[{device}]")
        columns = _checked_columns(decoder, trace) or _entry_by_entry(decoder, trace, device)
        first = sum(len(c["action"]) for c in per_device)
        for index in np.flatnonzero(columns["action"] == ACTION_CODE["annotate"]).tolist():
            annotations[first + index] = _metadata_text(trace[index].get("user_metadata"))
        per_device.append(columns)
    has_times = all(c["has_times"] for c in per_device)
    if not has_times:  # one clock for every entry: the index within its device, never a mix
        for columns in per_device:
            columns["time_us"] = np.arange(len(columns["action"]), dtype=np.int64)

    def joined(key: str, dtype: type) -> np.ndarray:
        return np.concatenate([c[key] for c in per_device]).astype(dtype) if per_device else np.zeros(0, dtype=dtype)

    devices = (
        np.concatenate([np.full(len(c["action"]), d, dtype=np.int32) for d, c in enumerate(per_device)])
        if per_device
        else np.zeros(0, np.int32)
    )
    return TraceEntries(
        devices,
        joined("action", np.int8),
        joined("address", np.int64),
        joined("size", np.int64),
        joined("stream", np.int64),
        joined("time_us", np.int64),
        joined("stack", np.int32),
        joined("device_free", np.int64),
        annotations,
        has_times,
    )


def _checked_columns(decoder: _Decoder, trace: list | tuple) -> dict | None:
    """One device's entries a column at a time (comprehensions and type sets: C loops, ~10x the
    entry-by-entry walk).  None at the first value of a wrong type: the walk then says where."""
    if set(map(type, trace)) - {dict}:
        return None
    actions = [entry.get("action") for entry in trace]
    if set(map(type, actions)) - {str}:
        return None
    columns: dict = {"action": np.asarray([ACTION_CODE.get(a, OTHER_ACTION) for a in actions], dtype=np.int64)}
    for column, key, absent in (
        ("address", "addr", 0),
        ("size", "size", 0),
        ("stream", "stream", 0),
        ("time_us", "time_us", None),
        ("device_free", "device_free", -1),
    ):
        values = [entry.get(key, absent) for entry in trace]
        types = set(map(type, values))
        if types - {int, type(None)} or (absent is not None and type(None) in types):
            return None
        columns["has_times" if column == "time_us" else column] = type(None) not in types
        if column == "time_us" and type(None) in types:
            values = [0] * len(values)
        try:
            columns[column] = np.asarray(values, dtype=np.int64)
        except OverflowError:
            return None
    try:
        columns["stack"] = np.asarray(
            [decoder.stack(entry.get("frames"), "device_traces") for entry in trace], dtype=np.int64
        )
    except TraceError:
        return None
    return columns


def _entry_by_entry(decoder: _Decoder, trace: list | tuple, device: int) -> dict:
    """The checking walk: raises a :class:`TraceError` naming the entry and field that is wrong."""
    columns: dict = {key: [] for key in _ENTRY_COLUMNS}
    has_times = True
    for index, entry in enumerate(trace):
        where = f"device_traces[{device}][{index}]"
        entry = decoder.record(entry, where)
        action = decoder.text(entry.get("action"), f"{where}.action")
        time = entry.get("time_us")
        has_times = has_times and time is not None
        columns["action"].append(ACTION_CODE.get(action, OTHER_ACTION))
        columns["address"].append(decoder.integer(entry.get("addr", 0), f"{where}.addr"))
        columns["size"].append(decoder.integer(entry.get("size", 0), f"{where}.size"))
        columns["stream"].append(decoder.integer(entry.get("stream", 0), f"{where}.stream"))
        columns["time_us"].append(0 if time is None else decoder.integer(time, f"{where}.time_us"))
        columns["stack"].append(decoder.stack(entry.get("frames"), f"{where}.frames"))
        free = entry.get("device_free")
        columns["device_free"].append(-1 if free is None else decoder.integer(free, f"{where}.device_free"))
    result: dict = {key: np.asarray(values, dtype=np.int64) for key, values in columns.items()}
    result["has_times"] = has_times
    return result


def _metadata_text(value: Any) -> str:
    """An annotation as text: plain data only reaches here, so its repr runs no code; reprlib
    bounds its depth and length (a list nested 100,000 deep would exhaust the stack)."""
    return value if type(value) is str else reprlib.repr(value)


def _decode_segments(decoder: _Decoder, segments: list | tuple) -> Segments:
    rows: dict[str, list] = {key: [] for key in ("device", "address", "total_size", "stream", "segment_type")}
    blocks: dict[str, list[int]] = {key: [] for key in ("segment", "address", "size", "requested", "state", "stack")}
    for number, segment in enumerate(segments):
        where = f"segments[{number}]"
        segment = decoder.record(segment, where)
        address = decoder.integer(segment.get("address", 0), f"{where}.address")
        device = decoder.integer(segment.get("device", 0), f"{where}.device")
        if not 0 <= device < MAX_DEVICES:
            raise decoder.bad(f"{where}.device", f"is {device}, not a device number (0-{MAX_DEVICES - 1})")
        rows["device"].append(device)
        rows["address"].append(address)
        rows["total_size"].append(decoder.integer(segment.get("total_size", 0), f"{where}.total_size"))
        rows["stream"].append(decoder.integer(segment.get("stream", 0), f"{where}.stream"))
        rows["segment_type"].append(decoder.text(segment.get("segment_type", ""), f"{where}.segment_type"))
        offset = address
        for index, block in enumerate(decoder.sequence(segment.get("blocks", []), f"{where}.blocks")):
            block_where = f"{where}.blocks[{index}]"
            block = decoder.record(block, block_where)
            size = decoder.integer(block.get("size", 0), f"{block_where}.size")
            state = decoder.text(block.get("state", "inactive"), f"{block_where}.state")
            if state not in BLOCK_STATE_CODE:
                raise decoder.bad(f"{block_where}.state", f"is {state[:40]!r}, not one of {', '.join(BLOCK_STATES)}")
            blocks["segment"].append(number)
            blocks["address"].append(decoder.integer(block.get("address", offset), f"{block_where}.address"))
            blocks["size"].append(size)
            blocks["requested"].append(
                decoder.integer(block.get("requested_size", size), f"{block_where}.requested_size")
            )
            blocks["state"].append(BLOCK_STATE_CODE[state])
            blocks["stack"].append(decoder.stack(block.get("frames"), f"{block_where}.frames"))
            offset += size
    ints = lambda values, dtype=np.int64: np.asarray(values, dtype=dtype)  # noqa: E731
    return Segments(
        ints(rows["device"], np.int32),
        ints(rows["address"]),
        ints(rows["total_size"]),
        ints(rows["stream"]),
        rows["segment_type"],
        ints(blocks["segment"], np.int32),
        ints(blocks["address"]),
        ints(blocks["size"]),
        ints(blocks["requested"]),
        ints(blocks["state"], np.int8),
        ints(blocks["stack"], np.int32),
    )
