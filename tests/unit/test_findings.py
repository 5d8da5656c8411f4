"""Each Overview finding on and off, at its threshold (report/findings.py)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.conftest import DATA, SHARED_TRACES, needs_shared
from tuiprof.analysis import load_model
from tuiprof.report import findings as F


def _op(name: str, self_cpu_us: float, calls: int = 1):
    return SimpleNamespace(name=name, self_cpu_us=self_cpu_us, calls=calls)


class _Calls(list):
    """One call, of no name the rules look for."""

    def __init__(self) -> None:
        super().__init__([1])
        self.names: list[str] = []


def _model(**overrides):
    """The fields the rules read, with values that trigger nothing."""
    base = dict(
        steps=[],
        kernels=[],
        activity=(),
        total_self_cpu_us=1000.0,
        total_flops=0,
        flops_source="",
        modules=SimpleNamespace(roots=[], walk=lambda: iter(()), cost_us=0.0),
        calls=_Calls(),
        peak_memory=None,
        info=SimpleNamespace(with_stack=True, record_shapes=True, profile_memory=True),
        report=SimpleNamespace(skipped=0, repaired=0, damaged=0),
        flops_damaged=0,
        external_ids_ignored=False,
        step_flops=0,
        step_flops_per_s=None,
        step_time_us=0.0,
        backward_pass=SimpleNamespace(ran=False, counted=False),
    )
    ops = overrides.pop("ops", [_op("aten::mm", 100.0)])
    base.update(overrides)
    model = SimpleNamespace(**base)
    model.operators = lambda: ops
    return model


def _step(duration=1000.0, loading=0.0, window=0.0, idle=0.0):
    return SimpleNamespace(
        duration_us=duration, data_loading_us=loading, device_window_us=window, device_idle_us=idle, cpu_bound_us=idle
    )


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


@pytest.mark.parametrize("self_us", [149.0, 150.0])
def test_top_operator(self_us) -> None:
    """A fact, never a warning, however large its share: it names no cause and no remedy, and a
    warning ranks first (the shipped sample's first line said only 'Top operator: ...')."""
    ops = [_op("aten::convolution_backward", self_us, 40), _op("aten::mm", 10.0)]
    model = _model(ops=ops, has_device=False)
    model.operators = lambda: [*ops, _op("ProfilerStep*", 900.0)]
    finding = F.top_operator(model)
    assert finding.severity == "info"
    assert finding.text.startswith("Top operator: aten::convolution_backward, ")
    assert f"{self_us / 10:.0f} % of all self CPU time (40 calls)" in finding.text


def _transformer(tmp_path, q_projection: bool):
    """A with_stack trace whose module time is known by construction (us)::

        Model_0 [0, 1000)                                  module time: 1000
          Conv2d_0 [0, 40)                                 patch embedding, 4 %
          Encoder_0 [50, 950)                              90 %
            Layer_i [50 + 150 i, 200 + 150 i), i = 0..5    6 x 150 = 900, 90 %
              Attention_i: 100 us (120 for i = 3)          6 x Attention = 620, 62 %
                Linear_i [+5, +25) when q_projection       6 x 20 = 120, 12 %
              Mlp_i: the rest of the layer, 2 us gaps      6 x ~26-46, under 30 %
          Linear_6 [960, 990)                              the head: a Linear, not inside an Attention

    The attention modules hold the time (62 %), and every module alone is small
    (Attention_3, the largest, 12 %).
    """
    from tests.helpers.gpu_trace import GpuTrace
    from tuiprof.analysis import load_model

    trace = GpuTrace()
    model = trace.module("Model_0", 0, 1000)
    conv = trace.module("Conv2d_0", 0, 40, model)
    trace.op("aten::convolution", 5, 30)
    encoder = trace.module("Encoder_0", 50, 900, model)
    for i in range(6):
        start = 50 + 150 * i
        layer = trace.module(f"Layer_{i}", start, 150, encoder)
        attention_us = 120 if i == 3 else 100
        attention = trace.module(f"Attention_{i}", start, attention_us, layer)
        if q_projection:
            trace.module(f"Linear_{i}", start + 5, 20, attention)
            trace.op("aten::linear", start + 6, 18)
        trace.op("aten::_scaled_dot_product_flash_attention", start + 30, attention_us - 35)
        trace.module(f"Mlp_{i}", start + attention_us + 2, 148 - attention_us - 2, layer)
        trace.op("aten::addmm", start + attention_us + 5, 10)
    trace.module("Linear_6", 960, 30, model)
    trace.op("aten::linear", 965, 20)
    assert conv
    return load_model(trace.write(tmp_path / "transformer.json"))


def test_top_module_is_the_repeated_layers_class_summed(tmp_path) -> None:
    """Issue 24 item 4: the finding named a 0 % leaf; it names the class that holds the time."""
    finding = F.top_module(_transformer(tmp_path, q_projection=True))
    assert (
        finding.text
        == "Top modules: 6 x Attention, 620.000us, 62 % of module time; inside them, 6 x Linear: 120.000us (12 %)."
    )


def test_top_module_names_the_costliest_instance_of_a_leaf_class(tmp_path) -> None:
    finding = F.top_module(_transformer(tmp_path, q_projection=False))
    assert finding.text == (
        "Top modules: 6 x Attention, 620.000us, 62 % of module time; the costliest: Model_0/Encoder_0/Layer_3/Attention_3, 120.000us (12 %)."
    )


def test_top_module_says_nothing_rather_than_0_percent(tmp_path) -> None:
    from tests.helpers.gpu_trace import GpuTrace
    from tuiprof.analysis import load_model

    trace = GpuTrace()
    trace.module("Empty_0", 10, 0)  # a module with no time: no module time at all
    trace.op("aten::add", 20, 5)
    assert F.top_module(load_model(trace.write(tmp_path / "empty.json"))) is None
    trace = GpuTrace()
    model = trace.module("Model_0", 0, 100)
    trace.op("aten::mm", 10, 80)  # all the work in the model's own code
    trace.module("Identity_0", 95, 0, model)  # its only leaf: 0 %
    text = F.top_module(load_model(trace.write(tmp_path / "self.json"))).text
    assert text == "Top module: Model_0, 100.000us, 100 % of module time."
    assert F.top_module(_model()) is None


def test_top_module_on_the_samples(resnet_model) -> None:
    """resnet18 has 16 Conv2d directly inside its 8 BasicBlocks (3 more in the downsample
    Sequentials and the stem's conv1 are elsewhere); the costliest is layer4's first
    3x3 conv, whose backward dominates (as the Modules view shows)."""
    finding = F.top_module(resnet_model)
    assert finding.text.startswith("Top modules: 16 x Conv2d, ")
    assert "+ bwd" in finding.text
    assert finding.text.endswith("; the costliest: ResNet_0/Sequential_5/BasicBlock_6/Conv2d_16, 650.700ms (22 %).")
    share = int(finding.text.split(" % of module time")[0].rsplit(", ", 1)[1])
    assert share >= 50


def test_top_module_on_the_tiny_transformer() -> None:
    from tests.conftest import SAMPLES
    from tuiprof.analysis import load_model

    text = F.top_module(load_model(SAMPLES / "tiny_transformer_cpu.pt.trace.json.gz")).text
    assert text.startswith("Top modules: 2 x TransformerEncoderLayer, ")
    assert "; inside them, 2 x MultiheadAttention: " in text


@needs_shared
def test_top_module_on_a_vit_inference_trace() -> None:
    """The H100 ViT trace: CPU time is the cost of every module there (device time is a
    sixth of it), so the share is the frames' durations, read from the raw JSON."""
    import gzip
    import json
    import re

    from tests.conftest import SHARED_TRACES
    from tuiprof.analysis import load_model

    path = SHARED_TRACES / "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz"
    with gzip.open(path, "rt") as handle:
        frames = [
            e
            for e in json.load(handle)["traceEvents"]
            if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")
        ]

    def duration(pattern: str) -> float:
        return sum(float(e["dur"]) for e in frames if re.fullmatch(pattern, e["name"][len("nn.Module: ") :]))

    total = duration(r"ViTModel_\d+")
    layers = {e["name"] for e in frames if re.fullmatch(r"nn.Module: ViTLayer_\d+", e["name"])}
    share = round(100 * duration(r"ViTLayer_\d+") / total)
    attention = round(100 * duration(r"ViTSdpaAttention_\d+") / total)
    assert len(layers) == 12 and share >= 50 and attention < 50
    text = F.top_module(load_model(path)).text
    assert text.startswith("Top modules: 12 x ViTLayer, ")
    assert f", {share} % of module time; inside them, 12 x ViTSdpaAttention: " in text and text.endswith(
        f"({attention} %)."
    )


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
    assert (
        times.text
        == "The file was damaged: 3 events with impossible times left out, 1 call with impossible input sizes given no FLOPs."
    )


def test_external_ids_ignored() -> None:
    assert F.external_ids_ignored(_model()) is None
    assert F.external_ids_ignored(_model(external_ids_ignored=True)).id == "external-ids"


def test_step_flops() -> None:
    finding = F.shapes_and_flops(
        _model(
            step_flops=2_000_000_000,
            step_flops_per_s=4e9,
            step_time_us=500_000.0,
            flops_source="measured",
            steps=[_step()],
        )
    )
    assert finding.id == "step-flops"
    assert "per step: 2.00 GFLOP forward only (no backward in this trace)" in finding.text
    assert "500.000ms, 4.00 GFLOP/s over the mean step time" in finding.text


@pytest.mark.parametrize(
    ("ran", "counted", "said"),
    [
        (True, True, "GFLOP forward + backward"),
        (True, False, "GFLOP forward only (its backward operators have no FLOPs formula)"),
        (False, False, "GFLOP forward only (no backward in this trace)"),
    ],
)
def test_step_flops_say_whether_the_backward_was_counted(ran, counted, said) -> None:
    """An old training trace's backward operators (aten::cudnn_convolution_backward_weight) have
    no FLOPs formula: its FLOPs are the forward's, but it did train (a walkthrough found
    "no backward in this trace" over a table of backward operators)."""
    finding = F.shapes_and_flops(
        _model(step_flops=2_000_000_000, backward_pass=SimpleNamespace(ran=ran, counted=counted), steps=[_step()])
    )
    assert said in finding.text


def test_flops_without_steps_are_over_the_traces_span() -> None:
    finding = F.shapes_and_flops(_model(step_flops=2_000_000_000, step_flops_per_s=4e9, step_time_us=500_000.0))
    assert "over the whole trace (no ProfilerStep spans)" in finding.text
    assert "4.00 GFLOP/s over the trace's span" in finding.text and "mean step" not in finding.text


@needs_shared
def test_an_old_training_trace_is_not_called_forward_only_without_backward() -> None:
    """The kineto resnet50 sample trains; its cudnn backward operators have no FLOPs formula."""
    model = load_model(
        SHARED_TRACES / "kineto__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
    )
    assert model.backward_pass == (True, False)
    assert "its backward operators have no FLOPs formula" in F.shapes_and_flops(model).text


def test_a_training_sample_counts_its_backward(resnet_model) -> None:
    assert resnet_model.backward_pass == (True, True)
    assert "forward + backward" in F.shapes_and_flops(resnet_model).text


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

    from tuiprof.report.overview import _modules_table
    from tuiprof.report.units import format_count

    console = Console(width=200, record=True)
    console.print(_modules_table(resnet_model))
    text = console.export_text()
    convs = [n for n in resnet_model.modules.walk() if n.class_name == "Conv2d" and n.parent.class_name == "BasicBlock"]
    forward, backward = sum(n.flops for n in convs), sum(n.backward_flops for n in convs)
    assert backward > forward > 0
    assert "Top modules (forward + backward)" in text
    assert text.splitlines()[2].startswith("16 x Conv2d ") and format_count(forward + backward) in text.splitlines()[2]


def test_overview_modules_table_starts_where_the_time_concentrates(tmp_path) -> None:
    """The synthetic transformer: the 6 attention modules (62 %), then what they hold."""
    from rich.console import Console

    from tuiprof.report.overview import _modules_table

    def rows(model) -> list[list[str]]:
        console = Console(width=120, record=True)
        console.print(_modules_table(model))
        return [line.split() for line in console.export_text().splitlines()[2:]]

    with_q = rows(_transformer(tmp_path, q_projection=True))
    assert with_q == [
        ["6", "x", "Attention", "62%", "620.000us", "--"],
        ["└", "6", "x", "Linear", "12%", "120.000us", "--"],
    ]
    without = rows(_transformer(tmp_path, q_projection=False))
    assert without[:2] == [
        ["6", "x", "Attention", "62%", "620.000us", "--"],
        ["└", "Layer_3/Attention_3", "12%", "120.000us", "--"],
    ]


@pytest.mark.parametrize("width", [60, 80])
def test_summary_findings_view_fits_the_terminal(monkeypatch, capsys, resnet_model, width) -> None:
    """``summary --view findings`` on a terminal: every finding starts a line with its
    severity; a long one wraps under its text, and no line is wider than the terminal."""
    from tests.conftest import SAMPLES
    from tuiprof import cli
    from tuiprof.report import summary

    monkeypatch.setattr(summary, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(width))
    assert cli.main(["summary", str(SAMPLES / "resnet18_cpu.pt.trace.json.gz"), "--view", "findings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines and max(len(line) for line in lines) <= width
    assert not any(line.lstrip().startswith("%") for line in lines)  # "89 %" stays whole
    found = []
    for line in lines:
        if line.startswith(" "):
            found[-1] += " " + line.strip()
        else:
            found.append(line)
    assert found == [f"{f.severity}: {f.text}" for f in F.findings(resnet_model)]


def test_summary_findings_view_on_a_pipe_and_as_json(capsys, resnet_model) -> None:
    import json

    from tests.conftest import SAMPLES
    from tuiprof import cli

    sample = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
    expected = F.findings(resnet_model)
    assert cli.main(["summary", sample, "--view", "findings"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{f.severity}: {f.text}" for f in expected]  # one a line, for grep
    assert cli.main(["summary", sample, "--view", "findings", "--format", "json"]) == 0
    assert [
        {key: row[key] for key in ("id", "severity", "text", "remedy", "saving")}
        for row in json.loads(capsys.readouterr().out)
    ] == [
        {
            "id": f.id,
            "severity": f.severity,
            "text": f.pointed(F.summary_pointer),
            "remedy": f.remedy,
            "saving": f.saving.amount if f.saving else None,
        }
        for f in expected
    ]


def test_summary_findings_of_a_run_lead_with_its_straggler(capsys) -> None:
    """``summary RUN_DIR --view findings`` names the run's straggler first, as the Overview
    of a rank does (rank 1 of the shipped gloo run: its data loading is ~21 ms longer), and
    points at the run's --view, never at a key of the explorer."""
    import re

    from tests.conftest import SAMPLES
    from tuiprof import cli

    assert cli.main(["summary", str(SAMPLES / "ddp_gloo_2ranks"), "--view", "findings"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("warning: Straggler rank 1:") and lines[0].endswith("See summary --view ranks.")
    assert not any(re.search(r"view, \d\)|\(\d\)", line) for line in lines)


def test_findings_point_where_each_surface_looks(capsys) -> None:
    """The memory peak's finding: ``summary`` names its --view, the explorer its view and key."""
    import asyncio

    from tuiprof import cli

    trace = str(DATA / "mlp_memory_categories.pt.trace.json.gz")
    assert cli.main(["summary", trace, "--view", "findings"]) == 0
    peak = [line for line in capsys.readouterr().out.splitlines() if "Peak CPU memory" in line]
    assert peak and peak[0].endswith("See summary --view memory-categories.") and "Memory view" not in peak[0]

    async def overview_text() -> str:
        from tests.helpers.tui import loaded, plain_text
        from tuiprof.tui.app import ExplorerApp
        from tuiprof.tui.sources import FileSource

        app = ExplorerApp(FileSource(trace))
        async with app.run_test(size=(160, 40)) as pilot:
            await loaded(pilot)
            return plain_text(app.query_one("#overview-body").content)

    assert "See the Memory view (5)." in " ".join(asyncio.run(overview_text()).split())


def test_a_notice_on_a_terminal_wraps_between_words(monkeypatch, capsys) -> None:
    """The run directory notice on a 60-column terminal: every line fits, no word is split."""
    import os

    from tests.conftest import SAMPLES
    from tuiprof.kinds.trace import choose_trace

    monkeypatch.setattr("sys.stderr.isatty", lambda: True, raising=False)
    monkeypatch.setattr("shutil.get_terminal_size", lambda *a: os.terminal_size((60, 20)))
    choose_trace(str(SAMPLES / "ddp_gloo_2ranks"), None)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 60
    words = " ".join(line.strip() for line in lines).split()
    assert "showing" in words and "RANK|NAME)" in words


def test_each_flop_rate_says_what_it_divides_by(resnet_model) -> None:
    """The Overview's rate is the step's FLOPs over the mean step; the Modules detail's is the
    module's FLOPs over its own forward + backward time (shorter than the step: it reads
    higher).  Each label says which, and each figure is that quotient (recomputed here)."""
    from tuiprof.report.details import module_text
    from tuiprof.report.units import format_count

    steps = resnet_model.steps
    step_rate = resnet_model.step_flops / (sum(s.duration_us for s in steps) / len(steps) / 1e6)
    finding = F.shapes_and_flops(resnet_model)
    assert f"{format_count(step_rate)}FLOP/s over the mean step time" in finding.text
    root = resnet_model.modules.roots[0]
    fwd_bwd_us = max(root.cpu_total_us + root.backward_cpu_us, root.device_total_us + root.backward_device_us)
    module_rate = (root.flops + root.backward_flops) / (fwd_bwd_us / 1e6)
    assert f"({format_count(module_rate).replace(' ', '')}FLOP/s over fwd+bwd)" in module_text(resnet_model, root).plain


def test_the_overview_never_breaks_between_a_number_and_its_percent(resnet_model) -> None:
    """The Overview wrapped `3.640ms (47` / ` %)` at some widths: at every width from 40 to
    100 no line of its findings ends in a number whose `%` starts the next line."""
    import io
    import re

    from rich.console import Console

    from tuiprof.report.overview import overview

    for width in range(40, 101):
        console = Console(width=width, color_system=None, file=io.StringIO())
        console.print(overview(resnet_model, lambda see: f"the {see} view (5)"))
        lines = console.file.getvalue().splitlines()
        for line, following in zip(lines, lines[1:]):
            assert not (re.search(r"\d$", line.rstrip()) and following.lstrip().startswith("%")), (
                width,
                line,
                following,
            )
