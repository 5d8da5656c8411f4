"""A numba scanner from a span's JSON bytes straight to columns (issue 29, item 4).

Experimental: the scanner reads every event of a span byte by byte, validates
it at least as strictly as msgspec would, and writes the CPU operators,
runtime launches and python frames straight into columns; device events,
``[memory]`` records and GPU annotations (few) are cut out and decoded by
msgspec as before.  Anything it does not fully understand (an escape, a byte
>= 0x80, a number that is not ``-?digits[.ddd]``, a duplicate member, a
string ``tid`` on a kept event, a negative duration, ``record_param_comms``)
makes it give the span up (None), and the caller decodes it the usual way, so
the columns never differ.
"""

from __future__ import annotations

import os
from functools import cache
from typing import Any

import msgspec
import numpy as np

from tuiprof.trace.columns import (
    COMMS_RECORD_NAME,
    CPU_CATEGORIES,
    FRAME_CATEGORY,
    GPU_ANNOTATION_CATEGORY,
    MODULE_PREFIX,
    NONE,
    ChunkColumns,
    CpuEvents,
    FrameColumns,
    columns_from_events,
)
from tuiprof.trace.decode import DECODE_ERRORS
from tuiprof.trace.jit import numba_module
from tuiprof.trace.schema import EVENT_LIST, NO_MEMBER, EventArgs, RawEvent

# Spans smaller than this are decoded the usual way: the scanner's import and cache load (~0.5 s)
# would cost more than it saves.  The tests and the fuzzer set it to 0 to force the scanner.
MIN_BYTES_ENV = "TUIPROF_JIT_SCAN_MIN_BYTES"
MIN_BYTES = 4 << 20
PARALLEL_SPAN_BYTES = 16 << 20  # decode.CHUNK_BYTES: what a worker is handed
# Room for events is made for the last span's bytes an event (Kineto's events are 200-350
# bytes); arrays sized for the worst case (3 bytes an event) cost a third of the scan.
_bytes_per_event = [100.0]

# args members EventArgs declares, by how msgspec types them.
INT_KEYS = (
    b"External id",
    b"external id",
    b"Sequence number",
    b"Python id",
    b"Python parent id",
    b"correlation",
    b"Bytes",
    b"Total Allocated",
    b"Total Reserved",
    b"Device Type",
    b"Device Id",
    b"Addr",
    b"In msg nelems",
    b"Out msg nelems",
    b"Group size",
)
RAW_KEYS = (b"Input Dims", b"Input type", b"Concrete Inputs")
LOOSE_KEYS = (b"stream", b"est. achieved occupancy %", b"Process Group Name", b"Process Group ID")
LIST_KEYS = (b"grid", b"block")
STR_KEYS = (b"Collective name", b"dtype")
ARG_KEYS = INT_KEYS + RAW_KEYS + LOOSE_KEYS + LIST_KEYS + STR_KEYS
# Routed categories: CPU codes 0-5, then frames (6), then those decoded by msgspec (8).
DEVICE_CATEGORIES = (b"kernel", b"Kernel", b"gpu_memcpy", b"Memcpy", b"gpu_memset", b"Memset")
CATEGORIES = (
    tuple(c.encode() for c in CPU_CATEGORIES)
    + (FRAME_CATEGORY.encode(),)
    + DEVICE_CATEGORIES
    + (GPU_ANNOTATION_CATEGORY.encode(),)
)
FRAME_KIND, OTHER_KIND, MSGSPEC_KIND = 6, 7, 8
ABSENT = np.iinfo(np.int64).min  # an id member absent or null (a -1 written is kept apart)
_decode_events = msgspec.json.Decoder(EVENT_LIST).decode
_decode_event = msgspec.json.Decoder(RawEvent).decode


def _table(keys: tuple[bytes, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The keys shortest first, as one blob and the offsets that cut it, and each one's index in ``keys``."""
    order = sorted(range(len(keys)), key=lambda k: len(keys[k]))
    blob = np.frombuffer(b"".join(keys[k] for k in order), dtype=np.uint8).copy()
    offsets = np.cumsum([0] + [len(keys[k]) for k in order]).astype(np.int64)
    return blob, offsets, np.array(order, dtype=np.int64)


def min_bytes() -> int:
    """The smallest span the scanner takes (``TUIPROF_JIT_SCAN_MIN_BYTES``, else MIN_BYTES)."""
    try:
        return int(os.environ.get(MIN_BYTES_ENV, ""))
    except ValueError:
        return MIN_BYTES


@cache
def _kernel() -> Any:
    numba = numba_module()
    if numba is None:
        return None
    from tuiprof.trace._jitscan_kernel import scan

    return scan


def warm_up() -> None:
    """Import numba and load the compiled scanner now (a decode worker, as it starts)."""
    if min_bytes() <= PARALLEL_SPAN_BYTES and _kernel() is not None:
        scan_columns(np.frombuffer(b"{}", dtype=np.uint8), 0, 2, force=True)


def scan_columns(buf: np.ndarray, start: int, end: int, force: bool = False) -> ChunkColumns | None:
    """The columns of the events in ``buf[start:end]`` (whole events, ``,`` between them),
    or None when the JIT is off, the span is small, or the scanner gave it up."""
    if end - start < min_bytes() and not force:
        return None
    kernel = _kernel()
    if kernel is None:
        return None
    if buf.flags.writeable:  # one compiled signature: read-only bytes (an mmap is)
        buf = buf.view()
        buf.flags.writeable = False
    keys = _tables()
    capacity = int((end - start) / _bytes_per_event[0] * 1.25) + 1024
    while True:
        result = kernel(buf, start, end, capacity, *keys)
        status = result[0]
        if status == 2:  # more events than room for them: rescanned with room for all
            capacity = (end - start) // 2 + 1
            continue
        if status == 0 and result[1] and end - start >= 1 << 20:  # a real span, not a warm-up
            _bytes_per_event[0] = (end - start) / result[1]
        if status != 0:
            return None
        return _columns(buf, *result[1:])


@cache
def _tables() -> tuple[np.ndarray, ...]:
    return (*_table(ARG_KEYS), *_table(CATEGORIES))


def _first_seen(ids: np.ndarray) -> np.ndarray:
    """The distinct values of ``ids`` in the order they first appear."""
    unique, first = np.unique(ids, return_index=True)
    return unique[np.argsort(first, kind="stable")]


def _columns(
    buf: np.ndarray,
    count: int,
    kind: np.ndarray,
    obj_start: np.ndarray,
    obj_end: np.ndarray,
    name_id: np.ndarray,
    tid: np.ndarray,
    ts: np.ndarray,
    dur: np.ndarray,
    ids: np.ndarray,
    raw: np.ndarray,
    distinct_at: np.ndarray,
    distinct_len: np.ndarray,
    distinct_count: int,
) -> ChunkColumns | None:
    kind = kind[:count]
    texts = [
        bytes(buf[a : a + n]).decode("ascii")
        for a, n in zip(distinct_at[:distinct_count].tolist(), distinct_len[:distinct_count].tolist())
    ]
    operators = np.flatnonzero(kind <= 2)
    cpu_rows = np.concatenate([operators, np.flatnonzero((kind >= 3) & (kind <= 5))])
    frame_rows = np.flatnonzero(kind == FRAME_KIND)
    by_msgspec = np.flatnonzero(kind == MSGSPEC_KIND)
    names: dict[str, int] = {}
    code = names.setdefault
    lut = np.full(distinct_count, NONE, dtype=np.int64)
    for i in _first_seen(name_id[cpu_rows]).tolist():
        lut[i] = code(texts[i], len(names))
    comms = _comms_records(buf, obj_start, obj_end, operators, name_id, texts) if COMMS_RECORD_NAME in names else []
    if comms is None:
        return None
    frame_ids = name_id[frame_rows]
    frame_distinct = _first_seen(frame_ids).tolist()
    module_lut = np.full(distinct_count, NONE, dtype=np.int64)
    prefix = len(MODULE_PREFIX)
    for i in frame_distinct:
        if texts[i].startswith(MODULE_PREFIX):
            module_lut[i] = code(texts[i][prefix:], len(names))
    for i in frame_distinct:
        lut[i] = code(texts[i], len(names))
    all_tids = np.concatenate([tid[cpu_rows], tid[frame_rows]])
    unique_tids, first, inverse = np.unique(all_tids, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    code_of_sorted = np.empty(len(order), dtype=np.int64)
    code_of_sorted[order] = np.arange(len(order))
    thread_codes = code_of_sorted[inverse.reshape(-1)]
    threads: list[int | str] = unique_tids[order].tolist()

    def id_column(rows: np.ndarray, member: int) -> np.ndarray:
        values = ids[rows, member]
        return np.where(values == ABSENT, NONE, values)

    ncpu = len(cpu_rows)
    raw_at = raw[cpu_rows][:, 0::2].T.reshape(-1)  # dims of every row, then types, then concrete
    raw_len = raw[cpu_rows][:, 1::2].T.reshape(-1)
    total = int(raw_len.sum())
    offsets = np.cumsum(raw_len) - raw_len
    if total:
        gather = np.repeat(raw_at - offsets, raw_len) + np.arange(total, dtype=np.int64)
        inputs = buf[gather].tobytes()
    else:
        inputs = b""
    external = ids[cpu_rows, 0]
    legacy = ids[cpu_rows, 1]
    external = np.where(external != ABSENT, external, np.where(legacy == ABSENT, NONE, legacy))
    cpu = CpuEvents(
        name=lut[name_id[cpu_rows]],
        category=kind[cpu_rows].astype(np.int64),
        thread=thread_codes[:ncpu],
        start_ns=ts[cpu_rows],
        dur_ns=dur[cpu_rows],
        external_id=external,
        correlation=id_column(cpu_rows, 5),
        sequence_number=id_column(cpu_rows, 2),
        dims_at=offsets[:ncpu],
        dims_len=raw_len[:ncpu],
        types_at=offsets[ncpu : 2 * ncpu],
        types_len=raw_len[ncpu : 2 * ncpu],
        concrete_at=offsets[2 * ncpu :],
        concrete_len=raw_len[2 * ncpu :],
    )
    frame_start = ts[frame_rows]
    frames = FrameColumns(
        name=lut[frame_ids],
        thread=thread_codes[ncpu:],
        start_ns=frame_start,
        end_ns=frame_start + dur[frame_rows],
        python_id=id_column(frame_rows, 3),
        parent_id=id_column(frame_rows, 4),
        module=module_lut[frame_ids],
    )
    rest = _by_msgspec(buf, obj_start[by_msgspec], obj_end[by_msgspec])
    if rest is None:
        return None
    remap = np.array([code(name, len(names)) for name in rest.names], dtype=np.int64)
    device = rest.device
    for column in ("name", "stream", "grid", "block"):
        values = getattr(device, column)
        setattr(device, column, np.where(values == NONE, NONE, remap[np.maximum(values, 0)]) if len(remap) else values)
    return ChunkColumns(
        names=list(names),
        threads=threads,
        cpu=cpu,
        frames=frames,
        device=device,
        inputs=inputs,
        gpu_annotations=rest.gpu_annotations,
        memory=rest.memory,
        comms_records=comms,
        operator_count=len(operators),
        event_count=count,
        other_events=int(np.count_nonzero(kind == OTHER_KIND)) + rest.other_events,
        damaged=rest.damaged,
    )


def _comms_records(
    buf: np.ndarray,
    obj_start: np.ndarray,
    obj_end: np.ndarray,
    operators: np.ndarray,
    name_id: np.ndarray,
    texts: list[str],
) -> list[EventArgs] | None:
    """The arguments of the ``record_param_comms`` operators that name a collective, as
    columns_from_events keeps them (few per trace: decoded by msgspec)."""
    records = []
    for row in operators[name_id[operators] == texts.index(COMMS_RECORD_NAME)].tolist():
        try:
            args = _decode_event(bytes(buf[obj_start[row] : obj_end[row]])).args
        except DECODE_ERRORS:
            return None
        if args is not None and args.collective_name is not None:
            args.input_dims = args.input_types = args.concrete_inputs = NO_MEMBER
            records.append(args)
    return records


def _by_msgspec(buf: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> ChunkColumns | None:
    """The events the scanner leaves to msgspec (device, ``[memory]``, GPU annotations), as columns."""
    data = buf.data
    text = b"[" + b",".join(data[a:b] for a, b in zip(starts.tolist(), ends.tolist())) + b"]"
    try:
        events = _decode_events(text)
    except DECODE_ERRORS:
        return None
    return columns_from_events(events)
