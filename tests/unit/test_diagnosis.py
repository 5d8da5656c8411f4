"""The diagnosis benchmark (benchmarks/diagnosis): how it scores tuiprof's findings, on fake
findings whose right answer is known, then its quick subset run for real.

The scoring tests take well under a second.  The real run captures two scripts twice each
(tuiprof run) and writes two synthetic GPU trace pairs: 25 s on 2 free cores, 90 s at a load
average of 8.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks.diagnosis.run import (
    ROOT,
    Result,
    judge,
    judge_diff,
    mentions,
    pick_finding,
    rates,
    run_external,
    targets_met,
)
from benchmarks.diagnosis.scenarios import BY_NAME, Scenario

DATA = BY_NAME["data-loading"]
SLEEP = BY_NAME["module-sleep"]
MOMENTUM = BY_NAME["momentum"]
DIFF = BY_NAME["diff-batch"]  # batches 64 -> 128


def finding(id: str, text: str = "", remedy: str = "", metric: str = "", current=None, saving=None, abstain=""):
    """A row of ``summary --view findings --format json``."""
    return {
        "id": id,
        "severity": "warning",
        "text": text,
        "remedy": remedy,
        "metric": metric,
        "current": current,
        "saving": saving,
        "abstain": abstain,
    }


def loading(saving=60_000.0, remedy="DataLoader(num_workers=3, persistent_workers=True)", abstain=""):
    return finding(
        "data-loading",
        "Data loading is 60 % of step time (60.000ms per step), in the main process (num_workers=0).",
        remedy,
        "step_us",
        100_000.0,
        saving,
        abstain,
    )


# The injected capture's mean step is 100 ms, the remedied one's 40 ms: 60 ms saved.
def test_the_right_cause_remedy_and_saving_score_all_three() -> None:
    result = judge(DATA, [loading()], 100_000.0, 40_000.0)
    assert (result.cause_ok, result.remedy_ok, result.saving_ok) == (True, True, True)
    assert (result.predicted, result.measured, result.error_pct) == (60_000.0, 60_000.0, 0.0)
    assert not result.harness_error and not result.note


def test_a_wrong_cause_first_is_wrong_even_when_a_later_finding_is_right() -> None:
    top = finding("top-operator", "Top operator: aten::mm, 40 % of all self CPU time.", metric="step_us", saving=1.0)
    result = judge(DATA, [top, loading()], 100_000.0, 40_000.0)
    assert (result.cause_ok, result.remedy_ok, result.saving_ok) == (False, False, False)
    assert result.predicted is None and result.note.startswith("said top-operator: Top operator: aten::mm")


def test_a_wrong_remedy_is_wrong_with_the_cause_right() -> None:
    result = judge(DATA, [loading(remedy="use a faster disk")], 100_000.0, 40_000.0)
    assert (result.cause_ok, result.remedy_ok, result.saving_ok) == (True, False, True)
    assert not judge(DATA, [loading(remedy="")], 100_000.0, 40_000.0).remedy_ok


def test_the_findings_current_is_checked_against_the_capture_it_is_of() -> None:
    assert judge(DATA, [loading()], 100_000.0, 40_000.0).note == ""
    assert judge(DATA, [loading()], 104_000.0, 44_000.0).note == "its current 100.000ms, measured 104.000ms"
    assert judge(DATA, [loading()], 104_000.0, 44_000.0, judged=100_000.0).note == ""  # two pairs, the first's


def test_a_prediction_11_percent_off_misses_and_9_percent_off_passes() -> None:
    over = judge(DATA, [loading(saving=66_600.0)], 100_000.0, 40_000.0)
    assert over.error_pct == pytest.approx(11.0) and not over.saving_ok
    under = judge(DATA, [loading(saving=54_600.0)], 100_000.0, 40_000.0)
    assert under.error_pct == pytest.approx(-9.0) and under.saving_ok


def test_an_abstention_with_its_reason_passes_and_silence_does_not() -> None:
    abstained = judge(DATA, [loading(saving=None, abstain="the workers' cores are not known")], 100_000.0, 40_000.0)
    assert abstained.saving_ok and abstained.predicted is None
    assert abstained.note == "abstained: the workers' cores are not known"
    silent = judge(DATA, [loading(saving=None)], 100_000.0, 40_000.0)
    assert not silent.saving_ok and silent.note == "no saving predicted and no reason given"


def test_a_module_finding_must_name_the_injected_module_by_its_qualified_name() -> None:
    def slow(name: str):
        return finding(
            "slow-module",
            f"{name} (Block) spends 20.000ms a step in its own Python code.",
            f"remove the work in {name}'s forward",
        )

    assert judge(SLEEP, [slow("blocks.2")], 40_000.0, 20_000.0).cause_ok
    for wrong in ("blocks.3", "blocks.20", "blocks.2.linear", "Net_0/Block_2"):
        result = judge(SLEEP, [slow(wrong)], 40_000.0, 20_000.0)
        assert not result.cause_ok and not result.remedy_ok, wrong


def test_whole_names() -> None:
    assert mentions("Straggler rank 1: 40 ms", "rank 1") and not mentions("Straggler rank 12", "rank 1")
    assert mentions("call loss.item() every 100 steps", ".item()")
    assert mentions("61 % gradients", "gradient") and mentions("ADAM's state", "Adam")
    assert not mentions("blocks.2.linear", "blocks.2") and mentions("blocks.2's forward", "blocks.2")


def test_memory_scenarios_judge_the_first_finding_with_a_peak_saving() -> None:
    first = finding("top-operator", "Top operator: aten::mm", metric="step_us", saving=5.0)
    peak = finding("memory-peak", "Peak CPU memory 49.71 MiB: 33 % optimizer state, 33 % gradients.")
    state = finding(
        "memory-optimizer-state",
        "SGD's momentum buffers are 16.56 MiB at the peak.",
        "SGD(momentum=0) or a stateless optimizer",
        "peak_bytes",
        52_125_888.0,
        17_362_984.0,
    )
    assert pick_finding([first, peak, state], "peak_bytes") is state
    assert pick_finding([first, peak], "peak_bytes") is peak
    assert pick_finding([first, peak, state], "step_us") is first
    result = judge(MOMENTUM, [first, peak, state], 52_125_888.0, 34_762_904.0)
    assert (result.cause_ok, result.remedy_ok, result.saving_ok, result.error_pct) == (True, True, True, 0.0)
    only_peak = judge(MOMENTUM, [first, peak], 52_125_888.0, 34_762_904.0)
    assert (only_peak.cause_ok, only_peak.remedy_ok, only_peak.saving_ok) == (True, False, False)


def test_a_remedy_that_moves_nothing_fails_the_scenario_not_tuiprof() -> None:
    result = judge(DATA, [loading()], 100_000.0, 95_000.0)
    assert result.harness_error.startswith("the remedy saved 5.000ms of 100.000ms")
    assert rates([result]) == {"cause": 0.0, "remedy": 0.0, "saving": 0.0}


def verdict(compared_b: float) -> dict:
    """``tuiprof diff``'s verdict on batch 64 (40 ms a step) -> 128 (50 ms): 1.6x per sample."""
    return {
        "outcome": "faster",
        "text": "batch 64 -> 128: B is 1.60x faster per sample",
        "per_sample": True,
        "median_a_us": 40_000.0,
        "median_b_us": 50_000.0,
        "compared_a_us": 625.0,
        "compared_b_us": compared_b,
    }


def test_the_diff_verdict_is_checked_against_each_sides_steps_and_batch() -> None:
    right = judge_diff(DIFF, verdict(390.625), 40_000.0, 50_000.0)
    assert (right.cause_ok, right.remedy_ok, right.saving_ok) == (True, True, True)
    assert right.predicted == pytest.approx(1.6) and right.measured == pytest.approx(1.6)
    # issue 35's mutant: B's step divided by A's batch (781.25 us a sample): "1.25x slower" -> wrong
    mutant = judge_diff(DIFF, {**verdict(781.25), "outcome": "slower"}, 40_000.0, 50_000.0)
    assert not mutant.cause_ok and not mutant.saving_ok
    off = judge_diff(DIFF, verdict(440.0), 40_000.0, 50_000.0)  # faster, but 1.42x instead of 1.6x
    assert off.cause_ok and off.error_pct == pytest.approx(-11.2, abs=0.1) and not off.saving_ok


def test_targets() -> None:
    right = Result("a", True, True, True)
    assert targets_met([right] * 20)
    assert not targets_met([right] * 19 + [Result("b", True, True, False)])  # one saving wrong: 95 %
    assert not targets_met([right] * 18 + [Result("b", False, False, True)] * 2)  # 90 % named
    assert targets_met([right] * 19 + [Result("b", True, False, True)])  # 95 % remedies
    assert not targets_met([])


def test_an_external_checkers_rows_are_folded_in_or_its_exit_status_is_one_row(tmp_path) -> None:
    checker = tmp_path / "checker.py"
    checker.write_text(
        "import json, os\n"
        "rows = [{'scenario': 'watch-30', 'cause_ok': True, 'remedy_ok': True, 'saving_ok': True, 'note': 'step 31'},\n"
        "        {'scenario': 'watch-80-hog', 'cause_ok': False, 'note': 'caught at 91', 'unknown_key': 1}]\n"
        "open(os.environ['DIAGNOSIS_ROWS'], 'w').write(json.dumps(rows))\n"
    )
    rows = run_external(Scenario("watch", "external", "", checker=str(checker)), tmp_path)
    assert [(r.scenario, r.cause_ok, r.saving_ok, r.note) for r in rows] == [
        ("watch-30", True, True, "step 31"),
        ("watch-80-hog", False, False, "caught at 91"),
    ]
    checker.write_text("import sys\nprint('resnet18: layer4 off by 17 points')\nsys.exit(1)\n")
    (tmp_path / "rows.json").unlink()
    (failed,) = run_external(Scenario("compiled", "external", "", checker=str(checker)), tmp_path)
    assert (failed.cause_ok, failed.note) == (False, "exit 1: resnet18: layer4 off by 17 points")
    (missing,) = run_external(Scenario("x", "external", "", checker="no/such/checker.py"), tmp_path)
    assert missing.note == "not run: no/such/checker.py does not exist yet" and not missing.cause_ok


# ------------------------------------------------------------------ the quick subset, for real


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory) -> tuple[int, dict]:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("diagnosis") / "rows.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/diagnosis/run.py", "--quick", "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.is_file(), done.stderr[-2000:]
    return done.returncode, json.loads(out.read_text())


def test_the_quick_scenarios_run_and_their_remedies_move_the_metric(quick_run) -> None:
    """The instrument itself: every quick scenario ran, and removing its cause saved at least
    10 % of its metric (else a scenario shows no cause and cannot judge tuiprof)."""
    _, report = quick_run
    rows = report["rows"]
    assert {row["scenario"] for row in rows} == {"data-loading", "momentum", "gpu-host-sync", "gpu-copy"}
    assert [(row["scenario"], row["harness_error"]) for row in rows if row["harness_error"]] == []
    assert all(row["measured"] >= 0.1 * row["details"]["current"] for row in rows)


def test_the_quick_scenarios_meet_the_targets(quick_run) -> None:
    """Cause and remedy right in every quick row; the savings of the rows measured without a
    clock (the memory replay, the synthetic GPU traces) within 10 %.  data-loading's saving is a
    real step time, measured on a CI machine of unknown load: within 25 % here (the benchmark's
    quiet runs, docs/bench-log/diagnosis.md, hold it to 10 %)."""
    _, report = quick_run
    rows = {row["scenario"]: row for row in report["rows"]}
    assert {name: (row["cause_ok"], row["remedy_ok"]) for name, row in rows.items()} == {
        name: (True, True) for name in rows
    }
    assert [name for name, row in rows.items() if name != "data-loading" and not row["saving_ok"]] == []
    loading = rows["data-loading"]
    assert loading["error_pct"] is not None and abs(loading["error_pct"]) <= 25, loading
