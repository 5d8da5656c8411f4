#!/usr/bin/env python3
"""The diagnosis benchmark: does tuiprof's first answer name the injected cause, say the right
remedy, and predict what the remedy saves?  (docs/advice.md has the design.)

For each scenario (scenarios.py) it profiles the injected script, reads ``summary --view
findings --format json``, takes the finding of the scenario's kind (time: the first
finding; memory: the first with a peak_bytes saving, else the first ``memory-*``), runs the
remedied script, measures the same metric the same way (the mean step of the Steps view, or
the peak of the Memory views) and prints one table::

    PYTHONPATH=. python benchmarks/diagnosis/run.py [--only NAME[,NAME]] [--quick] [--json OUT] [--keep DIR]

It exits 1 when a target is missed (the first finding names the cause in 95 % of the
scenarios, its remedy is right in 90 %, every predicted saving is within 10 % of the
re-measured one or the finding abstains), 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks.diagnosis.gpu_traces import write_pair  # noqa: E402
from benchmarks.diagnosis.scenarios import BY_NAME, MEMORY, PEAK_MEMORY, SCENARIOS, Scenario  # noqa: E402
from tuiprof.report.units import format_bytes, format_us  # noqa: E402

HERE = Path(__file__).resolve().parent
TOLERANCE_PCT = 10.0  # a predicted saving further than this from the re-measured one is wrong
MIN_EFFECT = 0.10  # a remedy saving less than this share of the metric: the scenario shows no cause
TARGETS = {"cause": 95.0, "remedy": 90.0, "saving": 100.0}  # % of the scenarios (issue 35)
ROWS_ENV = "DIAGNOSIS_ROWS"  # where an external checker may write its rows (JSON)
CAPTURE_TIMEOUT_S = 600


class HarnessError(Exception):
    """A scenario could not be run or measured (not a wrong answer of tuiprof's)."""


# ------------------------------------------------------------------ scoring (pure: tests/unit/test_diagnosis.py)


@dataclass
class Result:
    """One row of the table."""

    scenario: str
    cause_ok: bool = False
    remedy_ok: bool = False
    saving_ok: bool = False
    metric: str = ""  # step_us, peak_bytes, or "ratio" (the diff's per-sample speed-up)
    predicted: float | None = None  # the finding's saving (None: abstained or none)
    measured: float | None = None  # injected metric - remedied metric, re-measured
    error_pct: float | None = None  # (predicted - measured) / measured
    note: str = ""  # abstained: why; or what was said instead of the cause
    finding: dict | None = None  # the finding judged, as summary's JSON gives it
    details: dict = field(default_factory=dict)  # what-if, noise, current, seconds...
    harness_error: str = ""  # the scenario itself failed (run, measure, or no effect)


def mentions(text: str, word: str) -> bool:
    """``word`` in ``text`` as a whole name, case-insensitive: ``blocks.2`` is not in
    ``blocks.20`` or ``blocks.2.linear``, ``rank 1`` not in ``rank 12``; ``gradient`` is in
    ``gradients`` (a word may go on; a name may not)."""
    left = r"(?<![\w])" if word[:1].isalnum() or word[:1] == "_" else ""
    return re.search(left + re.escape(word) + r"(?![\d]|\.\w)", text, re.IGNORECASE) is not None


def pick_finding(findings: Sequence[dict], metric: str) -> dict | None:
    """The finding a scenario is judged on: the first one for time; for memory the first whose
    saving is in peak_bytes, else the first ``memory-*`` one."""
    if metric != PEAK_MEMORY:
        return findings[0] if findings else None
    return next((f for f in findings if f.get("metric") == PEAK_MEMORY), None) or next(
        (f for f in findings if str(f.get("id", "")).startswith("memory-")), None
    )


def names_cause(scenario: Scenario, finding: dict) -> bool:
    if scenario.ids == MEMORY:
        right_kind = finding.get("metric") == PEAK_MEMORY or str(finding.get("id", "")).startswith("memory-")
    else:
        right_kind = finding.get("id") in scenario.ids
    text = str(finding.get("text", ""))
    return right_kind and all(any(mentions(text, word) for word in group) for group in scenario.names)


def right_remedy(scenario: Scenario, finding: dict) -> bool:
    remedy = str(finding.get("remedy") or "")
    return bool(remedy) and any(all(mentions(remedy, word) for word in group) for group in scenario.remedy)


def judge(
    scenario: Scenario, findings: Sequence[dict], current: float, remedied: float, judged: float | None = None
) -> Result:
    """Score tuiprof's findings on the injected capture against the re-measured metric:
    ``current`` (the injected captures') and ``remedied`` (the remedied captures'); ``judged``:
    the metric of the capture the findings are of (``current`` with one pair), which the
    finding's own ``current`` should equal."""
    measured = current - remedied
    result = Result(scenario.name, metric=scenario.metric, measured=measured)
    if measured < MIN_EFFECT * current:
        result.harness_error = (
            f"the remedy saved {_amount(scenario.metric, measured)} of {_amount(scenario.metric, current)} "
            f"(under {MIN_EFFECT:.0%}): the scenario shows no cause"
        )
    finding = pick_finding(findings, scenario.metric)
    result.finding = finding
    if finding is None:
        result.note = "no finding" if scenario.metric != PEAK_MEMORY else "no memory finding"
        return result
    result.cause_ok = names_cause(scenario, finding)
    result.remedy_ok = right_remedy(scenario, finding)
    if not result.cause_ok:
        result.note = f"said {finding.get('id')}: {finding.get('text', '')}"
        return result
    if finding.get("metric") and finding["metric"] != scenario.metric:
        result.note = f"saving predicted in {finding['metric']}, the remedy measured in {scenario.metric}"
        return result
    predicted = finding.get("saving")
    if predicted is None:
        why = str(finding.get("abstain") or "")
        result.saving_ok = bool(why)
        result.note = f"abstained: {why}" if why else "no saving predicted and no reason given"
        return result
    result.predicted = float(predicted)
    result.error_pct = 100 * (result.predicted - measured) / measured if measured else None
    result.saving_ok = result.error_pct is not None and abs(result.error_pct) <= TOLERANCE_PCT
    reported, judged = finding.get("current"), current if judged is None else judged
    if reported is not None and judged and abs(float(reported) - judged) > 0.01 * judged:
        result.note = (
            f"its current {_amount(scenario.metric, float(reported))}, measured {_amount(scenario.metric, judged)}"
        )
    return result


def judge_diff(scenario: Scenario, verdict: dict, median_a: float, median_b: float) -> Result:
    """Score ``tuiprof diff A B``'s verdict: B (the batch doubled) must be faster per sample
    and slower per step, and its per-sample speed-up (A's time a sample / B's) must be within
    TOLERANCE_PCT of the one measured from each side's median step and known batch."""
    batch_a, batch_b = scenario.batches
    measured = (median_a / batch_a) / (median_b / batch_b)
    result = Result(scenario.name, metric="ratio", measured=measured)
    if not (measured > 1 and median_b > median_a):
        result.harness_error = "the captures are not faster per sample and slower per step: the scenario shows nothing"
    result.finding = {key: verdict.get(key) for key in ("outcome", "text", "per_sample", "median_a_us", "median_b_us")}
    result.cause_ok = bool(verdict.get("per_sample")) and verdict.get("outcome") == "faster"
    result.remedy_ok = float(verdict.get("median_b_us") or 0) > float(verdict.get("median_a_us") or 0)
    if not result.cause_ok:
        result.note = f"verdict: {verdict.get('text', '')}"
        return result
    compared_a, compared_b = verdict.get("compared_a_us"), verdict.get("compared_b_us")
    if not compared_a or not compared_b:
        result.note = "the verdict gives no per-sample times"
        return result
    result.predicted = float(compared_a) / float(compared_b)
    result.error_pct = 100 * (result.predicted - measured) / measured
    result.saving_ok = abs(result.error_pct) <= TOLERANCE_PCT
    if not result.remedy_ok:
        result.note = f"verdict's steps: A {format_us(verdict.get('median_a_us') or 0)}, B {format_us(verdict.get('median_b_us') or 0)}"
    return result


def _amount(metric: str, value: float) -> str:
    if metric == PEAK_MEMORY:
        return format_bytes(int(value))
    if metric == "ratio":
        return f"{value:.2f}x"
    return format_us(value)


# ------------------------------------------------------------------ running tuiprof


def _env() -> dict[str, str]:
    """The child's environment: the tuiprof PYTHONPATH names, else this checkout's (children run
    outside the repository, so that it is the one imported), and no decoded-trace cache (every
    capture is read once)."""
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": path or str(ROOT), "TUIPROF_NO_CACHE": "1"}


def _run(command: list[str], cwd: Path, timeout: float = CAPTURE_TIMEOUT_S) -> subprocess.CompletedProcess:
    done = subprocess.run(command, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise HarnessError(f"{' '.join(command[:6])}... exited {done.returncode}: {' | '.join(tail)}")
    return done


def tuiprof_json(*args: str) -> object:
    """``python -m tuiprof ARGS --format json``, run in the folder of the file it reads (never the
    repository: ``-m`` puts the working folder first on sys.path, ahead of PYTHONPATH)."""
    done = _run([sys.executable, "-m", "tuiprof", *args, "--format", "json"], Path(args[1]).parent, timeout=300)
    return json.loads(done.stdout)


def capture(scenario: Scenario, folder: Path, remedied: bool) -> Path:
    """Profile the scenario's script (``--remedy`` when ``remedied``) into ``folder``; the trace
    or run directory."""
    script = HERE / "scenarios" / f"{scenario.script}.py"
    args = [*scenario.args, *(["--remedy"] if remedied else [])]
    label = "remedied" if remedied else "injected"
    folder.mkdir(parents=True, exist_ok=True)
    run = ["-m", "tuiprof", "run", "--no-tui", *scenario.schedule]
    if scenario.how == "torchrun":
        target = folder / label
        command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(scenario.ranks)]
        _run([*command, *run, "--save", str(target / f"{scenario.script}.json.gz"), str(script), *args], folder)
        return target
    target = folder / f"{label}.json.gz"
    _run([sys.executable, *run, "--save", str(target), str(script), *args], folder)
    return target


def captures(scenario: Scenario, folder: Path, repeat: int) -> list[tuple[Path, Path]]:
    """``repeat`` pairs (injected, remedied), taken alternately so that a change of the
    machine's load during the run falls on both sides."""
    if scenario.how == "synthetic":
        return [write_pair(scenario.builder, folder)]  # built, not measured: the same every time
    return [
        (capture(scenario, folder / str(n), remedied=False), capture(scenario, folder / str(n), remedied=True))
        for n in range(1, repeat + 1)
    ]


def step_times(path: Path) -> list[float]:
    """Every step's duration (us): a trace's Steps view, or every rank's steps of a run."""
    if path.is_dir():
        rows = tuiprof_json("summary", str(path), "--view", "rank-steps")
        return [float(row["step_us"]) for row in rows]  # type: ignore[union-attr, index]
    rows = tuiprof_json("summary", str(path), "--view", "steps")
    return [float(row["duration_us"]) for row in rows]  # type: ignore[union-attr, index]


def peak_bytes(path: Path) -> float:
    """The peak as the memory views measure it: torch's categories at the peak summed (every
    tensor torch sees, the weights included; what the what-ifs subtract from), else the
    allocator peak of the Memory view."""
    categories = tuiprof_json("summary", str(path), "--view", "memory-categories")
    if categories:
        return float(sum(row["bytes_at_peak"] for row in categories))  # type: ignore[union-attr, index]
    rows = tuiprof_json("summary", str(path), "--view", "memory")
    if not rows:
        raise HarnessError(f"{path.name}: no memory recorded")
    return float(max(row["peak_bytes"] for row in rows))  # type: ignore[union-attr, index]


def findings_of(path: Path) -> list[dict]:
    return tuiprof_json("summary", str(path), "--view", "findings")  # type: ignore[return-value]


# ------------------------------------------------------------------ the scenarios' kinds


def run_measured(scenario: Scenario, folder: Path, repeat: int) -> Result:
    """script, torchrun and synthetic: the findings of the first injected capture, the metric
    of every capture (the mean of the pairs' values)."""
    pairs = captures(scenario, folder, repeat)
    findings = findings_of(pairs[0][0])
    details: dict = {}
    if scenario.metric == PEAK_MEMORY:
        values = [(peak_bytes(injected), peak_bytes(remedied)) for injected, remedied in pairs]
    else:
        steps = [(step_times(injected), step_times(remedied)) for injected, remedied in pairs]
        values = [(statistics.fmean(before), statistics.fmean(after)) for before, after in steps]
        details["noise_us"] = _standard_error(steps)
    current, after = (statistics.fmean(side) for side in zip(*values))
    result = judge(scenario, findings, current, after, judged=values[0][0])
    savings = [a - b for a, b in values]
    details.update({"current": current, "remedied": after, "savings": savings})
    if max(savings) - min(savings) > TOLERANCE_PCT / 100 * abs(current - after):
        result.note = f"{result.note.rstrip('.')}; " if result.note else ""
        result.note += f"the pairs' savings disagree by more than {TOLERANCE_PCT:.0f} %: " + ", ".join(
            _amount(scenario.metric, saving) for saving in savings
        )
    if scenario.what_if:
        details["what_if"] = _what_if(pairs[0][0], scenario.what_if, current - after)
    result.details.update(details)
    return result


def _standard_error(steps: list[tuple[list[float], list[float]]]) -> float | None:
    """Of the measured saving (the difference of two mean steps), from the spread of the steps
    in each capture: how far noise within a run moves it (drift between runs is not in it:
    ``savings`` in the details shows that, one per pair)."""
    a = [step for before, _ in steps for step in before]
    b = [step for _, after in steps for step in after]
    if len(a) < 2 or len(b) < 2:
        return None
    return (statistics.variance(a) / len(a) + statistics.variance(b) / len(b)) ** 0.5


def _what_if(path: Path, remedy: str, measured: float) -> dict:
    rows = tuiprof_json("summary", str(path), "--view", "memory-what-ifs")
    row = next((r for r in rows if r.get("remedy") == remedy), None)  # type: ignore[union-attr]
    if row is None:
        return {"remedy": remedy, "saves_bytes": None}
    saves = float(row["saves_bytes"])
    return {
        "remedy": remedy,
        "saves_bytes": saves,
        "error_pct": 100 * (saves - measured) / measured if measured else None,
    }


def run_diff(scenario: Scenario, folder: Path) -> Result:
    a, b = capture(scenario, folder, remedied=False), capture(scenario, folder, remedied=True)
    verdict = tuiprof_json("diff", str(a), str(b), "--view", "verdict")["verdict"]  # type: ignore[index]
    median_a, median_b = statistics.median(step_times(a)), statistics.median(step_times(b))
    result = judge_diff(scenario, verdict, median_a, median_b)
    result.details.update({"median_a_us": median_a, "median_b_us": median_b})
    return result


def run_external(scenario: Scenario, folder: Path) -> list[Result]:
    """A checker another part of the project writes: it may write its rows (a JSON list of
    objects with Result's keys: scenario, cause_ok, remedy_ok, saving_ok, metric, predicted,
    measured, error_pct, note) to the file named by $DIAGNOSIS_ROWS; without rows its exit
    status is one row (0: every column right)."""
    checker = ROOT / scenario.checker
    if not checker.is_file():
        return [Result(scenario.name, note=f"not run: {scenario.checker} does not exist yet")]
    rows_path = folder / "rows.json"
    env = {**_env(), ROWS_ENV: str(rows_path)}
    done = subprocess.run(
        [sys.executable, str(checker)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600
    )
    if rows_path.is_file():
        keys = set(Result.__dataclass_fields__)
        return [Result(**{k: v for k, v in row.items() if k in keys}) for row in json.loads(rows_path.read_text())]
    ok = done.returncode == 0
    last = (done.stdout + done.stderr).strip().splitlines()[-1:] or [""]
    return [Result(scenario.name, ok, ok, ok, note=f"exit {done.returncode}: {last[0]}")]


def run_scenario(scenario: Scenario, folder: Path, repeat: int = 1) -> list[Result]:
    started = time.perf_counter()
    try:
        if scenario.how == "external":
            results = run_external(scenario, folder)
        elif scenario.how == "diff":
            results = [run_diff(scenario, folder)]
        else:
            results = [run_measured(scenario, folder, repeat)]
    except (HarnessError, subprocess.TimeoutExpired, json.JSONDecodeError, KeyError) as error:
        results = [Result(scenario.name, harness_error=f"{type(error).__name__}: {error}")]
    for result in results:
        result.details.setdefault("seconds", round(time.perf_counter() - started, 1))
    return results


# ------------------------------------------------------------------ the table


COLUMNS = (("scenario", 16), ("cause", 5), ("remedy", 6), ("predicted", 9), ("measured", 9), ("error", 8))


def _error_cell(result: Result) -> str:
    if result.harness_error:
        return "FAILED"
    if result.error_pct is not None:
        return f"{result.error_pct:+.1f}%"
    if not result.cause_ok:
        return "n/a"
    return "abstain" if result.note.startswith("abstained") else "none"


def _cells(result: Result) -> list[str]:
    def amount(value: float | None) -> str:
        return "-" if value is None else _amount(result.metric, value)

    yes = {True: "yes", False: "no"}
    return [
        result.scenario,
        yes[result.cause_ok],
        yes[result.remedy_ok],
        amount(result.predicted),
        amount(result.measured),
        _error_cell(result),
    ]


def table(results: Sequence[Result], width: int) -> str:
    """The table, then a note per row that needs one (wrapped to ``width``), then the targets."""
    lines = [" ".join(f"{name:<{size}}" for name, size in COLUMNS).rstrip()]
    for result in results:
        cells = _cells(result)
        lines.append(
            " ".join(
                f"{cell[:size] if i == 0 else cell:<{size}}" for i, (cell, (_, size)) in enumerate(zip(cells, COLUMNS))
            ).rstrip()
        )
    notes = [
        f"{r.scenario}: " + "; ".join(part for part in (r.harness_error or r.note, _what_if_note(r)) if part)
        for r in results
        if r.harness_error or r.note or _what_if_note(r)
    ]
    if notes:
        lines.append("")
        for note in notes:
            lines.extend(textwrap.wrap(note, width, subsequent_indent="  "))
    lines.append("")
    for line in target_lines(results):
        lines.extend(textwrap.wrap(line, width, subsequent_indent="  "))
    return "\n".join(lines)


def _what_if_note(result: Result) -> str:
    what_if = result.details.get("what_if")
    if not what_if or what_if.get("saves_bytes") is None:
        return ""
    error = what_if.get("error_pct")
    off = f", {error:+.1f}% off" if error is not None else ""
    return f"what-if '{what_if['remedy']}': {format_bytes(int(what_if['saves_bytes']))}{off}"


def rates(results: Sequence[Result]) -> dict[str, float]:
    """% of the rows right in each column; a row whose scenario failed to run is wrong in all."""
    count = len(results) or 1

    def share(ok: list[bool]) -> float:
        return 100 * sum(ok) / count

    valid = [not r.harness_error for r in results]
    return {
        "cause": share([r.cause_ok and v for r, v in zip(results, valid)]),
        "remedy": share([r.remedy_ok and v for r, v in zip(results, valid)]),
        "saving": share([r.saving_ok and v for r, v in zip(results, valid)]),
    }


def target_lines(results: Sequence[Result]) -> list[str]:
    shares = rates(results)
    words = {"cause": "cause named first", "remedy": "remedy right", "saving": "saving within 10 % or abstained"}
    return [
        f"{words[key]}: {shares[key]:.0f} % (target {TARGETS[key]:.0f} %) {'met' if shares[key] >= TARGETS[key] else 'MISSED'}"
        for key in TARGETS
    ]


def targets_met(results: Sequence[Result]) -> bool:
    shares = rates(results)
    return bool(results) and all(shares[key] >= TARGETS[key] for key in TARGETS)


# ------------------------------------------------------------------ command line


def select(only: str | None, quick: bool) -> list[Scenario]:
    if only:
        names = [name.strip() for name in only.split(",") if name.strip()]
        unknown = [name for name in names if name not in BY_NAME]
        if unknown:
            raise SystemExit(f"unknown scenario {', '.join(unknown)}; known: {', '.join(BY_NAME)}")
        return [BY_NAME[name] for name in names]
    return [s for s in SCENARIOS if s.quick or not quick]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", metavar="NAME[,NAME]", help="these scenarios only")
    parser.add_argument("--quick", action="store_true", help="the CI subset")
    parser.add_argument("--json", metavar="OUT", help="also write every row, with its details, here")
    parser.add_argument("--keep", metavar="DIR", help="keep the captures here (default: a temporary folder)")
    parser.add_argument(
        "--repeat", type=int, default=1, metavar="N", help="capture each side N times, alternately (default 1)"
    )
    args = parser.parse_args(argv)
    chosen = select(args.only, args.quick)
    started, load = time.perf_counter(), os.getloadavg()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="tuiprof-diagnosis-"))
    results: list[Result] = []
    try:
        for number, scenario in enumerate(chosen, 1):
            print(f"[{number}/{len(chosen)}] {scenario.name}: {scenario.cause}", file=sys.stderr, flush=True)
            folder = work / scenario.name
            folder.mkdir(parents=True, exist_ok=True)
            results.extend(run_scenario(scenario, folder, max(1, args.repeat)))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    elapsed = time.perf_counter() - started
    width = max(60, min(shutil.get_terminal_size((80, 24)).columns, 100))
    print(table(results, width))
    print(f"{len(results)} rows in {elapsed:.0f}s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} at the start")
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "rows": [asdict(r) for r in results],
                    "rates": rates(results),
                    "targets": TARGETS,
                    "seconds": round(elapsed, 1),
                    "load_average": load,
                },
                indent=2,
            )
        )
    return 0 if targets_met(results) else 1


if __name__ == "__main__":
    sys.exit(main())
