#!/usr/bin/env python3
"""Timeline cost on a big trace against the small sample, in the same run.

For each trace, in its own process: load + analyse time and RSS, then the
Timeline's index build (time, RSS increase, bytes held by its arrays), then
frames at 200 columns over every lane the view shows by default: the first
frame (whole trace), zoom in x2 around the centre (10 times), pan by a
quarter window (10 times), jump to the next idle gap / step and zoom out.
A frame here is what the view draws: the busy fraction and fullest event of
every column of every lane, and the lines with names written in.

    python scripts/bench_timeline.py /tmp/big.json [--sample sample_traces/resnet18_cpu.pt.trace.json.gz]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DEFAULT_SAMPLE = ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"
COLUMNS = 200


def _rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def measure(path: str) -> dict:
    from tuiprof.analysis import analyze
    from tuiprof.analysis.timeline import build_timeline
    from tuiprof.report.timeline import draw
    from tuiprof.trace import load_trace

    started = time.perf_counter()
    store = load_trace(path)
    model = analyze(store)
    load_s = time.perf_counter() - started
    rss_loaded = _rss_mb()

    started = time.perf_counter()
    timeline = build_timeline(model, store)
    build_s = time.perf_counter() - started
    rss_built = _rss_mb()
    index_mb = sum((lane.intervals or lane.counter).nbytes for lane in timeline.lanes) / 1e6  # type: ignore[union-attr]
    # RSS barely moves (the build reuses what the load freed): count allocations instead,
    # in a second build under tracemalloc (numpy reports its buffers to it).
    tracemalloc.start()
    kept = build_timeline(model, store)
    held_mb, peak_mb = (value / 1e6 for value in tracemalloc.get_traced_memory())
    tracemalloc.stop()
    del kept

    lanes = timeline.select()
    events = sum(len(lane.intervals) for lane in timeline.lanes if lane.intervals is not None)
    window = [timeline.begin_ns, timeline.end_ns]

    def frame() -> float:
        began = time.perf_counter()
        draw(timeline, window[0], window[1], COLUMNS, lanes)
        return (time.perf_counter() - began) * 1000

    actions: list[tuple[str, list[float]]] = [("first frame (whole trace)", [frame()])]

    def zoom(factor: float) -> None:
        centre, half = sum(window) // 2, (window[1] - window[0]) * factor / 2
        half = max(half, COLUMNS)
        window[:] = [int(centre - half), int(centre + half)]

    def pan(fraction: float) -> None:
        shift = int((window[1] - window[0]) * fraction)
        window[:] = [window[0] + shift, window[1] + shift]

    def gap() -> None:
        found = timeline.next_idle_gap(window[1], min_ns=1000)
        if found is not None:
            width = window[1] - window[0]
            window[:] = [found.start_ns - width // 4, found.start_ns - width // 4 + width]

    steps = iter(timeline.steps[:10])

    def fit_step() -> None:
        step = next(steps)
        window[:] = [step.start_ns, step.end_ns]

    def repeat(label: str, move, times: int = 10) -> None:
        """Each move (its own look-ups included) and the frame after it."""
        spent = []
        for _ in range(times):
            began = time.perf_counter()
            move()
            spent.append((time.perf_counter() - began) * 1000 + frame())
        actions.append((label, spent))

    repeat("zoom in x2 (10 times)", lambda: zoom(0.5))
    repeat("pan a quarter (10 times)", lambda: pan(0.25))
    repeat("jump to next idle gap (10 times)", gap)
    if timeline.steps:
        repeat(f"fit step ({min(10, len(timeline.steps))} steps)", fit_step, min(10, len(timeline.steps)))
    repeat("zoom out x2 (10 times)", lambda: zoom(2.0))
    return {
        "path": path,
        "mb": os.path.getsize(path) / 1e6,
        "events": events,
        "lanes_shown": len(lanes),
        "lanes": len(timeline.lanes),
        "load_s": load_s,
        "rss_loaded_mb": rss_loaded,
        "build_s": build_s,
        "rss_increase_mb": rss_built - rss_loaded,
        "index_mb": index_mb,
        "held_mb": held_mb,
        "build_peak_mb": peak_mb,
        "actions": [(label, sorted(t)[len(t) // 2], max(t)) for label, t in actions],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", help="the big trace")
    parser.add_argument("--sample", default=str(DEFAULT_SAMPLE), help="the baseline trace")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # child: measure one trace, print JSON
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.trace)))
        return 0
    results = []
    for path in (args.trace, args.sample):
        child = subprocess.run([sys.executable, __file__, path, "--one"], capture_output=True, text=True, cwd=ROOT)
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 1
        results.append(json.loads(child.stdout))
    big, sample = results
    for r, name in ((big, "big"), (sample, "sample")):
        print(
            f"{name}: {Path(r['path']).name} {r['mb']:.0f} MB, {r['events']:,} lane events, {r['lanes']} lanes "
            f"({r['lanes_shown']} shown); load+analyse {r['load_s']:.2f} s, RSS {r['rss_loaded_mb']:.0f} MB"
        )
        print(
            f"  index build {r['build_s']:.3f} s = {100 * r['build_s'] / r['load_s']:.1f}% of load (target <= 10%); "
            f"memory held {r['held_mb']:.0f} MB = {100 * r['held_mb'] / r['rss_loaded_mb']:.1f}% of the loaded RSS "
            f"(target <= 15%; index arrays {r['index_mb']:.0f} MB, peak during build {r['build_peak_mb']:.0f} MB, "
            f"RSS +{r['rss_increase_mb']:.0f} MB)"
        )
    print(
        f"{'action at 200 columns':34} {'median ms (big)':>16} {'max ms (big)':>13} {'median ms (sample)':>19} {'ratio':>6}"
    )
    baseline = {label: median for label, median, _ in sample["actions"]}
    slowest = 0.0
    for label, median, worst in big["actions"]:
        base = baseline.get(label)
        ratio = f"{median / base:.1f}" if base else "-"
        slowest = max(slowest, worst)
        print(f"{label:34} {median:16.1f} {worst:13.1f} {base if base is not None else float('nan'):19.1f} {ratio:>6}")
    print(f"slowest frame with the big trace: {slowest:.1f} ms (target: first frame <= 150 ms, each move <= 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
