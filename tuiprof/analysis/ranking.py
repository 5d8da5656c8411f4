"""What is most expensive: the rankings the Overview, the header and the module
tree share, so "top module" and "share of module time" mean one thing everywhere."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.operators import OperatorStats

STEP_ROW = "ProfilerStep*"  # the merged step spans: a container, never "the top operator"


def module_time_us(model: TraceModel) -> float:
    """All module time: the roots' costs (forward + backward, see ModuleNode.cost_us)."""
    return model.modules.cost_us


def module_share(model: TraceModel, node: ModuleNode) -> float:
    """The node's cost as a fraction of all module time (0 when there is none)."""
    total = module_time_us(model)
    return node.cost_us / total if total else 0.0


def top_modules(model: TraceModel, limit: int = 5) -> list[ModuleNode]:
    """The costliest leaf modules (the layers that do the work), forward + backward."""
    leaves = (n for n in model.modules.walk() if n.depth > 0 and not n.children)
    return sorted(leaves, key=lambda n: n.cost_us, reverse=True)[:limit]


def operator_rank_key(model: TraceModel) -> str:
    """Operators rank by self device time on GPU traces, else by self CPU time."""
    return "self_device_us" if model.has_device else "self_cpu_us"


def top_operators(model: TraceModel, limit: int = 5) -> list[OperatorStats]:
    key = operator_rank_key(model)
    ranked = sorted((s for s in model.operators() if s.name != STEP_ROW), key=lambda s: getattr(s, key), reverse=True)
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
