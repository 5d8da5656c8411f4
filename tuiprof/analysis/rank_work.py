"""Where one rank's step time went, in items that compare across ranks: what a straggler did
in its extra time.

A straggler's excess is its work per step (Step - Exposed comm) above the other ranks'.  To
say what that time was, each rank keeps a small table of like-with-like items, each a mean
per step, and :func:`analysis.ranks.find_stragglers` compares the straggler's items with the
median of the same items on the other ranks:

- ``operator``: a call name's self time among calls (its time minus its child calls', Python
  frames not subtracted: ``aten::mm``, ``enumerate(DataLoader)#...``, ``cudaLaunchKernel``), every thread, calls that start in a step; communication calls
  (``c10d::*``, ``gloo:*``, ``record_param_comms`` and their children) and the step spans
  left out: they are the waiting, not the work;
- ``kernel``: a compute kernel's device time (GPU ranks), kernels that start in a step's
  device window;
- ``module``: a module instance's cost (forward + backward, ``ModuleNode.cost_us``, by its
  path; shown by its qualified name where the capture knew it), over the trace divided by its steps;
- ``python``: the step's thread running no call and not waiting in a collective: Python
  between operators, or a ``time.sleep``.  Each stretch of at least PYTHON_STRETCH_NS is
  named after the innermost Python frame in its middle (``<built-in function sleep>``, with
  stacks recorded); shorter ones are BETWEEN_OPERATORS.

Small items are dropped (under MIN_ITEM_US a step), modules beyond MAX_MODULES: an item
missing on a rank counts as 0 there, off by at most that much.
"""

from __future__ import annotations

import msgspec
import numpy as np

from tuiprof.analysis.calls import is_step_name
from tuiprof.analysis.intervals import merge_spans
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.python_stack import python_stacks
from tuiprof.analysis.steps import StepStats, is_communication
from tuiprof.trace.store import TraceEvents

OPERATOR, KERNEL, MODULE, PYTHON = "operator", "kernel", "module", "python"
BETWEEN_OPERATORS = "(Python between operators)"
PYTHON_STRETCH_NS = 100_000  # a stretch this long is one thing the script did (a sleep, a loop), worth naming
MIN_ITEM_US = 1.0
MAX_MODULES = 500
COMMUNICATION_CALL_PREFIXES = ("c10d::", "record_param_comms", "gloo:", "nccl:", "rccl:", "mpi:", "ucc:")


class WorkItem(msgspec.Struct, frozen=True, array_like=True):
    """One like-with-like item of a rank's step: its kind, its name, its mean time per step."""

    kind: str  # OPERATOR, KERNEL, MODULE or PYTHON
    label: str  # an operator or kernel name, a module path, a Python frame
    us: float  # mean per step
    name: str = ""  # a module's qualified name and class (``blocks.1 (Block)``) where the capture knew it: shown
    # (ranks compare by label)


def communication_calls(model: TraceModel) -> np.ndarray:
    """Per call: whether it is communication (COMMUNICATION_CALL_PREFIXES) or inside one."""
    calls = model.calls
    codes = np.array(calls.name_codes(lambda name: name.startswith(COMMUNICATION_CALL_PREFIXES)), dtype=np.int64)
    excluded = np.isin(calls.column("name_id"), codes)
    parents = calls.column("parent")
    ancestor = parents.copy()
    while True:  # children of communication calls are communication too: down by pointer jumping
        live = ancestor >= 0
        if not live.any():
            break
        excluded[live] |= excluded[ancestor[live]]
        ancestor[live] = parents[ancestor[live]]
    return excluded


def rank_work(
    store: TraceEvents, model: TraceModel, steps: list[StepStats], waits: list[tuple[int, int]]
) -> tuple[WorkItem, ...]:
    """The rank's items (module docstring); ``waits`` are its collectives' spans on the CPU
    (gloo), time its step thread spends waiting, not working."""
    if not steps:
        return ()
    count = len(steps)
    items = _operators(model, steps) + _kernels(model, steps) + _modules(model) + _python(store, model, steps, waits)
    named = {node.path: node.label for node in model.modules.walk() if node.qualified_name}
    return tuple(
        WorkItem(kind, label, total_ns / 1000 / count, named.get(label, "") if kind == MODULE else "")
        for kind, label, total_ns in items
        if total_ns / 1000 / count >= MIN_ITEM_US
    )


def _in_steps(times: np.ndarray, windows: list[tuple[int, int]]) -> np.ndarray:
    """Whether each time lies in a window (the latest window begun by then)."""
    windows = sorted(windows)
    starts = np.array([a for a, _ in windows], dtype=np.int64)
    ends = np.maximum.accumulate(np.array([b for _, b in windows], dtype=np.int64))  # overlapping windows
    at = np.searchsorted(starts, times, side="right") - 1
    return (at >= 0) & (times < ends[np.maximum(at, 0)])


def _totals(kind: str, names: list[str], codes: np.ndarray, amounts: np.ndarray) -> list[tuple[str, str, float]]:
    sums = np.bincount(codes, weights=amounts, minlength=len(names)) if len(codes) else np.zeros(0)
    return [(kind, names[code], float(sums[code])) for code in np.flatnonzero(sums > 0).tolist()]


def _operators(model: TraceModel, steps: list[StepStats]) -> list[tuple[str, str, float]]:
    calls = model.calls
    if not len(calls):
        return []
    names = calls.column("name_id")
    chosen = _in_steps(calls.column("start_ns"), [(s.start_ns, s.end_ns) for s in steps])
    chosen &= ~communication_calls(model) & ~np.isin(names, calls.name_codes(is_step_name))
    return _totals(OPERATOR, calls.names, names[chosen], _self_among_calls(calls)[chosen])


def _self_among_calls(calls) -> np.ndarray:
    """Each call's time minus its child calls' (Python frames are not children here, unlike
    ``self_ns``: a Dataset's ``time.sleep`` under ``enumerate(DataLoader)`` stays its time)."""
    totals = calls.column("total_ns").astype(np.float64)
    parents = calls.column("parent")
    nested = parents >= 0
    children = np.bincount(parents[nested], weights=totals[nested], minlength=len(totals))
    return np.maximum(totals - children, 0.0)


def _kernels(model: TraceModel, steps: list[StepStats]) -> list[tuple[str, str, float]]:
    activity = model.activity
    if not model.has_device or not len(activity):
        return []
    events = activity.events
    codes = np.unique(events.name[events.kind == 0]).tolist()
    compute = [code for code in codes if not is_communication(activity.names[code])]
    windows = [(s.device_window_start_ns, s.device_window_end_ns) for s in steps]
    chosen = (events.kind == 0) & np.isin(events.name, compute) & _in_steps(activity.start_ns, windows)
    return _totals(KERNEL, activity.names, events.name[chosen], activity.dur_ns[chosen].astype(np.float64))


def _modules(model: TraceModel) -> list[tuple[str, str, float]]:
    nodes = sorted(model.modules.walk(), key=lambda node: -node.cost_us)[:MAX_MODULES]
    totals: dict[str, float] = {}
    for node in nodes:  # one path, several nodes? (not in a tree; kept safe) summed
        totals[node.path] = totals.get(node.path, 0.0) + node.cost_us * 1000
    return [(MODULE, path, ns) for path, ns in totals.items()]


def _python(
    store: TraceEvents, model: TraceModel, steps: list[StepStats], waits: list[tuple[int, int]]
) -> list[tuple[str, str, float]]:
    """Stretches of the step thread running no call and not waiting, named by their Python frame."""
    calls = model.calls
    step_codes = calls.name_codes(is_step_name)
    step_rows = np.flatnonzero(np.isin(calls.column("name_id"), step_codes))
    if not len(step_rows):
        return []  # a trace without steps: no thread is the step's
    thread = int(calls.column("thread")[step_rows[0]])
    mine = (calls.column("thread") == thread) & ~np.isin(calls.column("name_id"), step_codes)
    busy_starts = np.concatenate((calls.column("start_ns")[mine], np.array([a for a, _ in waits], dtype=np.int64)))
    busy_ends = np.concatenate((calls.column("end_ns")[mine], np.array([b for _, b in waits], dtype=np.int64)))
    lows, highs = merge_spans(busy_starts, busy_ends)
    stretches: list[tuple[int, int]] = []
    for step in steps:  # the step minus the busy spans
        at = step.start_ns
        first = int(np.searchsorted(highs, step.start_ns, side="right"))  # spans are disjoint and sorted
        last = int(np.searchsorted(lows, step.end_ns, side="left"))
        for low, high in zip(lows[first:last].tolist(), highs[first:last].tolist()):
            if low > at:
                stretches.append((at, low))
            at = max(at, high)
        if step.end_ns > at:
            stretches.append((at, step.end_ns))
    long = [(a, b) for a, b in stretches if b - a >= PYTHON_STRETCH_NS]
    between = float(sum(b - a for a, b in stretches if b - a < PYTHON_STRETCH_NS))
    stacks = python_stacks(
        store.frames, store.names, store.threads, [(calls.threads[thread], (a + b) // 2) for a, b in long]
    )
    totals: dict[str, float] = {}
    for (a, b), stack in zip(long, stacks):
        label = stack[-1] if stack else BETWEEN_OPERATORS
        totals[label] = totals.get(label, 0.0) + (b - a)
    totals[BETWEEN_OPERATORS] = totals.get(BETWEEN_OPERATORS, 0.0) + between
    return [(PYTHON, label, ns) for label, ns in totals.items() if ns > 0]
