"""CUDA-graph replays in a trace, and the kernels they ran (``torch.compile(mode="reduce-overhead")``).

A CUDA graph runs as one ``cudaGraphLaunch`` runtime call (``hipGraphLaunch`` on
ROCm; CUPTI may write ``cudaGraphLaunch_v10000``); every kernel, memcpy and
memset the graph replays is a device event that carries that call's
``correlation`` id.  A replay is counted per launch call; its kernels are
the device events of kind ``kernel`` with its correlation, and its device
time is the time of all its device events (the graph's memsets and copies
too).  Per compiled region (the ``[compiled N:M]`` node of the module tree
that holds the operator the launch ran in) the replays are those whose
device events were launched there.  Pure numpy, no torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from tuiprof.analysis.calls import DeviceActivity, OperatorCalls
from tuiprof.analysis.compiled import is_region_node
from tuiprof.analysis.modules import ModuleTree
from tuiprof.trace.columns import DEVICE_KINDS, NONE
from tuiprof.trace.store import TraceEvents

GRAPH_LAUNCH_PREFIXES = ("cudaGraphLaunch", "hipGraphLaunch")


@dataclass(frozen=True)
class GraphReplays:
    """CUDA-graph replays and what they ran on the device."""

    replays: int
    kernels: int
    device_ns: int


@dataclass(frozen=True)
class CudaGraphs:
    total: GraphReplays  # every launch call in the trace
    by_region: dict[str, GraphReplays] = field(
        default_factory=dict
    )  # region node name ("[compiled 0:0]") -> its replays


def cuda_graph_replays(
    store: TraceEvents, calls: OperatorCalls, activity: DeviceActivity, tree: ModuleTree
) -> CudaGraphs | None:
    """The trace's CUDA-graph replays (module docstring); None when it has none."""
    cpu = store.cpu
    codes = calls.name_codes(lambda name: name.startswith(GRAPH_LAUNCH_PREFIXES))
    launches = np.flatnonzero(np.isin(cpu.name, np.array(codes, dtype=np.int64)))
    if not len(launches):
        return None
    correlations = cpu.correlation[launches]
    correlations = correlations[correlations != NONE]
    device = activity.events
    replayed = np.flatnonzero(np.isin(device.correlation, correlations)) if len(device) else np.empty(0, dtype=np.int64)
    total = _replays(len(launches), replayed, activity)
    return CudaGraphs(total=total, by_region=_by_region(replayed, activity, tree))


def _replays(count: int, events: np.ndarray, activity: DeviceActivity) -> GraphReplays:
    kernel = DEVICE_KINDS.index("kernel")
    return GraphReplays(
        replays=count,
        kernels=int((activity.events.kind[events] == kernel).sum()),
        device_ns=int(activity.dur_ns[events].sum()),
    )


def _by_region(events: np.ndarray, activity: DeviceActivity, tree: ModuleTree) -> dict[str, GraphReplays]:
    """Replayed device events grouped by the region node their launching operator counts in."""
    charged = tree.charged_node
    if not len(events) or not len(charged):
        return {}
    nodes = tree.frame_index()[1]
    launcher = activity.launchers[events]
    grouped: dict[str, list[int]] = {}
    for event, row in zip(events.tolist(), launcher.tolist()):
        node = nodes[int(charged[row])] if row >= 0 and charged[row] >= 0 else None
        while node is not None and not is_region_node(node):
            node = node.parent
        if node is not None:
            grouped.setdefault(node.name, []).append(event)
    return {
        region: _replays(len(set(activity.events.correlation[rows].tolist())), np.array(rows, dtype=np.int64), activity)
        for region, rows in grouped.items()
    }
