"""What only a live run knows, applied to a model built from its trace.

A capture hands over plain data (no torch objects): torch's own FLOPs per
operator call, keyed by the call's ``External id``, and per module instance
(``Conv2d_1``) its qualified name, parameter count and output shape.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import fill_totals


@dataclass
class ModuleFacts:
    qualified_name: str
    parameters: int
    output_shape: str


@dataclass
class LiveFacts:
    flops_by_external_id: dict[int, int] = field(default_factory=dict)
    modules: dict[str, ModuleFacts] = field(default_factory=dict)  # "Conv2d_1" -> facts
    log_lines: list[str] = field(default_factory=list)  # what the profiler printed
    device: str = "cpu"


def apply_live_facts(model: TraceModel, facts: LiveFacts) -> TraceModel:
    """Replace recomputed FLOPs with torch's and name the module tree."""
    calls = model.calls
    if facts.flops_by_external_id:
        measured = facts.flops_by_external_id
        calls.flops = array("q", [measured.get(ext, 0) if ext >= 0 else 0 for ext in calls.external_id])
        model.flops_source = "measured by torch.profiler (with_flops)"
        model._tables.clear()
        model.__dict__.pop("total_flops", None)
        fill_totals(model.modules, calls)
    for node in model.modules.walk():
        known = facts.modules.get(node.name)
        if known is not None:
            node.qualified_name = known.qualified_name
            node.parameters = known.parameters
            node.output_shape = known.output_shape
    return model
