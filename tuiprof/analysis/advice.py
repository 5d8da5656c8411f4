"""The predictions behind the findings' remedies: what a change would save, or why not.

Each function here answers one cause that report/findings.py names, with the saving in the
terms it is measured again in (the mean step), and None where the cause is absent.  The
rules and how each was checked by doing the change are in docs/advice.md; the diagnosis
benchmark (benchmarks/diagnosis) re-measures every prediction.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import median

import numpy as np

from tuiprof.analysis.calls import is_step_name
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode, outside_tops
from tuiprof.analysis.operators import shape_codes
from tuiprof.analysis.steps import Coverage, idle_share
from tuiprof.trace.columns import DEVICE_KINDS

SINGLE_PROCESS_LOADER = "_SingleProcessDataLoaderIter"
WORKER_LOADER = "_MultiProcessingDataLoaderIter"
MAX_SUGGESTED_WORKERS = 8  # past this, worker start-up and memory outweigh what more of them hide


@dataclass(frozen=True)
class LoadingAdvice:
    """The step's data loading, where it runs and what DataLoader workers would leave of it."""

    loader: str  # "main process" (num_workers=0), "workers" (already), or "" (not a DataLoader's)
    loading_us: float  # mean per step
    step_us: float  # mean step
    workers: int  # the num_workers suggested (0: none suggested)
    step_after_us: float | None  # the mean step predicted with them; None: abstained
    why_not: str = ""

    @property
    def compute_us(self) -> float:
        return max(self.step_us - self.loading_us, 0.0)


def loading_advice(model: TraceModel) -> LoadingAdvice | None:
    """Data loading in the steps, and the step with workers: with ``N`` workers each batch is
    still made in the loading time, ``N`` at once, so the step becomes the larger of the rest of
    the step and loading / N (the wait is hidden once the workers keep up).  ``N`` is the fewest
    that keep up, plus one for jitter, at most MAX_SUGGESTED_WORKERS.  It assumes the workers get
    a core each (or that loading waits on I/O): the remedy says so.  Already loading in workers,
    the wait means they cannot keep up; their number is not in the trace, so the saving of
    more of them is not predicted."""
    steps = model.steps
    if not steps:
        return None
    step_us = sum(s.duration_us for s in steps) / len(steps)
    loading_us = sum(s.data_loading_us for s in steps) / len(steps)
    if not step_us or not loading_us:
        return None
    names = model.calls.names
    loader = (
        "workers"
        if any(WORKER_LOADER in name for name in names)
        else "main process"
        if any(SINGLE_PROCESS_LOADER in name for name in names)
        else ""
    )
    compute_us = max(step_us - loading_us, 0.0)
    if loader != "main process":
        why = (
            "the loader already runs in workers, and how many is not in the trace"
            if loader
            else "the loading is not a DataLoader's (no _SingleProcessDataLoaderIter in the trace)"
        )
        return LoadingAdvice(loader, loading_us, step_us, 0, None, why)
    workers = min(MAX_SUGGESTED_WORKERS, max(2, math.ceil(loading_us / max(compute_us, 1.0)) + 1))
    return LoadingAdvice(loader, loading_us, step_us, workers, max(compute_us, loading_us / workers))


@dataclass(frozen=True)
class SlowModule:
    """A module instance that costs far more a step than its siblings of the same class
    (same parent, same parameters where known): like with like, the excess is what it would
    save by running like them.  Without such siblings, only its own Python time (the part of
    its span in no operator) is an excess tuiprof can name."""

    node: ModuleNode
    on_device: bool  # costs compared on the device (a GPU trace), else on the CPU
    cost_us: float  # a step, forward + backward
    siblings: tuple[ModuleNode, ...]  # the like modules it is compared with (may be empty)
    sibling_us: float  # their median cost a step (0 without siblings)
    host_us: float  # a step: its own forward span that no operator and no child module covers
    # a step: what it costs beyond its siblings' median; where its own Python time holds at least
    # half of that, its Python time beyond theirs; without siblings, its Python time
    excess_us: float
    top_operator: str  # the operator holding most of its excess over its siblings ('' if none)
    top_operator_us: float  # that operator's excess a step


SLOW_MODULE_RATIO = 1.5  # a like module at 1.5x its siblings' median is not noise or shape
SLOW_MODULE_SHARE = 0.05  # ... and its excess is worth a line at 5 % of the step
HOST_TIME_SHARE = 0.10  # a module's own Python time at 10 % of the step (no siblings to compare)
# Two like siblings at least: against one, which of the two is the slow one is a guess (resnet's
# layer1.0 at 2.2x layer1.1 over one profiled step was named first on the shipped sample's run).
MIN_LIKE_SIBLINGS = 2


def slow_module(model: TraceModel) -> SlowModule | None:
    """The module whose excess a step is the largest, if it passes the thresholds above.

    Only nodes that ran in every step are compared (a module of the loss or of a warm-up
    only is not like its siblings), per step, forward and backward (``cost_us``)."""
    step_count = max(len(model.steps), 1)
    step_us = model.step_time_us
    if not step_us or not model.modules.roots:
        return None
    best: SlowModule | None = None
    for node in model.modules.walk():
        found = _judge(model, node, step_count, step_us)
        if found is not None and (best is None or found.excess_us > best.excess_us):
            best = found
    return best


def _cost_us(node: ModuleNode, on_device: bool) -> float:
    """Forward + backward on the device where there is one (a GPU model's CPU time is its
    launches, which cost the step only while the device waits: the idle findings' part),
    else on the CPU."""
    if on_device:
        return node.device_total_us + node.backward_device_us
    return node.cpu_total_us + node.backward_cpu_us


def _judge(model: TraceModel, node: ModuleNode, step_count: int, step_us: float) -> SlowModule | None:
    on_device = bool(model.kernels)
    cost = _cost_us(node, on_device) / step_count
    host = 0.0 if on_device else _host_us(model, node) / step_count
    siblings = _like_siblings(model, node)
    if len(siblings) >= MIN_LIKE_SIBLINGS:
        typical = median(_cost_us(s, on_device) for s in siblings) / step_count
        excess = cost - typical
        if cost < SLOW_MODULE_RATIO * typical or excess < SLOW_MODULE_SHARE * step_us:
            return None
        sibling_host = 0.0 if on_device else median(_host_us(model, s) for s in siblings) / step_count
        if (
            not on_device and host - sibling_host >= excess / 2
        ):  # its own Python time: measured directly, not against noisy totals
            return SlowModule(node, on_device, cost, siblings, typical, host, host - sibling_host, "", 0.0)
        operator, operator_us = _top_excess_operator(model, node, siblings, step_count, on_device)
        return SlowModule(node, on_device, cost, siblings, typical, host, excess, operator, operator_us)
    if on_device or host < HOST_TIME_SHARE * step_us:
        return None
    return SlowModule(node, on_device, cost, (), 0.0, host, host, "", 0.0)


def _like_siblings(model: TraceModel, node: ModuleNode) -> tuple[ModuleNode, ...]:
    """The other children of its parent that should cost what it costs: the same class and
    children's classes, and the same operators on the same input shapes, give or take extra
    ones (one's set of (operator, shapes) holds the other's: extra work in one of them is what
    is looked for; resnet's layers, of equal FLOPs but other weights, are not alike), and the
    same parameter count where a live capture saved it.  Without recorded shapes, no module
    is like another."""
    parent = node.parent
    if parent is None or not model.info.record_shapes:
        return ()
    shape = [child.class_name for child in node.children]
    candidates = [
        other
        for other in parent.children
        if other is not node
        and other.class_name == node.class_name
        and [child.class_name for child in other.children] == shape
        and (node.parameters is None or other.parameters == node.parameters)
    ]
    if not candidates:
        return ()
    mine = _signature(model, node)
    return tuple(
        other for other in candidates if (theirs := _signature(model, other)) and (theirs <= mine or mine <= theirs)
    )


def _signature(model: TraceModel, node: ModuleNode) -> frozenset[int]:
    """The (operator, input shapes) pairs of the module's forward calls, as codes."""
    rows = np.asarray(node.subtree_operator_rows(), dtype=np.int64)
    codes, keys = shape_codes(model.calls)
    if not len(rows) or not len(codes):
        return frozenset()
    pairs = model.calls.column("name_id")[rows] * max(len(keys), 1) + codes[rows]
    return frozenset(np.unique(pairs).tolist())


def _host_us(model: TraceModel, node: ModuleNode) -> float:
    """The module's own forward time that no operator covers (Python code in its forward:
    a sleep, I/O, a loop): its self time (children modules taken out) minus its outermost
    direct operator calls."""
    rows = np.asarray(node.operator_rows, dtype=np.int64)
    if not len(rows):
        return max(node.self_cpu_us, 0.0)
    parent = model.calls.column("parent")
    parents = parent[rows]
    outer = rows[~np.isin(parents, rows)]  # calls whose parent is not a call of this module
    covered = int(model.calls.column("total_ns")[outer].sum()) / 1000
    return max(node.self_cpu_us - covered, 0.0)


def _top_excess_operator(
    model: TraceModel, node: ModuleNode, siblings: tuple[ModuleNode, ...], step_count: int, on_device: bool
) -> tuple[str, float]:
    """The operator whose self time in the module (forward and backward; on the device where
    there is one) exceeds its siblings' median the most, a step."""
    column = "self_device_ns" if on_device else "self_ns"
    mine = _self_by_name(model, node, column)
    theirs = [_self_by_name(model, s, column) for s in siblings]
    best, best_us = "", 0.0
    for name, spent in mine.items():
        extra = (spent - median(t.get(name, 0.0) for t in theirs)) / step_count
        if extra > best_us:
            best, best_us = name, extra
    return best, best_us


def _self_by_name(model: TraceModel, node: ModuleNode, column: str) -> dict[str, float]:
    rows = model.modules.operator_rows(node)
    calls = model.calls
    names = calls.column("name_id")[rows]
    spent = calls.column(column)[rows]
    codes, inverse = np.unique(names, return_inverse=True)
    sums = np.bincount(inverse, weights=spent, minlength=len(codes))
    return {calls.names[int(code)]: float(total) / 1000 for code, total in zip(codes.tolist(), sums.tolist())}


SYNC_NAMES = frozenset(
    {
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",  # the blocking copy
        "hipStreamSynchronize",
        "hipDeviceSynchronize",
        "hipEventSynchronize",
        "hipMemcpy",
    }
)


@dataclass(frozen=True)
class HostSyncs:
    """The CPU's waits for the device in the steps, and the device idle each one leaves: once a
    sync returns the device has nothing queued, so it idles until the CPU launches again.
    Without the waits the CPU queues its work ahead: the step becomes the larger of the device's
    busy time and the CPU's own work (``saving_us``)."""

    per_step: float  # syncs a step
    wait_us: float  # the CPU's time blocked in their callers (aten::item around its copy and sync), a step
    idle_after_us: float  # device idle after them until the next device work, a step
    step_us: float
    busy_us: float  # the device's busy time, a step
    caller: str  # the outermost operator above the commonest sync (aten::item), or the sync's own name
    module: str  # the module that caller ran in ('' outside modules or without a module tree)

    @property
    def saving_us(self) -> float:
        """Without the waits the CPU runs ahead and the step is the larger of the device's busy
        time and the CPU's own work (the step less the waits)."""
        return max(self.step_us - max(self.busy_us, self.step_us - self.wait_us), 0.0)


def host_syncs(model: TraceModel) -> HostSyncs | None:
    """The syncs inside the steps (None without a device, steps or syncs)."""
    if not len(model.activity) or not model.steps:
        return None
    calls = model.calls
    codes = calls.name_codes(lambda name: name in SYNC_NAMES)
    if not codes:
        return None
    return _waits(model, np.flatnonzero(np.isin(calls.column("name_id"), codes)))


@dataclass(frozen=True)
class PageableCopies:
    """Host-to-device copies from pageable memory in the steps: the copy time no kernel runs
    beside (exposed: the step's compute waits for it) and the device idle after each (its call
    returns only once the copy is done, like a sync).  Pinned memory, ``non_blocking=True`` and
    the next batch copied ahead overlap both with compute: they are the saving."""

    per_step: float
    exposed_us: float  # a step: copy time with no kernel running
    idle_after_us: float  # a step: device idle after the copies' calls return, until the next work
    step_us: float
    caller: str
    module: str

    @property
    def saving_us(self) -> float:
        return self.exposed_us + self.idle_after_us


def pageable_copies(model: TraceModel) -> PageableCopies | None:
    """The pageable host-to-device copies inside the steps (None without any)."""
    activity = model.activity
    if not len(activity) or not model.steps:
        return None
    pageable = [code for code, name in enumerate(activity.names) if "Pageable" in name and "HtoD" in name]
    if not pageable:
        return None
    events = activity.events
    copies = np.isin(events.name, pageable) & (events.kind == DEVICE_KINDS.index("memcpy"))
    launchers = activity.launchers[copies]
    waits = _waits(model, np.unique(launchers[launchers >= 0]))
    if waits is None:
        return None
    kernels = events.kind == DEVICE_KINDS.index("kernel")
    begins, ends = events.start_ns[copies], events.start_ns[copies] + events.dur_ns[copies]
    overlapped = Coverage(events.start_ns[kernels], events.start_ns[kernels] + events.dur_ns[kernels]).within(
        begins, ends
    )
    inside = _in_steps(model, begins)
    exposed = int(((ends - begins) - overlapped)[inside].sum()) / 1000 / len(model.steps)
    return PageableCopies(waits.per_step, exposed, waits.idle_after_us, waits.step_us, waits.caller, waits.module)


def _in_steps(model: TraceModel, times: np.ndarray) -> np.ndarray:
    """Whether each of ``times`` falls in a step's span."""
    step_starts = np.array([s.start_ns for s in model.steps], dtype=np.int64)
    step_ends = np.array([s.end_ns for s in model.steps], dtype=np.int64)
    at = np.searchsorted(step_starts, times, side="right") - 1
    return (at >= 0) & (times < step_ends[np.maximum(at, 0)])


def _waits(model: TraceModel, rows: np.ndarray) -> HostSyncs | None:
    """The calls ``rows`` that block the CPU until the device is done, inside the steps: how
    many a step, their time, and the device idle after each until the next device work."""
    calls = model.calls
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    step_starts = np.array([s.start_ns for s in model.steps], dtype=np.int64)
    step_ends = np.array([s.end_ns for s in model.steps], dtype=np.int64)
    at = np.searchsorted(step_starts, starts[rows], side="right") - 1
    inside = (at >= 0) & (ends[rows] <= step_ends[np.maximum(at, 0)])
    rows = rows[inside]
    if not len(rows):
        return None
    begins = model.activity.start_ns
    finishes = begins + model.activity.dur_ns
    sorted_begins = np.sort(begins, kind="stable")
    returned = ends[rows]
    following = np.searchsorted(sorted_begins, returned, side="left")
    has_next = following < len(sorted_begins)
    next_start = np.where(has_next, sorted_begins[np.minimum(following, len(sorted_begins) - 1)], returned)
    running = _running_at(begins, finishes, returned)
    gaps = np.where(has_next & ~running, np.maximum(next_start - returned, 0), 0)
    count = len(model.steps)
    caller_rows = _outermost(calls.column("parent"), rows)
    names = calls.column("name_id")[caller_rows]
    common = int(np.bincount(names).argmax())
    caller_row = int(caller_rows[names == common][0])
    owner = model.modules.charged_module(caller_row) if model.modules.roots else None
    module = (owner[0].qualified_name or owner[0].path) if owner is not None else ""
    callers = np.unique(caller_rows)
    steps = model.steps
    return HostSyncs(
        per_step=len(rows) / count,
        wait_us=int((ends[callers] - starts[callers]).sum()) / 1000 / count,
        idle_after_us=int(gaps.sum()) / 1000 / count,
        step_us=model.step_time_us,
        busy_us=sum(s.device_window_us - s.device_idle_us for s in steps) / len(steps),
        caller=calls.names[common],
        module=module,
    )


def _running_at(begins: np.ndarray, finishes: np.ndarray, times: np.ndarray) -> np.ndarray:
    """Whether any device work runs at each of ``times`` (started before, finishing after)."""
    order = np.argsort(begins, kind="stable")
    latest_finish = np.maximum.accumulate(finishes[order])  # the latest finish of the work begun so far
    begun = np.searchsorted(begins[order], times, side="right")
    return (begun > 0) & (latest_finish[np.maximum(begun - 1, 0)] > times)


def _outermost(parent: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Each row's top ancestor below its step (the operator the user called), itself at the top."""
    result = rows.copy()
    for _ in range(64):  # operators nest a few levels; a deeper (damaged) chain stops here
        up = parent[result]
        climb = up >= 0
        if climb.any():
            grand = np.where(climb, parent[np.maximum(up, 0)], -1)
            climb &= grand >= 0  # never climb onto the step span itself (a top-level call)
        if not climb.any():
            break
        result = np.where(climb, up, result)
    return result


@dataclass(frozen=True)
class IdleSplit:
    """The device's idle in the steps' device windows, a step, by what the CPU did meanwhile:
    loading data, waiting in a sync (each a cause of its own), or the rest: Python and launches,
    the host too slow to keep the device fed."""

    share: float  # idle over the windows (the Steps view's and the Timeline's)
    loading_us: float
    sync_us: float
    host_us: float


def idle_split(model: TraceModel) -> IdleSplit | None:
    steps = model.steps
    idle_us = sum(s.device_idle_us for s in steps)
    share = idle_share(idle_us, sum(s.device_window_us for s in steps))
    if share is None:
        return None
    count = len(steps)
    loading = max(idle_us - sum(s.cpu_bound_us for s in steps), 0.0) / count
    syncs = host_syncs(model)
    sync = min(syncs.idle_after_us if syncs else 0.0, max(idle_us / count - loading, 0.0))
    return IdleSplit(share, loading, sync, max(idle_us / count - loading - sync, 0.0))


LAUNCH_NAMES = ("cudaLaunchKernel", "hipLaunchKernel", "cuLaunchKernel", "hipModuleLaunchKernel")


def launch_held_us(model: TraceModel) -> float:
    """The part of the mean step the launch calls hold: the step less the larger of the device's
    busy time and the CPU's other work (what replaying the launches as a CUDA graph would leave,
    counting only the launch calls' own time)."""
    steps, step = model.steps, model.step_time_us
    if not steps or not step or not model.kernels:
        return 0.0
    launches = sum(s.self_cpu_us for s in model.operators() if s.name in LAUNCH_NAMES) / len(steps)
    busy = sum(s.device_window_us - s.device_idle_us for s in steps) / len(steps)
    return max(step - max(busy, step - launches), 0.0)


# Outside modules but not extra work: the optimizer, the data loader, what backward() and DDP
# start with; each is a part of a training step of its own (data loading has its own finding).
EXPECTED_OUTSIDE = ("Optimizer.", "enumerate(DataLoader)", "aten::ones_like", "reducer::", "autograd::")


@dataclass(frozen=True)
class OutsideWork:
    """Work in the steps outside every module that no optimizer, loader or backward did (metrics,
    norms, logging between backward and step): its calls' time and, what removing it saves, the
    spans of its runs (calls one after the other with no other call between: the Python that
    loops over them is in the span, not in any call)."""

    calls_us: float  # a step: the extra calls' own time
    span_us: float  # a step: the spans of their runs
    operators: tuple[tuple[str, float, float], ...]  # (name, calls a step, time a step), costliest first


def outside_work(model: TraceModel) -> OutsideWork | None:
    outside = model.modules.outside
    if outside is None or not model.steps:
        return None
    calls = model.calls
    name_id, starts, ends = calls.column("name_id"), calls.column("start_ns"), calls.column("end_ns")
    tops = outside_tops(calls, outside.operator_rows)
    expected = calls.name_codes(lambda name: name.startswith(EXPECTED_OUTSIDE))
    extra = tops[~np.isin(name_id[tops], expected) & _in_steps(model, starts[tops])]
    if not len(extra):
        return None
    # Runs: the top-level calls of each thread in time order (steps aside); extra calls one
    # after the other make a run, which any other top-level call (a module's work, the backward,
    # the optimizer) ends.  A run's span holds the Python that loops over its calls.
    parent = calls.column("parent")
    is_step = np.isin(name_id, calls.name_codes(is_step_name))
    level = np.flatnonzero(~is_step & ((parent < 0) | is_step[np.maximum(parent, 0)]))
    level = np.union1d(level, extra)
    level = level[np.lexsort((starts[level], calls.column("thread")[level]))]
    is_extra = np.isin(level, extra)
    thread = calls.column("thread")[level]
    new_run = is_extra & ~np.concatenate(([False], is_extra[:-1] & (thread[1:] == thread[:-1])))
    run = np.cumsum(new_run)[is_extra] - 1
    members = level[is_extra]
    run_start = np.full(int(run.max()) + 1, np.iinfo(np.int64).max, dtype=np.int64)
    run_end = np.zeros(int(run.max()) + 1, dtype=np.int64)
    np.minimum.at(run_start, run, starts[members])
    np.maximum.at(run_end, run, ends[members])
    count = len(model.steps)
    codes, inverse = np.unique(name_id[extra], return_inverse=True)
    times = np.bincount(inverse, weights=calls.column("total_ns")[extra]) / 1000 / count
    numbers = np.bincount(inverse) / count
    operators = sorted(
        ((calls.names[int(c)], float(n), float(t)) for c, n, t in zip(codes, numbers, times)), key=lambda op: -op[2]
    )
    return OutsideWork(float(times.sum()), int((run_end - run_start).sum()) / 1000 / count, tuple(operators))
