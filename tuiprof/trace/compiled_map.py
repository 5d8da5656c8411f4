"""Which module owns each kernel of a compiled (Inductor) graph, as a capture saw it.

A capture that compiles the model (``tuiprof live --compile``, or a script
that calls ``torch.compile`` under ``tuiprof run``) records, while Inductor
generates code, every kernel a compiled graph calls and the modules of the
FX nodes it computes (:mod:`tuiprof.capture.compiled`).  The record is
plain data, saved in the trace's ``tuiprofLive`` member, so ``open`` and
``summary`` rebuild the same module tree later without torch
(:mod:`tuiprof.analysis.compiled_map`).  docs/compiled.md says where the
data come from and how time is attributed.

Compact on purpose: module paths are stored once (``modules``) and kernels
refer to them by index.

A kernel's ``bytes`` and ``flops`` (the work of each module's nodes) came
after version 1's first form, as optional trailing members: a map without them
reads as before (split by nodes), and a reader without them ignores them.  Read
from a file, the map is checked (:func:`map_damage`) before it is used.
"""

from __future__ import annotations

import msgspec

COMPILED_MAP_VERSION = 1


class CompiledModule(msgspec.Struct, array_like=True):
    """A module a compiled graph's nodes came from."""

    path: str  # qualified name relative to the compiled root ("layer1.0.conv1"; "" is the root itself)
    class_name: str  # "Conv2d"


class CompiledKernel(msgspec.Struct, array_like=True):
    """One kernel call of a graph, in the order the graph's code calls them."""

    event: str  # the profiler event that times it: "graph_0_cpp_fused_relu_1", "aten::mm"
    kernel: str  # Inductor's name for it: "cpp_fused_relu_1", "extern_kernels.mm"
    modules: list[int]  # indices into CompiledMap.modules of the modules its nodes belong to
    nodes: list[int]  # how many of its FX nodes each of those modules holds (parallel to modules)
    bytes: list[int] = []  # per module: bytes its nodes read and write ([]: not measured)
    flops: list[int] = []  # per module: FLOPs of its nodes that run here (conv, mm: torch's formulas)


class CompiledGraph(msgspec.Struct):
    """One graph Inductor compiled: the forward or the backward of one compiled region."""

    region: str  # Dynamo's compile id, as in the trace's "Torch-Compiled Region: 0/0"
    backward: bool
    kernels: list[CompiledKernel] = []


class CompiledMap(msgspec.Struct):
    version: int = COMPILED_MAP_VERSION
    root: str = ""  # qualified name of the module the compiled regions belong to ("" when unknown)
    modules: list[CompiledModule] = []
    graphs: list[CompiledGraph] = []
    cost_s: float = 0.0  # time the capture spent taking the map (during compilation, outside the profiled steps)
    unread: int = 0  # kernels the capture could not read (left out of the map; their time is unattributed)


LIMIT = 2**63  # no capture writes a count or size this large; below it, sums of them stay exact enough as floats


def map_damage(cmap: CompiledMap) -> str:
    """What makes a saved map unusable, '' when nothing: every kernel's module indices
    point into ``modules``, its per-module lists are as long as ``modules``, node counts
    are at least 1, sizes 0 or more (all below :data:`LIMIT`), and bytes and FLOPs come together."""
    count = len(cmap.modules)
    for g, graph in enumerate(cmap.graphs):
        for k, kernel in enumerate(graph.kernels):
            width = len(kernel.modules)
            where = f"graph {g}, kernel {k}"
            if any(not 0 <= index < count for index in kernel.modules):
                return f"{where}: a module index outside 0..{count - 1}"
            if (
                len(kernel.nodes) != width
                or len(kernel.bytes) != len(kernel.flops)
                or len(kernel.bytes) not in (0, width)
            ):
                return f"{where}: per-module lists of different lengths"
            if any(not 1 <= nodes < LIMIT for nodes in kernel.nodes):
                return f"{where}: a node count outside 1..2^63"
            if any(not 0 <= value < LIMIT for value in (*kernel.bytes, *kernel.flops)):
                return f"{where}: a size outside 0..2^63"
    return ""
