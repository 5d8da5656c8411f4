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
from dataclasses import dataclass, field

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.memory import MAX_ATTRIBUTED, MemoryTimeline, innermost_calls_at
from tuiprof.analysis.memory_categories import CategorisedMemory
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.python_stack import Stack
from tuiprof.analysis.steps import StepStats
from tuiprof.analysis.timeline import PHASES, profiler_step_rows, step_phases

# Categories that grow with the batch: halving it halves them (parameters, gradients
# and optimizer state are per parameter; torch's "unknown" is left as it is).
BATCH_CATEGORIES = ("input", "activation", "temporary", "autograd_detail")
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
class WhatIf:
    """One remedy's arithmetic: ``saves_bytes`` off a peak of ``peak_bytes``."""

    remedy: str  # grads-to-none | no-momentum | checkpoint | half-batch
    saves_bytes: int
    peak_bytes: int
    basis_bytes: int  # the bytes the saving is taken from (the category or module total)
    module: str = ""  # checkpoint: the module
    recompute_us: float = 0.0  # checkpoint: its forward time per step, run again in backward

    @property
    def peak_after(self) -> int:
        return self.peak_bytes - self.saves_bytes


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
        what_ifs=_what_ifs(model, memory, step, most),
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


def _what_ifs(
    model: TraceModel, memory: CategorisedMemory, step: StepStats | None, most: ModuleMemory | None
) -> list[WhatIf]:
    peak = memory.peak_bytes
    by_category = memory.peak_by_category
    found = []
    # Gradients live at the peak that were made before its step began: kept from the last step.
    kept = 0
    if step is not None:
        kept = sum(t.bytes for t in memory.live_at_peak if t.category == "gradient" and t.made_ns < step.start_ns)
    found.append(WhatIf("grads-to-none", kept, peak, by_category.get("gradient", 0)))
    found.append(
        WhatIf("no-momentum", by_category.get("optimizer_state", 0), peak, by_category.get("optimizer_state", 0))
    )
    if most is not None:
        node = most.node
        steps = max(1, len(model.steps))
        forward_us = node.cost_parts_us[0] / steps if node is not None else 0.0
        activations = most.bytes.get("activation", 0)
        found.append(WhatIf("checkpoint", activations, peak, activations, most.label, forward_us))
    batch = sum(by_category.get(c, 0) for c in BATCH_CATEGORIES)
    found.append(WhatIf("half-batch", batch // 2, peak, batch))
    return found


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
