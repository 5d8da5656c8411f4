"""Memory over time per device, the peak, and who was running at the peak."""

from __future__ import annotations

import heapq
from dataclasses import dataclass, replace

import numpy as np

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.python_stack import Stack, python_stacks
from tuiprof.analysis.reuse import keep_stacks, reused_stacks
from tuiprof.trace.columns import NONE
from tuiprof.trace.memory import MemoryRecords
from tuiprof.trace.store import TraceEvents, as_thread_id

MAX_ATTRIBUTED = 500  # allocations live at the peak named one by one (operator, module, stack); the rest in one row


@dataclass(frozen=True, eq=False)
class MemoryTimeline:
    """Allocated and reserved bytes after every allocator event on one device.

    ``reserved`` is empty when the file recorded no totals (trace/memory.py).  The series are
    int64 arrays, not tuples: millions of points a GB, which only the chart and the Timeline's
    counter lanes read, with numpy (tuples cost 60 ms of a 0.5 s reopen to build and were
    turned back into arrays).  Compared by identity (arrays have no truth value).
    """

    device: str  # "CPU", "CUDA:0"
    times_ns: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray
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
        timelines.append(
            MemoryTimeline(
                device=device,
                times_ns=records.start_ns[mine],
                allocated=allocated,
                reserved=records.reserved[mine] if records.reserved_known[index] else np.zeros(0, dtype=np.int64),
                peak_bytes=int(records.allocated[peak]),
                peak_ns=int(records.start_ns[peak]),
                peak_operator_row=innermost_call_at(calls, records.tids[peak], int(records.start_ns[peak])),
                allocations=int((records.bytes[mine] > 0).sum()),
                frees=int((records.bytes[mine] < 0).sum()),
                live_at_peak=live,
                addressed=bool((records.addr[mine] != NONE).all()),
            )
        )
    # Every device's stacks in one pass over the frames (each pass sorts them all).
    named = [t.live_at_peak[:MAX_ATTRIBUTED] for t in timelines]
    queries = [(tid, start) for live in named for _, tid, start in live]
    stacks = reused_stacks(store, len(queries))  # a reopen: what the first open found (analysis/reuse.py)
    if stacks is None:
        stacks = python_stacks(store.frames, store.names, store.threads, queries)
        keep_stacks(store, stacks)
    for index, live in enumerate(named):
        timelines[index] = replace(timelines[index], live_stacks=tuple(stacks[: len(live)]))
        stacks = stacks[len(live) :]
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
    """:func:`innermost_call_at` for many (thread, time) queries at once, -1 where none holds:
    per thread one sweep in time order, a heap of the calls started so far, latest start on
    top, ended ones dropped for good (later queries come later)."""
    found = np.full(len(times_ns), -1, dtype=np.int64)
    starts, ends, threads = calls.column("start_ns"), calls.column("end_ns"), calls.column("thread")
    by_thread: dict[int | str, list[int]] = {}
    for query, tid in enumerate(tids):
        by_thread.setdefault(as_thread_id(tid), []).append(query)
    for tid, queries in by_thread.items():
        if tid not in calls.threads:
            continue
        queries.sort(key=lambda q: times_ns[q])
        last = int(np.searchsorted(starts, times_ns[queries[-1]], side="right"))  # rows are in start order
        rows = np.flatnonzero(threads[:last] == calls.threads.index(tid)).tolist()
        open_calls: list[int] = []  # -row: rows are in start order, so the latest start is the largest row
        next_row = 0
        for query in queries:
            time_ns = times_ns[query]
            while next_row < len(rows) and starts[rows[next_row]] <= time_ns:
                heapq.heappush(open_calls, -rows[next_row])
                next_row += 1
            while open_calls and ends[-open_calls[0]] < time_ns:
                heapq.heappop(open_calls)
            if open_calls:
                found[query] = -open_calls[0]
    return found
