"""What only a live run knows, used while the model is built.

The facts (:class:`tuiprof.trace.live.LiveFacts`) come either straight from a
capture or from the member a capture saved in its trace; :func:`analyze`
takes them into account before the model exists, so the model is never
changed afterwards.
"""

from __future__ import annotations

from array import array

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.modules import ModuleTree
from tuiprof.trace.live import LiveFacts

TORCH_FLOPS = "measured by torch.profiler (with_flops)"


def torch_flops_column(calls: OperatorCalls, facts: LiveFacts) -> array:
    """Per call, torch's own FLOP count (0 for calls it did not count)."""
    measured = facts.flops_by_external_id
    return array("q", [measured.get(ext, 0) if ext >= 0 else 0 for ext in calls.external_id])


def name_modules(tree: ModuleTree, facts: LiveFacts) -> None:
    """Give each node of a tree being built its qualified name, parameters and output shape."""
    for node in tree.walk():
        known = facts.modules.get(node.name)
        if known is not None:
            node.qualified_name = known.qualified_name
            node.parameters = known.parameters
            node.output_shape = known.output_shape
