#!/usr/bin/env python3
"""Time to the ranks table of a run directory, and peak memory, against loading the ranks one after another.

Modes, each in its own process (peak RSS is that process's; "workers MB" the
largest child it started):

- ``sequential``: the baseline: every rank loaded and analysed in this process,
  one after another (what a one-rank-at-a-time tool does), keeping only the
  summaries;
- ``parallel``: ``summarise_run`` with one worker process per core (writes sidecars);
- ``cluster``: ``summarise_run`` on ``--cluster local:N`` (Dask, if installed; writes sidecars);
- ``reopen``: ``summarise_run`` again, reading only the sidecars.

    python scripts/make_big_trace.py --size-mb 200 --from ../shared/traces/dlrm_8ranks/worker0_*.json.gz -o run/worker0.1.pt.trace.json
    ... (one per rank, from each rank's file) ...
    python scripts/bench_ranks.py run/ [--cluster local:2]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MODES = ("sequential", "parallel", "cluster", "reopen")


def measure(mode: str, directory: str, cluster: str) -> dict:
    """Run one mode here (called in a fresh process) and report time and memory."""
    from tuiprof.analysis.ranks import summarise_run, summarise_trace
    from tuiprof.trace.run import open_run

    started = time.perf_counter()
    run = open_run(directory)
    if mode == "sequential":
        os.environ["TUIPROF_DECODE_WORKERS"] = "1"  # one file at a time, in this process
        summaries = [summarise_trace(f) for f in run.ranks]
        ranks = len(summaries)
    else:
        summary = summarise_run(run, cluster=cluster if mode == "cluster" else None)
        ranks = len(summary.ranks)
        assert mode != "reopen" or summary.from_sidecars == ranks, "sidecars were not used"
    seconds = time.perf_counter() - started
    return {
        "mode": mode,
        "seconds": seconds,
        "ranks": ranks,
        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "workers_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def run_mode(mode: str, directory: Path, cluster: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, __file__, str(directory), "--measure", mode, "--cluster", cluster],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def drop_sidecars(directory: Path) -> None:
    for sidecar in directory.glob("*.tuiprof-summary"):
        sidecar.unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--cluster", default="local:2", help="Dask address for the cluster mode (default local:2)")
    parser.add_argument("--measure", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, str(args.run_dir), args.cluster)))
        return 0
    from tuiprof.trace.run import open_run

    files = [f.path for f in open_run(args.run_dir).ranks]
    sizes = [p.stat().st_size for p in files]
    total_mb, largest_mb = sum(sizes) / 1e6, max(sizes) / 1e6
    print(f"{args.run_dir}: {len(files)} ranks, {total_mb:.0f} MB, largest {largest_mb:.0f} MB; {os.cpu_count()} cores")
    print(
        f"targets: ranks table within {total_mb / 150:.1f} s (total / 150 MB/s); explorer RSS <= {1.5 * largest_mb:.0f} MB; reopen <= 1 s"
    )
    for path in files:  # into the page cache, as for every mode
        with open(path, "rb") as handle:
            while handle.read(64 << 20):
                pass
    modes = [m for m in MODES if m != "cluster" or _has_dask()]
    print(
        f"{'mode':<12}{'seconds':>9}{'MB/s':>8}{'peak RSS MB':>13}{'RSS/largest':>13}{'workers MB':>12}{'vs sequential':>15}",
        flush=True,
    )
    baseline = None
    for mode in modes:
        if mode in ("parallel", "cluster"):
            drop_sidecars(args.run_dir)  # analysed afresh (and sidecars written for the reopen)
        r = run_mode(mode, args.run_dir, args.cluster)
        baseline = baseline or r["seconds"]
        print(
            f"{r['mode']:<12}{r['seconds']:>9.2f}{total_mb / r['seconds']:>8.0f}{r['rss_mb']:>13.0f}"
            f"{r['rss_mb'] / largest_mb:>13.2f}{r['workers_mb']:>12.0f}{baseline / r['seconds']:>14.1f}x",
            flush=True,
        )
    drop_sidecars(args.run_dir)
    return 0


def _has_dask() -> bool:
    try:
        import dask.distributed  # noqa: F401
    except ImportError:
        print("(dask not installed: no cluster mode)")
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
