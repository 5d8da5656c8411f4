"""The Timeline: every CPU thread, GPU stream, step, memory and idle gap as indexed lanes.

Built once after load (:func:`build_timeline`), then only queried: a frame
(:meth:`Timeline.frame`) asks each lane's index for the busy fraction and the
fullest event of every column, so it costs about columns x lanes x log(events)
whatever the trace's size (see :mod:`tuiprof.analysis.intervals`).

Lanes, top to bottom:

- ``step``: ``ProfilerStep#N`` spans; ``phase``: data loading, forward,
  backward and optimizer inside each step, where the trace shows them
  (``enumerate(DataLoader)`` spans; the backward roots
  ``autograd::engine::evaluate_function: ...`` from the first to the last;
  ``Optimizer.*`` spans; forward is the step up to the first backward root,
  minus data loading and optimizer spans, and exists only when backward does).
- ``cpu/<tid>/<depth>``: the operators of each thread, one sub-lane per
  nesting depth (``ProfilerStep#N`` left out: the step lane shows them).  A
  depth's operators do not overlap, so the fullest event of a column is exact.
- ``python/<tid>/<depth>``: ``nn.Module`` frames per thread and module depth,
  a flame lane (with_stack traces; needs the store: the model keeps no frame times).
- ``gpu/<stream>``: kernels, memcpys and memsets of each stream; the event
  kind (collectives apart) travels along for colour.
- ``memory/<device>``: allocated bytes over time (the Memory view's curve).
- ``idle``: device-idle gaps, the Steps view's definition: each step's device
  window minus the union of all device activity (any stream, any launcher).
  Without steps the window is the device's span (first to last activity).
  The idle *share* of a range is :meth:`Timeline.device_idle` (idle over the
  device windows in it, never over the range's width: ``steps.idle_share``).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field, replace
from functools import cached_property

import numpy as np

from tuiprof.analysis.arrays import RowView, group_rows, nearest_ancestor
from tuiprof.analysis.calls import DeviceActivity, is_step_name
from tuiprof.analysis.gap_activity import GapActivity, cpu_in_gap
from tuiprof.analysis.intervals import NO_EVENT, CounterIndex, IntervalIndex, merge_spans, subtract_spans
from tuiprof.analysis.kernels import KernelStats, aggregate_kernels
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.operators import OperatorStats, aggregate_operators, input_shapes_key
from tuiprof.analysis.steps import DATA_LOADING_PREFIX, DeviceIdle, device_idle, device_windows, is_communication
from tuiprof.trace.columns import DEVICE_KINDS
from tuiprof.trace.store import TraceEvents

LANE_GROUPS = ("step", "cpu", "python", "gpu", "memory", "idle")
DEFAULT_DEPTH = 3  # nesting sub-lanes shown per thread before "+N deeper"
GPU_KINDS = (*DEVICE_KINDS, "communication")  # an event's kind code in gpu lanes
COMMUNICATION_KIND = len(DEVICE_KINDS)
PHASES = ("data loading", "forward", "backward", "optimizer")  # kind codes in the phase lane
OPTIMIZER_PREFIX = "Optimizer."
BACKWARD_ROOT_PREFIX = "autograd::engine::evaluate_function: "  # the autograd engine's node for one backward op
IDLE_NAME = "idle"


@dataclass(eq=False)
class Lane:
    """One row of the Timeline: intervals (or a counter) with what labels it."""

    key: str  # "cpu/5617/0", "gpu/7", "step", "phase", "memory/CUDA:0", "idle"
    group: str  # one of LANE_GROUPS
    label: str  # "thread 5617", "  depth 1", "stream 7"
    intervals: IntervalIndex | None = None
    counter: CounterIndex | None = None
    thread: str = ""  # cpu/python lanes: the thread they belong to
    depth: int = 0  # cpu/python lanes: nesting depth


@dataclass(frozen=True)
class LaneFrame:
    """One lane over the columns of a frame.

    ``busy``: the busy fraction per column (a counter lane: the highest level
    over the lane's peak); ``dominant``: the lane row filling each column
    most (NO_EVENT: none); ``values``: a counter lane's highest value per column.
    """

    lane: Lane
    busy: np.ndarray
    dominant: np.ndarray
    values: np.ndarray | None = None


@dataclass(frozen=True)
class Slice:
    """One event of a lane, by its row in the lane's index."""

    lane: Lane
    row: int
    name: str
    start_ns: int
    end_ns: int
    ref: int  # call row (cpu, step), device event (gpu), frame row (python), window number (idle), -1 (phase)
    kind: int

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


@dataclass(frozen=True)
class StepWindow:
    name: str
    number: int  # N of ProfilerStep#N (-1 if not a number)
    start_ns: int  # the earlier of the CPU span and the device window
    end_ns: int


@dataclass(frozen=True)
class CallTarget:
    """``T`` on an operator (Operators, Modules, Memory): its call at row ``row`` of ``model.calls``."""

    row: int


@dataclass(frozen=True)
class DeviceTarget:
    """``T`` on a kernel, memcpy or memset: device event ``index`` of ``model.activity``."""

    index: int


@dataclass(frozen=True)
class WindowTarget:
    """``T`` or enter on a step: the time window [start_ns, end_ns) to fit the Timeline to."""

    start_ns: int
    end_ns: int


# What another view asks the Timeline to show (tui ShowInTimeline carries it).
TimelineTarget = CallTarget | DeviceTarget | WindowTarget


@dataclass(frozen=True)
class SliceDetail:
    """What ``enter`` on a slice shows: facts as (label, text), the slices linked to it
    (the launching operator of a kernel, the kernels an operator launched), and for an
    idle gap the CPU activity inside it (:mod:`tuiprof.analysis.gap_activity`)."""

    slice: Slice
    facts: list[tuple[str, str]]
    links: list[Slice]
    cpu: list[GapActivity] = field(default_factory=list)  # an idle gap: what the CPU did meanwhile


@dataclass(frozen=True)
class RangeStats:
    """A selected time range: busy share per lane, and the Operators and Kernels tables
    restricted to the calls and device events starting inside it."""

    start_ns: int
    end_ns: int
    busy: list[tuple[Lane, float]]
    operators: list[OperatorStats]
    kernels: list[KernelStats]
    idle: DeviceIdle  # device idle in the device windows inside the range (steps.idle_share)


@dataclass(eq=False)
class Timeline:
    model: TraceModel
    names: list[str]  # the trace's name table, then the timeline's own labels
    lanes: list[Lane]
    begin_ns: int
    end_ns: int
    steps: list[StepWindow] = field(default_factory=list)

    @cached_property
    def _by_key(self) -> dict[str, Lane]:
        return {lane.key: lane for lane in self.lanes}

    def lane(self, key: str) -> Lane | None:
        return self._by_key.get(key)

    @property
    def idle(self) -> Lane | None:
        return self.lane("idle")

    def select(
        self, groups: tuple[str, ...] | list[str] | None = None, depth: int | dict[str, int] = DEFAULT_DEPTH
    ) -> list[Lane]:
        """The lanes to show: of these groups, nesting sub-lanes up to ``depth``
        (per thread when a dict: thread -> depth, DEFAULT_DEPTH for the others)."""
        chosen = []
        for lane in self.lanes:
            if groups is not None and lane.group not in groups:
                continue
            if lane.group in ("cpu", "python"):
                limit = depth.get(lane.thread, DEFAULT_DEPTH) if isinstance(depth, dict) else depth
                if lane.depth >= limit:
                    continue
            chosen.append(lane)
        return chosen

    @cached_property
    def _depths_by_thread(self) -> dict[tuple[str, str], list[int]]:
        """(group, thread) -> the depths of its lanes, sorted: built once, so labelling
        every thread's lanes is linear (a scan of all lanes per thread was quadratic:
        10,000 threads took 28 s)."""
        depths: dict[tuple[str, str], list[int]] = {}
        for lane in self.lanes:
            depths.setdefault((lane.group, lane.thread), []).append(lane.depth)
        for values in depths.values():
            values.sort()
        return depths

    def deeper(self, lane: Lane) -> int:
        """How many nesting sub-lanes of ``lane``'s thread lie below ``lane``."""
        depths = self._depths_by_thread[(lane.group, lane.thread)]
        return len(depths) - bisect_right(depths, lane.depth)

    def busiest(self, lanes: list[Lane], start_ns: int, end_ns: int, max_lanes: int) -> tuple[list[Lane], int]:
        """``lanes`` cut to at most ``max_lanes``: the busiest threads and GPU streams in
        [start, end) first, each with its sub-lanes (the shallowest when only some fit),
        order unchanged; and how many threads and streams were left out.  Steps,
        phases, memory and idle always stay.

        A frame costs a row of cells per lane: 40,000 threads made the text
        timeline unusable and ``--format json`` ran out of memory."""

        def unit(lane: Lane) -> tuple[str, str] | None:
            """The thread or stream a lane draws (None: a lane that always stays)."""
            if lane.group not in ("cpu", "python", "gpu") or lane.intervals is None:
                return None
            return (lane.group, lane.thread or lane.key)

        window = np.array([start_ns, end_ns], dtype=np.int64)
        busy: dict[tuple[str, str], int] = {}
        count: dict[tuple[str, str], int] = {}
        for lane in lanes:
            key = unit(lane)
            if key is not None:
                covered = lane.intervals.covered(window)  # type: ignore[union-attr]
                busy[key] = max(busy.get(key, 0), int(covered[1] - covered[0]))
                count[key] = count.get(key, 0) + 1
        room = max_lanes - (len(lanes) - sum(count.values()))
        if sum(count.values()) <= room:
            return lanes, 0
        allowed: dict[tuple[str, str], int] = {}  # unit -> lanes it may draw
        for key in sorted(busy, key=lambda key: -busy[key]):  # stable: ties keep lane order
            if room <= 0:
                break
            allowed[key] = min(count[key], room)
            room -= allowed[key]
        chosen = []
        for lane in lanes:
            key = unit(lane)
            if key is None or allowed.get(key, 0) > 0:
                chosen.append(lane)
                if key is not None:
                    allowed[key] -= 1
        return chosen, len(busy) - sum(1 for key in busy if key in allowed)

    @staticmethod
    def edges(start_ns: int, end_ns: int, columns: int) -> np.ndarray:
        """Cell borders: ``columns`` cells of (almost) equal integer width over [start, end).

        ``i * span // columns`` as ``i * (span // columns) + i * (span % columns) // columns``:
        the same integers, and no product leaves int64 (events 1e15 us apart overflowed it)."""
        whole, rest = divmod(end_ns - start_ns, columns)
        column = np.arange(columns + 1, dtype=np.int64)
        return start_ns + column * whole + (column * rest) // columns

    def frame(self, start_ns: int, end_ns: int, columns: int, lanes: list[Lane]) -> list[LaneFrame]:
        """Busy fraction and fullest event per column of every lane: the whole cost of a frame."""
        edges = self.edges(start_ns, end_ns, columns)
        result = []
        for lane in lanes:
            if lane.counter is not None:
                values = lane.counter.highest(edges)
                peak = lane.counter.peak
                level = values / peak if peak > 0 else np.zeros(columns)
                result.append(LaneFrame(lane, level, np.full(columns, NO_EVENT, dtype=np.int64), values))
            else:
                assert lane.intervals is not None
                result.append(LaneFrame(lane, lane.intervals.busy(edges), lane.intervals.dominant(edges)))
        return result

    def slice(self, lane: Lane, row: int) -> Slice:
        index = lane.intervals
        assert index is not None
        return Slice(
            lane,
            row,
            self.names[index.names[row]],
            int(index.starts[row]),
            int(index.ends[row]),
            int(index.refs[row]),
            int(index.kinds[row]),
        )

    def slice_at(self, lane: Lane, time_ns: int) -> Slice | None:
        if lane.intervals is None:
            return None
        row = lane.intervals.at(time_ns)
        return self.slice(lane, row) if row != NO_EVENT else None

    def next_slice(self, lane: Lane, time_ns: int, forward: bool = True) -> Slice | None:
        """The slice of ``lane`` starting after (or before) ``time_ns``."""
        if lane.intervals is None:
            return None
        row = lane.intervals.next_after(time_ns) if forward else lane.intervals.previous_before(time_ns)
        return self.slice(lane, row) if row != NO_EVENT else None

    def next_idle_gap(self, time_ns: int, min_ns: int = 0, forward: bool = True) -> Slice | None:
        """The first device-idle gap at least ``min_ns`` long starting after (before) ``time_ns``."""
        idle = self.idle
        if idle is None or idle.intervals is None:
            return None
        index = idle.intervals
        lengths = index.ends - index.starts
        if forward:
            first = int(np.searchsorted(index.starts, time_ns, side="right"))
            hits = np.flatnonzero(lengths[first:] >= min_ns)
            return self.slice(idle, first + int(hits[0])) if len(hits) else None
        last = int(np.searchsorted(index.starts, time_ns, side="left"))
        hits = np.flatnonzero(lengths[:last] >= min_ns)
        return self.slice(idle, int(hits[-1])) if len(hits) else None

    def longest_idle_gap(self, start_ns: int, end_ns: int) -> Slice | None:
        """The longest device-idle gap overlapping [start, end) (the earliest on a tie)."""
        idle = self.idle
        if idle is None or idle.intervals is None:
            return None
        index = idle.intervals
        last = int(np.searchsorted(index.starts, end_ns, side="left"))
        overlapping = np.flatnonzero(index.ends[:last] > start_ns)
        if not len(overlapping):
            return None
        lengths = index.ends[overlapping] - index.starts[overlapping]
        return self.slice(idle, int(overlapping[int(np.argmax(lengths))]))

    def step_at(self, time_ns: int) -> int:
        """Index of the step whose window holds ``time_ns`` (else the last one before it; -1 none)."""
        starts = [s.start_ns for s in self.steps]
        return int(np.searchsorted(starts, time_ns, side="right")) - 1

    def range_stats(self, start_ns: int, end_ns: int, lanes: list[Lane] | None = None) -> RangeStats:
        """Busy share per lane over [start, end) and the tables of what started inside it."""
        lanes = self.lanes if lanes is None else lanes
        busy = [(frame.lane, float(frame.busy[0])) for frame in self.frame(start_ns, end_ns, 1, lanes)]
        calls = self.model.calls
        starts = calls.column("start_ns")
        rows = np.arange(int(np.searchsorted(starts, start_ns, "left")), int(np.searchsorted(starts, end_ns, "left")))
        device_rows = [
            lane.intervals.refs[lane.intervals.starting_in(start_ns, end_ns)]
            for lane in self.lanes
            if lane.group == "gpu" and lane.intervals is not None
        ]
        chosen = np.sort(np.concatenate(device_rows)) if device_rows else np.empty(0, dtype=np.int64)
        return RangeStats(
            start_ns,
            end_ns,
            busy,
            aggregate_operators(calls, rows),
            _kernels_of(self.model, chosen),
            self.device_idle(start_ns, end_ns),
        )

    def device_idle(self, start_ns: int, end_ns: int, step: str | None = None) -> DeviceIdle:
        """Device idle in [start, end), by the one definition (:func:`steps.idle_share`): in the
        device windows of every step there, or of the step named only."""
        steps = self.model.steps if step is None else [s for s in self.model.steps if s.name == step]
        return device_idle(steps, self.model.activity, start_ns, end_ns)

    def detail(self, item: Slice) -> SliceDetail:
        """Facts about a slice and the slices linked to it across lanes."""
        model = self.model
        facts: list[tuple[str, str]] = [("lane", item.lane.label.strip())]
        links: list[Slice] = []
        group = item.lane.group
        if group in ("cpu", "step"):
            calls = model.calls
            shapes = input_shapes_key(calls, item.ref)
            if shapes != "[]":
                facts.append(("input shapes", shapes))
            charged = model.modules.charged_module(item.ref)
            if charged is not None:
                module, through_autograd = charged
                facts.append(("module", f"{module.path} (backward)" if through_autograd else module.path))
            parent = calls.parent[item.ref]
            if parent >= 0:
                facts.append(("inside", calls.name(parent)))
            launched = np.flatnonzero(model.activity.launchers == item.ref)
            if len(launched):
                facts.append(("launched", f"{len(launched)} device events"))
                links.extend(found for found in (self.device_slice(int(i)) for i in launched[:50]) if found)
        elif group == "gpu":
            activity = model.activity
            facts.append(("kind", GPU_KINDS[item.kind]))
            for column in ("grid", "block"):
                text = activity.text(column, item.ref)
                if text:
                    facts.append((column, text))
            launcher = int(activity.launchers[item.ref])
            if launcher >= 0:
                facts.append(("launched by", model.calls.name(launcher)))
                found = self.call_slice(launcher)
                if found:
                    links.append(found)
        elif group == "python":
            node = model.modules.by_frame.get(item.ref)
            if node is not None:
                facts.append(("module", node.path))
        elif group == "idle":
            return SliceDetail(item, facts, links, cpu_in_gap(model.calls, model.activity, item.start_ns, item.end_ns))
        return SliceDetail(item, facts, links)

    def call_slice(self, row: int) -> Slice | None:
        """The slice of call ``row`` in its thread's depth lane (a table row -> the timeline)."""
        calls = self.model.calls
        if is_step_name(calls.name(row)):
            return self._find(self.lane("step"), row, calls.start_ns[row])
        depth, up = 0, calls.parent[row]
        while up >= 0:
            if not is_step_name(calls.name(up)):
                depth += 1
            up = calls.parent[up]
        return self._find(self.lane(f"cpu/{calls.tid(row)}/{depth}"), row, calls.start_ns[row])

    def launched_span(self, row: int) -> tuple[int, int] | None:
        """(first start, last end) of the device work call ``row`` launched, itself or through
        the calls nested in it (``aten::linear`` launches its GEMM through ``aten::addmm``);
        None when it launched none.  Nested calls are those starting inside it on its thread
        (a thread's calls nest in time), found in one pass over the launches."""
        calls, activity = self.model.calls, self.model.activity
        launcher = activity.launchers
        launched = np.flatnonzero(launcher >= 0)
        by = launcher[launched]
        starts = calls.column("start_ns")[by]
        inside = (
            (calls.column("thread")[by] == calls.thread[row])
            & (starts >= calls.start_ns[row])
            & (starts < calls.end_ns[row])
        )
        chosen = launched[inside]
        if not len(chosen):
            return None
        begins = activity.start_ns[chosen]
        return int(begins.min()), int((begins + activity.dur_ns[chosen]).max())

    def device_slice(self, index: int) -> Slice | None:
        """The slice of device event ``index`` in its stream's lane."""
        activity = self.model.activity
        return self._find(self.lane(f"gpu/{activity.text('stream', index)}"), index, int(activity.start_ns[index]))

    def _find(self, lane: Lane | None, ref: int, start_ns: int) -> Slice | None:
        """The row of ``lane`` holding ``ref`` (rows with equal starts are few: scanned)."""
        if lane is None or lane.intervals is None:
            return None
        index = lane.intervals
        at = index.starting_in(start_ns, start_ns + 1)
        for row in range(at.start, at.stop):
            if index.refs[row] == ref:
                return self.slice(lane, row)
        return None


def build_timeline(model: TraceModel, store: TraceEvents | None = None) -> Timeline:
    """Every lane of the trace, indexed.  ``store`` adds the module flame lanes (the
    model keeps no python frame times)."""
    names = list(model.calls.names)
    lanes: list[Lane] = []
    windows = device_windows(model.steps, model.activity)
    step_lanes, steps = _step_lanes(model, names, windows)
    lanes += step_lanes
    lanes += _cpu_lanes(model)
    if store is not None:
        lanes += _python_lanes(model, store)
    lanes += _gpu_lanes(model)
    lanes += _memory_lanes(model)
    idle = _idle_lane(model, names, windows)
    if idle is not None:
        lanes.append(idle)
    begin, end = _extent(model, lanes)
    return Timeline(model, names, lanes, begin, end, steps)


def _extent(model: TraceModel, lanes: list[Lane]) -> tuple[int, int]:
    starts, ends = [], []
    for lane in lanes:
        if lane.intervals is not None and len(lane.intervals):
            starts.append(int(lane.intervals.starts[0]))
            ends.append(int(lane.intervals.ends.max()))
        elif lane.counter is not None and len(lane.counter):
            starts.append(int(lane.counter.times[0]))
            ends.append(int(lane.counter.times[-1]))
    if not starts:
        return 0, 1
    return min(starts), max(max(ends), min(starts) + 1)


def _thread_label(tid: int | str) -> str:
    return f"thread {tid}"


def _cpu_lanes(model: TraceModel) -> list[Lane]:
    """One lane per (thread, nesting depth), step spans left out."""
    calls = model.calls
    if not len(calls):
        return []
    names = calls.column("name_id")
    is_step = np.isin(names, calls.name_codes(is_step_name))
    above = nearest_ancestor(calls.column("parent"), ~is_step)
    depth = _depths(above)
    threads = calls.column("thread")
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    rows = np.flatnonzero(~is_step)
    keys = threads[rows] * (int(depth.max()) + 1) + depth[rows]
    groups = []
    for key, where in zip(*group_rows(keys)):
        chosen = rows[where]
        thread_code, level = divmod(key, int(depth.max()) + 1)
        groups.append((thread_code, level, chosen))
    first_start = {}
    for thread_code, level, chosen in groups:
        if level == 0:
            first_start[thread_code] = int(starts[chosen[0]])
    groups.sort(key=lambda g: (first_start.get(g[0], 0), g[0], g[1]))
    lanes = []
    for thread_code, level, chosen in groups:
        tid = calls.threads[thread_code]
        lanes.append(
            Lane(
                key=f"cpu/{tid}/{level}",
                group="cpu",
                label=_thread_label(tid) if level == 0 else f"  depth {level}",
                intervals=IntervalIndex(starts[chosen], ends[chosen], names[chosen], refs=chosen),
                thread=str(tid),
                depth=level,
            )
        )
    return lanes


def _depths(parent: np.ndarray) -> np.ndarray:
    """Distance of every node to its root: list ranking by pointer jumping (Wyllie),
    O(log depth) array passes."""
    depth = (parent >= 0).astype(np.int64)
    jump = parent.copy()
    pending = np.flatnonzero(jump >= 0)
    while len(pending):
        target = jump[pending]
        depth[pending] = depth[pending] + depth[target]  # right side read before writing
        jump[pending] = jump[target]
        pending = pending[jump[pending] >= 0]
    return depth


def _python_lanes(model: TraceModel, store: TraceEvents) -> list[Lane]:
    """``nn.Module`` frames per (thread, module depth): the flame lanes."""
    by_frame = model.modules.by_frame
    if not by_frame:
        return []
    frames = store.frames
    rows = np.fromiter(by_frame, dtype=np.int64, count=len(by_frame))
    depth = np.array([node.depth for node in by_frame.values()], dtype=np.int64)
    width = int(depth.max()) + 1
    keys = frames.thread[rows] * width + depth
    lanes = []
    for key, where in zip(*group_rows(keys)):
        thread_code, level = divmod(key, width)
        chosen = rows[where]
        tid = store.threads[thread_code]
        lanes.append(
            Lane(
                key=f"python/{tid}/{level}",
                group="python",
                label=f"modules {tid}" if level == 0 else f"  depth {level}",
                intervals=IntervalIndex(
                    frames.start_ns[chosen], frames.end_ns[chosen], frames.module[chosen], refs=chosen
                ),
                thread=str(tid),
                depth=level,
            )
        )
    return lanes


def _gpu_kinds(activity: DeviceActivity) -> np.ndarray:
    """Kind code of each device event (GPU_KINDS), collective kernels apart."""
    events = activity.events
    kinds = events.kind.copy()
    kernel_names = np.unique(events.name[kinds == 0])
    collective = [code for code in kernel_names.tolist() if is_communication(activity.names[code])]
    kinds[(kinds == 0) & np.isin(events.name, collective)] = COMMUNICATION_KIND
    return kinds


def _gpu_lanes(model: TraceModel) -> list[Lane]:
    activity = model.activity
    if not len(activity):
        return []
    events = activity.events
    kinds = _gpu_kinds(activity)
    lanes = []
    for stream, where in zip(*group_rows(events.stream)):
        label = activity.names[stream] if stream >= 0 else ""
        lanes.append(
            Lane(
                key=f"gpu/{label}",
                group="gpu",
                label=f"stream {label}" if label else "stream ?",
                intervals=IntervalIndex(
                    events.start_ns[where],
                    events.start_ns[where] + events.dur_ns[where],
                    events.name[where],
                    refs=where,
                    kinds=kinds[where],
                ),
            )
        )
    lanes.sort(key=lambda lane: _natural(lane.key))
    return lanes


def _natural(text: str) -> tuple:
    tail = text.rsplit("/", 1)[-1]
    return (0, int(tail), "") if tail.isdigit() else (1, 0, tail)


def _memory_lanes(model: TraceModel) -> list[Lane]:
    return [
        Lane(
            key=f"memory/{timeline.device}",
            group="memory",
            label=f"memory {timeline.device}",
            counter=CounterIndex(
                np.array(timeline.times_ns, dtype=np.int64), np.array(timeline.allocated, dtype=np.int64)
            ),
        )
        for timeline in model.memory
    ]


def profiler_step_rows(model: TraceModel) -> np.ndarray:
    """The call rows of the ``ProfilerStep#N`` spans."""
    calls = model.calls
    return np.flatnonzero(np.isin(calls.column("name_id"), calls.name_codes(is_step_name)))


def _step_lanes(
    model: TraceModel, names: list[str], windows: list[tuple[str, int, int]]
) -> tuple[list[Lane], list[StepWindow]]:
    calls = model.calls
    step_rows = profiler_step_rows(model)
    if not len(step_rows):
        return [], []
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    device = {name: (start, end) for name, start, end in windows}
    steps = []
    for stats in model.steps:
        start, end = stats.start_ns, stats.end_ns
        if stats.name in device:
            start, end = min(start, device[stats.name][0]), max(end, device[stats.name][1])
        steps.append(StepWindow(stats.name, stats.number, start, end))
    steps.sort(key=lambda s: s.start_ns)
    lanes = [
        Lane(
            "step",
            "step",
            "steps",
            IntervalIndex(starts[step_rows], ends[step_rows], calls.column("name_id")[step_rows], refs=step_rows),
        )
    ]
    phase = _phase_lane(model, names, step_rows)
    if phase is not None:
        lanes.append(phase)
    return lanes, steps


def _phase_lane(model: TraceModel, names: list[str], step_rows: np.ndarray) -> Lane | None:
    """Data loading, forward, backward and optimizer spans of each step (see the module docstring)."""
    pieces = step_phases(model, step_rows)
    if not pieces:
        return None
    base = len(names)
    names.extend(PHASES)
    array = np.array(pieces, dtype=np.int64)
    return Lane(
        "phase",
        "step",
        "phases",
        IntervalIndex(array[:, 0], array[:, 1], base + array[:, 2], refs=np.full(len(array), -1), kinds=array[:, 2]),
    )


def step_phases(model: TraceModel, step_rows: np.ndarray) -> list[tuple[int, int, int]]:
    """(start ns, end ns, index into PHASES) of each step's phases (see the module docstring)."""
    calls = model.calls
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    name_id = calls.column("name_id")
    data = np.isin(name_id, calls.name_codes(lambda n: n.startswith(DATA_LOADING_PREFIX)))
    optimizer = np.isin(name_id, calls.name_codes(lambda n: n.startswith(OPTIMIZER_PREFIX)))
    backward = np.isin(name_id, calls.name_codes(lambda n: n.startswith(BACKWARD_ROOT_PREFIX)))
    pieces: list[tuple[int, int, int]] = []  # (start, end, phase)
    for row in step_rows.tolist():
        lo, hi = np.searchsorted(starts, [starts[row], ends[row]], side="left")
        inside = np.arange(lo, hi)
        cut = []
        for phase, mask in ((0, data), (3, optimizer)):
            for r in inside[mask[inside]].tolist():
                pieces.append((int(starts[r]), int(ends[r]), phase))
                cut.append((int(starts[r]), int(ends[r])))
        roots = inside[backward[inside]]
        if not len(roots):
            continue
        first_backward = int(starts[roots].min())
        pieces.append((first_backward, int(ends[roots].max()), 2))
        begin = int(starts[row])
        for a, b in sorted(cut):
            if b <= begin or a >= first_backward:
                continue
            if a > begin:
                pieces.append((begin, a, 1))
            begin = max(begin, b)
        if begin < first_backward:
            pieces.append((begin, first_backward, 1))
    return pieces


def _idle_lane(model: TraceModel, names: list[str], windows: list[tuple[str, int, int]]) -> Lane | None:
    """Each window minus the union of all device activity."""
    if not windows:
        return None
    activity = model.activity
    busy_starts, busy_ends = merge_spans(activity.start_ns, activity.start_ns + activity.dur_ns)
    window_starts = np.array([w[1] for w in windows], dtype=np.int64)
    window_ends = np.array([w[2] for w in windows], dtype=np.int64)
    gap_starts, gap_ends, owner = subtract_spans(window_starts, window_ends, busy_starts, busy_ends)
    names.append(IDLE_NAME)
    return Lane(
        "idle",
        "idle",
        "device idle",
        IntervalIndex(gap_starts, gap_ends, np.full(len(gap_starts), len(names) - 1), refs=owner),
    )


def _kernels_of(model: TraceModel, rows: np.ndarray) -> list[KernelStats]:
    """The Kernels table over some device events (rows refer to the whole activity)."""
    if not len(rows):
        return []
    activity = model.activity
    part = DeviceActivity(names=activity.names, events=activity.events.take(rows))
    part.launcher = activity.launchers[rows]
    return [replace(k, rows=RowView(rows[np.asarray(k.rows)])) for k in aggregate_kernels(part, model.calls)]
