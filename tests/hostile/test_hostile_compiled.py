"""Damaged compiled-kernel maps (``tuiprofLive.compiled``) found by ``scripts/fuzz.py --surface compiled``;
the answers are worked out by hand on synthetic traces (no torch, no compile)."""

from __future__ import annotations

from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model

DEPTH = 1500  # deeper than Python's recursion limit (1,000)
KERNEL_US = 100


def nested_map_trace() -> GpuTrace:
    """One graph call running one kernel, whose map puts it in the deepest of ``DEPTH`` nested
    modules (``m``, ``m.m``, ``m.m.m``... each listed, so each is a node)."""
    trace = GpuTrace()
    trace.step(1, 0, 1000)
    trace.op("Torch-Compiled Region: 0/0", 10, 490)
    trace.op("CompiledFunction", 20, 460, **{"Sequence number": 3})
    trace.op("## Call CompiledFxGraph aaaaaaaaaaaa ##", 30, 440)
    trace.op("graph_0_cpp_fused_0", 40, KERNEL_US)
    modules = [[".".join(["m"] * depth), "Nest"] for depth in range(1, DEPTH + 1)]
    kernel = ["graph_0_cpp_fused_0", "cpp_fused_0", [DEPTH - 1], [1]]
    graphs = [{"region": "0/0", "backward": False, "kernels": [kernel]}]
    trace.members["tuiprofLive"] = {"version": 1, "compiled": {"version": 1, "modules": modules, "graphs": graphs}}
    return trace


def test_modules_nested_past_the_recursion_limit_are_placed(tmp_path) -> None:
    """A map whose kernel is in a module 1,500 deep: RecursionError (exit 1 in every summary
    view and diff) while the nodes were made; now each module is a node and the kernel's time
    is the deepest one's own."""
    model = load_model(nested_map_trace().write(tmp_path / "nested.json"))
    deepest = next(n for n in model.modules.walk() if (n.qualified_name or "").count("m") == DEPTH)
    assert deepest.self_cpu_us == KERNEL_US
    chain = []
    node = deepest
    while node is not None and node.qualified_name:
        chain.append(node.qualified_name)
        node = node.parent
    assert chain == [".".join(["m"] * depth) for depth in range(DEPTH, 0, -1)]
    assert model.report.problems == []
