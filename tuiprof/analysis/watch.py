"""Watching a long job: the slow-step rule, and what a watch history says.

The **slow rule** (:class:`SlowRule`, run by the watched process at every
step boundary, :class:`SlowDetector`): the first ``warmup`` steps are not
judged (compilation, autotuning, caches filling); after them, once ``window``
unprofiled steps have been seen, a step whose wall time is over ``ratio`` x
the median of the last ``window`` unprofiled steps counts as slow, and
``held`` slow steps in a row trigger a capture.  Slow steps enter the window
too: a job that stays slow becomes the new normal after about ``window / 2``
steps (a new slowdown on top of it triggers again).  Steps the profiler ran
in are not judged and not counted (the profiler makes them slower).

The **summary** (:func:`summarise_watch`) compares like with like: a
capture's steps (profiled) against the healthy capture's steps (profiled),
both read from the history.  Pure Python: no torch, no Textual.
"""

from __future__ import annotations

import bisect
import statistics
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from tuiprof.analysis.build import load_model
from tuiprof.analysis.diff import TraceDiff, diff_traces
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranks import Straggler, summarise_run
from tuiprof.errors import TraceError
from tuiprof.trace.run import open_run
from tuiprof.trace.watch import Capture, History


@dataclass(frozen=True)
class SlowRule:
    ratio: float = 1.2  # a step over ratio x the running median counts as slow
    window: int = 50  # the running median is over the last `window` unprofiled steps
    held: int = 3  # this many slow steps in a row trigger
    warmup: int = 10  # steps never judged at the start

    def describe(self) -> str:
        return (
            f"after {self.warmup} warm-up steps, {self.held} steps in a row over {self.ratio:g}x "
            f"the median of the last {self.window}"
        )


def parse_slow_rule(text: str, warmup: int) -> SlowRule:
    """``RATIO[:N[:K]]`` (``1.2``, ``1.5:100``, ``1.2:50:3``) as a :class:`SlowRule`."""
    parts = text.split(":")
    defaults = SlowRule()
    try:
        ratio = float(parts[0])
        window = int(parts[1]) if len(parts) > 1 else defaults.window
        held = int(parts[2]) if len(parts) > 2 else defaults.held
    except ValueError:
        ratio = window = held = -1
    if len(parts) > 3 or not ratio > 1 or window < 3 or held < 1 or warmup < 0:
        raise TraceError(
            f"--watch-threshold {text}",
            "not RATIO[:N[:K]] with RATIO > 1, N >= 3, K >= 1",
            "write it like 1.2:50:3 (1.2x the median of the last 50 steps, held for 3 steps)",
        )
    return SlowRule(ratio, window, held, warmup)


class SlowDetector:
    """The slow rule over a stream of step times (one :meth:`observe` per unprofiled step).

    The window is kept sorted (``bisect``) beside its arrival order, so a step
    costs O(window) list moves -- about a microsecond for the default 50.
    """

    def __init__(self, rule: SlowRule) -> None:
        self.rule = rule
        self.seen = 0
        self.over = 0  # slow steps in a row so far
        self.last_over = False  # whether the last step observed was over the threshold (``--catch`` keeps it)
        self._arrived: deque[float] = deque()
        self._sorted: list[float] = []

    @property
    def median_s(self) -> float | None:
        values = self._sorted
        if not values:
            return None
        middle = len(values) // 2
        return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2

    def observe(self, wall_s: float) -> bool:
        """Take one unprofiled step's wall time; whether the rule fires at it."""
        self.seen += 1
        if self.seen <= self.rule.warmup:
            return False
        fires = self.last_over = False
        if len(self._arrived) == self.rule.window:
            median = self.median_s or 0.0
            self.last_over = wall_s > self.rule.ratio * median
            self.over = self.over + 1 if self.last_over else 0
            fires = self.over >= self.rule.held
            if fires:
                self.over = 0
            oldest = self._arrived.popleft()
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._arrived.append(wall_s)
        bisect.insort(self._sorted, wall_s)
        return fires


# ------------------------------------------------------------------ summary


@dataclass(frozen=True)
class CaptureSummary:
    """One capture, its steps' medians read from the history, against the healthy capture's."""

    capture: Capture
    median_step_s: float | None  # None: the history has none of its steps
    median_data_s: float | None  # None: no DataLoader in use
    healthy_median_s: float | None  # None: no healthy capture (or this is it)

    @property
    def ratio(self) -> float | None:
        if self.median_step_s is None or not self.healthy_median_s:
            return None
        return self.median_step_s / self.healthy_median_s


@dataclass(frozen=True)
class WatchSummary:
    history: History
    captures: tuple[CaptureSummary, ...]  # in the order they were written
    healthy: CaptureSummary | None
    median_step_s: float | None  # over every unprofiled step

    @property
    def kept(self) -> tuple[CaptureSummary, ...]:
        return tuple(c for c in self.captures if c.capture.dropped is None)


def summarise_watch(history: History) -> WatchSummary:
    position = {step: index for index, step in enumerate(history.steps)}

    def medians(capture: Capture) -> tuple[float | None, float | None]:
        indexes = [position[s] for s in range(capture.first_step, capture.last_step + 1) if s in position]
        walls = [history.wall_s[i] for i in indexes]
        datas = [d for d in (history.data_s[i] for i in indexes) if d is not None]
        return (statistics.median(walls) if walls else None, statistics.median(datas) if datas else None)

    healthy_capture = next((c for c in history.captures if c.trigger == "healthy"), None)
    healthy_median = medians(healthy_capture)[0] if healthy_capture else None
    summaries = []
    for capture in history.captures:
        step_s, data_s = medians(capture)
        summaries.append(
            CaptureSummary(capture, step_s, data_s, None if capture is healthy_capture else healthy_median)
        )
    healthy = next((s for s in summaries if s.capture is healthy_capture), None)
    unprofiled = [w for w, p in zip(history.wall_s, history.profiled) if not p]
    return WatchSummary(history, tuple(summaries), healthy, statistics.median(unprofiled) if unprofiled else None)


@dataclass(frozen=True)
class ChartColumn:
    """One column of the step-time chart: the median of its unprofiled steps (and their data loading)."""

    first_step: int
    last_step: int
    wall_s: float | None  # None: every step in it was profiled
    data_s: float | None
    marks: str  # the first letters of the triggers that fired in it ("S", "D", "E", "H")


def step_chart(history: History, columns: int) -> list[ChartColumn]:
    """The history in at most ``columns`` columns of consecutive steps (the median of each: one
    odd step does not make a column tall, a slowdown that lasts does)."""
    count = len(history.steps)
    if not count or columns < 1:
        return []
    per_column = -(-count // columns)
    marks_at: dict[int, str] = {}
    for trigger in history.triggers:
        marks_at[trigger.step] = marks_at.get(trigger.step, "") + trigger.trigger[0].upper()
    chart = []
    for start in range(0, count, per_column):
        stop = min(count, start + per_column)
        walls = [history.wall_s[i] for i in range(start, stop) if not history.profiled[i]]
        datas = [d for i in range(start, stop) if not history.profiled[i] and (d := history.data_s[i]) is not None]
        first, last = history.steps[start], history.steps[stop - 1]
        marks = "".join(m for step, m in sorted(marks_at.items()) if first <= step <= last)
        chart.append(
            ChartColumn(
                first,
                last,
                statistics.median(walls) if walls else None,
                statistics.median(datas) if datas else None,
                marks,
            )
        )
    return chart


# ------------------------------------------------------------------ a capture against the healthy one

# The parts of a step a capture is split into, in the terms of the Steps view's columns.
STEP_PARTS = (("data_loading_us", "data loading"), ("exposed_communication_us", "exposed communication"))
REST_OF_STEP = "the rest of the step"


@dataclass(frozen=True)
class PartDelta:
    """One part of the step: its median per step in the healthy capture and in the other one."""

    part: str  # "data loading", "exposed communication", REST_OF_STEP
    healthy_us: float
    other_us: float

    @property
    def delta_us(self) -> float:
        return self.other_us - self.healthy_us


@dataclass(frozen=True)
class CaptureComparison:
    """A capture against the healthy one: where the step time went (largest growth first), then
    the operator diff that ``tuiprof diff`` prints (A: healthy, B: the capture).  Under torchrun
    (a capture is a run directory) ``stragglers`` holds the capture's stragglers, by rank: the
    parts are rank 0's, whose steps wait for the slow rank in communication."""

    parts: tuple[PartDelta, ...]
    diff: TraceDiff
    stragglers: dict[int, Straggler] = field(default_factory=dict)
    of_rank_0: bool = False  # the parts and the diff are rank 0's (the captures are run directories)


def step_parts(healthy: TraceModel, other: TraceModel) -> tuple[PartDelta, ...]:
    """Median per step of each part in both captures, the part that grew most first.

    Medians (not means): the first capture of a process carries one-off
    profiler costs in a step or two, which a mean would spread over the
    comparison.  "The rest of the step" is the step minus the named parts."""

    def medians(model: TraceModel) -> dict[str, float]:
        steps = model.steps
        values = {
            label: statistics.median(getattr(s, key) for s in steps) if steps else 0.0 for key, label in STEP_PARTS
        }
        rests = [s.duration_us - sum(getattr(s, key) for key, _ in STEP_PARTS) for s in steps]
        values[REST_OF_STEP] = statistics.median(rests) if rests else 0.0
        return values

    a, b = medians(healthy), medians(other)
    parts = [PartDelta(name, a[name], b[name]) for name in a if a[name] or b[name]]
    return tuple(sorted(parts, key=lambda p: -p.delta_us))


def compare_captures(healthy_path: str, other_path: str) -> CaptureComparison:
    healthy, other = load_model(healthy_path), load_model(other_path)
    diff = diff_traces([healthy], [other], label_a=f"healthy {Path(healthy_path).name}", label_b=Path(other_path).name)
    ranks = Path(other_path).is_dir()
    stragglers = summarise_run(open_run(other_path)).stragglers() if ranks else {}
    return CaptureComparison(step_parts(healthy, other), diff, stragglers, ranks)
