"""``tuiprof diff`` on real captures: the shipped resnet18 pair (batch 128 vs
batch 64, both made by scripts/make_sample_traces.py) and two ranks of the
shared 8-rank DLRM run."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES, SHARED_TRACES, needs_shared, shared_trace_paths
from tests.helpers.cli import tuiprof
from tuiprof.analysis import load_model
from tuiprof.analysis.diff import diff_traces
from tuiprof.report.diff import render_diff

BATCH_128 = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
BATCH_64 = SAMPLES / "resnet18_b64_cpu.pt.trace.json.gz"
DLRM = SHARED_TRACES / "dlrm_8ranks"


def test_half_the_batch_is_faster_and_the_convolution_backward_moved_most(resnet_model) -> None:
    diff = diff_traces(resnet_model, load_model(BATCH_64))
    verdict = diff.verdict
    assert verdict.outcome == "faster" and verdict.median_b_us < verdict.median_a_us
    top = verdict.contributors[0]
    assert top.name == "aten::convolution_backward" and top.delta < 0 and top.share_pct > 50
    assert diff.peak_b_bytes < diff.peak_a_bytes
    # Both steps of B are faster, module for module the biggest convolutions moved most.
    assert all(r.delta < 0 for r in diff.table("steps").rows)
    assert diff.table("modules").rows[0].name.startswith("ResNet_0/Sequential_5/")
    # The same operators ran (same model): nothing added or removed by name.
    assert {r.status for r in diff.table("ops").rows} <= {"changed", "same"}


def test_reversed_pair_is_slower_and_fails_the_gate() -> None:
    result = tuiprof("diff", str(BATCH_64), str(BATCH_128), "--fail-if-slower", "5%", "--format", "json")
    assert result.returncode == 1
    assert "top regressions: aten::convolution_backward" in result.stderr
    document = json.loads(result.stdout)
    assert document["verdict"]["outcome"] == "slower"
    assert tuiprof("diff", str(BATCH_128), str(BATCH_64), "--fail-if-slower", "5%").returncode == 0


@needs_shared
def test_two_ranks_of_the_dlrm_run() -> None:
    rank0, rank1 = sorted(DLRM.iterdir())[:2]
    diff = diff_traces(load_model(rank0), load_model(rank1))
    assert diff.table("ops").metric == "self device time"
    # Rank 1 waited longer in its all-to-all: the collective carries the delta.
    assert diff.verdict.contributors[0].name == "nccl:all_to_all"
    assert diff.table("kernels").rows[0].name.startswith("ncclKernel_SendRecv")
    assert diff.verdict.steps_a == diff.verdict.steps_b == 1
    assert "Modules: not compared: A and B have no module tree (recorded without with_stack=True)" in diff.notes


@needs_shared
def test_a_run_directory_against_itself_by_rank_and_averaged() -> None:
    for extra in (["--trace", "3"], ["--ranks"], ["--ranks", "0,5"]):
        result = tuiprof("diff", str(DLRM), str(DLRM), "--format", "json", *extra)
        assert result.returncode == 0, result.stderr
        document = json.loads(result.stdout)
        assert document["verdict"]["outcome"] == "no change"
        assert all(r["delta"] == 0 for t in document["tables"].values() for r in t["rows"])
    assert (
        "mean of ranks 0,5"
        in json.loads(tuiprof("diff", str(DLRM), str(DLRM), "--ranks", "0,5", "--format", "json").stdout)["a"]
    )
    bad = tuiprof("diff", str(DLRM), str(DLRM), "--ranks", "9")
    assert bad.returncode == 2 and "no trace of rank 9" in bad.stderr


@needs_shared
@pytest.mark.parametrize("path", [p for p in shared_trace_paths() if p.is_file()], ids=lambda p: p.name[:40])
def test_every_shared_trace_diffed_with_itself_is_no_change(path) -> None:
    model = load_model(path)
    diff = diff_traces(model, model)
    assert diff.verdict.outcome == "no change"
    assert all(r.delta == 0 and r.status == "same" for t in diff.tables for r in t.rows)
    assert all(line for line in diff.notes) and render_diff(diff, "markdown")


def _with_live_names(path, sidecar) -> object:
    """A shipped sample as a live capture knows it: module facts from its sidecar."""
    from tuiprof.analysis import analyze
    from tuiprof.trace import load_trace
    from tuiprof.trace.live import LiveFacts, ModuleFacts

    facts = json.loads(sidecar.read_text())["modules"]
    return analyze(load_trace(path), LiveFacts(modules={k: ModuleFacts(**v) for k, v in facts.items()}))


def test_live_captures_match_modules_by_qualified_name() -> None:
    a = _with_live_names(BATCH_128, SAMPLES / "resnet18_cpu.key_averages.json")
    b = _with_live_names(BATCH_64, SAMPLES / "resnet18_b64_cpu.key_averages.json")
    modules = diff_traces(a, b).table("modules")
    top = modules.rows[0]
    assert top.name.startswith("layer4.") and top.detail.startswith("Conv2d_") and top.delta < 0
    assert modules.row("model") is not None and {r.status for r in modules.rows} == {"changed"}
    # Only one side named: matched by path, as for files.
    assert diff_traces(a, load_model(BATCH_64)).table("modules").rows[0].name.startswith("ResNet_0/")
