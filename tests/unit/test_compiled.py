"""Compiled models without a mapping: regions in the module tree, fused kernel names decoded.

Traces: tests/data/compiled_mlp_cpu.json.gz (scripts/make_compiled_trace.py: an eager Net
calling a torch.compile'd Body with a graph break, trained one step on CPU, with_stack) and
the shared ROCm one (a compiled model profiled without stacks).  Every expected number is
recomputed here from the raw JSON in plain Python: event spans, time containment and ids,
never tuiprof's engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, needs_shared
from tests.helpers.compiled import COMPILED_CPU, REGION, complete_events, encloses
from tuiprof import cli
from tuiprof.analysis import load_model

COMPILED_ROCM = SHARED_TRACES / "tracelens__torch_compile_triton__trace.json.gz"
US = 1e-3  # tolerance: tuiprof sums exact nanoseconds, the oracle sums floats


def _expected_path(events: list[dict], region: dict) -> str:
    """The region's tree path by the rule in analysis/compiled.py: every module frame and
    region span enclosing it, outermost first (by time containment on its thread)."""
    enclosing = [
        e
        for e in events
        if (e["name"].startswith("nn.Module: ") or e["name"].startswith(REGION)) and encloses(e, region)
    ]
    names = [
        e["name"].removeprefix("nn.Module: ")
        if e["name"].startswith("nn.Module: ")
        else "[compiled " + e["name"].removeprefix(REGION).replace("/", ":") + "]"
        for e in sorted(enclosing, key=lambda e: (e["ts"], -e["dur"])) + [region]
    ]
    return "/".join(names)


def _device_us_inside(events: list[dict], region: dict) -> float:
    """Device time of the kernels that CPU events inside the region span launched (External id)."""
    ids = {
        e["args"]["External id"]
        for e in events
        if e.get("cat") in ("cpu_op", "user_annotation")
        and (e is region or encloses(region, e))
        and "External id" in e.get("args", {})
    }
    return sum(
        e["dur"]
        for e in events
        if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and e.get("args", {}).get("External id") in ids
    )


def _nodes(model) -> dict[str, object]:
    return {node.path: node for node in model.modules.walk()}


# ------------------------------------------------------------------ regions in the module tree


def test_cpu_regions_sit_under_the_eager_modules_that_called_them():
    events = complete_events(COMPILED_CPU)
    regions = [e for e in events if e["name"].startswith(REGION)]
    assert len(regions) == 3  # frames 0, 1 (the graph break in Body.b) and 2 (resumed after it)
    nodes = _nodes(load_model(COMPILED_CPU))
    for region in regions:
        path = _expected_path(events, region)
        assert path in nodes, (path, sorted(nodes))
        assert nodes[path].calls == 1
        assert nodes[path].cpu_total_us == pytest.approx(region["dur"], abs=US)
    # The eager block that ran inside region 0 (at the graph break) moved under it.
    assert "Net_0/OptimizedModule_0/Body_0/[compiled 0:0]/Block_0" in nodes
    assert "Net_0/OptimizedModule_0/Body_0/Block_0" not in nodes


def test_cpu_region_backward_time_comes_through_compiled_function_sequence_numbers():
    events = complete_events(COMPILED_CPU)
    outer = next(e for e in events if e["name"] == REGION + "0/0")
    forward = {e["args"]["Sequence number"] for e in events if e["name"] == "CompiledFunction" and encloses(outer, e)}
    assert len(forward) == 3  # one per compiled frame, all inside region 0 (its child regions)
    backward_us = sum(
        e["dur"]
        for e in events
        if e["name"] == "autograd::engine::evaluate_function: CompiledFunctionBackward"
        and e["args"]["Sequence number"] in forward
    )
    node = _nodes(load_model(COMPILED_CPU))[_expected_path(events, outer)]
    assert node.backward_cpu_us == pytest.approx(backward_us, abs=US)


def test_cpu_module_self_times_stay_positive_with_regions_inside():
    events = complete_events(COMPILED_CPU)
    body = next(e for e in events if e["name"] == "nn.Module: Body_0")
    outer = next(e for e in events if e["name"] == REGION + "0/0")
    nodes = _nodes(load_model(COMPILED_CPU))
    assert nodes["Net_0/OptimizedModule_0/Body_0"].self_cpu_us == pytest.approx(body["dur"] - outer["dur"], abs=US)
    assert all(node.self_cpu_us >= 0 for node in nodes.values())


@needs_shared
def test_rocm_region_holds_its_cpu_and_device_time():
    events = complete_events(COMPILED_ROCM)
    region = next(e for e in events if e["name"].startswith(REGION))
    model = load_model(COMPILED_ROCM)
    assert [root.path for root in model.modules.roots] == ["[compiled 0:0]"]  # no stacks: at the top
    node = model.modules.roots[0]
    assert node.cpu_total_us == pytest.approx(region["dur"], abs=US)
    device_us = _device_us_inside(events, region)
    assert device_us > 0
    assert node.device_total_us == pytest.approx(device_us, abs=US)
    all_device_us = sum(e["dur"] for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
    assert device_us == pytest.approx(all_device_us)  # every kernel of this trace ran inside the region


@needs_shared
def test_rocm_modules_summary_is_not_empty(capsys):
    assert cli.main(["summary", str(COMPILED_ROCM), "--view", "modules", "--format", "csv"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[1].startswith("[compiled 0:0],")
    assert "empty" not in err


def test_cpu_modules_summary_lists_regions(capsys):
    assert cli.main(["summary", str(COMPILED_CPU), "--view", "modules", "--format", "csv"]) == 0
    paths = [line.split(",")[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert "Net_0/OptimizedModule_0/Body_0/[compiled 0:0]" in paths


# ------------------------------------------------------------------ fused kernel names

# Written by hand from the names (Inductor: "triton", category[:3], "fused", sorted aten ops, suffix).
ROCM_NAMES = {
    "triton_poi_fused__unsafe_view_mul_silu_2": "pointwise: _unsafe_view, mul, silu",
    "triton_red_fused_add_mean_mul_pow_rsqrt_0": "reduction: add, mean, mul, pow, rsqrt",
    "triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1": "reduction: _unsafe_view, add, mean, mul, pow, rsqrt",
    "triton_poi_fused__unsafe_view_add_3": "pointwise: _unsafe_view, add",
}
CPU_NAMES = {
    "graph_0_cpp_fused_native_layer_norm_0": "C++ (CPU): native_layer_norm",
    "graph_0_cpp_fused_add_silu_1": "C++ (CPU): add, silu",
    "graph_1_cpp_fused_native_layer_norm_0": "C++ (CPU): native_layer_norm",
    "graph_2_cpp_fused_add_silu_0": "C++ (CPU): add, silu",
    "graph_2_cpp_fused_silu_backward_0": "C++ (CPU): silu_backward",
    "graph_1_cpp_fused_sum_0": "C++ (CPU): sum",
    "graph_1_cpp_fused_native_layer_norm_native_layer_norm_backward_1": "C++ (CPU): native_layer_norm, native_layer_norm_backward",
    "graph_0_cpp_fused_silu_backward_0": "C++ (CPU): silu_backward",
    "graph_0_cpp_fused_add_native_layer_norm_native_layer_norm_backward_sum_1": (
        "C++ (CPU): add, native_layer_norm, native_layer_norm_backward, sum"
    ),
}


def _inductor_names(path: Path) -> set[str]:
    return {e["name"] for e in complete_events(path) if e["name"].startswith(("triton_", "cpp_", "graph_"))}


def test_cpu_trace_kernel_names_decode():
    from tuiprof.analysis.compiled import describe_kernel

    assert _inductor_names(COMPILED_CPU) == set(CPU_NAMES)
    assert {name: describe_kernel(name) for name in CPU_NAMES} == CPU_NAMES


@needs_shared
def test_rocm_trace_kernel_names_decode():
    from tuiprof.analysis.compiled import describe_kernel

    assert _inductor_names(COMPILED_ROCM) == set(ROCM_NAMES)
    assert {name: describe_kernel(name) for name in ROCM_NAMES} == ROCM_NAMES


@pytest.mark.parametrize(
    ("name", "computes"),
    [
        (
            "triton_per_fused_convolution_backward_native_batch_norm_backward_3",
            "persistent reduction: convolution_backward, native_batch_norm_backward",
        ),
        ("triton_tem_fused_addmm_relu_0", "template: addmm, relu"),
        ("cpp_fused_add_mean_0", "C++ (CPU): add, mean"),
        ("cpp_fused_clamp_min_0", "C++ (CPU): clamp_min"),  # the listed name wins over clamp + min
        ("triton_poi__0", "pointwise"),  # descriptive names off
        ("triton_", ""),
        ("aten::mm", ""),
        ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x192x64_MI16x16x1_SN", ""),
    ],
)
def test_decoder_rules(name, computes):
    from tuiprof.analysis.compiled import describe_kernel

    assert describe_kernel(name) == computes


def test_kernel_and_operator_rows_and_details_say_what_kernels_compute():
    from tuiprof.report.details import operator_text
    from tuiprof.report.views import TRACE_VIEWS, ViewOptions

    model = load_model(COMPILED_CPU)
    view = TRACE_VIEWS["operators"]
    assert "computes" in {c.key for c in view.visible_columns(ViewOptions(), model)}
    rows = {row["name"]: row for row in view.build(model, ViewOptions())}
    assert rows["graph_0_cpp_fused_add_silu_1"]["computes"] == "C++ (CPU): add, silu"
    assert rows["aten::mm"]["computes"] == ""
    text = operator_text(model, rows["graph_0_cpp_fused_add_silu_1"].item).plain
    assert "computes: C++ (CPU): add, silu" in text


def test_eager_trace_tables_show_no_computes_column(resnet_model):
    from tuiprof.report.views import TRACE_VIEWS, ViewOptions

    for name in ("operators", "kernels"):
        assert "computes" not in {c.key for c in TRACE_VIEWS[name].visible_columns(ViewOptions(), resnet_model)}


@needs_shared
def test_rocm_kernel_table_says_what_kernels_compute_at_80_columns():
    from tuiprof.report.details import kernel_text
    from tuiprof.report.views import TRACE_VIEWS, ViewOptions

    model = load_model(COMPILED_ROCM)
    view = TRACE_VIEWS["kernels"]
    narrow = {c.key for c in view.visible_columns(ViewOptions(), model) if c.narrow}
    assert "computes" in narrow and "launcher" not in narrow  # the launcher repeats a Triton kernel's name
    rows = {row["name"]: row for row in view.build(model, ViewOptions())}
    assert {name: rows[name]["computes"] for name in ROCM_NAMES} == ROCM_NAMES
    silu = rows["triton_poi_fused__unsafe_view_mul_silu_2"].item
    assert "computes: pointwise: _unsafe_view, mul, silu" in kernel_text(silu).plain


def test_region_spans_without_dynamo_become_nodes_by_the_documented_names(tmp_path):
    """A synthetic trace whose answer is known by construction (times in us)."""
    from tests.helpers.gpu_trace import GpuTrace

    trace = GpuTrace()
    # AOTAutograd's function holding one graph call, which runs one Triton kernel (40 us on the device).
    trace.op("CompiledFunction", 0, 100, **{"Sequence number": 7})
    trace.op("## Call CompiledFxGraph abcdefghijkl ##", 10, 80)
    kernel = trace.op("triton_poi_fused_add_0", 20, 10)
    trace.launch(kernel, "triton_poi_fused_add_0", 22, 2, 40, 40)
    # A graph call alone (5 us on the device).
    graph = trace.op("## Call CompiledFxGraph zyxwvutsrqpo ##", 200, 50)
    trace.launch(graph, "triton_red_fused_sum_1", 210, 2, 260, 5)
    # The backward of the function above (autograd thread), and one whose forward is not in the trace.
    trace.op("autograd::engine::evaluate_function: CompiledFunctionBackward", 300, 80, tid=9, **{"Sequence number": 7})
    backward = trace.op("CompiledFunctionBackward", 310, 60, tid=9, **{"Sequence number": 7})
    trace.launch(backward, "triton_poi_fused_mul_2", 320, 2, 330, 3, tid=9)
    trace.op("CompiledFunctionBackward", 400, 50, tid=9, **{"Sequence number": 99})
    model = load_model(trace.write(tmp_path / "regions.json"))

    nodes = _nodes(model)
    assert set(nodes) == {"[compiled function]", "[graph zyxwvuts]", "[compiled backward]"}
    function = nodes["[compiled function]"]
    assert (function.cpu_total_us, function.device_total_us) == (100, 40)
    assert (function.backward_cpu_us, function.backward_device_us) == (80, 3)
    assert (nodes["[graph zyxwvuts]"].cpu_total_us, nodes["[graph zyxwvuts]"].device_total_us) == (50, 5)
    assert nodes["[compiled backward]"].cpu_total_us == 50


def test_overview_top_modules_never_list_a_module_and_its_descendant_as_peers():
    """The compiled MLP: the region [compiled 2:0] runs inside [compiled 1:0] (the trace's
    spans nest), so the Overview lists it under that row, indented and named from there,
    never as a second row whose share would seem to add to its parent's."""
    from rich.console import Console

    from tuiprof.report.overview import _modules_table

    events = complete_events(COMPILED_CPU)
    regions = {
        e["name"]: e for e in events if e.get("ph") == "X" and e["name"].startswith("Torch-Compiled Region: 2/0")
    }
    outer = [e for e in events if e.get("ph") == "X" and e["name"].startswith("Torch-Compiled Region: 1/0")]
    assert (
        regions and outer and all(any(encloses(o, r) for o in outer) for r in regions.values())
    )  # nested, in the file

    console = Console(width=100, record=True)
    console.print(_modules_table(load_model(str(COMPILED_CPU))))
    lines = console.export_text().splitlines()[2:]
    assert lines[0].startswith("Block_0/[compiled 1:0]")
    assert lines[1].startswith("└ [compiled 2:0] ")
