"""The GPU path of compiled runs, on synthetic traces whose answers are known by
construction (tests/helpers/gpu_trace.py; docs/compiled.md, "GPU path"):

- Triton kernels launched by driver calls inside a ``## Call CompiledFxGraph ##``
  call, placed in modules by the capture's map (tuiprofLive.compiled, written as
  the capture writes it), keyed per graph;
- CUDA-graph replays (``cudaGraphLaunch``) and the kernels inside them, counted.
"""

from __future__ import annotations

from tests.conftest import SHARED_TRACES, needs_shared
from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model

US = 1000  # ns

# The map, as the capture writes it (tuiprof/trace/compiled_map.py, version 1):
# modules [path, class]; graphs with kernels [event, kernel, module indices, node counts].
MODULES = [["block", "Block"], ["block.fc", "Linear"], ["block.act", "ReLU"], ["head", "Linear"]]
BLOCK, FC, ACT, HEAD = range(4)
COMPILED_MAP = {
    "version": 1,
    "root": "",
    "modules": MODULES,
    "graphs": [
        {
            "region": "0/0",
            "backward": False,
            "kernels": [
                ["triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0", [FC], [2]],
                ["aten::mm", "extern_kernels.mm", [HEAD], [1]],
                ["triton_poi_fused_relu_1", "triton_poi_fused_relu_1", [FC, ACT], [1, 1]],  # fused: -> block
                ["triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0", [HEAD], [2]],  # same kernel, called again
            ],
        },
        {
            "region": "0/0",
            "backward": True,
            "kernels": [
                ["triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0", [FC], [3]],
            ],
        },
        {
            "region": "1/0",
            "backward": False,
            "kernels": [  # the same kernel name in another graph
                ["triton_poi_fused_add_mul_0", "triton_poi_fused_add_mul_0", [ACT], [1]],
            ],
        },
    ],
}


def compiled_gpu_trace(with_map: bool = True) -> GpuTrace:
    """Two compiled regions run on a GPU; device times (us) chosen so each module's is known.

    Region 0/0, forward graph call (driver launches on the graph call, as the Triton
    launcher does with no record function):
      triton_poi_fused_add_mul_0  40  -> block.fc
      aten::mm -> gemm           100  -> head (an extern kernel: its operator)
      triton_poi_fused_relu_1     10  -> block (fused fc + act; launched under a
                                         record function of its name, as torch 2.14 does)
      triton_poi_fused_add_mul_0  20  -> head (the second call of the same kernel)
      triton_red_fused_sum_2       5  -> (compiled, unattributed): not in the map
    Region 0/0, backward graph call: triton_poi_fused_add_mul_0 30 -> block.fc (backward).
    Region 1/0, forward graph call: triton_poi_fused_add_mul_0 7 -> block.act.
    """
    trace = GpuTrace()
    trace.step(1, 0, 2000)
    trace.op("Torch-Compiled Region: 0/0", 10, 490)
    trace.op("CompiledFunction", 20, 460, **{"Sequence number": 3})
    graph = trace.op("## Call CompiledFxGraph aaaaaaaaaaaa ##", 30, 440)
    driver = {"runtime": "cuLaunchKernel", "runtime_category": "cuda_driver"}
    trace.launch(graph, "triton_poi_fused_add_mul_0", 40, 5, 100, 40, **driver)
    mm = trace.op("aten::mm", 50, 30)
    trace.launch(mm, "gemm_kernel", 55, 5, 140, 100)
    relu = trace.op("triton_poi_fused_relu_1", 90, 10)
    trace.launch(relu, "triton_poi_fused_relu_1", 92, 5, 240, 10, **driver)
    trace.launch(graph, "triton_poi_fused_add_mul_0", 110, 5, 250, 20, **driver)
    trace.launch(graph, "triton_red_fused_sum_2", 120, 5, 270, 5, **driver)
    trace.op("Torch-Compiled Region: 1/0", 520, 60)
    other = trace.op("## Call CompiledFxGraph bbbbbbbbbbbb ##", 530, 40)
    trace.launch(other, "triton_poi_fused_add_mul_0", 540, 5, 600, 7, **driver)
    # autograd runs each backward node under an evaluate_function span (the only backward work there is)
    trace.op("autograd::engine::evaluate_function: CompiledFunctionBackward", 695, 310, tid=9, **{"Sequence number": 3})
    trace.op("CompiledFunctionBackward", 700, 300, tid=9, **{"Sequence number": 3})
    backward = trace.op("## Call CompiledFxGraph cccccccccccc ##", 710, 280, tid=9)
    trace.launch(backward, "triton_poi_fused_add_mul_0", 720, 5, 800, 30, tid=9, **driver)
    if with_map:
        trace.members["tuiprofLive"] = {"version": 1, "compiled": COMPILED_MAP}
    return trace


def _below(model, region: str) -> dict:
    """Qualified name -> node, of the modules placed below the region node ``region``."""
    top = next(n for n in model.modules.walk() if n.name == region)
    found, stack = {}, list(top.children)
    while stack:
        node = stack.pop()
        found[node.qualified_name or node.name] = node
        stack += node.children
    return found


def test_triton_kernels_launched_in_a_graph_call_go_to_their_modules(tmp_path) -> None:
    model = load_model(compiled_gpu_trace().write(tmp_path / "compiled-gpu.json"))
    nodes = _below(model, "[compiled 0:0]")
    assert (nodes["block.fc"].self_device_us, nodes["block.fc"].backward_device_us) == (40, 30)
    assert nodes["head"].self_device_us == 100 + 20  # the extern mm and the second add_mul call
    assert nodes["block"].self_device_us == 10  # the fused fc + act kernel: their deepest common module
    assert nodes["block"].device_total_us == 10 + 40
    # region 1/0's kernel of the same name is its own graph's: block.act there, not block.fc
    region_1 = _below(model, "[compiled 1:0]")
    assert region_1["block.act"].self_device_us == 7 and region_1["block.act"].backward_device_us == 0
    assert "block.fc" not in region_1
    unattributed = nodes["(compiled, unattributed)"]
    assert (unattributed.device_total_us, unattributed.backward_device_us) == (5, 0)  # the kernel the map does not name
    compiled = model.compiled
    assert compiled.on_device
    assert compiled.graph_ns == [(175 + 7) * US, 30 * US]
    assert compiled.below_root_ns == [(170 + 7) * US, 30 * US]
    assert compiled.kernels_missing == 0


def test_a_compiled_gpu_trace_without_a_map_keeps_its_kernels_unattributed(tmp_path) -> None:
    model = load_model(compiled_gpu_trace(with_map=False).write(tmp_path / "no-map.json"))
    assert not [n for n in model.modules.walk() if n.qualified_name]
    region = next(n for n in model.modules.walk() if n.name == "[compiled 0:0]")
    assert region.device_total_us == 175


def reduce_overhead_trace() -> GpuTrace:
    """``reduce-overhead``: the graph calls replay CUDA graphs (times in us).

    Step 1 and step 2 each run region 0/0's forward graph call, which replays one
    CUDA graph of 3 kernels (10 + 20 + 30 us) and a memset (4 us); step 1's backward
    replays a graph of 2 kernels (5 + 6 us).  A plain kernel launched outside any
    graph (100 us) is no replay.  Totals: 3 replays, 8 kernels,
    2 x 64 + 11 = 139 us of device time.
    """
    trace = GpuTrace()
    for number, base in ((1, 0), (2, 1000)):
        trace.step(number, base, 1000)
        trace.op("Torch-Compiled Region: 0/0", base + 10, 200)
        trace.op("CompiledFunction", base + 20, 180, **{"Sequence number": 3 + number})
        graph = trace.op("## Call CompiledFxGraph aaaaaaaaaaaa ##", base + 30, 160)
        trace.graph_launch(
            graph,
            base + 40,
            20,
            [
                ("triton_poi_fused_add_mul_0", base + 100, 10),
                ("gemm_kernel", base + 110, 20),
                ("triton_poi_fused_relu_1", base + 130, 30),
            ],
        )
        replayed = trace.events[-1]  # a memset of the same replay: its correlation
        trace.events.append({**replayed, "cat": "gpu_memset", "name": "Memset (Device)", "ts": base + 160, "dur": 4})
    trace.op("autograd::engine::evaluate_function: CompiledFunctionBackward", 295, 210, tid=9, **{"Sequence number": 4})
    trace.op("CompiledFunctionBackward", 300, 200, tid=9, **{"Sequence number": 4})
    backward = trace.op("## Call CompiledFxGraph cccccccccccc ##", 310, 180, tid=9)
    trace.graph_launch(
        backward, 320, 10, [("triton_poi_fused_mul_2", 400, 5), ("triton_red_fused_sum_3", 405, 6)], tid=9
    )
    eager = trace.op("aten::add", 600, 50)
    trace.launch(eager, "elementwise_add", 610, 5, 700, 100)
    return trace


def test_cuda_graph_replays_and_their_kernels_are_counted(tmp_path) -> None:
    from tuiprof.report.compiled_summary import compiled_lines, region_lines

    model = load_model(reduce_overhead_trace().write(tmp_path / "reduce-overhead.json"))
    graphs = model.compiled_run.cuda_graphs
    assert (graphs.total.replays, graphs.total.kernels, graphs.total.device_ns) == (3, 8, 139 * US)
    region = graphs.by_region["[compiled 0:0]"]
    assert (region.replays, region.kernels, region.device_ns) == (3, 8, 139 * US)
    assert "CUDA graphs: 3 replays, 8 kernels, 139.000us of device time" in compiled_lines(model)
    assert "CUDA graphs: 3 replays, 8 kernels, 139.000us of device time" in region_lines(
        model.compiled_run, "[compiled 0:0]"
    )


def test_a_compiled_trace_without_cuda_graphs_says_nothing_of_them(tmp_path) -> None:
    from tuiprof.report.compiled_summary import compiled_lines

    model = load_model(compiled_gpu_trace().write(tmp_path / "compiled-gpu.json"))
    assert model.compiled_run.cuda_graphs is None
    assert not [line for line in compiled_lines(model) if "CUDA graph" in line]


def test_kernels_replayed_in_a_cuda_graph_go_to_their_modules(tmp_path) -> None:
    """A replay's kernels carry the graph launch's correlation, so they count in the graph
    call the launch ran in and are matched to the map like any launched kernel."""
    trace = reduce_overhead_trace()
    trace.members["tuiprofLive"] = {"version": 1, "compiled": COMPILED_MAP}
    model = load_model(trace.write(tmp_path / "reduce-overhead-mapped.json"))
    nodes = _below(model, "[compiled 0:0]")
    assert nodes["block.fc"].self_device_us == 2 * 10  # triton_poi_fused_add_mul_0, one per step
    assert nodes["block"].self_device_us == 2 * 30  # triton_poi_fused_relu_1: fc + act fused
    unattributed = nodes["(compiled, unattributed)"]
    assert unattributed.device_total_us == 2 * (20 + 4)  # gemm_kernel and the memset: no map kernel names them
    assert unattributed.backward_device_us == 5 + 6  # the backward graph's kernels are not in its map


@needs_shared
def test_the_shared_rocm_compiled_trace_without_a_map_is_unchanged() -> None:
    """No map and no graph launch: one region node holding every kernel, as before
    (its totals are checked against the raw events in test_compiled.py)."""
    model = load_model(SHARED_TRACES / "tracelens__torch_compile_triton__trace.json.gz")
    assert [(n.name, n.children) for n in model.modules.roots] == [("[compiled 0:0]", [])]
    assert model.compiled is None and model.compiled_run.cuda_graphs is None
