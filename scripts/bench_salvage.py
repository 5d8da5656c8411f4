#!/usr/bin/env python3
"""Time opening a trace with damaged events against the same trace undamaged.

A damaged event (here: a missing ``}``, the commonest damage of a cut or
hand-edited file) makes its 16 MB span fail the fast decode and go through
salvage, which must stay linear: the target is at most 2x the undamaged
load with 1,000 damaged events spread over a 100 MB file (every span hit).
Each load runs in its own process, alternating, best of ``--repeat``; the
ratio is measured in the same run.

    python scripts/bench_salvage.py --size-mb 100 --damaged 1000 [--from TRACE] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SOURCE = ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"

CHILD = r"""
import json, sys, time
sys.path.insert(0, ROOT)
from tuiprof.analysis import load_model
started = time.perf_counter()
model = load_model(sys.argv[1])
model.operators(); sum(1 for _ in model.modules.walk()); len(model.kernels); len(model.steps); len(model.memory)
report = model.report
print(json.dumps({"seconds": time.perf_counter() - started, "events": model.info.event_count,
                  "repaired": report.repaired, "skipped": report.skipped}))
""".replace("ROOT", repr(str(ROOT)))


def damage(source: Path, target: Path, count: int, seed: int) -> int:
    """Copy ``source`` with the closing brace of ``count`` evenly spread events removed."""
    data = source.read_bytes()
    ends = [m.start() for m in re.finditer(rb"\}(?=,\s*\n\s*\{)", data)]
    rng = random.Random(seed)
    step = max(1, len(ends) // count)
    chosen = sorted(rng.randrange(i, min(i + step, len(ends))) for i in range(0, len(ends), step))[:count]
    drop = {ends[i] for i in chosen}
    parts, last = [], 0
    for pos in sorted(drop):
        parts.append(data[last:pos])
        last = pos + 1
    parts.append(data[last:])
    target.write_bytes(b"".join(parts))
    return len(drop)


def measure(path: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"loading {path} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=100)
    parser.add_argument("--damaged", type=int, default=1000)
    parser.add_argument("--from", dest="source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tuiprof-bench-") as folder:
        clean, broken = Path(folder) / "clean.json", Path(folder) / "damaged.json"
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "make_big_trace.py"),
                "--size-mb",
                str(args.size_mb),
                "--from",
                str(args.source),
                "-o",
                str(clean),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        removed = damage(clean, broken, args.damaged, args.seed)
        best: dict[str, dict] = {}
        for _ in range(args.repeat):
            for label, path in (("undamaged", clean), ("damaged", broken)):
                result = measure(path)
                if label not in best or result["seconds"] < best[label]["seconds"]:
                    best[label] = result
        size_mb = clean.stat().st_size / 1e6
        print(f"{'file':<10} {'MB':>6} {'seconds':>8} {'events':>10} {'repaired':>9} {'skipped':>8}")
        for label, result in best.items():
            print(
                f"{label:<10} {size_mb:6.0f} {result['seconds']:8.2f} {result['events']:10,} "
                f"{result['repaired']:9,} {result['skipped']:8,}"
            )
        ratio = best["damaged"]["seconds"] / best["undamaged"]["seconds"]
        print(f"ratio: {removed:,} damaged events cost {ratio:.2f}x the undamaged load (target <= 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
