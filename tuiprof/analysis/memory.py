"""Memory over time per device, the peak, and who was running at the peak."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.calls import CPU_MEMORY_TYPES, OperatorCalls
from tuiprof.trace.store import TraceEvents, as_thread_id

DEVICE_TYPE_NAMES = {0: "CPU", 1: "CUDA", 2: "MKLDNN", 5: "IDEEP", 6: "HIP", 12: "XPU", 20: "PrivateUse1"}


@dataclass(frozen=True)
class MemoryTimeline:
    """Allocated and reserved bytes after every allocator event on one device.

    Files before 2021 have no ``Total Allocated``: the curve is then the
    running sum of ``Bytes`` and ``reserved`` stays empty.
    """

    device: str  # "CPU", "CUDA:0"
    times_ns: tuple[int, ...]
    allocated: tuple[int, ...]
    reserved: tuple[int, ...]
    peak_bytes: int
    peak_ns: int
    peak_operator_row: int  # call row running at the peak, -1 if none
    allocations: int
    frees: int

    @property
    def is_cpu(self) -> bool:
        return self.device == "CPU" or self.device.startswith(("MKLDNN", "IDEEP"))


def build_memory_timelines(store: TraceEvents, calls: OperatorCalls) -> list[MemoryTimeline]:
    per_device: dict[str, list[tuple[int, int, int | None, int | None, int | str]]] = {}
    for event in store.memory:
        args = event.args
        if args is None or args.alloc_bytes is None:
            continue
        type_id = args.device_type if args.device_type is not None else 0
        device = DEVICE_TYPE_NAMES.get(type_id, f"device{type_id}")
        if type_id not in CPU_MEMORY_TYPES:
            device = f"{device}:{args.device_id if args.device_id is not None else 0}"
        per_device.setdefault(device, []).append(
            (event.start_ns, args.alloc_bytes, args.total_allocated, args.total_reserved, event.tid)
        )
    timelines = []
    for device, records in per_device.items():
        records.sort(key=lambda r: r[0])
        has_totals = all(r[2] is not None for r in records)
        allocated: list[int] = []
        running = 0
        for record in records:
            running += record[1]
            allocated.append(record[2] if has_totals else running)
        reserved = tuple(r[3] or 0 for r in records) if has_totals else ()
        peak_index = max(range(len(allocated)), key=allocated.__getitem__)
        peak = records[peak_index]
        timelines.append(
            MemoryTimeline(
                device=device,
                times_ns=tuple(r[0] for r in records),
                allocated=tuple(allocated),
                reserved=reserved,
                peak_bytes=allocated[peak_index],
                peak_ns=peak[0],
                peak_operator_row=innermost_call_at(calls, peak[4], peak[0]),
                allocations=sum(1 for r in records if r[1] > 0),
                frees=sum(1 for r in records if r[1] < 0),
            )
        )
    timelines.sort(key=lambda t: (t.is_cpu, t.device))
    return timelines


def innermost_call_at(calls: OperatorCalls, tid: int | str, time_ns: int) -> int:
    """The latest-starting call on ``tid`` whose span holds ``time_ns``."""
    tid = as_thread_id(tid)
    if tid not in calls.threads:
        return -1
    thread = calls.threads.index(tid)
    starts = calls.column("start_ns")
    started = int(np.searchsorted(starts, time_ns, side="right"))  # rows are in start order
    holding = np.flatnonzero(
        (calls.column("thread")[:started] == thread) & (calls.column("end_ns")[:started] >= time_ns)
    )
    return int(holding[-1]) if len(holding) else -1
