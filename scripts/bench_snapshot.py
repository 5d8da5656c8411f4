#!/usr/bin/env python3
"""Time reading an allocator snapshot: ``pickle.load`` versus tuiprof to analysis-ready.

Each measurement runs in its own process (its peak RSS is its own), in the
same run, alternating; the ratio is what to trust on a noisy machine.
``pickle`` is the stdlib's ``pickle.load`` of the file (what memory_viz's
loaders and a plain script do; it would also run any code in the file);
``tuiprof`` is ``read_snapshot`` (restricted unpickler, decode into columns)
plus ``analyze_snapshot``.

    python scripts/bench_snapshot.py --size-mb 200 [--repeat 2] [--keep] [--dir /tmp]
    python scripts/bench_snapshot.py FILE.pickle [--repeat 2]

The generated file is shaped like a real ``_dump_snapshot`` of a training run:
alloc/free_requested/free_completed entries on one device, each with a stack of
``--depth`` frames drawn from 64 distinct stacks.  As torch's ``_snapshot`` builds
them, the frame dicts are shared (it symbolizes each distinct frame once, and the
pickle writes it once then refers to it), each entry's frames list is its own.
"""

from __future__ import annotations

import argparse
import os
import pickle
import random
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

MEASURE = {
    "pickle": "import pickle; pickle.load(open(PATH, 'rb'))",
    "tuiprof": "from tuiprof.trace.snapshot import read_snapshot; from tuiprof.analysis.snapshot import analyze_snapshot; "
    "analyze_snapshot(read_snapshot(PATH))",
}
PROBE = """
import resource, sys, time
PATH = sys.argv[1]
start = time.perf_counter()
{code}
print(time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def make_snapshot_file(path: Path, size_mb: int, depth: int, seed: int = 0) -> int:
    """Write a snapshot of about ``size_mb`` MB; returns its number of trace entries."""
    rng = random.Random(seed)
    stacks = [
        [
            {
                "filename": f"/usr/lib/python3.11/site-packages/torch/nn/modules/m{s % 7}.py"
                if f < depth - 4
                else "/home/user/train.py",
                "line": 10 * f + s,
                "name": f"fn_{s}_{f}",
            }
            for f in range(depth)
        ]
        for s in range(64)
    ]
    entry_bytes = depth * 2 + 150  # pickled size of one entry (frames as memo references), measured on this shape
    count = size_mb * 1_000_000 // entry_bytes
    trace, live, clock, address = [], [], 1_700_000_000_000_000, 0x7F0000000000
    while len(trace) < count:
        clock += rng.randrange(1, 50)
        if live and (rng.random() < 0.45 or len(live) > 5000):
            addr, size, stack = live.pop(rng.randrange(len(live)))
            for action in ("free_requested", "free_completed"):
                trace.append(
                    {
                        "action": action,
                        "addr": addr,
                        "size": size,
                        "stream": 0,
                        "time_us": clock,
                        "frames": list(stacks[stack]),
                    }
                )
        else:
            size, stack = rng.randrange(1, 4096) * 512, rng.randrange(64)
            address += size + 512
            live.append((address, size, stack))
            trace.append(
                {
                    "action": "alloc",
                    "addr": address,
                    "size": size,
                    "stream": 0,
                    "time_us": clock,
                    "frames": list(stacks[stack]),
                }
            )
    blocks = [
        {"address": a, "size": s, "requested_size": s, "state": "active_allocated", "frames": list(stacks[k])}
        for a, s, k in sorted(live)
    ]
    segment = {
        "device": 0,
        "address": blocks[0]["address"] if blocks else 0,
        "total_size": sum(b["size"] for b in blocks),
        "stream": 0,
        "segment_type": "large",
        "blocks": blocks,
    }
    with open(path, "wb") as handle:
        pickle.dump({"segments": [segment], "device_traces": [trace]}, handle, protocol=4)
    return len(trace)


def measure(kind: str, path: Path) -> tuple[float, int]:
    code = PROBE.format(code=MEASURE[kind])
    result = subprocess.run(
        [sys.executable, "-c", code, str(path)], capture_output=True, text=True, cwd=ROOT, check=True
    )
    seconds, rss = result.stdout.split()
    return float(seconds), int(rss)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--depth", type=int, default=30, help="frames per stack (real snapshots: 20-80)")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    path = args.file
    if path is None:
        path = args.dir / f"bench-snapshot-{args.size_mb}mb.pickle"
        started = time.perf_counter()
        entries = make_snapshot_file(path, args.size_mb, args.depth)
        print(
            f"made {path}: {path.stat().st_size / 1e6:.0f} MB, {entries:,} entries, {time.perf_counter() - started:.1f} s"
        )
    size = path.stat().st_size
    try:
        results: dict[str, list[tuple[float, int]]] = {kind: [] for kind in MEASURE}
        for _ in range(args.repeat):
            for kind in MEASURE:
                results[kind].append(measure(kind, path))
        print(f"{'':8} {'seconds':>8} {'peak RSS MB':>12} {'RSS / file':>10}")
        best = {kind: min(values) for kind, values in results.items()}
        for kind, (seconds, rss) in best.items():
            print(f"{kind:8} {seconds:8.2f} {rss / 1e6:12.0f} {rss / size:10.2f}")
        print(
            f"tuiprof / pickle: {best['tuiprof'][0] / best['pickle'][0]:.2f}x the time, "
            f"{best['tuiprof'][1] / best['pickle'][1]:.2f}x the peak RSS (best of {args.repeat})"
        )
    finally:
        if args.file is None and not args.keep:
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
