#!/usr/bin/env python3
"""Time the analysis of a trace on 1 and 2 cores (issue 29 item 2), stage by stage.

Each measurement is its own process pinned to a CPU set (``sched_setaffinity``: the
decode workers inherit it, and the analysis starts one thread per core in it), run
alternately with the other sets, so the ratios are from one run: this machine is
shared, its absolute times are not.  The cache is off (``TUIPROF_NO_CACHE=1``): the
decode is a first open's.  For each run: the decode (to the store, workers included)
and the analysis (``analyze``: the model with its by-name table), wall and CPU
seconds, and per stage (``analysis/stages.py``'s side-by-side stages; "between stages"
is the analysis's CPU outside them, the serial glue) the CPU of its own thread.

    nice python scripts/bench_analysis.py /tmp/big-mi300.json [...] [--cores 0,0:1] [--stages]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, os, resource, sys, time
cpus = [int(c) for c in sys.argv[2].split(":")]
os.sched_setaffinity(0, cpus)
sys.path.insert(0, ROOT)
from tuiprof.allocator import return_freed_memory
return_freed_memory()  # as the tuiprof command does
from tuiprof.analysis.build import analyze
from tuiprof.analysis.stages import recording
from tuiprof.trace import load_trace

def cpu_now():
    own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime

started, cpu = time.perf_counter(), cpu_now()
store = load_trace(sys.argv[1])
decoded, decode_cpu = time.perf_counter(), cpu_now()
with recording() as stages:
    model = analyze(store)
done, analysis_cpu = time.perf_counter(), cpu_now()
print(json.dumps({
    "events": model.info.event_count, "decode_s": decoded - started, "decode_cpu_s": decode_cpu - cpu,
    "analysis_s": done - decoded, "analysis_cpu_s": analysis_cpu - decode_cpu,
    "stages": [[s.name, s.wall_s, s.cpu_s] for s in stages],
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
}))
""".replace("ROOT", repr(str(ROOT)))


def measure(path: Path, cpus: str) -> dict:
    env = dict(os.environ, TUIPROF_NO_CACHE="1")
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), cpus], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{path} on CPUs {cpus} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--cores", default="0,0:1", help="CPU sets to compare, comma-separated, CPUs joined by ':'")
    parser.add_argument("--stages", action="store_true", help="print each run's stage table")
    args = parser.parse_args()
    sets = args.cores.split(",")
    print(
        f"{'file':<18} {'MB':>5} {'Mev':>5} {'cpus':>4} {'decode s':>8} {'cpu s':>6} {'analysis s':>10} {'cpu s':>6} "
        f"{'us/ev':>5} {'open s':>6} {'RSS MB':>6}"
    )
    for path in args.files:
        runs = {cpus: measure(path, cpus) for cpus in sets}
        size_mb = path.stat().st_size / 1e6
        for cpus, run in runs.items():
            print(
                f"{path.name[-18:]:<18} {size_mb:5.0f} {run['events'] / 1e6:5.2f} {len(cpus.split(':')):>4} "
                f"{run['decode_s']:8.2f} {run['decode_cpu_s']:6.2f} {run['analysis_s']:10.2f} {run['analysis_cpu_s']:6.2f} "
                f"{run['analysis_cpu_s'] / run['events'] * 1e6:5.2f} {run['decode_s'] + run['analysis_s']:6.2f} "
                f"{run['peak_rss_mb']:6.0f}",
                flush=True,
            )
        first, *others = sets
        for cpus in others:
            one, more = runs[first], runs[cpus]
            print(
                f"{'':<18} ratio: {len(cpus.split(':'))} cpus / {len(first.split(':'))}: analysis "
                f"{one['analysis_s'] / more['analysis_s']:.2f}x faster (CPU {more['analysis_cpu_s'] / one['analysis_cpu_s']:.2f}x), "
                f"whole open {(one['decode_s'] + one['analysis_s']) / (more['decode_s'] + more['analysis_s']):.2f}x"
            )
        if args.stages:
            for cpus, run in runs.items():
                print_stages(run, len(cpus.split(":")))
    return 0


def print_stages(run: dict, cores: int) -> None:
    """Each stage's CPU (summed over its calls: the nesting's parts are one line), and the rest."""
    total: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for name, wall_s, cpu_s in run["stages"]:
        line = total[name]
        line[0] += 1
        line[1] += wall_s
        line[2] += cpu_s
    print(f"    stages on {cores} cpus: {'stage':<26} {'runs':>4} {'wall s':>6} {'cpu s':>6}")
    for name, (runs, wall_s, cpu_s) in sorted(total.items(), key=lambda item: -item[1][2]):
        print(f"    {'':<18} {name:<26} {runs:>4} {wall_s:6.3f} {cpu_s:6.3f}")
    between = run["analysis_cpu_s"] - sum(line[2] for line in total.values())
    print(f"    {'':<18} {'(between stages)':<26} {'':>4} {'':>6} {between:6.3f}")


if __name__ == "__main__":
    sys.exit(main())
