"""Each Overview finding on and off, at its threshold (report/findings.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tuiprof.report import findings as F


def _op(name: str, self_cpu_us: float, calls: int = 1):
    return SimpleNamespace(name=name, self_cpu_us=self_cpu_us, calls=calls)


def _model(**overrides):
    """The fields the rules read, with values that trigger nothing."""
    base = dict(
        steps=[], kernels=[], total_self_cpu_us=1000.0, total_flops=0, flops_source="",
        modules=SimpleNamespace(roots=[], walk=lambda: iter(())), calls=[1], peak_memory=None,
        info=SimpleNamespace(with_stack=True, record_shapes=True, profile_memory=True),
        report=SimpleNamespace(skipped=0, repaired=0, damaged=0), flops_damaged=0, external_ids_ignored=False,
        step_flops=0, step_flops_per_s=None, step_time_us=0.0,
    )
    ops = overrides.pop("ops", [_op("aten::mm", 100.0)])
    base.update(overrides)
    model = SimpleNamespace(**base)
    model.operators = lambda: ops
    return model


def _step(duration=1000.0, loading=0.0, window=0.0, idle=0.0):
    return SimpleNamespace(duration_us=duration, data_loading_us=loading, device_window_us=window, device_idle_us=idle)


@pytest.mark.parametrize(("loading", "fires"), [(49.0, False), (50.0, True)])
def test_data_loading(loading, fires) -> None:
    assert (F.data_loading(_model(steps=[_step(loading=loading)])) is not None) is fires


@pytest.mark.parametrize(("idle", "fires"), [(99.0, False), (100.0, True)])
def test_gpu_idle(idle, fires) -> None:
    finding = F.gpu_idle(_model(steps=[_step(window=1000.0, idle=idle)]))
    assert (finding is not None) is fires
    if fires:
        assert finding.id == "gpu-idle" and "10 %" in finding.text
    assert F.gpu_idle(_model(steps=[_step()])) is None  # CPU-only steps: nothing to say


def test_no_steps() -> None:
    assert F.no_steps(_model()).id == "no-steps"
    assert F.no_steps(_model(steps=[_step()])) is None


@pytest.mark.parametrize(("self_us", "severity"), [(149.0, "info"), (150.0, "warning")])
def test_top_operator(self_us, severity) -> None:
    ops = [_op("aten::convolution_backward", self_us, 40), _op("aten::mm", 10.0)]
    model = _model(ops=ops, has_device=False)
    model.operators = lambda: [*ops, _op("ProfilerStep*", 900.0)]
    finding = F.top_operator(model)
    assert finding.severity == severity
    assert finding.text.startswith("Top operator: aten::convolution_backward, ")
    assert f"{self_us / 10:.0f} % of all self CPU time (40 calls)" in finding.text


def test_top_module_names_backward_on_the_sample(resnet_model) -> None:
    finding = F.top_module(resnet_model)
    assert finding.text.startswith("Top module: ResNet_0/Sequential_5/BasicBlock_6/Conv2d_16")
    assert "+ bwd" in finding.text and "% of module time" in finding.text
    assert F.top_module(_model()) is None


@pytest.mark.parametrize(("self_us", "fires"), [(99.0, False), (100.0, True)])
def test_copies(self_us, fires) -> None:
    assert (F.copies(_model(ops=[_op("aten::copy_", self_us)])) is not None) is fires


@pytest.mark.parametrize(("self_us", "fires"), [(199.0, False), (200.0, True)])
def test_launch_bound(self_us, fires) -> None:
    kernels = [SimpleNamespace(calls=30, avg_us=4.0), SimpleNamespace(calls=5, avg_us=50.0)]
    finding = F.launch_bound(_model(ops=[_op("cudaLaunchKernel", self_us)], kernels=kernels))
    assert (finding is not None) is fires
    if fires:
        assert finding.id == "launch-bound" and "30 launches under 10 us" in finding.text
    assert F.launch_bound(_model(ops=[_op("cudaLaunchKernel", 900.0)])) is None  # no kernels: not a GPU trace


def test_backward_ratio() -> None:
    root = SimpleNamespace(cpu_total_us=100.0, backward_cpu_us=250.0)
    assert "2.5x" in F.backward_ratio(_model(modules=SimpleNamespace(roots=[root]))).text
    assert F.backward_ratio(_model()) is None


def test_module_tree_missing() -> None:
    assert "TorchScript" in F.module_tree_missing(_model()).text
    no_stack = _model(info=SimpleNamespace(with_stack=False, record_shapes=True, profile_memory=True))
    assert "with_stack=True" in F.module_tree_missing(no_stack).text
    assert F.module_tree_missing(_model(modules=SimpleNamespace(roots=[object()]))) is None


def test_shapes_and_flops() -> None:
    no_shapes = _model(info=SimpleNamespace(with_stack=True, record_shapes=False, profile_memory=True))
    assert F.shapes_and_flops(no_shapes).id == "no-shapes"
    assert F.shapes_and_flops(_model(total_flops=10, flops_source="measured")).text == "FLOPs measured."
    assert F.shapes_and_flops(_model()) is None


def test_memory_not_recorded() -> None:
    off = _model(info=SimpleNamespace(with_stack=True, record_shapes=True, profile_memory=False))
    assert F.memory_not_recorded(off).id == "no-memory"
    assert F.memory_not_recorded(_model()) is None


def test_memory_peak_and_damage_on_the_sample(resnet_model) -> None:
    ids = [f.id for f in F.findings(resnet_model)]
    assert "memory-peak" in ids and "damaged" not in ids
    assert F.damaged_file(_model(report=SimpleNamespace(skipped=2, repaired=1, damaged=0))).text == (
        "The file was damaged: 1 event repaired, 2 events skipped."
    )
    times = F.damaged_file(_model(report=SimpleNamespace(skipped=0, repaired=0, damaged=3), flops_damaged=1))
    assert times.text == "The file was damaged: 3 events with impossible times left out, 1 call with impossible input sizes given no FLOPs."


def test_external_ids_ignored() -> None:
    assert F.external_ids_ignored(_model()) is None
    assert F.external_ids_ignored(_model(external_ids_ignored=True)).id == "external-ids"


def test_step_flops() -> None:
    finding = F.shapes_and_flops(_model(step_flops=2_000_000_000, step_flops_per_s=4e9, step_time_us=500_000.0, flops_source="measured", steps=[_step()]))
    assert finding.id == "step-flops"
    assert "per step: 2.00 GFLOP forward only (no backward in this trace)" in finding.text
    assert "500.000ms, 4.00 GFLOP/s achieved" in finding.text


def test_overview_tables_drop_numbers_rather_than_cut_them() -> None:
    from rich.console import Console

    from tuiprof.report.overview import FittedTable

    table = FittedTable("t")
    table.add_column("name", numeric=False)
    for header in ("first", "second", "third"):
        table.add_column(header)
    table.add_row("aten::convolution_backward", "123.456ms", "234.567ms", "345.678ms")
    console = Console(width=40, record=True, color_system=None)
    console.print(table)
    text = console.export_text()
    assert "123.456ms" in text and "234.567ms" in text  # whole, with their units
    assert "345.678" not in text  # the rightmost number went, whole: no "345.6…"


def test_overview_module_flops_are_forward_plus_backward_like_its_times(resnet_model) -> None:
    """The table is titled forward + backward: its FLOPs column counts both, as the Findings do."""
    from rich.console import Console

    from tuiprof.analysis.ranking import top_modules
    from tuiprof.report.overview import OVERVIEW_TOP, _modules_table
    from tuiprof.report.units import format_count

    console = Console(width=200, record=True)
    console.print(_modules_table(resnet_model))
    text = console.export_text()
    top = top_modules(resnet_model, OVERVIEW_TOP)[0]
    assert top.backward_flops > top.flops > 0
    assert "Top modules (forward + backward)" in text
    assert format_count(top.flops + top.backward_flops) in text.splitlines()[3]
