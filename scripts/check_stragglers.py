"""Check tuiprof's straggler finding by doing it: slow a rank, read the finding, fix that rank, measure.

    python scripts/check_stragglers.py                 # every case (about 4 minutes on 2 cores)
    python scripts/check_stragglers.py --only "2 ranks, sleep"

Each case makes a real gloo run on CPU under ``torchrun ... -m tuiprof run`` of
scripts/straggler_ddp.py with one or two ranks slowed (a sleep, extra matrix products in a
module, a slow Dataset), reads ``summary RUN --view findings --format json`` and checks its
first finding: the rank it names first and the cause its remedy names.  Then it runs the same
with that rank's slowdown removed (the remedy applied; a second slowed rank stays slow),
FIXED_RUNS times (a loaded host makes one run's step wander by tens of %), and compares the
step it measures, as the finding's ``current`` does (``summary --view rank-steps``: the median
over ranks of each rank's median Step; the median of the runs, their range beside it), with
the predicted one (``current - saving``).  The ``estimate`` column is the saving tuiprof
computed, also where it abstained.  Runs without the slowdown are shared by the cases that
leave the same ranks slowed.

One table: case, named rank right?, cause right?, predicted step, measured step, error %.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from statistics import median

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "straggler_ddp.py"
ACTIVE_STEPS = 8  # profiled steps: enough for the saving's standard error
FIXED_RUNS = 3
# What the first finding's remedy must name for each slowdown.
CAUSE_WORDS = {"sleep": "sleep", "sleep-backward": "sleep", "matmul": "Extra_0", "data": "DataLoader(num_workers"}


@dataclass(frozen=True)
class Case:
    name: str
    ranks: int
    slow: tuple[str, ...]  # RANK:KIND:MS, scripts/straggler_ddp.py's --slow
    straggler: int  # the rank to name first: the one whose fix shortens the step most

    def kind_of(self, rank: int) -> str | None:
        return next((spec.split(":")[1] for spec in self.slow if int(spec.split(":")[0]) == rank), None)


CASES = (
    Case("2 ranks, sleep", 2, ("1:sleep:30",), 1),
    Case("2 ranks, matmul", 2, ("1:matmul:30",), 1),
    Case("2 ranks, data", 2, ("1:data:30",), 1),
    Case("4 ranks, sleep", 4, ("2:sleep:30",), 2),
    Case("4 ranks, matmul", 4, ("3:matmul:30",), 3),
    Case("4 ranks, data", 4, ("1:data:30",), 1),
    Case("4 ranks, two slowed", 4, ("1:sleep:45", "2:data:15"), 1),
    # Rank 2 does the most extra work (50 ms) but is late at the first collective by 30 ms, 10 ms
    # less than rank 1 (40 ms); at the second it leads rank 3 by 5 ms.  Fixing rank 1 saves 10 ms,
    # rank 2 5 ms: rank 1 first (the most-extra-work rule named rank 2).
    Case("4 ranks, late at two", 4, ("1:sleep:40", "2:sleep:30", "2:sleep-backward:20", "3:sleep-backward:15"), 1),
)


def free_port() -> int:
    with socket.socket() as probe:  # torchrun's default port may be taken by another run on this machine
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def capture(directory: Path, ranks: int, slow: tuple[str, ...]) -> None:
    command = [
        *("torchrun", "--nproc-per-node", str(ranks), "--master-port", str(free_port())),
        *("-m", "tuiprof", "run", "--no-tui", "--active", str(ACTIVE_STEPS)),
        *("--save", str(directory / "train.pt.trace.json.gz"), str(SCRIPT)),
        *(part for spec in slow for part in ("--slow", spec)),
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TUIPROF_NO_SIDECARS="1")
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")


def summary(directory: Path, view: str) -> list[dict]:
    command = [sys.executable, "-m", "tuiprof", "summary", str(directory), "--view", view, "--format", "json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), TUIPROF_NO_SIDECARS="1")
    return json.loads(subprocess.run(command, capture_output=True, text=True, env=env, check=True).stdout)


def measured_step_us(directory: Path) -> float:
    """The run's step as the finding's ``current`` measures it (analysis/ranks.py: run_step_us),
    recomputed from the rank-steps rows: the median over ranks of each rank's median Step."""
    steps: dict[int, list[float]] = {}
    for row in summary(directory, "rank-steps"):
        steps.setdefault(row["rank"], []).append(row["step_us"])
    return median(median(values) for values in steps.values())


_fixed: dict[tuple[int, tuple[str, ...]], list[float]] = {}


def fixed_steps_us(ranks: int, slow: tuple[str, ...], scratch: Path) -> list[float]:
    """The measured step of FIXED_RUNS runs with these slowdowns (shared by the cases that ask)."""
    key = (ranks, slow)
    if key not in _fixed:
        found = []
        for attempt in range(FIXED_RUNS):
            capture(scratch / f"fixed{attempt}", ranks, slow)
            found.append(measured_step_us(scratch / f"fixed{attempt}"))
        _fixed[key] = found
    return _fixed[key]


def estimate_us(directory: Path) -> float:
    """The saving tuiprof computed for the straggler it names first, claimed or not."""
    sys.path.insert(0, str(ROOT))
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.trace.run import open_run

    found = list(summarise_run(open_run(directory), use_sidecars=False).stragglers().values())
    return found[0].saving_us if found else 0.0


def check(case: Case, scratch: Path) -> dict:
    slowed = scratch / "slowed"
    capture(slowed, case.ranks, case.slow)
    rows = summary(slowed, "findings")
    first = rows[0] if rows and rows[0]["id"] == "straggler" else None
    named = int(first["text"].split()[2].rstrip(":")) if first else None
    kind = case.kind_of(named) if named is not None else None
    cause_right = first is not None and kind is not None and CAUSE_WORDS[kind] in first["remedy"]
    # the remedy applied to the rank it named (its slowdown removed; none if it named an unslowed rank)
    fixed = fixed_steps_us(case.ranks, tuple(spec for spec in case.slow if int(spec.split(":")[0]) != named), scratch)
    measured = median(fixed)
    current = first["current"] if first else measured_step_us(slowed)
    estimate = estimate_us(slowed)
    saving = first["saving"] if first else None
    return {
        "case": case.name,
        "rank": named == case.straggler,
        "cause": cause_right,
        "current": current,
        "predicted": current - saving if saving is not None else None,
        "estimate": current - estimate,
        "measured": measured,
        "measured_range": (min(fixed), max(fixed)),
        "abstain": first["abstain"] if first else "no straggler named",
        "named": named,
    }


def table(results: list[dict]) -> str:
    ms = lambda us: f"{us / 1000:.1f}"  # noqa: E731
    lines = [
        f"{'case':<20} {'rank':>4} {'cause':>5} {'step now':>8} {'predicted':>9} {'measured':>8} {'(range)':>11} "
        f"{'error %':>7} {'saving err %':>12} {'estimate':>8} {'est err %':>9}",
    ]
    for r in results:
        predicted = ms(r["predicted"]) if r["predicted"] is not None else "abstains"
        error = f"{100 * (r['predicted'] - r['measured']) / r['measured']:+.1f}" if r["predicted"] is not None else "-"
        saved = r["current"] - r["measured"]  # what removing the slowdown saved
        saving_error = f"{100 * (r['measured'] - r['predicted']) / saved:+.1f}" if r["predicted"] is not None else "-"
        estimate_error = f"{100 * (r['estimate'] - r['measured']) / r['measured']:+.1f}"
        low, high = (ms(us) for us in r["measured_range"])
        lines.append(
            f"{r['case']:<20} {'yes' if r['rank'] else 'NO':>4} {'yes' if r['cause'] else 'NO':>5} {ms(r['current']):>8} "
            f"{predicted:>9} {ms(r['measured']):>8} {low + '-' + high:>11} {error:>7} {saving_error:>12} "
            f"{ms(r['estimate']):>8} {estimate_error:>9}"
        )
    lines.append(
        f"steps in ms (median over ranks of the median Step); measured: the median of {FIXED_RUNS} runs "
        "without the named rank's slowdown (range: their min-max);\nerror % = (predicted - measured) / measured step; "
        "saving err % = (predicted - measured saving) / measured saving, the measured saving = step now - measured;\n"
        "estimate: the step tuiprof computed, also where it abstains"
    )
    lines.extend(f"{r['case']}: abstains: {r['abstain']}" for r in results if r["predicted"] is None)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", help="run only the case of this name (repeatable)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores", flush=True)
    results = []
    for case in cases:
        with tempfile.TemporaryDirectory(prefix="tuiprof-stragglers-") as scratch:
            results.append(check(case, Path(scratch)))
        print(f"{case.name}: done (load average {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    if not all(r["rank"] and r["cause"] for r in results):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
