"""Column visibility is a field of each column (``Column.shown_when``), a fact of the trace
or the options, never a view's name or a key's spelling.  Each rule is checked on a pair
of traces built to differ in that one fact (tests/helpers/gpu_trace.py), the expected columns
typed from the rule's meaning."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.report.views import RUN_VIEWS, TRACE_VIEWS, Column, View, ViewOptions


def _model(
    tmp_path: Path,
    name: str,
    *,
    kernel: bool = False,
    memory_device: int | None = None,
    op: str = "aten::mm",
    module: bool = False,
):
    trace = GpuTrace()
    trace.step(1, 0.0, 100.0)
    if module:
        trace.module("Linear_0", 5.0, 50.0)
    external = trace.op(op, 10.0, 20.0)
    if kernel:
        trace.launch(external, "gemm_kernel", 12.0, 2.0, 30.0, 5.0)
    if memory_device is not None:
        trace.memory(15.0, 4096, 4096, device_type=memory_device)
    return load_model(trace.write(tmp_path / f"{name}.json"))


def _shown(view: str, model, options: ViewOptions | None = None) -> set[str]:
    return {c.key for c in TRACE_VIEWS[view].visible_columns(options or ViewOptions(), model)}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("rules")
    return {
        "cpu": _model(folder, "cpu", memory_device=0),  # CPU memory, no device activity
        "gpu": _model(folder, "gpu", kernel=True, memory_device=1),
        "cpu_ops_cuda_memory": _model(folder, "cuda_memory", memory_device=1),  # allocations, no kernel recorded
        "inductor": _model(folder, "inductor", op="triton_poi_fused_mul_silu_2"),
        "modules": _model(folder, "modules", module=True, memory_device=0),
    }


DEVICE_ACTIVITY_COLUMNS = {
    "operators": {"self_device_us", "device_total_us", "device_avg_us"},
    "modules": {"device_total_us"},
    "kernels": {"device_total_us"},
    "steps": {
        "device_window_us",
        "kernel_us",
        "device_idle_us",
        "idle_pct",
        "memcpy_us",
        "memset_us",
        "communication_us",
    },
}


def test_device_columns_show_when_the_trace_has_device_activity(models) -> None:
    for view, keys in DEVICE_ACTIVITY_COLUMNS.items():
        assert keys <= _shown(view, models["gpu"]), view
        assert not keys & _shown(view, models["cpu"]), view


def test_the_memory_tables_device_column_shows_on_cpu_traces(models) -> None:
    """It was hidden by a rule on keys holding "device": a CPU trace's memory table had no Device."""
    for name in ("cpu", "gpu"):
        assert "device" in _shown("memory", models[name])
        assert TRACE_VIEWS["memory"].build(models[name], ViewOptions())[0]["device"]


def test_no_rule_reads_a_key_a_column_without_a_rule_always_shows(models) -> None:
    view = View("probe", "Probe", (Column("device_name", "Device", "text", "a name"),), "", lambda m, o: [])
    assert [c.key for c in view.visible_columns(ViewOptions(), models["cpu"])] == ["device_name"]


def test_device_memory_columns_show_when_a_device_allocated(models) -> None:
    keys = {"device_mem_bytes", "self_device_mem_bytes"}
    assert not models["cpu_ops_cuda_memory"].has_device and not models["cpu"].has_device  # the premise
    assert keys <= _shown("operators", models["gpu"])
    assert keys <= _shown("operators", models["cpu_ops_cuda_memory"])  # CUDA allocations, no kernel recorded
    assert not keys & _shown("operators", models["cpu"])


def test_computes_shows_for_inductor_kernels_and_takes_the_launchers_place_at_80_columns(models) -> None:
    assert models["inductor"].has_inductor_kernels and not models["gpu"].has_inductor_kernels  # the premise
    for view in ("operators", "kernels"):
        assert "computes" in _shown(view, models["inductor"])
        assert "computes" not in _shown(view, models["cpu"])
    narrow = {c.key: c.narrow for c in TRACE_VIEWS["kernels"].visible_columns(ViewOptions(), models["inductor"])}
    assert narrow["computes"] and not narrow["launcher"]
    assert {c.key: c.narrow for c in TRACE_VIEWS["kernels"].visible_columns(ViewOptions(), models["gpu"])}["launcher"]


def test_input_shapes_show_when_grouped_by_shape_in_every_format(models) -> None:
    assert "input_shapes" in _shown("operators", models["cpu"], ViewOptions(group_by_shape=True))
    assert "input_shapes" not in _shown("operators", models["cpu"])
    assert "input_shapes" not in {c.key for c in TRACE_VIEWS["operators"].visible_columns(ViewOptions(), None)}


def test_module_at_peak_shows_when_the_trace_has_module_frames(models) -> None:
    assert "peak_module" in _shown("memory", models["modules"])
    assert "peak_module" not in _shown("memory", models["cpu"])


def _modules(backward_us: float = 0.0, qualified: str = "") -> SimpleNamespace:
    """A model as the module rules read it: its roots' backward time, its nodes' qualified names."""
    node = SimpleNamespace(backward_cpu_us=backward_us, qualified_name=qualified)
    return SimpleNamespace(modules=SimpleNamespace(roots=[node], walk=lambda: [node]), has_device=True)


def test_backward_columns_show_for_training_and_live_columns_for_live_captures() -> None:
    assert {"backward_cpu_us", "backward_device_us"} <= _shown("modules", _modules(backward_us=5.0))
    assert not {"backward_cpu_us", "backward_device_us"} & _shown("modules", _modules())
    live = {"qualified_name", "parameters", "output_shape"}
    assert live <= _shown("modules", _modules(qualified="layer1.0"))
    assert not live & _shown("modules", _modules())


def test_run_device_columns_and_data_only_columns() -> None:
    def run(device: bool, damage: object = None) -> SimpleNamespace:
        return SimpleNamespace(
            ranks=[SimpleNamespace(has_device=device, damage=None), SimpleNamespace(has_device=device, damage=damage)]
        )

    device = {"compute_us", "memcpy_us", "memset_us", "device_idle_us", "cpu_bound_us"}
    shown = {c.key for c in RUN_VIEWS["ranks"].visible_columns(ViewOptions(), run(True))}
    assert device <= shown and not {"file", "straggler_reason", "damage", "damaged"} & shown
    damaged = {c.key for c in RUN_VIEWS["ranks"].visible_columns(ViewOptions(), run(True, damage="truncated"))}
    assert "damaged" in damaged and "damage" not in damaged  # Damaged when one rank is; the long text in data formats
    assert not device & {c.key for c in RUN_VIEWS["ranks"].visible_columns(ViewOptions(), run(False))}
    assert "waits_us" not in {c.key for c in RUN_VIEWS["collectives"].visible_columns(ViewOptions(), run(True))}


def test_data_formats_keep_every_column_the_rows_hold() -> None:
    for view in (*TRACE_VIEWS.values(), *RUN_VIEWS.values()):
        kept = {c.key for c in view.visible_columns(ViewOptions(group_by_shape=True), None)}
        assert kept == {c.key for c in view.columns}, view.name


def test_memory_category_columns_show_when_torch_categorised_the_memory() -> None:
    """The memory-* tables (h/memcat, merged): a category's column or cell needs torch's categories,
    which only a tuiprof capture saves; the what-ifs' arithmetic is a sentence, data formats only."""
    categories = (
        "activation",
        "parameter",
        "gradient",
        "optimizer_state",
        "input",
        "temporary",
        "autograd_detail",
        "unknown",
    )
    by_category = {f"{name}_bytes" for name in categories}
    frames = SimpleNamespace(by_frame={0: object()})  # with_stack: Python frames, so stacks
    categorised = SimpleNamespace(memory_categories=object(), modules=frames)
    allocator_only = SimpleNamespace(memory_categories=None, modules=SimpleNamespace(by_frame={}))
    assert by_category <= _shown("memory-modules", categorised)
    assert not by_category & _shown("memory-modules", allocator_only)
    assert "category" in _shown("memory-allocations", categorised)
    assert "category" not in _shown("memory-allocations", allocator_only)
    assert "code" in _shown("memory-allocations", categorised)  # the deepest user frame: with_stack traces
    assert "code" not in _shown("memory-allocations", allocator_only)
    assert "stack" not in _shown("memory-allocations", categorised)  # the whole stack: data formats and the detail
    assert "how" not in _shown("memory-what-ifs", categorised)
    assert "how" in {c.key for c in TRACE_VIEWS["memory-what-ifs"].visible_columns(ViewOptions(), None)}
