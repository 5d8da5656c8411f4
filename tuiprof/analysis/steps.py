"""Training steps: each ``ProfilerStep#N`` and where its device time went."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import nearest_ancestor
from tuiprof.analysis.calls import STEP_PREFIX, DeviceActivity, OperatorCalls, is_step_name
from tuiprof.analysis.intervals import merge_spans
from tuiprof.trace.schema import TimedEvent

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
    kernel_us: float  # compute kernels in the window, any step's (union of their intervals)
    memcpy_us: float
    memset_us: float
    communication_us: float
    device_idle_us: float  # window minus busy
    device_window_us: float  # the step as the device saw it (see build_steps)
    device_window_start_ns: int  # where that window begins
    # communication while no compute kernel runs on any stream: |comm U compute| - |compute| in the window
    exposed_communication_us: float = 0.0
    # device idle while no data loading ran either: the device waited for the CPU to launch work
    cpu_bound_us: float = 0.0

    @property
    def end_ns(self) -> int:
        """Where the step's CPU span ends (``start_ns`` plus its duration)."""
        return self.start_ns + round(self.duration_us * 1000)

    @property
    def device_window_end_ns(self) -> int:
        return self.device_window_start_ns + round(self.device_window_us * 1000)

    @property
    def idle_pct(self) -> float:
        """The step's device idle share (:func:`idle_share`) in %; 0 without a device window."""
        share = idle_share(self.device_idle_us, self.device_window_us)
        return 100 * share if share is not None else 0.0


def idle_share(idle: float, window: float) -> float | None:
    """THE device idle share, the one every view shows: time in the device windows with no
    device activity on any stream, over the time of those windows (None: no window, unknown).

    The windows are the steps' device windows (:func:`build_steps`), each counted whole
    even where a lagging step's window overlaps the next one's, so the share over several
    steps is the sum of their idle over the sum of their windows, exactly as their rows
    add up; without steps, the device's span.  Never over a CPU span or a screen's width:
    a range of the Timeline clips the windows to the range (:func:`device_idle`)."""
    return idle / window if window > 0 else None


@dataclass(frozen=True, slots=True)
class DeviceIdle:
    """Device idle time and the device-window time it is a share of (integer ns)."""

    idle_ns: int
    window_ns: int

    @property
    def share(self) -> float | None:
        return idle_share(self.idle_ns, self.window_ns)


def is_communication(name: str) -> bool:
    lowered = name.lower()
    return any(marker in lowered for marker in COMMUNICATION_MARKERS)


def build_steps(calls: OperatorCalls, activity: DeviceActivity, gpu_annotations: list[TimedEvent]) -> list[StepStats]:
    """One row per ``ProfilerStep#N``, device columns measured over its device window.

    The window is the step's ``gpu_user_annotation`` span when the trace has
    one, else its CPU span, widened to cover all the device work the step
    launched, from its first start to its last end: a lagging device finishes
    a step after the CPU has moved on, and on ROCm the annotation can be a
    short marker placed milliseconds into the step's work.  A step's work is
    what the calls inside its CPU span (by nesting, else by time) launched.
    Every device column is the union of what ran on the device inside that
    window, whichever step launched it: when windows overlap, the previous
    step's kernels keep the device busy, and idle is only what nothing covers.
    """
    name_id = calls.column("name_id")
    step_rows = np.flatnonzero(np.isin(name_id, calls.name_codes(is_step_name)))
    if not len(step_rows):
        return []
    step_annotations = {e.name: (e.start_ns, e.start_ns + e.dur_ns) for e in gpu_annotations if is_step_name(e.name)}
    step_of = step_of_calls(calls, step_rows)
    launcher = activity.launchers
    activity_step = np.where(launcher >= 0, step_of[np.maximum(launcher, 0)], -1)
    loading_rows = np.flatnonzero(np.isin(name_id, calls.name_codes(_is_loading)) & (step_of >= 0))
    loading = np.bincount(step_of[loading_rows], weights=calls.column("total_ns")[loading_rows], minlength=len(calls))
    finishes = activity.start_ns + activity.dur_ns
    launched = activity_step >= 0
    own_start = np.full(len(calls), np.iinfo(np.int64).max, dtype=np.int64)
    own_end = np.full(len(calls), -1, dtype=np.int64)
    np.minimum.at(own_start, activity_step[launched], activity.start_ns[launched])
    np.maximum.at(own_end, activity_step[launched], finishes[launched])

    windows = []
    for row in step_rows.tolist():
        name = calls.name(row)
        low, high = step_annotations.get(name, (calls.start_ns[row], calls.end_ns[row]))
        if own_end[row] >= 0:  # widened both ways: a ROCm annotation can be a marker inside the work
            windows.append((min(low, int(own_start[row])), max(high, int(own_end[row]))))
        elif name in step_annotations:
            windows.append((low, high))
        else:
            windows.append((low, low))  # no device work: no device window
    lows, highs = np.array(windows, dtype=np.int64).reshape(-1, 2).T
    spans = _loading_spans(calls, loading_rows)
    columns = _window_columns(activity, lows, highs, spans)
    return [
        _step_stats(
            calls.name(row), (calls.start_ns[row], calls.end_ns[row]), loading[row], columns, i, (lows[i], highs[i])
        )
        for i, row in enumerate(step_rows.tolist())
    ]


def device_windows(steps: list[StepStats], activity: DeviceActivity) -> list[tuple[str, int, int]]:
    """(step name, start, end) of every step's device window, in time order; steps without
    device work have none.  Without steps: one window ("") over the device's span, first
    to last activity: without steps no CPU span says when the device should have been working
    (the CPU time before the first launch may be setup)."""
    if not len(activity):
        return []
    if not steps:
        return [("", int(activity.start_ns.min()), int((activity.start_ns + activity.dur_ns).max()))]
    windows = [(s.name, s.device_window_start_ns, s.device_window_end_ns) for s in steps if s.device_window_us > 0]
    return sorted(windows, key=lambda w: w[1])


def device_idle(
    steps: list[StepStats], activity: DeviceActivity, start_ns: int | None = None, end_ns: int | None = None
) -> DeviceIdle:
    """Device idle in the device windows of ``steps`` (:func:`device_windows`), clipped to
    [start, end) when given: the Timeline's legend and range detail.  Unclipped, it is the
    steps' ``device_idle_us`` and ``device_window_us`` summed, which the Overview's finding
    divides (:func:`idle_share`)."""
    windows = device_windows(steps, activity)
    if not windows:
        return DeviceIdle(0, 0)
    lows = np.array([w[1] for w in windows], dtype=np.int64)
    highs = np.array([w[2] for w in windows], dtype=np.int64)
    if start_ns is not None:
        lows = np.maximum(lows, start_ns)
    if end_ns is not None:
        highs = np.minimum(highs, end_ns)
    inside = highs > lows
    lows, highs = lows[inside], highs[inside]
    busy = Coverage(activity.start_ns, activity.start_ns + activity.dur_ns).within(lows, highs)
    window_ns = int((highs - lows).sum())
    return DeviceIdle(window_ns - int(busy.sum()), window_ns)


WHOLE_TRACE = "(whole trace)"


def whole_trace_step(calls: OperatorCalls, activity: DeviceActivity) -> StepStats:
    """The whole trace measured as one step: for traces without ``ProfilerStep#N``."""
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    span = (int(starts.min()), int(ends.max())) if len(calls) else (0, 0)
    window = (span[0], span[0])  # no device work: no device window
    if len(activity):
        finishes = activity.start_ns + activity.dur_ns
        window = (min(span[0], int(activity.start_ns.min())), max(span[1], int(finishes.max())))
    loading_rows = np.flatnonzero(np.isin(calls.column("name_id"), calls.name_codes(_is_loading)))
    spans = _loading_spans(calls, loading_rows)
    loading_ns = Coverage(*spans).before[-1]  # nested loading spans count once
    columns = _window_columns(activity, np.array([window[0]]), np.array([window[1]]), spans)
    return _step_stats(WHOLE_TRACE, span, loading_ns, columns, 0, window)


def _is_loading(name: str) -> bool:
    return name.startswith(DATA_LOADING_PREFIX)


def _loading_spans(calls: OperatorCalls, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return calls.column("start_ns")[rows], calls.column("end_ns")[rows]


def _window_columns(
    activity: DeviceActivity, lows: np.ndarray, highs: np.ndarray, loading: tuple[np.ndarray, np.ndarray]
) -> list[list[int]]:
    """Covered ns in each window of: all activity, kernels, memcpys, memsets, communication,
    compute or communication, and all activity or data loading."""
    begins = activity.start_ns
    finishes = begins + activity.dur_ns
    kinds = _activity_kinds(activity)
    talking_or_computing = (kinds == _KERNEL) | (kinds == _COMMUNICATION)
    coverage = [Coverage(begins, finishes)] + [Coverage(begins[kinds == k], finishes[kinds == k]) for k in range(4)]
    coverage.append(Coverage(begins[talking_or_computing], finishes[talking_or_computing]))
    coverage.append(Coverage(np.concatenate((begins, loading[0])), np.concatenate((finishes, loading[1]))))
    return [c.within(lows, highs).tolist() for c in coverage]


def _step_stats(
    name: str, span: tuple[int, int], loading_ns: float, columns: list[list[int]], i: int, window: tuple[int, int]
) -> StepStats:
    busy, kernel, memcpy, memset, communication, talking_or_computing, busy_or_loading = (c[i] for c in columns)
    window_ns = int(window[1] - window[0])
    return StepStats(
        name=name,
        number=_step_number(name),
        start_ns=span[0],
        duration_us=(span[1] - span[0]) / 1000,
        data_loading_us=round(loading_ns) / 1000,
        kernel_us=kernel / 1000,
        memcpy_us=memcpy / 1000,
        memset_us=memset / 1000,
        communication_us=communication / 1000,
        device_idle_us=(window_ns - busy) / 1000,
        device_window_us=window_ns / 1000,
        device_window_start_ns=int(window[0]),
        exposed_communication_us=(talking_or_computing - kernel) / 1000,
        cpu_bound_us=(window_ns - busy_or_loading) / 1000,
    )


_KERNEL, _MEMCPY, _MEMSET, _COMMUNICATION = range(4)


def _activity_kinds(activity: DeviceActivity) -> np.ndarray:
    """Kind of each device event, collective kernels (NCCL, RCCL...) apart."""
    events = activity.events
    kinds = events.kind.copy()  # DEVICE_KINDS order: kernel, memcpy, memset
    kernel_names = np.unique(events.name[kinds == _KERNEL])
    collective = [code for code in kernel_names.tolist() if is_communication(activity.names[code])]
    kinds[(kinds == _KERNEL) & np.isin(events.name, collective)] = _COMMUNICATION
    return kinds


def step_of_calls(calls: OperatorCalls, step_rows: np.ndarray) -> np.ndarray:
    """Call row -> the step row enclosing it (by nesting, else by time; -1 none).  By time too:
    a step span that an optimizer's span straddles (``tuiprof run`` steps at the optimizer's
    post hook) nests nothing, and other threads' calls are never nested in it."""
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


class Coverage:
    """The union of some intervals, asked how much of each window it covers."""

    def __init__(self, begins: np.ndarray, ends: np.ndarray) -> None:
        self.begins, self.ends = merge_spans(begins, ends)  # touching spans merge
        self.before = np.concatenate(([0], np.cumsum(self.ends - self.begins)))  # covered before each span

    def within(self, lows: np.ndarray, highs: np.ndarray) -> np.ndarray:
        """Covered ns inside each window [low, high]."""
        return self._up_to(highs) - self._up_to(lows)

    def _up_to(self, times: np.ndarray) -> np.ndarray:
        started = np.searchsorted(self.begins, times, side="right")  # spans begun by then
        last = np.maximum(started - 1, 0)
        beyond = np.where(started > 0, np.maximum(self.ends[last] - times, 0), 0) if len(self.ends) else 0
        return self.before[started] - beyond


def union_ns(begins: np.ndarray, ends: np.ndarray) -> int:
    """Length of the union of the spans (touching spans merge)."""
    return int(Coverage(begins, ends).before[-1])


def _step_number(name: str) -> int:
    try:
        return int(name[len(STEP_PREFIX) :])
    except ValueError:
        return -1
