"""Memory over time per device, the peak, and who was running at the peak."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.intervals import innermost_spans_at
from tuiprof.analysis.python_stack import Stack, python_stacks
from tuiprof.trace.columns import NONE
from tuiprof.trace.memory import MemoryRecords
from tuiprof.trace.store import TraceEvents

MAX_ATTRIBUTED = 500  # allocations live at the peak named one by one (operator, module, stack); the rest in one row


@dataclass(frozen=True)
class MemoryTimeline:
    """Allocated and reserved bytes after every allocator event on one device.

    ``reserved`` is empty when the file recorded no totals (trace/memory.py).
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
    # (bytes, thread, start ns) of each allocation not freed by the peak (paired by Addr), largest first
    live_at_peak: tuple[tuple[int, int | str, int], ...] = ()
    # the Python stack of each of the first MAX_ATTRIBUTED of live_at_peak (analysis/python_stack.py)
    live_stacks: tuple[Stack, ...] = ()
    addressed: bool = True  # every record has an Addr, so allocations and frees pair up

    @property
    def is_cpu(self) -> bool:
        return self.device == "CPU" or self.device.startswith(("MKLDNN", "IDEEP"))

    @property
    def before_trace_bytes(self) -> int:
        """Bytes of the peak no allocation in the trace accounts for: memory allocated before
        the capture began (a CUDA allocator's Total Allocated counts the model's weights).
        0 when records without an ``Addr`` leave allocations unpaired (nothing can be said)."""
        if not self.addressed:
            return 0
        return max(0, self.peak_bytes - sum(size for size, _, _ in self.live_at_peak))


@dataclass(frozen=True)
class PeakFigure:
    """The one memory peak the header, the Overview and the Memory view name (TraceModel.peak_figure)."""

    device: str
    bytes: int
    at_ns: int
    allocator: bool  # True: the allocator's Total Allocated ("allocator peak"); False: torch's categories ("peak")
    before_trace_bytes: int  # of ``bytes``, memory allocated before the capture began


def build_memory_timelines(store: TraceEvents, calls: OperatorCalls) -> list[MemoryTimeline]:
    records = store.memory_records
    timelines = []
    for index, device in enumerate(records.device_names):
        mine = np.flatnonzero(records.device == index)
        allocated = records.allocated[mine]
        peak = int(mine[int(np.argmax(allocated))])  # the first record at the highest level
        live = live_at(records, mine[mine <= peak])
        queries = [(tid, start) for _, tid, start in live[:MAX_ATTRIBUTED]]
        timelines.append(
            MemoryTimeline(
                device=device,
                times_ns=tuple(records.start_ns[mine].tolist()),
                allocated=tuple(allocated.tolist()),
                reserved=tuple(records.reserved[mine].tolist()) if records.reserved_known[index] else (),
                peak_bytes=int(records.allocated[peak]),
                peak_ns=int(records.start_ns[peak]),
                peak_operator_row=innermost_call_at(calls, records.tids[peak], int(records.start_ns[peak])),
                allocations=int((records.bytes[mine] > 0).sum()),
                frees=int((records.bytes[mine] < 0).sum()),
                live_at_peak=live,
                live_stacks=tuple(python_stacks(store.frames, store.names, store.threads, queries)),
                addressed=bool((records.addr[mine] != NONE).all()),
            )
        )
    timelines.sort(key=lambda t: (t.is_cpu, t.device))
    return timelines


def live_at(records: MemoryRecords, rows: np.ndarray) -> tuple[tuple[int, int | str, int], ...]:
    """The allocations among ``rows`` (time order) whose address the rows do not free again after:
    (bytes, thread, start ns), largest first.  Records without an ``Addr`` pair nothing."""
    rows = rows[records.addr[rows] != NONE]
    if not len(rows):
        return ()
    reverse = rows[::-1]
    _, last = np.unique(records.addr[reverse], return_index=True)  # each address's last record
    final = reverse[last]
    final = final[records.bytes[final] > 0]
    final = final[np.argsort(-records.bytes[final], kind="stable")]
    return tuple((int(records.bytes[r]), records.tids[r], int(records.start_ns[r])) for r in final.tolist())


def innermost_call_at(calls: OperatorCalls, tid: int | str, time_ns: int) -> int:
    """The latest-starting call on ``tid`` whose span holds ``time_ns``."""
    return int(innermost_calls_at(calls, [tid], [time_ns])[0])


def innermost_calls_at(calls: OperatorCalls, tids: list[int | str], times_ns: list[int]) -> np.ndarray:
    """:func:`innermost_call_at` for many (thread, time) queries at once, -1 where none holds."""
    return innermost_spans_at(
        (calls.column("start_ns"), calls.column("end_ns"), calls.column("thread")), calls.threads, tids, times_ns
    )
