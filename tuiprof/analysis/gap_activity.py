"""What the CPU was doing while the device sat idle: the answer an idle gap's detail gives.

An idle gap says the device waited; the CPU activity in the same time says for
what.  Each call's time inside the gap is charged to the call itself minus
its children (its *self* overlap, so nested calls count once per thread), and
that piece is named after the call's outermost ancestor below the step: the
operator or annotation the thread was running at the top (``aten::item``,
``enumerate(DataLoader)#...``, ``Optimizer.step#SGD.step``), which is what a
user recognises in their code.  A piece gets a cause when its chain of calls
says one:

- ``sync``: the chain holds a host-device synchronisation (``aten::item``,
  ``aten::_local_scalar_dense``, ``*Synchronize``, a blocking ``cudaMemcpy``):
  the CPU waited for the device, which then waits for the CPU;
- ``data loading``: the chain holds an ``enumerate(DataLoader)`` span;
- ``Python``: the time the *waited-for thread* ran no call at all (Python,
  framework or the interpreter between operators).  The waited-for thread is
  the one that launched the device work ending the gap (else the work before
  it): the device idled until that thread launched.

Every thread takes part (a backward thread's work in the gap is CPU activity
too), so the pieces can add up to more than the gap.  ``ProfilerStep#N`` spans
name nothing: their self time is the ``Python`` piece.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.calls import DeviceActivity, OperatorCalls, is_step_name
from tuiprof.analysis.intervals import merge_spans
from tuiprof.analysis.steps import DATA_LOADING_PREFIX

SYNC_NAMES = frozenset({"aten::item", "aten::_local_scalar_dense", "cudaMemcpy", "hipMemcpy"})
NO_OPERATOR = "no operator"
SYNC, DATA_LOADING, PYTHON = "sync", "data loading", "Python"


@dataclass(frozen=True, slots=True)
class GapActivity:
    """CPU time inside a gap: ``label`` (a call's name, or NO_OPERATOR), and why, when known."""

    label: str
    overlap_ns: int
    cause: str = ""  # SYNC, DATA_LOADING, PYTHON or ""


def is_sync(name: str) -> bool:
    return name in SYNC_NAMES or "synchronize" in name.lower()


def cpu_in_gap(calls: OperatorCalls, activity: DeviceActivity, start_ns: int, end_ns: int) -> list[GapActivity]:
    """CPU activity overlapping [start, end), largest first (see the module docstring)."""
    starts, ends = calls.column("start_ns"), calls.column("end_ns")
    parents = calls.column("parent")
    before = int(np.searchsorted(starts, end_ns, side="left"))  # calls are in start order
    rows = np.flatnonzero(ends[:before] > start_ns)
    overlap = np.minimum(ends[rows], end_ns) - np.maximum(starts[rows], start_ns)
    # self overlap: a call's time in the gap minus its children's (children overlap, so are rows too)
    parent_at = np.searchsorted(rows, parents[rows])
    has_parent = (parents[rows] >= 0) & (parent_at < len(rows))
    has_parent[has_parent] = rows[parent_at[has_parent]] == parents[rows][has_parent]
    children = np.zeros(len(rows), dtype=np.int64)
    np.add.at(children, parent_at[has_parent], overlap[has_parent])
    own = overlap - children
    totals: dict[tuple[str, str], int] = {}
    for row, amount in zip(rows.tolist(), own.tolist()):
        if amount > 0 and not is_step_name(calls.name(row)):
            key = _label_and_cause(calls, row)
            totals[key] = totals.get(key, 0) + amount
    waited = _waited_thread(calls, activity, start_ns, end_ns)
    if waited is not None:
        mine = rows[(calls.column("thread")[rows] == waited) & ~_is_step(calls, rows)]
        lows, highs = merge_spans(np.maximum(starts[mine], start_ns), np.minimum(ends[mine], end_ns))
        idle_thread = (end_ns - start_ns) - int((highs - lows).sum())
        if idle_thread > 0:
            totals[(NO_OPERATOR, PYTHON)] = idle_thread
    found = [GapActivity(label, amount, cause) for (label, cause), amount in totals.items()]
    return sorted(found, key=lambda a: (-a.overlap_ns, a.label))


def _label_and_cause(calls: OperatorCalls, row: int) -> tuple[str, str]:
    """The outermost non-step ancestor's name, and the cause the chain up to it shows."""
    label, cause = row, ""
    while row >= 0:
        name = calls.name(row)
        if is_step_name(name):
            break
        if is_sync(name):
            cause = SYNC
        elif name.startswith(DATA_LOADING_PREFIX) and not cause:
            cause = DATA_LOADING
        label = row
        row = int(calls.parent[row])
    return calls.name(label), cause


def _is_step(calls: OperatorCalls, rows: np.ndarray) -> np.ndarray:
    return np.isin(calls.column("name_id")[rows], calls.name_codes(is_step_name))


def _waited_thread(calls: OperatorCalls, activity: DeviceActivity, start_ns: int, end_ns: int) -> int | None:
    """Thread code of the launcher of the device work that ends the gap (else of the work
    that ended when it began); None when neither was launched by a known call."""
    launcher = activity.launchers
    finishes = activity.start_ns + activity.dur_ns
    for events in (np.flatnonzero(activity.start_ns == end_ns), np.flatnonzero(finishes == start_ns)):
        known = launcher[events][launcher[events] >= 0]
        if len(known):
            return int(calls.column("thread")[known[0]])
    return None
