"""What fills memory at its peak: by category, by module, the allocations, and
what the standard remedies would save (their arithmetic, not their texts).

With torch's categories (a tuiprof capture, analysis/memory_categories.py):

- a tensor's bytes go to the module the capture named for it: a parameter,
  its gradient and its optimizer state to the module owning the parameter,
  any other tensor to the module whose forward allocated it (activations to
  the layer that made and saved them); memory allocated outside every
  forward (backward, the loss as a function) has no module;
- a module's bytes include its submodules' (``layer4`` holds its blocks');
- "the module holding the most activations" is the root's child (a
  top-level block) with the most activation bytes, followed down while one
  child with children of its own holds all of them: the block a user would
  checkpoint (never a lone ReLU).

Without them (another tool's trace), only what the JSON supports: the
``[memory]`` allocations still live at the allocator's peak (paired with
their frees by ``Addr``), each named after the operator running when it was
made and that operator's module.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.memory import MAX_ATTRIBUTED, MemoryTimeline, innermost_calls_at
from tuiprof.analysis.memory_categories import CategorisedMemory
from tuiprof.analysis.memory_what_ifs import (
    STATE_FREE_OPTIMIZERS,
    STEP_PREFIX,
    ZERO_GRAD_PREFIX,
    batch_scaled,
    batch_sized,
    gradients_set_to_none,
    named_spans,
    replay,
    without_optimizer_state,
)
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.python_stack import Stack
from tuiprof.analysis.steps import StepStats
from tuiprof.analysis.timeline import PHASES, profiler_step_rows, step_phases

UNNAMED = "(smaller allocations, not named)"


@dataclass(frozen=True)
class PeakAllocation:
    """One allocation live at the peak (or several of one operator and module, ``count``)."""

    bytes: int
    category: str  # torch's category; "" when the trace has none
    operator: str
    module: str  # the module's label ("layer1.0.conv1 (Conv2d)" or "Conv2d_1"); "" outside every module
    count: int = 1
    stack: Stack = ()  # the Python stack it was allocated in, outermost first; () when unknown


@dataclass
class ModuleMemory:
    """Bytes live at the peak that belong to one module and its submodules, by category."""

    label: str
    path: str  # "ResNet_0/Sequential_0": the tree position ("" for a module the tree lacks)
    depth: int
    node: ModuleNode | None
    bytes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.bytes.values())


@dataclass(frozen=True)
class GradientBound:
    """torch's gradients at the peak against the parameters they are for: a parameter has
    one gradient of its own size, so gradients above the parameters are torch over-counting
    (gradients it saw made before the capture and never saw freed)."""

    gradient_bytes: int
    parameter_bytes: int  # of the parameters (torch's guesses left out)
    modules_over: int  # modules holding more gradient bytes than parameter bytes

    @property
    def over_counted(self) -> int:
        return max(0, self.gradient_bytes - self.parameter_bytes)


@dataclass(frozen=True)
class WhatIf:
    """One remedy replayed on torch's timeline (analysis/memory_what_ifs.py): the peak of the
    run with the remedy applied, or ``peak_after`` None and ``why_not`` where tuiprof abstains."""

    remedy: str  # grads-to-none | no-momentum | stateless-optimizer | checkpoint | half-batch
    peak_bytes: int
    peak_after: int | None  # the replayed peak; None: not predicted
    basis_bytes: int  # what the remedy changes, at the peak: gradients zeroed in place, optimizer state, batch-sized bytes, activations
    why_not: str = ""  # why the saving is not predicted (peak_after None)
    step: StepStats | None = None  # where the replayed peak falls: its step...
    phase: str = ""  # ...and phase ("backward"; "" outside them)
    module: str = ""  # checkpoint: the module
    recompute_us: float = 0.0  # checkpoint: its forward time per step, run again in backward
    optimizer: str = ""  # the optimizer's class, as its step's span names it ("SGD", "Adam")
    bound: GradientBound | None = None  # grads-to-none: torch's gradients against the parameters

    @property
    def saves_bytes(self) -> int | None:
        return None if self.peak_after is None else self.peak_bytes - self.peak_after


@dataclass(frozen=True)
class MemoryBreakdown:
    """The peak explained; ``memory`` is None for a trace without torch's categories."""

    device: str
    peak_bytes: int
    peak_ns: int
    step: StepStats | None
    phase: str  # "forward", "backward", "optimizer", "data loading"; "" outside them
    memory: CategorisedMemory | None
    modules: list[ModuleMemory]  # tree order, parents first
    allocations: list[PeakAllocation]  # largest first
    what_ifs: list[WhatIf]
    most_activations: ModuleMemory | None
    phases: tuple[tuple[int, int, str], ...] = ()  # (start ns, end ns, phase) of every step, for the curve
    before_trace_bytes: int = 0  # of the peak, memory allocated before the capture began

    @property
    def by_category(self) -> list[tuple[str, int]]:
        """(category, bytes at the peak), largest first, empty categories left out."""
        if self.memory is None:
            return []
        return sorted(((c, b) for c, b in self.memory.peak_by_category.items() if b), key=lambda item: -item[1])


def memory_breakdown(model: TraceModel) -> MemoryBreakdown | None:
    """The peak of the categorised device when there is one, else of the allocator's curve."""
    memory = model.categorised_peak
    if memory is not None:
        return _categorised(model, memory)
    timeline = model.peak_memory
    if timeline is None:
        return None
    step, phase = _place(model, timeline.peak_ns)
    allocations = _json_allocations(model, timeline)
    modules = _module_rows(model, [(a.module_node, "", a.bytes) for a in allocations])
    return MemoryBreakdown(
        device=timeline.device,
        peak_bytes=timeline.peak_bytes,
        peak_ns=timeline.peak_ns,
        step=step,
        phase=phase,
        memory=None,
        modules=modules,
        allocations=_merged(allocations),
        what_ifs=[],
        most_activations=None,
        before_trace_bytes=timeline.before_trace_bytes,
    )


def _categorised(model: TraceModel, memory: CategorisedMemory) -> MemoryBreakdown:
    step, phase = _place(model, memory.peak_ns)
    nodes = _nodes_by_name(model)
    owned = [(nodes.get(t.module), t.module, t.bytes, t.category) for t in memory.live_at_peak]
    modules = _module_rows(model, [(node, name, size) for node, name, size, _ in owned], [c for *_, c in owned])
    allocations = [
        PeakAllocation(t.bytes, t.category, t.operator, _label(nodes.get(t.module), t.module), stack=t.stack)
        for t in memory.live_at_peak
    ]
    most = _most_activations(modules)
    return MemoryBreakdown(
        device=memory.device,
        peak_bytes=memory.peak_bytes,
        peak_ns=memory.peak_ns,
        step=step,
        phase=phase,
        memory=memory,
        modules=modules,
        allocations=allocations,
        what_ifs=_what_ifs(model, memory, most),
        most_activations=most,
        phases=_phases(model),
        before_trace_bytes=memory.before_trace_bytes,
    )


def _nodes_by_name(model: TraceModel) -> dict[str, ModuleNode]:
    """The trace's module name -> its first node in tree order (a module called from two places counts at the first)."""
    nodes: dict[str, ModuleNode] = {}
    for node in model.modules.walk():
        nodes.setdefault(node.name, node)
    return nodes


def _label(node: ModuleNode | None, name: str) -> str:
    return node.label if node is not None else name


def _module_rows(
    model: TraceModel, owned: list[tuple[ModuleNode | None, str, int]], categories: list[str] | None = None
) -> list[ModuleMemory]:
    """Bytes per module, each module's submodules included, in tree order; modules the tree lacks last."""
    rows = {id(node): ModuleMemory(node.label, node.path, node.depth, node) for node in model.modules.walk()}
    loose: dict[str, ModuleMemory] = {}
    for index, (node, name, size) in enumerate(owned):
        category = categories[index] if categories else "total"
        if node is None:
            if not name:
                continue
            row = loose.setdefault(name, ModuleMemory(name, "", 0, None))
            row.bytes[category] = row.bytes.get(category, 0) + size
            continue
        while node is not None:  # the module and every module above it
            row = rows[id(node)]
            row.bytes[category] = row.bytes.get(category, 0) + size
            node = node.parent
    return [row for row in rows.values() if row.bytes] + list(loose.values())


def _most_activations(modules: list[ModuleMemory]) -> ModuleMemory | None:
    """The root's child with the most activation bytes, followed down while one child
    that has children of its own holds all of them (a block, never a single ReLU)."""
    by_node = {id(m.node): m for m in modules if m.node is not None and m.bytes.get("activation")}
    if not by_node:
        return None

    def activation_children(module: ModuleMemory) -> list[ModuleMemory]:
        return [by_node[id(c)] for c in module.node.children if id(c) in by_node] if module.node else []

    roots = [m for m in by_node.values() if m.node is not None and m.node.parent is None]  # by_node: every node is set
    best = max(roots, key=lambda m: m.bytes["activation"])
    children = activation_children(best)
    if children:  # below the whole model: its block that holds the most
        best = max(children, key=lambda m: m.bytes["activation"])
    while True:
        whole = [
            c
            for c in activation_children(best)
            if c.bytes["activation"] == best.bytes["activation"] and c.node is not None and c.node.children
        ]
        if not whole:
            return best
        best = whole[0]


def _phases(model: TraceModel) -> tuple[tuple[int, int, str], ...]:
    return tuple((start, end, PHASES[phase]) for start, end, phase in step_phases(model, profiler_step_rows(model)))


def _place(model: TraceModel, time_ns: int) -> tuple[StepStats | None, str]:
    """The profiler step holding ``time_ns`` and the phase of that step it falls in."""
    step = next((s for s in model.steps if s.start_ns <= time_ns < s.start_ns + round(s.duration_us * 1000)), None)
    if step is None:
        return None, ""
    phase = next((name for start, end, name in _phases(model) if start <= time_ns < end), "")
    return step, phase


def _what_ifs(model: TraceModel, memory: CategorisedMemory, most: ModuleMemory | None) -> list[WhatIf]:
    """Each remedy replayed on torch's timeline (analysis/memory_what_ifs.py)."""
    peak = memory.peak_bytes
    by_category = memory.peak_by_category

    def replayed(remedy: str, deltas: np.ndarray, basis: int, **facts: Any) -> WhatIf:
        after = replay(memory, deltas)
        place = _place(model, after.peak_ns)
        return WhatIf(remedy, peak, after.peak_bytes, basis, step=place[0], phase=place[1], **facts)

    found = [_gradients_to_none(model, memory, replayed)]
    steps = named_spans(model.calls, STEP_PREFIX)
    optimizer = steps[0].optimizer if steps else ""
    state = by_category.get("optimizer_state", 0)
    stateless = optimizer and optimizer not in STATE_FREE_OPTIMIZERS
    remedy = "stateless-optimizer" if stateless else "no-momentum"
    found.append(replayed(remedy, without_optimizer_state(memory, steps), state, optimizer=optimizer))
    if most is not None:
        node = most.node
        forward_us = node.cost_parts_us[0] / max(1, len(model.steps)) if node is not None else 0.0
        activations = most.bytes.get("activation", 0)
        why = "not replayed: which of its activations the layers after it keep is not known"
        found.append(WhatIf("checkpoint", peak, None, activations, why, module=most.label, recompute_us=forward_us))
    parents: dict[str, str] = {}
    for node in model.modules.walk():
        parents.setdefault(node.name, node.parent.name if node.parent is not None else "")
    sized = batch_sized(memory, parents, steps, named_spans(model.calls, ZERO_GRAD_PREFIX))
    basis = sum(t.bytes for t in memory.live_at_peak if sized[t.row])
    found.append(replayed("half-batch", batch_scaled(memory, sized, 1, 2), basis))
    return found


def _gradients_to_none(model: TraceModel, memory: CategorisedMemory, replayed: Callable[..., WhatIf]) -> WhatIf:
    """zero_grad(set_to_none=True): gradients zeroed in place freed there instead."""
    bound = _gradient_bound(memory)
    gradients = memory.peak_by_category.get("gradient", 0)
    zero_grads = named_spans(model.calls, ZERO_GRAD_PREFIX)
    if not zero_grads and (memory.changes.category == memory.categories.index("gradient")).any():
        why = "no optimizer.zero_grad() in the trace, so where gradients would be freed is not known"
        return WhatIf("grads-to-none", memory.peak_bytes, None, gradients, why, bound=bound)
    deltas, zeroed = gradients_set_to_none(memory, zero_grads)
    kept = sum(t.bytes for t in memory.live_at_peak if t.row in zeroed)
    return replayed("grads-to-none", deltas, kept, bound=bound)


def _gradient_bound(memory: CategorisedMemory) -> GradientBound:
    """Gradients and parameters at the peak, by module; a parameter is one a module holds or one
    from before the capture (a compiled model's, captured without it), never torch's guess."""
    gradients: dict[str, int] = defaultdict(int)
    parameters: dict[str, int] = defaultdict(int)
    for tensor in memory.live_at_peak:
        if tensor.category == "gradient":
            gradients[tensor.module] += tensor.bytes
        elif tensor.category == "parameter" and (tensor.module or tensor.made_ns < 0):
            parameters[tensor.module] += tensor.bytes
    over = sum(1 for module, size in gradients.items() if module and size > parameters.get(module, 0))
    return GradientBound(sum(gradients.values()), sum(parameters.values()), over)


# ------------------------------------------------------------------ JSON only


@dataclass(frozen=True)
class _JsonAllocation:
    bytes: int
    operator: str
    module_node: ModuleNode | None
    stack: Stack = ()


def _json_allocations(model: TraceModel, timeline: MemoryTimeline) -> list[_JsonAllocation]:
    """The allocations live at ``timeline``'s peak, largest first (the largest
    MAX_ATTRIBUTED named after their operator and module, the rest together)."""
    named = timeline.live_at_peak[:MAX_ATTRIBUTED]
    calls = innermost_calls_at(model.calls, [tid for _, tid, _ in named], [start for *_, start in named]).tolist()
    _, nodes = model.modules.frame_index()
    charged = model.modules.charged_node
    found = []
    for (size, _, _), call, stack in zip(named, calls, timeline.live_stacks):
        node = nodes[int(charged[call])] if call >= 0 and len(charged) and charged[call] >= 0 else None
        found.append(_JsonAllocation(size, _outermost_operator(model.calls, call), node, stack))
    found += [_JsonAllocation(size, UNNAMED, None) for size, _, _ in timeline.live_at_peak[MAX_ATTRIBUTED:]]
    return found


def _outermost_operator(calls: OperatorCalls, row: int) -> str:
    """The outermost ``::`` operator around a call (the capture's rule), else the call's own name."""
    if row < 0:
        return ""
    parent = calls.column("parent")
    name = calls.name(row)
    while row >= 0:
        if "::" in calls.name(row):
            name = calls.name(row)
        row = int(parent[row])
    return name


def _merged(allocations: list[_JsonAllocation]) -> list[PeakAllocation]:
    """One row per operator, module and stack: bytes and allocations live at the peak."""
    groups: dict[tuple[str, str, Stack], list[int]] = defaultdict(lambda: [0, 0])
    for allocation in allocations:
        group = groups[(allocation.operator, _label(allocation.module_node, ""), allocation.stack)]
        group[0] += allocation.bytes
        group[1] += 1
    merged = [
        PeakAllocation(size, "", operator, module, count, stack)
        for (operator, module, stack), (size, count) in groups.items()
    ]
    return sorted(merged, key=lambda a: -a.bytes)
