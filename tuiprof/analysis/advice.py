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


def _judge(model: TraceModel, node: ModuleNode, step_count: int, step_us: float) -> SlowModule | None:
    cost = node.cost_us / step_count
    host = _host_us(model, node) / step_count
    siblings = _like_siblings(node)
    if siblings:
        typical = median(s.cost_us for s in siblings) / step_count
        excess = cost - typical
        if cost < SLOW_MODULE_RATIO * typical or excess < SLOW_MODULE_SHARE * step_us:
            return None
        sibling_host = median(_host_us(model, s) for s in siblings) / step_count
        if host - sibling_host >= excess / 2:  # its own Python time: measured directly, not against noisy totals
            return SlowModule(node, cost, siblings, typical, host, host - sibling_host, "", 0.0)
        operator, operator_us = _top_excess_operator(model, node, siblings, step_count)
        return SlowModule(node, cost, siblings, typical, host, excess, operator, operator_us)
    if host < HOST_TIME_SHARE * step_us:
        return None
    return SlowModule(node, cost, (), 0.0, host, host, "", 0.0)


def _like_siblings(node: ModuleNode) -> tuple[ModuleNode, ...]:
    """The other children of its parent of the same class (and parameter count, when a live
    capture saved it)."""
    parent = node.parent
    if parent is None:
        return ()
    return tuple(
        other
        for other in parent.children
        if other is not node
        and other.class_name == node.class_name
        and (node.parameters is None or other.parameters == node.parameters)
    )


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
    model: TraceModel, node: ModuleNode, siblings: tuple[ModuleNode, ...], step_count: int
) -> tuple[str, float]:
    """The operator whose self CPU time in the module (forward and backward) exceeds its
    siblings' median the most, a step."""
    mine = _self_by_name(model, node)
    theirs = [_self_by_name(model, s) for s in siblings]
    best, best_us = "", 0.0
    for name, spent in mine.items():
        extra = (spent - median(t.get(name, 0.0) for t in theirs)) / step_count
        if extra > best_us:
            best, best_us = name, extra
    return best, best_us


def _self_by_name(model: TraceModel, node: ModuleNode) -> dict[str, float]:
    rows = model.modules.operator_rows(node)
    calls = model.calls
    names = calls.column("name_id")[rows]
    spent = calls.column("self_ns")[rows]
    codes, inverse = np.unique(names, return_inverse=True)
    sums = np.bincount(inverse, weights=spent, minlength=len(codes))
    return {calls.names[int(code)]: float(total) / 1000 for code, total in zip(codes.tolist(), sums.tolist())}
