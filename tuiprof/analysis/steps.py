"""Training steps: each ``ProfilerStep#N`` and where its device time went."""

from __future__ import annotations

from dataclasses import dataclass

from tuiprof.analysis.calls import STEP_PREFIX, DeviceActivity, OperatorCalls, to_ns
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
    step_rows = [r for r in range(len(calls)) if calls.name(r).startswith(STEP_PREFIX)]
    if not step_rows:
        return []
    device_windows = {
        e.name: (to_ns(e.ts), to_ns(e.ts) + to_ns(e.dur)) for e in gpu_annotations if e.name.startswith(STEP_PREFIX)
    }
    step_of_call = _step_of_calls(calls, step_rows)
    per_step: dict[int, list[int]] = {row: [] for row in step_rows}
    for index, launcher in enumerate(activity.launcher):
        step = step_of_call.get(launcher) if launcher >= 0 else None
        if step is not None:
            per_step[step].append(index)
    loading: dict[int, int] = {row: 0 for row in step_rows}
    for row, step in step_of_call.items():
        if calls.name(row).startswith(DATA_LOADING_PREFIX):
            loading[step] += calls.total_ns[row]

    steps = []
    for row in step_rows:
        name = calls.name(row)
        start, end = calls.start_ns[row], calls.end_ns[row]
        window = device_windows.get(name, (start, end))
        spans: dict[str, list[tuple[int, int]]] = {"kernel": [], "memcpy": [], "memset": [], "comm": []}
        for index in per_step[row]:
            event = activity.events[index]
            kind = activity.kind[index]
            if kind == "kernel" and is_communication(event.name):
                kind = "comm"
            begin = to_ns(event.ts)
            spans[kind].append((begin, begin + to_ns(event.dur)))
        every = [s for group in spans.values() for s in group]
        if every:
            window = (min(window[0], min(s[0] for s in every)), max(window[1], max(s[1] for s in every)))
        busy = _union_ns(every)
        window_ns = window[1] - window[0] if every or name in device_windows else 0
        steps.append(
            StepStats(
                name=name,
                number=_step_number(name),
                start_ns=start,
                duration_us=(end - start) / 1000,
                data_loading_us=loading[row] / 1000,
                kernel_us=_union_ns(spans["kernel"]) / 1000,
                memcpy_us=_union_ns(spans["memcpy"]) / 1000,
                memset_us=_union_ns(spans["memset"]) / 1000,
                communication_us=_union_ns(spans["comm"]) / 1000,
                device_busy_us=busy / 1000,
                device_idle_us=max(0, window_ns - busy) / 1000,
                device_window_us=window_ns / 1000,
            )
        )
    return steps


def _step_of_calls(calls: OperatorCalls, step_rows: list[int]) -> dict[int, int]:
    """Call row -> the step row enclosing it (by nesting, else by time)."""
    steps = set(step_rows)
    result: dict[int, int] = {}
    for row in range(len(calls)):
        parent = calls.parent[row]
        while parent >= 0 and parent not in steps:
            parent = calls.parent[parent]
        if parent >= 0:
            result[row] = parent
            continue
        start = calls.start_ns[row]
        for step in step_rows:  # other threads (backward, data workers)
            if calls.start_ns[step] <= start < calls.end_ns[step] and step != row:
                result[row] = step
                break
    return result


def _union_ns(spans: list[tuple[int, int]]) -> int:
    total = 0
    current_start = current_end = None
    for begin, end in sorted(spans):
        if current_end is None or begin > current_end:
            if current_end is not None:
                total += current_end - current_start
            current_start, current_end = begin, end
        else:
            current_end = max(current_end, end)
    if current_end is not None:
        total += current_end - current_start
    return total


def _step_number(name: str) -> int:
    try:
        return int(name[len(STEP_PREFIX) :])
    except ValueError:
        return -1
