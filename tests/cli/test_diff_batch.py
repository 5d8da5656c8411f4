"""``tuiprof diff`` across a batch-size change: each side's batch is read from
the trace, the verdict and the ``--fail-if-slower`` gate compare per sample.

The synthetic pairs are built so the answer is known by construction: at
batch 16 a step takes 1000 us (62.5 us a sample), at batch 32 it takes
1846 us (57.6875 us a sample): per step B is 1.85x slower, per sample 7.7 %
faster.  The shipped resnet18 pair is checked against its raw JSON.
"""

from __future__ import annotations

import gzip
import json
import statistics

import pytest

from tests.conftest import SAMPLES
from tests.helpers.cli import tuiprof
from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.analysis.batch import Batch, detect_batch
from tuiprof.analysis.diff import diff_traces
from tuiprof.report.diff import render_diff, summary_lines, verdict_text

BATCH_128 = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
BATCH_64 = SAMPLES / "resnet18_b64_cpu.pt.trace.json.gz"
STEP_US = {16: 1000.0, 32: 1846.0}


def batch_trace(path, batch: int | None, *, step_us: float | None = None, source: str = "module", steps: int = 2):
    """``steps`` CPU steps of ``step_us``: ``Net_0`` > ``aten::linear`` on a
    [batch, 64] input (``source="module"``), the same after a DataLoader span
    (``"dataloader"``), or without Input Dims (``batch`` None)."""
    step_us = step_us if step_us is not None else STEP_US[batch]
    trace = GpuTrace()
    dims = {"Input Dims": [[batch, 64], [10, 64], [10]]} if batch else {}
    for step in range(steps):
        s = step * step_us
        trace.step(step + 1, s, step_us)
        if source == "dataloader":
            trace.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s + 1, 8)
            trace.op("aten::to", s + 10, 5, **({"Input Dims": [[batch, 3, 8, 8], [], []]} if batch else {}))
        else:
            trace.module("Net_0", s + 10, step_us - 20)
        trace.op("aten::empty", s + 20, 2, **({"Input Dims": [[], [], []]} if batch else {}))
        trace.op("aten::linear", s + 30, step_us - 50, **dims)
    return trace.write(path)


def _diff(tmp_path, batch_a, batch_b, **kwargs):
    a = load_model(batch_trace(tmp_path / "a.json", batch_a, **kwargs))
    b = load_model(batch_trace(tmp_path / "b.json", batch_b, **kwargs))
    return diff_traces(a, b)


def test_batch_is_read_from_the_first_modules_input_and_the_dataloader(tmp_path) -> None:
    assert detect_batch(load_model(batch_trace(tmp_path / "m.json", 16))) == Batch(
        16, "Net_0's input: aten::linear [16, 64]"
    )  # aten::empty's [] input is skipped
    assert detect_batch(load_model(batch_trace(tmp_path / "d.json", 32, source="dataloader"))) == Batch(
        32, "DataLoader batch: aten::to [32, 3, 8, 8]"
    )
    unknown = detect_batch(load_model(batch_trace(tmp_path / "u.json", None, step_us=1000)))
    assert unknown == Batch(None, "recorded without record_shapes=True")


def test_batch_16_to_32_is_compared_per_sample(tmp_path) -> None:
    diff = _diff(tmp_path, 16, 32)
    verdict = diff.verdict
    assert verdict.per_sample and (verdict.batch_a.size, verdict.batch_b.size) == (16, 32)
    assert (verdict.median_a_us, verdict.median_b_us) == (1000.0, 1846.0)  # the steps themselves
    assert (verdict.compared_a_us, verdict.compared_b_us) == (62.5, 57.6875)
    assert verdict.outcome == "faster" and verdict.delta_pct == pytest.approx(-7.7)
    text = verdict_text(verdict)
    assert text == "batch 16 -> 32: B is 1.08x faster per sample (-7.7 %, 0.0 % noise)"
    assert len(f"verdict: {text}") <= 80
    assert "per sample: A 62.500us (batch 16), B 57.688us (batch 32), -4.812us" in summary_lines(diff)
    # Every time table is per step and per sample too, like the verdict: aten::linear's 950 us / 16
    # against 1796 us / 32 (each of the 2 steps holds one call).
    linear = diff.table("ops").row("aten::linear")
    assert (linear.a, linear.b) == pytest.approx((950 / 16, 1796 / 32))
    assert (linear.calls_a, linear.calls_b) == (1.0, 1.0)
    # the operators' deltas are set against one step's delta per sample, not the sum of both steps'
    assert diff.coverage.step_delta_us == pytest.approx(1846 / 32 - 1000 / 16)
    assert diff.table("ops").metric == "self CPU time per sample"
    assert [r.a for r in sorted(diff.table("steps").rows, key=lambda r: r.name)] == [62.5, 62.5]


def test_the_gate_judges_per_sample(tmp_path) -> None:
    a = batch_trace(tmp_path / "a.json", 16)
    b = batch_trace(tmp_path / "b.json", 32)
    # Per step B is 84.6 % slower; per sample it is 7.7 % faster: the gate passes.
    passed = tuiprof("diff", str(a), str(b), "--fail-if-slower", "5%", "--format", "json")
    assert passed.returncode == 0, passed.stderr
    document = json.loads(passed.stdout)["verdict"]
    assert (document["batch_a"], document["batch_b"], document["per_sample"]) == (16, 32, True)
    assert document["outcome"] == "faster"
    # The other way round B is 8.3 % slower per sample: over a 5 % gate.
    failed = tuiprof("diff", str(b), str(a), "--fail-if-slower", "5%", "--view", "verdict")
    assert failed.returncode == 1
    assert failed.stderr.startswith("tuiprof: B is 8.3 % slower per sample than A (over the 5 % gate")
    assert "verdict: batch 32 -> 16: B is 1.08x slower per sample (+8.3 %, 0.0 % noise)" in failed.stdout


def test_an_unknown_batch_is_said_and_steps_are_compared(tmp_path) -> None:
    diff = _diff(tmp_path, None, None, step_us=1000)
    assert not diff.verdict.per_sample
    assert verdict_text(diff.verdict) == "batch unknown: no change: A and B take 1.000ms per step"
    assert (
        "batch unknown (A and B: recorded without record_shapes=True): compared per step, as if the batches were equal"
    ) in diff.notes
    a = load_model(batch_trace(tmp_path / "a.json", 16))
    b = load_model(batch_trace(tmp_path / "b.json", None, step_us=1846))
    one_side = diff_traces(a, b)
    assert verdict_text(one_side.verdict).startswith("batch 16 -> ?: B is 1.85x slower per step")
    assert one_side.slower_than(5)  # nothing to divide by: the gate judges per step


def test_equal_batches_say_nothing_about_them(tmp_path) -> None:
    a = load_model(batch_trace(tmp_path / "a.json", 16))
    b = load_model(batch_trace(tmp_path / "b.json", 16, step_us=1100))
    diff = diff_traces(a, b)
    assert not diff.verdict.per_sample and not any("batch" in note for note in diff.notes)
    assert verdict_text(diff.verdict) == "B is 1.10x slower per step (+10.0 %, 0.0 % noise)"


def test_a_live_capture_saves_its_batch(tmp_path) -> None:
    import torch
    from torch import nn

    from tuiprof.capture.config import CaptureConfig
    from tuiprof.capture.session import profile_training

    def batches():
        while True:
            yield torch.randn(5, 4), torch.randint(0, 3, (5,))

    config = CaptureConfig(model="tiny", device="cpu", batch_size=128, wait=0, warmup=1, active=1, with_stack=False)
    result = profile_training(config, tmp_path / "t.json.gz", model=nn.Linear(4, 3), batches=batches())
    member = json.loads(gzip.decompress(result.trace_path.read_bytes()))["tuiprofLive"]
    assert member["batch_size"] == 5  # the batch fed, not the config's default
    assert detect_batch(load_model(result.trace_path)) == Batch(5, "the live capture's batch")


def _raw_steps_and_batch(path) -> tuple[float, int]:
    """The median ProfilerStep duration and the first aten::conv2d's batch, read with json alone."""
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    steps = [e["dur"] for e in events if e.get("name", "").startswith("ProfilerStep#")]
    conv = min((e for e in events if e.get("name") == "aten::conv2d"), key=lambda e: e["ts"])
    return statistics.median(steps), conv["args"]["Input Dims"][0][0]


def test_the_shipped_resnet18_pair_is_compared_per_sample() -> None:
    (step_a, batch_a), (step_b, batch_b) = _raw_steps_and_batch(BATCH_128), _raw_steps_and_batch(BATCH_64)
    assert (batch_a, batch_b) == (128, 64)
    diff = diff_traces(load_model(BATCH_128), load_model(BATCH_64))
    verdict = diff.verdict
    assert verdict.per_sample and (verdict.batch_a.size, verdict.batch_b.size) == (128, 64)
    assert verdict.compared_a_us == pytest.approx(step_a / 128, rel=1e-6)
    assert verdict.compared_b_us == pytest.approx(step_b / 64, rel=1e-6)
    expected_pct = 100 * (step_b / 64 - step_a / 128) / (step_a / 128)
    assert verdict.delta_pct == pytest.approx(expected_pct, rel=1e-6)
    text = render_diff(diff, "table", views=())
    assert f"verdict: batch 128 -> 64: B is {(step_a / 128) / (step_b / 64):.2f}x faster per sample" in text
    assert all(len(line) <= 80 for line in text.splitlines() if line.startswith("verdict:"))


@pytest.mark.parametrize("basis", ["steps", "trace window"])
@pytest.mark.parametrize("batches", [(1024, 2048), (None, None), (None, 2048), (16, 16)])
@pytest.mark.parametrize("medians", [(1000, 1000, None), (1000, 1010, 9.5), (1000, 123456, 99.5), (123456, 1000, None)])
def test_every_verdict_fits_80_columns(basis, batches, medians) -> None:
    from tuiprof.analysis.diff import Verdict

    (size_a, size_b), (median_a, median_b, spread) = batches, medians
    per_sample = basis == "steps" and bool(size_a and size_b) and size_a != size_b
    verdict = Verdict(
        basis,
        median_a,
        median_b,
        2,
        2,
        spread,
        spread,
        "slower",
        (),
        Batch(size_a, "test"),
        Batch(size_b, "test"),
        per_sample,
    )
    assert len(f"verdict: {verdict_text(verdict)}") <= 80


def test_diff_exports_are_exact_and_calls_stay_per_step(tmp_path) -> None:
    """CSV and JSON of a per-sample diff: times exact to the nanosecond (the trace's own
    decimals over the batch, no float noise such as ``2454793.5950000007``), and calls per
    step, not per sample (40 conv2d calls a step are not 0.312 a sample)."""
    import csv as csv_module
    from decimal import Decimal

    a_path = batch_trace(tmp_path / "a.json", 16, step_us=1000.123)
    b_path = batch_trace(tmp_path / "b.json", 32, step_us=1846.457)
    rows = list(csv_module.DictReader(tuiprof("diff", str(a_path), str(b_path), "--format", "csv").stdout.splitlines()))
    linear = next(r for r in rows if r["table"] == "ops" and r["name"] == "aten::linear")
    # aten::linear lasts step_us - 50 in each step; per step and per sample, from the file's decimals
    expected_a = (Decimal("1000.123") - 50) / 16
    assert Decimal(linear["a"]) == expected_a.quantize(Decimal("0.001"), rounding="ROUND_HALF_EVEN")
    assert linear["calls_a"] == "1.0" and linear["calls_b"] == "1.0"
    document = json.loads(tuiprof("diff", str(a_path), str(b_path), "--format", "json").stdout)
    for value in (
        document["verdict"]["median_a_us"],
        document["verdict"]["compared_a_us"],
        document["verdict"]["delta_pct"],
    ):
        assert len(repr(value).split(".")[-1]) <= 3, value
    ops = document["tables"]["ops"]["rows"]
    assert next(r for r in ops if r["name"] == "aten::linear")["calls_b"] == 1.0


@pytest.mark.parametrize(
    ("batch_a", "batch_b", "step_a", "step_b"),
    [(16, 32, 1000.0, 1846.0), (64, 8, 7000.0, 990.0), (8, 128, 500.0, 3550.0)],
)
def test_the_per_sample_verdict_agrees_with_its_own_step_lines(tmp_path, batch_a, batch_b, step_a, step_b) -> None:
    """Every place the diff speaks per sample divides each side by its own batch: the verdict's
    ratio, the per-sample line and the steps' delta under the operators (``coverage``), all
    against the answer computed here from the steps and batches the traces were built with
    (a B time divided by A's batch, or the other way round, fails whichever pair it hits)."""
    a = load_model(batch_trace(tmp_path / "a.json", batch_a, step_us=step_a))
    b = load_model(batch_trace(tmp_path / "b.json", batch_b, step_us=step_b))
    diff = diff_traces(a, b)
    per_sample_a, per_sample_b = step_a / batch_a, step_b / batch_b
    verdict = diff.verdict
    assert (verdict.compared_a_us, verdict.compared_b_us) == pytest.approx((per_sample_a, per_sample_b))
    ratio = max(per_sample_a, per_sample_b) / min(per_sample_a, per_sample_b)
    word = "faster" if per_sample_b < per_sample_a else "slower"
    pct = 100 * (per_sample_b - per_sample_a) / per_sample_a
    assert verdict.outcome == word and verdict.delta_pct == pytest.approx(pct)
    assert f"B is {ratio:.2f}x {word} per sample ({pct:+.1f} %" in verdict_text(verdict)
    assert diff.coverage.step_delta_us == pytest.approx(per_sample_b - per_sample_a)
    assert diff.coverage.operator_delta_us == pytest.approx(
        (step_b - 28) / batch_b - (step_a - 28) / batch_a
    )  # aten::linear's step - 50 us, aten::empty's 2 us and ProfilerStep#'s own 20 us, per sample
