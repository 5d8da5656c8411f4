"""Decoded events as columns: what a decode worker sends back.

A big trace holds millions of CPU operators, runtime launches and python
frames.  Kept as one Python object each they cost ~500 bytes and a Python
loop per analysis pass; as columns (numpy int64, names and threads as codes
into small tables, undecoded input lists in one bytes blob) they cost ~100
bytes and every pass is a numpy operation.  Device activity and ``[memory]``
records are columns too; GPU annotations (few) remain typed structs.

:func:`columns_from_events` runs in decode workers, one chunk at a time, with
chunk-local name and thread tables; :mod:`tuiprof.trace.store` merges chunks
into global tables.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from itertools import chain, compress
from typing import Any, ClassVar, cast

import msgspec
import numpy as np

from tuiprof.trace.schema import NO_MEMBER, EventArgs, RawEvent, TimedEvent

# CPU-side categories kept as columns: operators first (they launch device
# work and carry External id), then runtime and driver calls (they carry
# the correlation id).  2021 names beside modern ones (TRACE_FORMAT.md).
CPU_CATEGORIES = ("cpu_op", "user_annotation", "Operator", "cuda_runtime", "cuda_driver", "Runtime")
OPERATOR_CATEGORY_CODES = (0, 1, 2)
_CPU_CODE = {name: code for code, name in enumerate(CPU_CATEGORIES)}
FRAME_CATEGORY = "python_function"
DEVICE_KINDS = ("kernel", "memcpy", "memset")
_DEVICE_CODE = {"kernel": 0, "Kernel": 0, "gpu_memcpy": 1, "Memcpy": 1, "gpu_memset": 2, "Memset": 2}
GPU_ANNOTATION_CATEGORY = "gpu_user_annotation"  # few per trace: kept as structs
MODULE_PREFIX = "nn.Module: "
MEMORY_NAME = "[memory]"
COMMS_RECORD_NAME = "record_param_comms"  # its arguments describe a collective: kept (few per trace)
NONE = -1  # a missing id in an int column
_EMPTY_ARGS = EventArgs()


class Columns:
    """A dataclass of equally long numpy columns, with concatenation and row selection."""

    __dataclass_fields__: ClassVar[
        dict[str, Any]
    ]  # set by @dataclass on each subclass: dataclasses.fields() takes them

    def __len__(self) -> int:
        first = fields(self)[0]
        return len(getattr(self, first.name))

    def take(self, rows: np.ndarray | slice):
        return type(self)(**{f.name: getattr(self, f.name)[rows] for f in fields(self)})

    @classmethod
    def concat(cls, parts: list):
        if not parts:
            return cls.empty()
        return cls(**{f.name: _joined([getattr(p, f.name) for p in parts]) for f in fields(cls)})

    @classmethod
    def empty(cls):
        return cls(**{f.name: np.empty(0, dtype=np.int64) for f in fields(cls)})


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate``, but an all-zero column is ``np.zeros``: calloc'd pages that take
    no memory until written.  Without record_shapes the six input-text columns are zeros
    (130 MB of an ns trace's 1 GB)."""
    if any(part.any() for part in parts):
        return np.concatenate(parts)
    return np.zeros(sum(map(len, parts)), dtype=np.result_type(*parts))


@dataclass
class CpuEvents(Columns):
    """Operators (``cpu_op``, ``user_annotation``) and runtime launches, one row each.

    ``name`` and ``thread`` are codes into the store's tables; ids are
    ``NONE`` when absent.  ``dims_at``/``dims_len`` locate the event's
    ``Input Dims`` JSON text in the store's input blob (``types_*`` its
    ``Input type``, ``concrete_*`` its ``Concrete Inputs``; length 0 when absent).
    """

    name: np.ndarray
    category: np.ndarray
    thread: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    external_id: np.ndarray
    correlation: np.ndarray
    sequence_number: np.ndarray
    dims_at: np.ndarray
    dims_len: np.ndarray
    types_at: np.ndarray
    types_len: np.ndarray
    concrete_at: np.ndarray
    concrete_len: np.ndarray


def input_texts(cpu: CpuEvents, inputs: bytes, row: int) -> tuple[bytes, bytes, bytes]:
    """Undecoded ``Input Dims``, ``Input type`` and ``Concrete Inputs`` of cpu row ``row``."""
    return tuple(  # type: ignore[return-value]
        inputs[int(at[row]) : int(at[row]) + int(length[row])]
        for at, length in (
            (cpu.dims_at, cpu.dims_len),
            (cpu.types_at, cpu.types_len),
            (cpu.concrete_at, cpu.concrete_len),
        )
    )


@dataclass
class FrameColumns(Columns):
    """``python_function`` frames; ``name`` is the frame's name code
    (``train.py(42): forward``, the Python stacks of allocations), ``module`` the name
    code of an ``nn.Module`` frame's module (``Conv2d_1``), ``NONE`` for other frames."""

    name: np.ndarray
    thread: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    python_id: np.ndarray
    parent_id: np.ndarray
    module: np.ndarray


@dataclass
class DeviceEvents(Columns):
    """Kernels, memcpys and memsets (``kind`` indexes DEVICE_KINDS).

    ``name``, ``stream``, ``grid`` and ``block`` are codes into the name
    table (``"128x1x1"`` for a grid); ``occupancy`` is the estimated achieved
    occupancy in percent, NaN when not written.
    """

    name: np.ndarray
    kind: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    external_id: np.ndarray
    correlation: np.ndarray
    stream: np.ndarray
    grid: np.ndarray
    block: np.ndarray
    occupancy: np.ndarray


@dataclass
class AllocatorColumns(Columns):
    """``[memory]`` events as decoded, one row each; :mod:`tuiprof.trace.memory` settles
    their quirks once the chunks are merged.

    Columns, not structs: they are a quarter of a with_stack CPU trace's events,
    and pickling them back from the decode workers as structs cost a quarter of
    the workers' time.  Absent members: the ``has_`` flags 0, ``kind`` -1,
    ``device_id`` -1, sizes 0; ``tid`` is NONE when the thread id is not an integer.
    """

    start_ns: np.ndarray
    tid: np.ndarray
    has_bytes: np.ndarray
    bytes: np.ndarray
    has_total: np.ndarray
    total_allocated: np.ndarray
    total_reserved: np.ndarray
    kind: np.ndarray
    device_id: np.ndarray
    addr: np.ndarray  # the allocation's address (an allocation and its free share it); NONE when absent


@dataclass
class ChunkColumns:
    """One decoded chunk: columns whose codes index the chunk's own tables."""

    names: list[str]
    threads: list[int | str]
    cpu: CpuEvents
    frames: FrameColumns
    device: DeviceEvents
    inputs: bytes
    gpu_annotations: list[TimedEvent] = field(default_factory=list)
    memory: AllocatorColumns = field(default_factory=AllocatorColumns.empty)
    comms_records: list[EventArgs] = field(default_factory=list)  # record_param_comms arguments
    operator_count: int = 0  # cpu rows before this are operators, after it runtime launches
    event_count: int = 0
    other_events: int = 0
    damaged: int = 0  # kept kinds left out: ts or dur not finite, absurd, or a negative dur


# Times whose magnitude reaches this many ns are damage (2**62 ns is 146 years):
# no real clock writes them, and sums of them would overflow int64.
ABSURD_NS = 1 << 62
# Plain numbers have at most 16 integer digits (19 ns digits: int64).  Texts are joined with
# 16 '0's before each and 8 after: a 24-byte window from 16 bytes before a number's dot (or
# end) then holds its integer part right-aligned in two 8-digit words, and the dot (or a
# '0') and its decimals padded with zeros in a third.  The NUL between (no JSON text holds
# one) marks where texts end.
_SEPARATOR = b"0" * 8 + b"\x00" + b"0" * 16


def exact_ns(texts: Sequence[bytes | msgspec.Raw]) -> tuple[np.ndarray, np.ndarray]:
    """Microsecond JSON numbers (their text) -> exact integer nanoseconds, and which are damaged.

    ``ts``/``dur`` are read as text and converted without a float on the way:
    at epoch magnitudes (~1.7e15 us) a float64 has no room for the three
    decimals, and calls 242 ns apart would start at the same ns.  Damaged
    (value 0): not a finite number (``NaN``, ``"NaN"``, ``Infinity``,
    ``null``...) or ``|value| >= 2**62`` ns.

    Plain numbers (``-?digits[.d{1,3}]``, all of Kineto's) are numpy passes:
    the texts are joined with zeros between them (``_SEPARATOR``), and each
    number's window of digits is read eight digits at a time
    (:func:`_read_digits`).  Anything else (exponents, more decimals,
    strings) is read one by one with :class:`~decimal.Decimal`, rounding half
    to even below a nanosecond.
    """
    count = len(texts)
    if not count:
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=bool)
    joined = np.frombuffer(bytearray().join((_SEPARATOR, _SEPARATOR.join(texts), _SEPARATOR)), dtype=np.uint8)
    marks = np.flatnonzero(joined == 0)
    if len(marks) == count + 1:  # cheaper than len() on every text
        start, end = marks[:-1] + 17, marks[1:] - 8
    else:  # a NUL in a text (not one msgspec decoded)
        lengths = np.fromiter(map(len, texts), dtype=np.int64, count=count)
        end = np.cumsum(lengths + len(_SEPARATOR))
        start = end - lengths
    # Decimals: the dot 2, 3 or 4 from the end (a text is a JSON value: msgspec checked it).
    decimals = np.zeros(count, dtype=np.int64)
    for k in (1, 2, 3):
        decimals[joined[end - k - 1] == 46] = k
    negative = joined[start] == 45
    joined[start[negative]] = 48  # the sign reads as one more leading zero
    digits_end = end - decimals - (decimals > 0)  # just after the integer part
    digits = digits_end - start - negative
    window = np.lib.stride_tricks.sliding_window_view(joined, 24)[digits_end - 16]
    window[:, 16] = 48  # the dot
    all_digits = ((window - np.uint8(48)) < 10).view(np.uint64)  # a byte of 1 per digit
    plain = (all_digits[:, 0] & all_digits[:, 1] & all_digits[:, 2]) == 0x0101010101010101
    # At least one digit, and int64 holds it: 19 ns digits start with 4 at most.
    plain &= (digits >= 1) & ((digits <= 15) | ((digits == 16) & (window[:, 0] <= 52)))
    words = window.view("<u8")
    whole = _read_digits(words[:, :2], 8)
    fraction = _read_digits(words[:, 2], 4)  # "0ddd": the dot read as a leading zero
    value = ((whole[:, 0] * np.uint64(10**8) + whole[:, 1]) * np.uint64(1000) + fraction).view(np.int64)
    value = np.where(negative, -value, value)
    odd = np.flatnonzero(~plain)
    value[odd] = 0
    damaged = np.abs(value) >= ABSURD_NS
    for row in odd.tolist():
        exact = _exact_ns_slowly(bytes(texts[row]))
        damaged[row] = exact is None
        value[row] = 0 if exact is None else exact
    value[damaged] = 0
    return value, damaged


# Multiply-and-shift steps that read ASCII digits in a little-endian uint64, first digit most
# significant: pairs of digits, then pairs of pairs (two 4-digit numbers), then all eight.
_DIGIT_STEPS = [
    (np.uint64(mask), np.uint64(scale << shift | 1), np.uint64(shift))
    for mask, scale, shift in (
        (0x0F0F0F0F0F0F0F0F, 10, 8),
        (0x00FF00FF00FF00FF, 100, 16),
        (0x0000FFFF0000FFFF, 10000, 32),
    )
]


def _read_digits(words: np.ndarray, count: int) -> np.ndarray:
    """The number written by the first ``count`` (4 or 8) ASCII digits of each uint64 word."""
    for mask, multiplier, shift in _DIGIT_STEPS[: count.bit_length() - 1]:
        words = ((words & mask) * multiplier) >> shift
    return words & np.uint64(0xFFFF) if count == 4 else words


def _exact_ns_slowly(text: bytes) -> int | None:
    """One number text a plain digit pass can't read (``1.7e+15``, ``"12.5"``); None if damaged."""
    try:
        number = Decimal(text.decode("ascii").strip().strip('"'))
    except (UnicodeDecodeError, InvalidOperation):
        return None
    if not number.is_finite() or number.adjusted() > 18:
        return None
    ns = int((number * 1000).to_integral_value(ROUND_HALF_EVEN))
    return ns if abs(ns) < ABSURD_NS else None


_INT64 = 1 << 63


def int_column(values: list[int]) -> np.ndarray:
    """An int64 column; a value beyond int64 (broken writers) becomes NONE."""
    return _int64(values)[0]


def _int64(values: list[int]) -> tuple[np.ndarray, np.ndarray | bool]:
    """An int64 column, and which values fit (True: all of them, the usual case);
    np.fromiter: cheaper than np.array on a list."""
    try:
        return np.fromiter(values, dtype=np.int64, count=len(values)), True
    except OverflowError:
        fits = [-_INT64 <= v < _INT64 for v in values]
        return np.array([v if ok else NONE for v, ok in zip(values, fits)], dtype=np.int64), np.array(fits)


def _external_ids(args: list[EventArgs]) -> np.ndarray:
    """``External id`` under either spelling (lower-case before 2022), NONE when absent."""
    return int_column(
        [
            a.external_id
            if a.external_id is not None
            else NONE
            if a.external_id_legacy is None
            else a.external_id_legacy
            for a in args
        ]
    )


def columns_from_events(events: list[RawEvent]) -> ChunkColumns:
    """Route one decoded batch by kind and turn the CPU-side kinds into columns.

    Per-kind comprehensions over routed lists cost about a third of doing
    the work event by event.
    """
    operators: list[RawEvent] = []
    launches: list[RawEvent] = []
    frames: list[RawEvent] = []
    memory: list[RawEvent] = []
    device: list[RawEvent] = []
    gpu_annotations: list[RawEvent] = []
    routes = {
        cat: operators if code in OPERATOR_CATEGORY_CODES else launches for code, cat in enumerate(CPU_CATEGORIES)
    }
    routes[FRAME_CATEGORY] = frames
    routes.update({cat: device for cat in _DEVICE_CODE})
    routes[GPU_ANNOTATION_CATEGORY] = gpu_annotations
    for event in events:
        if event.name == MEMORY_NAME:
            memory.append(event)
        elif event.ph == "X":
            bucket = routes.get(event.cat)
            if bucket is not None:
                bucket.append(event)
    groups = (operators, launches, frames, device, memory, gpu_annotations)
    other = len(events) - sum(map(len, groups))  # flows, metadata, instants: the joins use ids instead
    (
        (
            cpu_start,
            cpu_dur,
            frame_start,
            frame_dur,
            device_start,
            device_dur,
            memory_start,
            _,
            annotation_start,
            annotation_dur,
        ),
        damaged,
    ) = _times(groups)

    names: dict[str, int] = {}
    threads: dict[int | str, int] = {}
    code = names.setdefault
    thread = threads.setdefault

    cpu = operators + launches  # operators first: the store keeps them before launches
    cpu_args = [e.args or _EMPTY_ARGS for e in cpu]
    # One blob per chunk: every Input Dims text, then every Input type, then every Concrete Inputs.
    blobs, lengths = [], []
    for texts in (
        [a.input_dims for a in cpu_args],
        [a.input_types for a in cpu_args],
        [a.concrete_inputs for a in cpu_args],
    ):
        if any(texts):  # none at all without record_shapes: any() is cheaper than join() and len()
            blobs.append(b"".join(texts))
            lengths.append(np.fromiter(map(len, texts), dtype=np.int64, count=len(cpu)))
        else:
            lengths.append(np.zeros(len(cpu), dtype=np.int64))
    inputs = b"".join(blobs)
    offsets = np.concatenate(lengths).cumsum() - np.concatenate(lengths)
    cpu_columns = CpuEvents(
        name=int_column([code(e.name, len(names)) for e in cpu]),
        category=int_column([_CPU_CODE[e.cat] for e in cpu]),
        thread=int_column([thread(e.tid, len(threads)) for e in cpu]),
        start_ns=cpu_start,
        dur_ns=cpu_dur,
        external_id=_external_ids(cpu_args),
        correlation=int_column([NONE if a.correlation is None else a.correlation for a in cpu_args]),
        sequence_number=int_column([NONE if a.sequence_number is None else a.sequence_number for a in cpu_args]),
        dims_at=offsets[: len(cpu)],
        dims_len=lengths[0],
        types_at=offsets[len(cpu) : 2 * len(cpu)],
        types_len=lengths[1],
        concrete_at=offsets[2 * len(cpu) :],
        concrete_len=lengths[2],
    )

    frame_args = [e.args or _EMPTY_ARGS for e in frames]
    frame_names = [e.name for e in frames]
    # Frame names repeat: each distinct one is looked at once.
    prefix = len(MODULE_PREFIX)
    modules = {
        name: code(name[prefix:], len(names)) if name.startswith(MODULE_PREFIX) else NONE
        for name in dict.fromkeys(frame_names)
    }
    frame_columns = FrameColumns(
        name=int_column([code(name, len(names)) for name in frame_names]),
        thread=int_column([thread(e.tid, len(threads)) for e in frames]),
        start_ns=frame_start,
        end_ns=frame_start + frame_dur,
        python_id=int_column([NONE if a.python_id is None else a.python_id for a in frame_args]),
        parent_id=int_column([NONE if a.python_parent_id is None else a.python_parent_id for a in frame_args]),
        module=int_column([modules[name] for name in frame_names]),
    )
    device_columns = _device_columns(device, device_start, device_dur, names) if device else DeviceEvents.empty()
    comms_code = names.get(COMMS_RECORD_NAME)
    rows = [] if comms_code is None else np.flatnonzero(cpu_columns.name[: len(operators)] == comms_code).tolist()
    comms = [cpu_args[row] for row in rows if cpu_args[row].collective_name is not None]
    for args in comms:
        args.input_dims = args.input_types = args.concrete_inputs = NO_MEMBER  # a Raw would keep the chunk alive
    for event in gpu_annotations:
        if event.args is not None and event.args.input_dims:
            args = event.args  # a Raw would keep the decoded chunk alive
            args.input_dims = args.input_types = args.concrete_inputs = NO_MEMBER
    annotations = [
        TimedEvent(e.name, e.tid, s, d, e.args)
        for e, s, d in zip(gpu_annotations, annotation_start.tolist(), annotation_dur.tolist())
    ]
    return ChunkColumns(
        names=list(names),
        threads=list(threads),
        cpu=cpu_columns,
        frames=frame_columns,
        device=device_columns,
        inputs=inputs,
        gpu_annotations=annotations,
        memory=_allocator_columns(memory, memory_start),
        comms_records=comms,
        operator_count=len(operators),
        event_count=len(events),
        other_events=other,
        damaged=damaged,
    )


def _times(groups: tuple[list[RawEvent], ...]) -> tuple[list[np.ndarray], int]:
    """Exact start and duration (ns) of each group's events; damaged events (bad ts or dur,
    dur < 0) are left out of their group, and counted.

    Operators and launches (the first two groups) come back as one: the cpu rows.  One
    exact_ns call for all groups: a call costs ~30 numpy passes whatever its length."""
    start, bad_start = exact_ns([e.ts for group in groups for e in group])
    dur, bad_dur = exact_ns([e.dur for group in groups for e in group])
    bad = bad_start | bad_dur | (dur < 0)
    damaged = int(bad.sum())
    if damaged:
        ends = np.cumsum([len(group) for group in groups]).tolist()
        good = (~bad).tolist()
        for group, group_end in zip(groups, ends):
            group[:] = compress(group, good[group_end - len(group) : group_end])
        start, dur = start[~bad], dur[~bad]
    ends = np.cumsum([len(group) for group in groups])[1:-1]  # operators and launches together
    return [column for pair in zip(np.split(start, ends), np.split(dur, ends)) for column in pair], damaged


def _allocator_columns(events: list[RawEvent], start_ns: np.ndarray) -> AllocatorColumns:
    """``[memory]`` events as columns: the ``args`` members trace/memory.py reads."""
    if not events:
        return AllocatorColumns.empty()
    args = [e.args or _EMPTY_ARGS for e in events]
    alloc = [a.alloc_bytes for a in args]
    total = [a.total_allocated for a in args]
    alloc_column, alloc_fits = _int64([v or 0 for v in alloc])
    total_column, total_fits = _int64([v or 0 for v in total])
    reserved, reserved_fits = _int64([a.total_reserved or 0 for a in args])
    kind, kind_fits = _int64([NONE if a.device_type is None else a.device_type for a in args])
    device_id, device_fits = _int64([NONE if a.device_id is None else a.device_id for a in args])
    addr, _ = _int64([NONE if a.addr is None else a.addr for a in args])
    tids = [e.tid for e in events]
    if not set(map(type, tids)) <= {int}:  # "123" from some writers: a number; other texts: NONE
        tids = [t if isinstance(t, int) else int(t) if t.isdecimal() else NONE for t in tids]
    return AllocatorColumns(
        start_ns=start_ns,
        tid=int_column(cast("list[int]", tids)),  # every text replaced just above
        # Numbers beyond int64 (2**64 in a damaged file) make no real record: left out.
        has_bytes=np.array([v is not None for v in alloc], dtype=np.int64)
        & alloc_fits
        & total_fits
        & reserved_fits
        & kind_fits
        & device_fits,
        bytes=alloc_column,
        has_total=np.array([v is not None for v in total], dtype=np.int64),
        total_allocated=total_column,
        total_reserved=reserved,
        kind=kind,
        device_id=device_id,
        addr=addr,  # an address beyond int64 is NONE: it pairs nothing
    )


class _ShapeTexts(dict):
    """Launch shape (a tuple) -> ``"128x1x1"``, None when empty or not all numbers;
    shapes repeat: each distinct one is checked and joined once."""

    def __missing__(self, key: tuple) -> str | None:
        text = self[key] = (
            "x".join(map(str, key)) if key and all(isinstance(v, (int, float, str)) for v in key) else None
        )
        return text


def _shape_texts(shapes: list[list | None]) -> list[str | None]:
    """Launch shapes (``grid``, ``block``) as :class:`_ShapeTexts`; None when absent."""
    keys = [tuple(shape) if shape else () for shape in shapes]
    try:
        return list(map(_ShapeTexts().__getitem__, keys))
    except TypeError:  # a nested list (a damaged trace) is no shape, and no dict key
        keys = [key if all(isinstance(v, (int, float, str)) for v in key) else () for key in keys]
        return list(map(_ShapeTexts().__getitem__, keys))


def _device_columns(
    events: list[RawEvent], start_ns: np.ndarray, dur_ns: np.ndarray, names: dict[str, int]
) -> DeviceEvents:
    """Device events as columns; their texts (name, stream, grid, block) as name codes."""
    code = names.setdefault
    args = [e.args or _EMPTY_ARGS for e in events]
    streams = [None if a.stream is None else str(a.stream) for a in args]
    shapes = _shape_texts([shape for a in args for shape in (a.grid, a.block)])  # in the order they come
    grids, blocks = shapes[0::2], shapes[1::2]
    # Texts get codes in the order they first appear, event by event, before kernel names.
    for text in dict.fromkeys(chain.from_iterable(zip(streams, grids, blocks))):
        if text is not None:
            code(text, len(names))
    occupancy = [a.occupancy_pct for a in args]
    if str in set(map(type, occupancy)):  # "33": no number here
        occupancy = [None if isinstance(v, str) else v for v in occupancy]
    return DeviceEvents(
        name=int_column([code(e.name, len(names)) for e in events]),
        kind=int_column([_DEVICE_CODE[e.cat] for e in events]),
        start_ns=start_ns,
        dur_ns=dur_ns,
        external_id=_external_ids(args),
        correlation=int_column([NONE if a.correlation is None else a.correlation for a in args]),
        stream=int_column([NONE if t is None else names[t] for t in streams]),
        grid=int_column([NONE if t is None else names[t] for t in grids]),
        block=int_column([NONE if t is None else names[t] for t in blocks]),
        occupancy=np.array(occupancy, dtype=np.float64),  # None: NaN
    )
