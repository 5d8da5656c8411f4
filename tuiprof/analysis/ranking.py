"""What is most expensive: the rankings the Overview, the header and the module
tree share, so "top module" and "share of module time" mean one thing everywhere."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.operators import STEP_WILDCARD, OperatorStats

# A class of modules whose instances hold at least this share of all module time is
# where the time concentrates: a majority, so no other class at that level can hold more.
CONCENTRATION_SHARE = 0.5


def module_time_us(model: TraceModel) -> float:
    """All module time: the roots' costs (forward + backward, see ModuleNode.cost_us)."""
    return model.modules.cost_us


def module_share(model: TraceModel, node: ModuleNode) -> float:
    """The node's cost as a fraction of all module time (0 when there is none)."""
    total = module_time_us(model)
    return node.cost_us / total if total else 0.0


@dataclass(frozen=True)
class ModuleGroup:
    """The instances of one module class at one level of the tree, their costs summed
    (``12 x ViTLayer``): how repeated layers are ranked, since each alone is small."""

    class_name: str
    nodes: tuple[ModuleNode, ...]  # costliest first
    cost_us: float  # the sum of the nodes' ModuleNode.cost_us
    forward_us: float  # cost_us = forward_us + backward_us (ModuleNode.cost_parts_us)
    backward_us: float

    def summed(self, field: str) -> float:
        """A ModuleNode field (``flops``, ``device_total_us``) summed over the instances."""
        return sum(getattr(node, field) for node in self.nodes)

    @property
    def label(self) -> str:
        """``12 x ViTLayer``; one instance: its name."""
        return f"{len(self.nodes)} x {self.class_name}" if len(self.nodes) > 1 else self.nodes[0].name


def module_classes(nodes: Iterable[ModuleNode]) -> list[ModuleGroup]:
    """``nodes`` grouped by class, each class's instances summed; the costliest class first."""
    by_class: dict[str, list[ModuleNode]] = defaultdict(list)
    for node in nodes:
        by_class[node.class_name].append(node)
    groups = []
    for name, members in by_class.items():
        parts = [n.cost_parts_us for n in members]
        members.sort(key=lambda n: n.cost_us, reverse=True)
        groups.append(
            ModuleGroup(
                name,
                tuple(members),
                sum(n.cost_us for n in members),
                sum(f for f, _ in parts),
                sum(b for _, b in parts),
            )
        )
    return sorted(groups, key=lambda g: g.cost_us, reverse=True)


def costliest_class(nodes: Iterable[ModuleNode]) -> ModuleGroup | None:
    """Of ``nodes``, the class whose instances cost the most together (None: no nodes)."""
    return next(iter(module_classes(nodes)), None)


def concentrated_modules(model: TraceModel) -> ModuleGroup | None:
    """Where module time concentrates: the most specific class of modules whose
    instances together hold at least CONCENTRATION_SHARE of all module time.

    From the top of the tree (the roots), the costliest class is taken (instances
    summed, by ModuleNode.cost_us as the Modules view ranks); then, among the
    children of its instances, the costliest class again, for as long as that class
    holds CONCENTRATION_SHARE of all module time.  A ResNet ends at its 16
    ``Conv2d`` inside the blocks, a ViT at its 12 ``ViTLayer`` (or deeper, at the
    attention, when that holds half).  When no top-level class holds half, the
    costliest top-level class is the answer.  None when there is no module time.
    """
    total = module_time_us(model)
    group = costliest_class(model.modules.roots)
    if group is None or not total or not group.cost_us:
        return None
    while (inner := costliest_class(child for node in group.nodes for child in node.children)) is not None:
        if inner.cost_us < CONCENTRATION_SHARE * total:
            break
        group = inner
    return group


def module_breakdown(model: TraceModel, limit: int = 5) -> list[ModuleGroup]:
    """The Overview's top modules: the modules where the time concentrates
    (:func:`concentrated_modules`), then what they are made of: the classes of their
    children, summed, costliest first; for modules with no children, their costliest
    instances one by one.  Parts that cost nothing are left out."""
    group = concentrated_modules(model)
    if group is None:
        return []
    children = [child for node in group.nodes for child in node.children]
    if children:
        parts = module_classes(children)
    else:
        parts = (
            [ModuleGroup(n.class_name, (n,), n.cost_us, *n.cost_parts_us) for n in group.nodes]
            if len(group.nodes) > 1
            else []
        )
    return [group, *(part for part in parts if part.cost_us)][:limit]


def operator_rank_key(model: TraceModel) -> str:
    """Operators rank by self device time on GPU traces, else by self CPU time."""
    return "self_device_us" if model.has_device else "self_cpu_us"


def top_operators(model: TraceModel, limit: int = 5) -> list[OperatorStats]:
    key = operator_rank_key(model)
    # The merged step spans (ProfilerStep*) are a container, never "the top operator".
    ranked = sorted(
        (s for s in model.operators() if s.name != STEP_WILDCARD), key=lambda s: getattr(s, key), reverse=True
    )
    return ranked[:limit]


def longest_call(model: TraceModel, rows: Sequence[int]) -> int | None:
    """The longest of an operator's calls (the one the timeline shows for its row)."""
    if not rows:
        return None
    picked = np.array(rows, dtype=np.int64)
    return int(picked[np.argmax(model.calls.column("total_ns")[picked])])


def longest_launch(model: TraceModel, indices: Sequence[int]) -> int | None:
    """The longest launch of a kernel (device event index)."""
    if not indices:
        return None
    picked = np.array(indices, dtype=np.int64)
    return int(picked[np.argmax(model.activity.dur_ns[picked])])
