#!/usr/bin/env python3
"""Time opening a trace: stdlib ``json.load`` versus tuiprof to analysis-ready.

Each measurement runs in its own process (so peak RSS is its own), in the
same run, alternating, and the ratio is what to trust: these machines are
noisy, single absolute times are not.  "worker MB" is the peak RSS of the
largest decode worker process tuiprof started (0 when it decoded in-process);
the workers run at the same time as the parent, one per core.

    python scripts/bench_load.py /tmp/big.json [/tmp/big.json.gz] [--repeat 2] [--cache warm|cold|as-is]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import gc, gzip, json, resource, sys, time
path, mode = sys.argv[1], sys.argv[2]
started = time.perf_counter()
if mode == "json":
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        document = json.load(handle)
    events = len(document["traceEvents"] if isinstance(document, dict) else document)
else:
    sys.path.insert(0, ROOT)
    from tuiprof.analysis import load_model
    model = load_model(path)
    # analysis-ready: every table the explorer opens with
    model.operators()
    sum(1 for _ in model.modules.walk()); len(model.kernels); len(model.steps); len(model.memory)
    events = model.info.event_count
elapsed = time.perf_counter() - started
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
worker_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # the largest decode worker
print(json.dumps({"seconds": elapsed, "peak_rss_mb": peak_kb / 1024, "worker_rss_mb": worker_kb / 1024, "events": events}))
""".replace("ROOT", repr(str(ROOT)))


def prepare_cache(path: Path, cache: str) -> None:
    """Start each run with the file in the same state, whichever tool ran before.

    ``warm``: read it once, so it is in the page cache (as after copying it
    over). ``cold``: drop the page cache (root only), so it comes from disk.
    Measured here: a cold read of 1 GB alone takes ~2 s, and the VM evicts
    the cache after memory-hungry runs (json.load peaks at 5 GB), so without
    this the tool that runs second is measured cold."""
    if cache == "warm":
        with open(path, "rb") as handle:
            while handle.read(16 << 20):
                pass
    elif cache == "cold":
        os.sync()
        try:
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        except OSError as exc:
            raise SystemExit(f"--cache cold needs root on Linux ({exc})") from None


def measure(path: Path, mode: str) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, str(path), mode], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{mode} on {path} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def uncompressed_size(path: Path) -> int:
    if not path.name.endswith(".gz"):
        return path.stat().st_size
    with open(path, "rb") as handle:  # gzip trailer: size mod 2**32
        handle.seek(-4, os.SEEK_END)
        trailer = int.from_bytes(handle.read(4), "little")
    size = trailer
    while size < path.stat().st_size:
        size += 1 << 32
    return size


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs of each mode; the best is kept")
    parser.add_argument("--skip-json", action="store_true", help="tuiprof only (for sizes stdlib cannot hold)")
    parser.add_argument("--cache", choices=("warm", "cold", "as-is"), default="warm",
                        help="page-cache state of the file before each run (default: warm)")
    args = parser.parse_args()
    print(f"{'file':<28} {'MB':>7} {'mode':<8} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>11} {'RSS/file':>8} {'worker MB':>9}")
    for path in args.files:
        size_mb = uncompressed_size(path) / 1e6
        best: dict[str, dict] = {}
        for _ in range(args.repeat):
            for mode in ("tuiprof",) if args.skip_json else ("json", "tuiprof"):
                prepare_cache(path, args.cache)
                run = measure(path, mode)
                if mode not in best or run["seconds"] < best[mode]["seconds"]:
                    best[mode] = run
        for mode, run in best.items():
            print(
                f"{path.name[-28:]:<28} {size_mb:7.0f} {mode:<8} {run['seconds']:8.2f} {size_mb / run['seconds']:7.0f} "
                f"{run['peak_rss_mb']:11.0f} {run['peak_rss_mb'] / size_mb:8.2f} {run['worker_rss_mb']:9.0f}"
            )
        if "json" in best:
            speedup = best["json"]["seconds"] / best["tuiprof"]["seconds"]
            memory = best["tuiprof"]["peak_rss_mb"] / best["json"]["peak_rss_mb"]
            print(f"{'':<28} ratio: tuiprof is {speedup:.1f}x faster than json.load, with {memory:.2f}x its peak RSS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
