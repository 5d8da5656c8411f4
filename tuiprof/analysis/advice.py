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

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.operators import shape_codes
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
    if siblings:
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
    Without the sync the CPU would have queued that work ahead: the idle is what it saves,
    while the device (not the CPU) is what the step waits on."""

    per_step: float  # syncs a step
    wait_us: float  # the CPU's time blocked in them, a step
    idle_after_us: float  # device idle after them until the next device work, a step
    step_us: float
    caller: str  # the outermost operator above the commonest sync (aten::item), or the sync's own name
    module: str  # the module that caller ran in ('' outside modules or without a module tree)


def host_syncs(model: TraceModel) -> HostSyncs | None:
    """The syncs inside the steps (None without a device, steps or syncs)."""
    if not len(model.activity) or not model.steps:
        return None
    calls = model.calls
    codes = calls.name_codes(lambda name: name in SYNC_NAMES)
    if not codes:
        return None
    return _waits(model, np.flatnonzero(np.isin(calls.column("name_id"), codes)))


def pageable_copies(model: TraceModel) -> HostSyncs | None:
    """Host-device copies from pageable memory inside the steps: their runtime call returns
    once the copy is done (staged through a pinned buffer), so each is a sync; pinned memory
    and ``non_blocking=True`` let the CPU run ahead (None without such copies)."""
    activity = model.activity
    if not len(activity) or not model.steps:
        return None
    pageable = [code for code, name in enumerate(activity.names) if "Pageable" in name]
    if not pageable:
        return None
    is_copy = activity.events.kind == DEVICE_KINDS.index("memcpy")
    launchers = activity.launchers[np.isin(activity.events.name, pageable) & is_copy]
    return _waits(model, np.unique(launchers[launchers >= 0]))


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
    return HostSyncs(
        per_step=len(rows) / count,
        wait_us=int((ends[rows] - starts[rows]).sum()) / 1000 / count,
        idle_after_us=int(gaps.sum()) / 1000 / count,
        step_us=model.step_time_us,
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
