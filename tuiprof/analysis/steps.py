"""Training steps: each ``ProfilerStep#N`` and where its device time went."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import nearest_ancestor
from tuiprof.analysis.calls import STEP_PREFIX, DeviceActivity, OperatorCalls, is_step_name, to_ns
from tuiprof.trace.schema import RawEvent

DATA_LOADING_PREFIX = "enumerate(DataLoader)"
COMMUNICATION_MARKERS = ("nccl", "rccl", "allreduce", "all_reduce", "allgather", "reducescatter", "c10d")


@dataclass(frozen=True, slots=True)
class StepStats:
    """One profiler step.  Device columns are 0 on CPU-only traces."""

    name: str  # "ProfilerStep#12"
    number: int
    start_ns: int
    duration_us: float
    data_loading_us: float
    kernel_us: float  # compute kernels (union of their intervals)
    memcpy_us: float
    memset_us: float
    communication_us: float
    device_busy_us: float  # union of all device activity
    device_idle_us: float  # window minus busy
    device_window_us: float  # the step as the device saw it

    @property
    def idle_pct(self) -> float:
        return 100 * self.device_idle_us / self.device_window_us if self.device_window_us else 0.0


def is_communication(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in COMMUNICATION_MARKERS)


def build_steps(
    calls: OperatorCalls, activity: DeviceActivity, gpu_annotations: list[RawEvent]
) -> list[StepStats]:
    name_id = calls.column("name_id")
    step_rows = np.flatnonzero(np.isin(name_id, calls.name_codes(is_step_name)))
    if not len(step_rows):
        return []
    device_windows = {
        e.name: (to_ns(e.ts), to_ns(e.ts) + to_ns(e.dur)) for e in gpu_annotations if is_step_name(e.name)
    }
    step_of = _step_of_calls(calls, step_rows)
    launcher = np.frombuffer(activity.launcher, dtype=np.int64)
    activity_step = np.where(launcher >= 0, step_of[np.maximum(launcher, 0)], -1)
    loading_codes = calls.name_codes(lambda name: name.startswith(DATA_LOADING_PREFIX))
    loading_rows = np.flatnonzero(np.isin(name_id, loading_codes) & (step_of >= 0))
    loading = np.bincount(step_of[loading_rows], weights=calls.column("total_ns")[loading_rows], minlength=len(calls))
    kinds = _activity_kinds(activity)

    steps = []
    for row in step_rows.tolist():
        name = calls.name(row)
        start, end = calls.start_ns[row], calls.end_ns[row]
        window = device_windows.get(name, (start, end))
        mine = np.flatnonzero(activity_step == row)
        begins, finishes = activity.start_ns[mine], activity.start_ns[mine] + activity.dur_ns[mine]
        if len(mine):
            window = (min(window[0], int(begins.min())), max(window[1], int(finishes.max())))
        busy = _union_ns(begins, finishes)
        window_ns = window[1] - window[0] if len(mine) or name in device_windows else 0

        def union_of(kind: int) -> int:
            chosen = kinds[mine] == kind
            return _union_ns(begins[chosen], finishes[chosen])

        steps.append(
            StepStats(
                name=name,
                number=_step_number(name),
                start_ns=start,
                duration_us=(end - start) / 1000,
                data_loading_us=round(loading[row]) / 1000,
                kernel_us=union_of(_KERNEL) / 1000,
                memcpy_us=union_of(_MEMCPY) / 1000,
                memset_us=union_of(_MEMSET) / 1000,
                communication_us=union_of(_COMMUNICATION) / 1000,
                device_busy_us=busy / 1000,
                device_idle_us=max(0, window_ns - busy) / 1000,
                device_window_us=window_ns / 1000,
            )
        )
    return steps


_KERNEL, _MEMCPY, _MEMSET, _COMMUNICATION = range(4)


def _activity_kinds(activity: DeviceActivity) -> np.ndarray:
    """Kind of each device event, collective kernels (NCCL, RCCL...) apart."""
    events = activity.events
    kinds = events.kind.copy()  # DEVICE_KINDS order: kernel, memcpy, memset
    kernel_names = np.unique(events.name[kinds == _KERNEL])
    collective = [code for code in kernel_names.tolist() if is_communication(activity.names[code])]
    kinds[(kinds == _KERNEL) & np.isin(events.name, collective)] = _COMMUNICATION
    return kinds


def _step_of_calls(calls: OperatorCalls, step_rows: np.ndarray) -> np.ndarray:
    """Call row -> the step row enclosing it (by nesting, else by time; -1 none)."""
    is_step = np.zeros(len(calls), dtype=bool)
    is_step[step_rows] = True
    result = nearest_ancestor(calls.column("parent"), is_step)
    loose = np.flatnonzero(result < 0)  # other threads (backward, data workers)
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    step_starts, step_ends = starts[step_rows], ends[step_rows]
    if len(step_rows) > 1 and (step_ends[:-1] > step_starts[1:]).any():
        for row in loose.tolist():  # overlapping steps: the first that holds the call
            holding = np.flatnonzero((step_starts <= starts[row]) & (starts[row] < step_ends) & (step_rows != row))
            if len(holding):
                result[row] = step_rows[holding[0]]
        return result
    at = np.searchsorted(step_starts, starts[loose], side="right") - 1
    safe = np.maximum(at, 0)
    holds = (at >= 0) & (starts[loose] < step_ends[safe]) & (step_rows[safe] != loose)
    result[loose[holds]] = step_rows[safe[holds]]
    return result


def _union_ns(begins: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the spans (touching spans merge)."""
    if not len(begins):
        return 0
    order = np.argsort(begins, kind="stable")
    begins, ends = begins[order], ends[order]
    reach = np.maximum.accumulate(ends)
    fresh = np.ones(len(begins), dtype=bool)
    fresh[1:] = begins[1:] > reach[:-1]
    firsts = np.flatnonzero(fresh)
    return int((np.maximum.reduceat(ends, firsts) - begins[firsts]).sum())


def _step_number(name: str) -> int:
    try:
        return int(name[len(STEP_PREFIX) :])
    except ValueError:
        return -1
