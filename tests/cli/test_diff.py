"""``tuiprof diff`` on synthetic trace pairs whose deltas are known by construction.

Every trace here is written as Kineto writes it (``X`` events in
microseconds, kernels joined by ``External id`` and ``correlation``,
``nn.Module`` python frames, ``[memory]`` instants) and loaded through the
real decoder, so the whole path from file to diff is under test.  Expected
numbers are computed by hand from the event times below.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.cli import tuiprof
from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.analysis.diff import TABLES, diff_traces
from tuiprof.report.diff import render_diff, verdict_text

STEP_US = 1000


def gpu_trace(
    path: Path,
    *,
    gemm_us: float = 100,
    conv_op: str = "aten::cudnn_convolution",
    extra_kernel: bool = False,
    relu_module: bool = True,
    peak_bytes: int = 1024,
    launch: str = "cudaLaunchKernel",
) -> Path:
    """Two 1000 us steps of a small GPU net (launches take 5 us of CPU):

    Net_0 > Linear_0 > aten::linear > aten::addmm (kernel ``gemm``, ``gemm_us``),
    Net_0 > ReLU_0 > aten::relu (kernel ``relu_kernel``, 20 us),
    Net_0 > aten::convolution > ``conv_op`` (kernel ``conv_kernel``, 50 us);
    ``extra_kernel`` adds ``extra_kernel`` (30 us) launched by aten::addmm.
    """
    trace = GpuTrace()
    for step in range(2):
        s = step * STEP_US
        trace.step(step + 1, s, STEP_US)
        net = trace.module("Net_0", s + 10, 890)
        trace.module("Linear_0", s + 20, 380, net)
        trace.op("aten::linear", s + 30, 360)
        addmm = trace.op("aten::addmm", s + 40, 300)
        trace.launch(addmm, "gemm", s + 50, 5, s + 60, gemm_us, runtime=launch)
        if extra_kernel:
            trace.launch(addmm, "extra_kernel", s + 100, 5, s + 250, 30, runtime=launch)
        trace.memory(s + 45, peak_bytes, peak_bytes)
        trace.memory(s + 330, -peak_bytes, 0)
        if relu_module:
            trace.module("ReLU_0", s + 400, 100, net)
        relu = trace.op("aten::relu", s + 410, 80)
        trace.launch(relu, "relu_kernel", s + 420, 5, s + 430, 20, runtime=launch)
        trace.op("aten::convolution", s + 500, 300)
        conv = trace.op(conv_op, s + 510, 280)
        trace.launch(conv, "conv_kernel", s + 520, 5, s + 530, 50, runtime=launch)
    return trace.write(path)


def cpu_trace(path: Path, first_us: list[float], second_us: float = 400, steps: int = 2) -> Path:
    """CPU-only steps covered wholly by two operators: ``aten::first`` (its
    length per step from ``first_us``) then ``aten::second``."""
    trace = GpuTrace()
    s = 0.0
    for step in range(steps):
        first = first_us[step % len(first_us)]
        trace.step(step + 5, s, first + second_us)
        trace.op("aten::first", s, first)
        trace.op("aten::second", s + first, second_us)
        s += first + second_us
    return trace.write(path)


def _diff(tmp_path, a_kwargs: dict, b_kwargs: dict, **options):
    a = load_model(gpu_trace(tmp_path / "a.json", **a_kwargs))
    b = load_model(gpu_trace(tmp_path / "b.json", **b_kwargs))
    return diff_traces(a, b, **options)


def test_a_trace_diffed_with_itself_is_all_zeros(tmp_path) -> None:
    model = load_model(gpu_trace(tmp_path / "a.json"))
    diff = diff_traces(model, model)
    assert diff.verdict.outcome == "no change"
    assert verdict_text(diff.verdict) == "batch unknown: no change: A and B take 1.000ms per step"
    for table in diff.tables:
        assert table.total_delta == 0
        assert all(r.delta == 0 and r.status == "same" for r in table.rows), table.name
    assert {t.name for t in diff.tables if t.rows} == set(TABLES)
    assert diff.notes == (
        "batch unknown (A and B: recorded without record_shapes=True): compared per step, as if the batches were equal",
    )
    assert not diff.slower_than(0) and not diff.memory_grew_over(0)


def test_an_operator_twice_as_slow(tmp_path) -> None:
    diff = _diff(tmp_path, {}, {"gemm_us": 200})
    ops = diff.table("ops")
    assert ops.metric == "self device time"
    addmm = ops.rows[0]
    assert (addmm.name, addmm.a, addmm.b, addmm.delta, addmm.delta_pct) == ("aten::addmm", 200.0, 400.0, 200.0, 100.0)
    assert addmm.share_pct == 100.0 and addmm.calls_a == addmm.calls_b == 2
    assert all(r.delta == 0 for r in ops.rows[1:])
    kernel = diff.table("kernels").rows[0]
    assert (kernel.name, kernel.delta) == ("gemm", 200.0)
    launcher = diff.table("launchers").rows[0]
    assert (launcher.name, launcher.detail, launcher.delta) == ("gemm", "aten::addmm", 200.0)
    module = diff.table("modules").rows[0]  # the device time of Linear_0's own ops
    assert (module.name, module.delta) == ("Net_0/Linear_0", 200.0)
    assert diff.verdict.contributors[0].name == "aten::addmm"
    assert diff.verdict.outcome == "no change"  # the CPU steps did not move


def test_an_added_kernel(tmp_path) -> None:
    diff = _diff(tmp_path, {}, {"extra_kernel": True})
    kernels = diff.table("kernels")
    added = kernels.rows[0]
    assert (added.name, added.status, added.a, added.b, added.calls_b) == ("extra_kernel", "added", None, 60.0, 2)
    assert added.delta_pct is None and added.share_pct == 100.0
    assert [r.status for r in kernels.rows[1:]] == ["same"] * 3
    launcher = diff.table("launchers").row("extra_kernel")
    assert (launcher.detail, launcher.status) == ("aten::addmm", "added")


def test_a_renamed_operator_under_the_same_parent_is_aligned(tmp_path) -> None:
    diff = _diff(tmp_path, {}, {"conv_op": "aten::miopen_convolution"})
    ops = diff.table("ops")
    aligned = ops.row("aten::cudnn_convolution → aten::miopen_convolution")
    assert aligned is not None and aligned.status == "aligned"
    assert (aligned.aligned_under, aligned.detail) == ("aten::convolution", "aligned under aten::convolution")
    assert (aligned.a, aligned.b, aligned.delta, aligned.calls_a, aligned.calls_b) == (100.0, 100.0, 0.0, 2, 2)
    assert not [r for r in ops.rows if r.status in ("added", "removed")]
    # Its kernel kept its name: matched as usual, launched by differently named operators.
    assert diff.table("kernels").row("conv_kernel").status == "same"
    launchers = {(r.detail, r.status) for r in diff.table("launchers").rows if r.name == "conv_kernel"}
    assert launchers == {("aten::cudnn_convolution", "removed"), ("aten::miopen_convolution", "added")}


def test_runtime_calls_align_with_runtime_calls_and_operators_with_operators(tmp_path) -> None:
    diff = _diff(tmp_path, {}, {"conv_op": "aten::miopen_convolution", "launch": "hipLaunchKernel"}, metric="cpu")
    aligned = {(r.name, r.aligned_under) for r in diff.table("ops").rows if r.status == "aligned"}
    assert aligned == {
        ("aten::cudnn_convolution → aten::miopen_convolution", "aten::convolution"),
        ("cudaLaunchKernel → hipLaunchKernel", "aten::convolution"),
        ("cudaLaunchKernel → hipLaunchKernel", "aten::addmm"),
        ("cudaLaunchKernel → hipLaunchKernel", "aten::relu"),
    }
    launches = diff.table("ops").row("cudaLaunchKernel → hipLaunchKernel", "aligned under aten::addmm")
    assert (launches.a, launches.b, launches.calls_a) == (10.0, 10.0, 2)  # 5 us, twice
    assert not [r for r in diff.table("ops").rows if r.status in ("added", "removed")]


def test_renamed_kernels_are_aligned_under_their_launcher(tmp_path) -> None:
    a = load_model(gpu_trace(tmp_path / "a.json"))
    text = (tmp_path / "a.json").read_text().replace('"conv_kernel"', '"miopen_conv_kernel"')
    b = load_model(Path(tmp_path / "b.json").write_text(text) and tmp_path / "b.json")
    row = diff_traces(a, b).table("kernels").row("conv_kernel → miopen_conv_kernel")
    assert row is not None and (row.aligned_under, row.a, row.b) == ("aten::cudnn_convolution", 100.0, 100.0)


def test_a_removed_module(tmp_path) -> None:
    diff = _diff(tmp_path, {}, {"relu_module": False}, metric="cpu")
    modules = diff.table("modules")
    removed = modules.row("Net_0/ReLU_0")
    # ReLU_0's forward self time: its 100 us frame, twice.
    assert (removed.status, removed.a, removed.b, removed.calls_a) == ("removed", 200.0, None, 2)
    net = modules.row("Net_0")  # the frame's time went back to its parent
    assert net.delta == 200.0 and modules.total_delta == 0
    assert diff.table("ops").total_delta == 0


def test_operator_deltas_sum_to_the_step_delta_where_operators_cover_the_steps(tmp_path) -> None:
    a = load_model(cpu_trace(tmp_path / "a.json", [600]))
    b = load_model(cpu_trace(tmp_path / "b.json", [1200]))
    diff = diff_traces(a, b)
    ops = diff.table("ops")
    assert ops.metric == "self CPU time"
    assert sum(r.delta for r in ops.rows) == ops.total_delta == diff.table("steps").total_delta == 1200.0
    assert diff.coverage.covered is True
    first = ops.rows[0]
    assert (first.name, first.delta, first.share_pct) == ("aten::first", 1200.0, 100.0)
    assert diff.verdict.outcome == "slower"
    assert verdict_text(diff.verdict) == ("batch unknown: B is 1.60x slower per step (+60.0 %, 0.0 % noise)")


def test_coverage_says_when_operators_do_not_cover_the_steps(tmp_path) -> None:
    # Every step ends 100 us after its last operator: time no operator holds.
    diff = _diff(tmp_path, {}, {}, metric="cpu")
    assert diff.coverage.covered is True  # nothing moved
    a = load_model(cpu_trace(tmp_path / "a.json", [600]))
    text = (tmp_path / "a.json").read_text()
    gapped = json.loads(text)
    for event in gapped["traceEvents"]:
        if event["name"].startswith("ProfilerStep"):
            event["dur"] += 100
    (tmp_path / "b.json").write_text(json.dumps(gapped))
    diff = diff_traces(a, load_model(tmp_path / "b.json"))
    # The step span got 100 us of self time: ProfilerStep* carries the delta, and operators cover it.
    assert diff.table("ops").row("ProfilerStep*").delta == 200.0 and diff.coverage.covered is True
    with_frames = diff_traces(
        load_model(gpu_trace(tmp_path / "c.json")),
        load_model(gpu_trace(tmp_path / "d.json", relu_module=False)),
        metric="cpu",
    )
    assert with_frames.coverage.covered is True


def test_within_noise_is_no_change_and_the_gate_passes(tmp_path) -> None:
    a = load_model(cpu_trace(tmp_path / "a.json", [600, 700]))  # steps 1000 and 1100: 10 % spread
    b = load_model(cpu_trace(tmp_path / "b.json", [650, 680]))  # 1050 and 1080
    diff = diff_traces(a, b)
    verdict = diff.verdict
    assert (verdict.median_a_us, verdict.median_b_us) == (1050.0, 1065.0)
    assert verdict.spread_a_pct == pytest.approx(100 * 100 / 1050)
    assert verdict.outcome == "no change" and not diff.slower_than(1)
    assert verdict_text(verdict) == "batch unknown: no change per step: B +1.4 %, within the 9.5 % noise"


def test_different_step_counts_are_compared_per_step(tmp_path) -> None:
    a = load_model(cpu_trace(tmp_path / "a.json", [600], steps=2))
    b = load_model(cpu_trace(tmp_path / "b.json", [600], steps=4))
    diff = diff_traces(a, b)
    assert diff.table("ops").row("aten::first").delta == 0
    assert diff.verdict.outcome == "no change"
    assert diff.notes[0] == "A recorded 2 steps and B 4: operator, module and kernel times are per step"


def test_traces_of_different_kinds_say_what_they_cannot_compare(tmp_path) -> None:
    gpu = load_model(gpu_trace(tmp_path / "a.json"))
    cpu = load_model(cpu_trace(tmp_path / "b.json", [600]))
    diff = diff_traces(gpu, cpu)
    assert diff.table("ops").metric == "self CPU time"
    assert list(diff.notes) == [
        "batch unknown (A and B: recorded without record_shapes=True): compared per step, as if the batches were equal",
        "A ran on a device and B is CPU-only: operators are compared by CPU time",
        "Modules: not compared: B has no module tree (recorded without with_stack=True)",
        "Kernels: not compared: B has no device activity (CPU-only)",
        "Memory: not compared: B has no memory records (recorded without profile_memory=True)",
    ]
    assert diff.table("kernels").rows == () and diff.table("steps").rows
    # B's two operators are not A's: no time in shared operators on B's side.
    assert diff.overlap.shared_b_pct == 0 and diff.overlap.different_programs
    text = render_diff(diff, "markdown")
    assert "not compared: B has no module tree" in text


def test_a_side_without_steps_compares_trace_windows(tmp_path) -> None:
    a = load_model(cpu_trace(tmp_path / "a.json", [600]))
    data = json.loads((tmp_path / "a.json").read_text())
    data["traceEvents"] = [e for e in data["traceEvents"] if not e["name"].startswith("ProfilerStep")]
    (tmp_path / "b.json").write_text(json.dumps(data))
    diff = diff_traces(a, load_model(tmp_path / "b.json"))
    assert diff.verdict.basis == "trace window" and diff.verdict.outcome == "no change"
    assert "Steps: not compared: B has no ProfilerStep spans (recorded without a schedule)" in diff.notes
    assert diff.coverage.covered is None


def test_memory_peak(tmp_path) -> None:
    diff = _diff(tmp_path, {}, {"peak_bytes": 2048})
    row = diff.table("memory").rows[0]
    assert (row.name, row.a, row.b, row.delta_pct) == ("CUDA:0", 1024, 2048, 100.0)
    assert diff.memory_grew_over(99) and not diff.memory_grew_over(100)


def test_ranks_are_averaged_and_steps_take_the_slowest(tmp_path) -> None:
    fast = load_model(cpu_trace(tmp_path / "a.json", [600]))
    slow = load_model(cpu_trace(tmp_path / "b.json", [800]))
    diff = diff_traces([fast, slow], [fast, fast])
    assert diff.table("ops").row("aten::first").a == 1400.0  # (1200 + 1600) / 2
    assert diff.verdict.median_a_us == 1200.0 and diff.verdict.median_b_us == 1000.0


# ------------------------------------------------------------------ the command


def test_gate_exits_1_naming_the_top_regression_and_0_otherwise(tmp_path) -> None:
    a = cpu_trace(tmp_path / "a.json", [600])
    b = cpu_trace(tmp_path / "b.json", [1200])
    failing = tuiprof("diff", str(a), str(b), "--fail-if-slower", "5%", "--format", "json")
    assert failing.returncode == 1
    assert failing.stderr.startswith("tuiprof: B is 60.0 % slower per step than A (over the 5 % gate")
    assert "top regressions: aten::first +1.200ms" in failing.stderr
    assert json.loads(failing.stdout)["verdict"]["outcome"] == "slower"
    assert tuiprof("diff", str(a), str(b), "--fail-if-slower", "70%").returncode == 0
    assert tuiprof("diff", str(b), str(a), "--fail-if-slower", "5").returncode == 0  # faster passes


def test_memory_gate(tmp_path) -> None:
    a = gpu_trace(tmp_path / "a.json")
    b = gpu_trace(tmp_path / "b.json", peak_bytes=1200)
    result = tuiprof("diff", str(a), str(b), "--fail-if-memory", "10%", "--view", "verdict")
    assert result.returncode == 1 and "B's memory peak is 17.2 % above A's" in result.stderr
    assert tuiprof("diff", str(a), str(b), "--fail-if-memory", "20%").returncode == 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.json", "{a}"], "missing.json: no such file or directory"),
        (["{a}", "{a}", "--fail-if-slower", "five"], "--fail-if-slower five: not a percentage"),
        (["{a}", "{empty}"], "the trace holds no events"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, args: list[str], message: str) -> None:
    a = cpu_trace(tmp_path / "a.json", [600])
    empty = tmp_path / "empty.json"
    empty.write_text('{"traceEvents": []}')
    result = tuiprof("diff", *(x.format(a=a, empty=empty) for x in args))
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_formats_and_views(tmp_path) -> None:
    a = gpu_trace(tmp_path / "a.json")
    b = gpu_trace(tmp_path / "b.json", gemm_us=200)
    as_csv = tuiprof("diff", str(a), str(b), "--format", "csv", "--view", "kernels")
    assert as_csv.returncode == 0
    lines = as_csv.stdout.splitlines()
    assert lines[0] == "table,unit,name,detail,status,a,b,delta,delta_pct,share_pct,calls_a,calls_b"
    assert lines[1] == "kernels,us,gemm,kernel,changed,200.0,400.0,200.0,100.0,100.0,2.0,2.0"
    document = json.loads(tuiprof("diff", str(a), str(b), "--format", "json").stdout)
    assert set(document["tables"]) == set(TABLES) and document["verdict"]["outcome"] == "no change"
    markdown = tuiprof("diff", str(a), str(b), "--format", "markdown").stdout
    assert markdown.startswith("## tuiprof diff") and "| aten::addmm |" in markdown
    table = tuiprof("diff", str(a), str(b), "--view", "ops")  # not a terminal: plain text
    assert "aten::addmm" in table.stdout and "verdict" not in table.stdout


def test_diff_imports_neither_torch_nor_textual(tmp_path) -> None:
    a = cpu_trace(tmp_path / "a.json", [600])
    code = (
        "import sys; sys.argv = ['tuiprof', 'diff', %r, %r];"
        "from tuiprof.cli import main; rc = main();"
        "print('HEAVY', sorted(m for m in ('torch', 'torchvision', 'textual') if m in sys.modules))"
    ) % (str(a), str(a))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr
