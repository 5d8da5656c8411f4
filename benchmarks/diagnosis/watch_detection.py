"""Does the watch catch a slowdown, and only a slowdown?  (issue 35, item 4)

A small MLP trains under ``tuiprof run --watch DIR`` (this file, ``--train``);
from step S on every step does its forward and backward 3 to 6 times (drawn
per step), so steps 1..S-1 are healthy and steps S.. are slow *by
construction*: the oracle.  Scenarios: S = 30, 60, 80, each on the machine as
it is and beside a CPU hog (a busy loop in another process), ``--runs``
times each (default 10).

Per run, from the history's own lines (``DIR/watch.jsonl``) and tuiprof's
labels (``summary DIR --view watch --format json``):

- caught: a slow trigger at step T with S <= T <= S + 5 whose capture tuiprof
  labels ``slower``; the delay is T - S (the earliest such trigger, caught or
  not: ``-`` when none came);
- named: the trigger names S as the first slow step (``first_slow``);
- false slow: captures labelled ``slower`` (or not labelled) whose steps are
  all before S (healthy by construction);
- noise spent: slow captures before S labelled ``not slower`` (the label is
  right; they started no cooldown);
- slow missed: captures of slow steps only (all >= S) labelled ``not slower``.

``python benchmarks/diagnosis/watch_detection.py [--runs N] [--from 30,60,80] [--no-hog]``
prints one table and the load average before and after each scenario (the
machine is shared: the quiet scenario is only as quiet as the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLOW_REPEATS = (3, 6)  # a slow step does its forward and backward this many times (drawn per step)
DEADLINE = 5  # steps after S within which the slowdown must be caught (issue 35's target)
AFTER = 25  # steps run after S (the trigger, the capture and its writing fit)
MIN_STEPS = 100


def train(steps: int, slow_from: int, seed: int) -> None:
    """The watched script: a 3-layer MLP, one thread; from ``slow_from`` on 3-6x the work a step."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = torch.randn(64, 256), torch.randint(0, 10, (64,))
    draw = random.Random(seed)
    for step in range(1, steps + 1):  # step N ends at its optimizer.step(): the watch's step N
        repeats = draw.randint(*SLOW_REPEATS) if step >= slow_from else 1
        optimizer.zero_grad()
        for _ in range(repeats):
            nn.functional.cross_entropy(model(inputs), targets).backward()
        optimizer.step()


@dataclass
class Outcome:
    caught: bool
    delay: int | None  # T - S of the first slow trigger at or after S (None: none came)
    named: bool
    false_slow: int
    noise_spent: int
    slow_missed: int
    healthy_takes: int
    slowdown: float  # median own time of the unprofiled steps from S over before S (the injected factor, measured)
    triggers: str  # the slow triggers, "step(first slow step)=verdict", for --detail


@dataclass
class Scenario:
    slow_from: int
    hog: bool
    outcomes: list[Outcome] = field(default_factory=list)
    load: list[tuple[float, float]] = field(default_factory=list)  # 1-minute load average before, after

    @property
    def name(self) -> str:
        return f"from {self.slow_from}, {'CPU hog' if self.hog else 'no hog'}"


def watched_run(directory: Path, slow_from: int, seed: int) -> Outcome:
    steps = max(MIN_STEPS, slow_from + AFTER)
    command = [sys.executable, "-m", "tuiprof", "run", "--watch", str(directory), __file__]
    command += ["--train", "--steps", str(steps), "--slow-from", str(slow_from), "--seed", str(seed)]
    run = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=600)
    if run.returncode != 0:
        raise SystemExit(f"the watched run failed (exit {run.returncode}):\n{run.stderr}")
    lines = [json.loads(line) for line in (directory / "watch.jsonl").read_text().splitlines()]
    # tuiprof's labels: the rows of `summary DIR --view watch --format json`, built in this process
    # (a `summary` process per run would add its start-up, seconds on this shared machine, to each).
    from tuiprof.analysis.watch import summarise_watch
    from tuiprof.report.watch import watch_rows
    from tuiprof.trace.watch import read_history

    rows = watch_rows(summarise_watch(read_history(directory)), with_dropped=True)
    verdicts = {(row["trigger"], row["first_step"]): row.get("verdict", "") for row in rows}  # none before history v2
    return judge(lines, verdicts, slow_from)


def judge(lines: list[dict], verdicts: dict[tuple[str, int], str], slow_from: int) -> Outcome:
    """One run against the construction: steps >= ``slow_from`` are slow, the others are not."""
    triggers = [line for line in lines if line.get("e") == "trigger" and line["trigger"] == "slow"]
    captures = [line for line in lines if line.get("e") == "capture"]
    dropped = {line["path"] for line in lines if line.get("e") == "dropped"}

    def capture_of(trigger: dict) -> dict | None:
        later = [c for c in captures if c["trigger"] == "slow" and c["first_step"] > trigger["step"]]
        return later[0] if later else None

    first = next((t for t in triggers if t["step"] >= slow_from), None)
    caught = False
    for trigger in triggers:
        capture = capture_of(trigger)
        within = slow_from <= trigger["step"] <= slow_from + DEADLINE
        if within and capture and verdicts.get(("slow", capture["first_step"])) == "slower":
            caught = True
    false_slow = noise = missed = 0
    for capture in captures:
        if capture["trigger"] != "slow" or capture["path"] in dropped:
            continue
        verdict = verdicts.get(("slow", capture["first_step"]), "")
        if capture["last_step"] < slow_from:
            false_slow += verdict != "not slower"
            noise += verdict == "not slower"
        elif capture["first_step"] >= slow_from and verdict == "not slower":
            missed += 1
    own = {line["s"]: line["w"] - line.get("q", 0.0) for line in lines if "s" in line and not line.get("p")}
    before = [w for s, w in own.items() if 16 <= s < slow_from]
    after = [w for s, w in own.items() if s >= slow_from]
    described = []
    for trigger in triggers:
        capture = capture_of(trigger)
        verdict = verdicts.get(("slow", capture["first_step"]), "") if capture else "no capture"
        described.append(f"{trigger['step']}({trigger.get('first_slow')})={verdict or '?'}")
    return Outcome(
        caught,
        None if first is None else first["step"] - slow_from,
        first is not None and first.get("first_slow") == slow_from,
        false_slow,
        noise,
        missed,
        sum(c["trigger"] == "healthy" for c in captures),
        statistics.median(after) / statistics.median(before) if before and after else float("nan"),
        " ".join(described) or "none",
    )


def run_scenario(scenario: Scenario, runs: int, base: Path, detail: bool) -> None:
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if scenario.hog else None
    try:
        if hog:
            time.sleep(1.0)  # the hog is running before the job starts
        load_before = os.getloadavg()[0]
        for index in range(runs):
            directory = base / f"s{scenario.slow_from}-{'hog' if scenario.hog else 'quiet'}-{index}"
            scenario.outcomes.append(watched_run(directory, scenario.slow_from, seed=index))
            if detail:
                print(f"{scenario.name}, run {index}: slow triggers {scenario.outcomes[-1].triggers}", file=sys.stderr)
            else:
                print(".", end="", file=sys.stderr, flush=True)
        scenario.load.append((load_before, os.getloadavg()[0]))
    finally:
        if hog:
            hog.kill()
            hog.wait()


def table(scenarios: list[Scenario]) -> str:
    header = (
        f"{'scenario':<22}{'runs':>5}{'caught':>7}{'delay max':>10}{'false slow':>11}"
        f"{'named S':>8}{'noise':>6}{'missed':>7}{'x slow':>7}"
    )
    lines = [header, "-" * len(header)]
    for scenario in scenarios:
        outcomes = scenario.outcomes
        delays = [o.delay for o in outcomes if o.delay is not None]
        delay = str(max(delays)) if len(delays) == len(outcomes) else f"{max(delays, default=0)} (-)"
        lines.append(
            f"{scenario.name:<22}{len(outcomes):>5}{sum(o.caught for o in outcomes):>7}{delay:>10}"
            f"{sum(o.false_slow for o in outcomes):>11}{sum(o.named for o in outcomes):>8}"
            f"{sum(o.noise_spent for o in outcomes):>6}{sum(o.slow_missed for o in outcomes):>7}"
            f"{statistics.median(o.slowdown for o in outcomes):>6.1f}x"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10, help="runs per scenario (default 10)")
    parser.add_argument("--from", dest="starts", default="30,60,80", help="slowdown starts S (default 30,60,80)")
    parser.add_argument("--no-hog", action="store_true", help="only the scenarios without a CPU hog")
    parser.add_argument(
        "--detail", action="store_true", help="each run's slow triggers on stderr: step(first slow step)=verdict"
    )
    parser.add_argument("--keep", metavar="DIR", help="keep the watch folders in DIR (default: deleted)")
    parser.add_argument("--train", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=MIN_STEPS, help=argparse.SUPPRESS)
    parser.add_argument("--slow-from", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.train:
        train(args.steps, args.slow_from, args.seed)
        return
    starts = [int(s) for s in args.starts.split(",")]
    scenarios = [Scenario(s, hog) for hog in ((False,) if args.no_hog else (False, True)) for s in starts]
    began = time.perf_counter()
    print(
        f"watch detection: {args.runs} runs per scenario, MLP 256-256-256-10 batch 64, 1 thread, steps 3-6x the "
        f"work from S; {os.cpu_count()} CPUs, torch {version('torch')}, load average {os.getloadavg()[0]:.2f}"
    )
    with tempfile.TemporaryDirectory(prefix="tuiprof-watch-bench-") as scratch:
        base = Path(args.keep or scratch)
        for scenario in scenarios:
            run_scenario(scenario, args.runs, base, args.detail)
    print(file=sys.stderr)
    print(table(scenarios))
    for scenario in scenarios:
        before, after = scenario.load[0]
        print(f"load average (1 min), {scenario.name}: {before:.2f} before, {after:.2f} after")
    print(
        f"caught: a slow trigger within {DEADLINE} steps of S whose capture tuiprof labels slower; delay: its step - S "
        "(of the first slow trigger at or after S; (-): none in some run); false slow: captures of healthy steps "
        "labelled slower; named S: the trigger names S as the first slow step; noise: slow captures of healthy "
        "steps labelled not slower; missed: captures of slow steps labelled not slower; x slow: median own "
        "time (wall less the wait for a CPU) of the unprofiled steps from S over before S (the injected "
        f"slowdown, measured).  {time.perf_counter() - began:.0f} s in all."
    )


if __name__ == "__main__":
    main()
