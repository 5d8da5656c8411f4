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
