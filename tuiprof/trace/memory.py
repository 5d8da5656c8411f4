"""Allocator records (``[memory]`` instants) as columns, with the format's quirks settled here.

- ``Device Type`` follows c10's DeviceType: 0 CPU, 2 MKLDNN and 5 IDEEP are host memory;
  1 CUDA, 6 HIP (ROCm GPUs report 6, not 1), 12 XPU and 20 PrivateUse1 are a device's.
  A record without one counts for neither in operator tables (as torch does) and is
  charted as CPU memory (pre-2021 files had only host records).
- Files before 2021 have no ``Total Allocated``: a device's allocated curve is then the
  running sum of ``Bytes`` and its reserved curve is unknown.
- A record without ``Bytes`` is not an allocator event and is left out.

The analysis reads only these columns; records come sorted by time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.trace.columns import AllocatorColumns

CPU_MEMORY_TYPES = frozenset({0, 2, 5})  # CPU, MKLDNN, IDEEP
DEVICE_MEMORY_TYPES = frozenset({1, 6, 12, 20})  # CUDA, HIP, XPU, PrivateUse1
DEVICE_TYPE_NAMES = {0: "CPU", 1: "CUDA", 2: "MKLDNN", 5: "IDEEP", 6: "HIP", 12: "XPU", 20: "PrivateUse1"}
NO_TYPE = -1


@dataclass(frozen=True)
class MemoryRecords:
    start_ns: np.ndarray  # int64, ascending
    bytes: np.ndarray  # int64, negative for a free
    kind: np.ndarray  # int64 Device Type, NO_TYPE when absent
    device: np.ndarray  # int64 index into device_names
    device_names: tuple[str, ...]  # "CPU", "CUDA:0", in first-seen order
    allocated: np.ndarray  # int64 Total Allocated after the record (or the device's running sum)
    reserved: np.ndarray  # int64 Total Reserved (0 where unknown)
    reserved_known: tuple[bool, ...]  # per device: whether the file recorded totals
    tids: tuple[int | str, ...]  # the thread of each record, as written
    addr: np.ndarray  # int64 Addr (an allocation and its free share it), NONE when absent

    def __len__(self) -> int:
        return len(self.start_ns)

    @property
    def is_cpu(self) -> np.ndarray:
        return np.isin(self.kind, list(CPU_MEMORY_TYPES))

    @property
    def is_device(self) -> np.ndarray:
        return np.isin(self.kind, list(DEVICE_MEMORY_TYPES))


def device_label(kind: int, device_id: int | None) -> str:
    """``CPU`` for host memory (and records without a type), ``CUDA:0`` for a device's."""
    type_id = 0 if kind == NO_TYPE else kind
    name = DEVICE_TYPE_NAMES.get(type_id, f"device{type_id}")
    return name if type_id in CPU_MEMORY_TYPES else f"{name}:{device_id if device_id is not None else 0}"


def memory_records(columns: AllocatorColumns) -> MemoryRecords:
    """The allocator records of a trace, sorted by time (ties in file order), devices labelled."""
    rows = np.flatnonzero(columns.has_bytes)
    rows = rows[np.argsort(columns.start_ns[rows], kind="stable")]
    kinds = columns.kind[rows]
    # One label per distinct (type, id) pair; several pairs can share one ("CPU").
    pairs, first, inverse = _distinct_pairs(kinds, columns.device_id[rows])
    labels = [device_label(kind, None if device_id < 0 else device_id) for kind, device_id in pairs]
    names = tuple(dict.fromkeys(labels[pair] for pair in np.argsort(first, kind="stable").tolist()))
    device = np.array([names.index(label) for label in labels], dtype=np.int64)[inverse]
    sizes = columns.bytes[rows]
    allocated = columns.total_allocated[rows]
    reserved = columns.total_reserved[rows]
    has_total = columns.has_total[rows].astype(bool)
    known = []
    for index in range(len(names)):
        mine = device == index
        if has_total[mine].all():
            known.append(True)
        else:  # pre-2021: the running sum of this device's bytes
            allocated[mine] = np.cumsum(sizes[mine])
            reserved[mine] = 0
            known.append(False)
    return MemoryRecords(
        start_ns=columns.start_ns[rows],
        bytes=sizes,
        kind=kinds,
        device=device,
        device_names=names,
        allocated=allocated,
        reserved=reserved,
        reserved_known=tuple(known),
        tids=tuple(columns.tid[rows].tolist()),
        addr=columns.addr[rows],
    )


def _distinct_pairs(kinds: np.ndarray, device_ids: np.ndarray) -> tuple[list[list[int]], np.ndarray, np.ndarray]:
    """``np.unique`` of the (kind, device id) rows, axis 0, with each pair's first row and each
    row's pair.  ``axis=0`` sorts the rows as void records: 0.2 s for the 1 GB cpu shape's
    memory, most of a reopen's memory timelines.  A trace has a handful of pairs in small
    ranges: each row's pair is then one code below 2**16, counted (``bincount``), each present
    code's first row found in the leading rows (:func:`_first_rows`): ~40 ms for 3 M rows.  Wide ranges or many
    pairs (a planted trace): ``axis=0`` as before."""
    if len(kinds):
        kind_low, id_low = int(kinds.min()), int(device_ids.min())
        kind_span, id_span = int(kinds.max()) - kind_low + 1, int(device_ids.max()) - id_low + 1
        if kind_span * id_span <= 1 << 16:
            codes = ((kinds - kind_low) * id_span + (device_ids - id_low)).astype(np.uint16)
            present = np.flatnonzero(np.bincount(codes, minlength=kind_span * id_span))
            if len(present) <= 64:
                rank = np.zeros(kind_span * id_span, dtype=np.int64)
                rank[present] = np.arange(len(present))
                first = _first_rows(codes, len(present))[present]
                pairs = [[kind_low + code // id_span, id_low + code % id_span] for code in present.tolist()]
                return pairs, first, rank[codes]
    rows, first, inverse = np.unique(
        np.stack((kinds, device_ids), axis=1), axis=0, return_index=True, return_inverse=True
    )
    return rows.tolist(), first, inverse.ravel()


def _first_rows(codes: np.ndarray, wanted: int) -> np.ndarray:
    """The first row of each code (indexed by code; unseen codes hold -1), reading windows of
    ``codes`` that double in length until ``wanted`` codes have been seen: a trace's devices
    all appear in its first records."""
    first = np.full(1 << 16, -1, dtype=np.int64)
    seen, start, size = 0, 0, 4096
    while seen < wanted and start < len(codes):
        found, where = np.unique(codes[start : start + size], return_index=True)
        new = first[found] < 0
        first[found[new]] = start + where[new]
        seen += int(new.sum())
        start, size = start + size, size * 2
    return first
