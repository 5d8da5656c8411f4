"""What a step spends outside the model: the ``(outside modules)`` node, per step and by operator.

The node (``ModuleTree.outside``, analysis/modules.py: ``outside_rows``) holds the calls on
the threads where modules run that are in no module and no backward work: data loading, the
optimizer, the loss computed in the loop, tensor work between ``loss.backward()`` and
``optimizer.step()``.  Its time is the time of each of those subtrees' top call; a top call
counts in the ``ProfilerStep#`` span it runs in.  Its operators are those top calls grouped by
name (``aten::randn`` with the ``aten::normal_`` under it), costliest first.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import group_rows
from tuiprof.analysis.calls import OperatorCalls, is_step_name
from tuiprof.analysis.modules import ModuleTree, outside_tops
from tuiprof.analysis.steps import step_of_calls


@dataclass(frozen=True)
class OutsideOperator:
    """The top calls outside modules of one name: the whole trace's, and per step."""

    name: str
    calls: int
    cpu_us: float  # CPU time (each call's total: what ran under it included)
    device_us: float  # device time of the kernels they launched, what ran under them included
    step_cpu_us: float | None  # the mean step's (calls in no step left out; None: no ProfilerStep spans)


@dataclass(frozen=True)
class OutsideModules:
    """CPU and device time outside every module (the ``(outside modules)`` node's), the trace's
    and each step's, and its top calls by name.  ``step_cpu_us`` follows ``model.steps``."""

    cpu_us: float
    device_us: float
    step_cpu_us: tuple[float, ...]  # one per ProfilerStep span, in the steps' order
    step_device_us: tuple[float, ...]
    operators: tuple[OutsideOperator, ...]  # costliest CPU first

    @property
    def per_step_cpu_us(self) -> float | None:
        """The mean step's CPU time outside modules (None: no ProfilerStep spans)."""
        return sum(self.step_cpu_us) / len(self.step_cpu_us) if self.step_cpu_us else None

    @property
    def per_step_device_us(self) -> float | None:
        return sum(self.step_device_us) / len(self.step_device_us) if self.step_device_us else None


def outside_modules(calls: OperatorCalls, tree: ModuleTree) -> OutsideModules:
    """The ``(outside modules)`` node's time, per step (the ``ProfilerStep#`` spans in row
    order, as ``build_steps`` makes the step rows) and by top call name."""
    node = tree.outside
    name_id = calls.column("name_id")
    step_codes = calls.name_codes(is_step_name)
    is_step = np.isin(name_id, step_codes)
    steps = int(is_step.sum())
    if node is None:
        return OutsideModules(0.0, 0.0, (0.0,) * steps, (0.0,) * steps, ())
    tops = outside_tops(calls, node.operator_rows)
    cpu = calls.column("total_ns")[tops]
    device = calls.column("device_total_ns")[tops]
    step_of = step_of_calls(calls, np.flatnonzero(is_step))[tops]  # a step call's row, -1: in none
    index = np.cumsum(is_step) - 1  # step call row -> its position among the steps
    in_step = step_of >= 0
    position = index[step_of[in_step]]
    step_cpu = np.bincount(position, weights=cpu[in_step], minlength=steps) / 1000
    step_device = np.bincount(position, weights=device[in_step], minlength=steps) / 1000
    operators = []
    for code, where in zip(*group_rows(name_id[tops])):
        per_step = int(cpu[where[in_step[where]]].sum()) / 1000 / steps if steps else None
        operators.append(
            OutsideOperator(
                calls.names[code], len(where), int(cpu[where].sum()) / 1000, int(device[where].sum()) / 1000, per_step
            )
        )
    operators.sort(key=lambda op: op.cpu_us, reverse=True)
    return OutsideModules(
        node.cpu_total_us,
        int(device.sum()) / 1000,
        tuple(step_cpu.tolist()),
        tuple(step_device.tolist()),
        tuple(operators),
    )
