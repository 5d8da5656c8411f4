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


def test_modules_nested_past_the_recursion_limit_are_placed_down_to_the_cut(tmp_path) -> None:
    """A map whose kernel is in a module 1,500 deep: RecursionError (exit 1 in every summary
    view and diff) while the nodes were made.  Now each module down to MAX_MODULE_DEPTH is a
    node, deeper ones count in the module at the cut (as eager module frames do, so that the
    explorer's tree can draw every level), with a note."""
    from tuiprof.analysis.modules import MAX_MODULE_DEPTH

    model = load_model(nested_map_trace().write(tmp_path / "nested.json"))
    deepest = max(model.modules.walk(), key=lambda n: n.depth)
    assert deepest.depth == MAX_MODULE_DEPTH and deepest.self_cpu_us == KERNEL_US
    chain = []
    node = deepest
    while node is not None and node.qualified_name:
        chain.append(node.qualified_name)
        node = node.parent
    assert chain == [".".join(["m"] * depth) for depth in range(len(chain), 0, -1)]
    assert MAX_MODULE_DEPTH - 5 < len(chain) <= MAX_MODULE_DEPTH
    assert [p for p in model.report.problems if "deeper than" in p] == [
        f"compiled-kernel map: modules deeper than {MAX_MODULE_DEPTH:,} levels count in the module at the cut"
    ]


async def test_the_explorer_draws_the_module_tree_expanded_down_to_the_cut(tmp_path) -> None:
    """Textual's Tree draws its lines by recursion: expanded level by level past about 980
    levels it raised RecursionError in the explorer.  Every level down to the cut draws."""
    from tests.helpers.tui import loaded
    from tuiprof.analysis.modules import MAX_MODULE_DEPTH
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.sources import FileSource
    from tuiprof.tui.widgets.module_tree import ModuleTreeView

    app = ExplorerApp(FileSource(str(nested_map_trace().write(tmp_path / "nested.json"))))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        tree = app.query_one("#module-tree", ModuleTreeView)
        node = tree.root
        while node.data is None or node.data.children:
            if not node.children:  # what expanding adds, without a redraw per level (75 s)
                for child in node.data.children:
                    tree._add(node, child)
            node.expand()
            node = max(node.children, key=lambda child: child.data.depth if child.data else -1)
        tree.select_node(node)  # scrolled to: its lines are built and drawn
        await pilot.pause()
        assert node.data.depth == MAX_MODULE_DEPTH and app.is_running
        assert app.return_code is None
