#!/usr/bin/env python3
"""Key-press latency of the real explorer (Pilot, headless) with a big trace loaded.

For each action it prints the time until the key is handled and the screen
refreshed ("key"), and until background work it started has shown its
result ("ready"; tables of big traces are built off the UI thread).  Pilot's
own cost per key press is measured with a key bound to nothing and
subtracted; the same actions on the small resnet18 sample, in the same run,
are the baseline.

    python scripts/bench_ui.py /tmp/big.json
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuiprof.tui.app import ExplorerApp  # noqa: E402
from tuiprof.tui.sources import FileSource  # noqa: E402
from tuiprof.tui.views import view_keys  # noqa: E402

TIMELINE_KEY = next(key for key, view_id, _ in view_keys() if view_id == "timeline")

ACTIONS = [
    ("switch to Operators", ["3"]),
    ("sort: next column", ["s"]),
    ("sort: reverse", ["r"]),
    ("move down 10 rows", ["j"] * 10),
    ("page down", ["pagedown"]),
    ("filter 'conv'", ["slash", "c", "o", "n", "v", "enter"]),
    ("clear filter", ["escape"]),
    ("group by input shape", ["i"]),
    ("back to by name", ["i"]),
    ("top-level only", ["t"]),
    ("all operators", ["t"]),
    ("switch to Modules", ["2"]),
    ("tree: down (select module)", ["down"]),
    ("tree: expand", ["space"]),
    ("switch to Kernels", ["4"]),
    ("switch to Memory", ["5"]),
    ("switch to Steps", ["6"]),
    ("switch to Overview", ["1"]),
    ("switch to Timeline", [TIMELINE_KEY]),
    ("timeline: zoom in", ["plus"]),
    ("timeline: pan right", ["l"]),
    ("timeline: lane down", ["j"]),
    ("timeline: next slice", ["w"]),
    ("timeline: next idle gap", ["g"]),
    ("timeline: zoom out", ["minus"]),
    ("timeline: fit all", ["F"]),
    ("timeline: next step", ["n"]),
]


async def measure(path: str) -> tuple[float, float, list[tuple[str, float, float]]]:
    app = ExplorerApp(FileSource(path))
    results = []
    async with app.run_test(size=(120, 40)) as pilot:
        started = time.perf_counter()
        await app.workers.wait_for_complete()
        await pilot.pause()
        load = time.perf_counter() - started
        await app.workers.wait_for_complete()  # tables prepared in the background after load
        await pilot.pause()
        prepared = time.perf_counter() - started
        noop = []
        for _ in range(10):
            began = time.perf_counter()
            await pilot.press("f12")  # bound to nothing: what Pilot itself costs
            await pilot.pause()
            noop.append(time.perf_counter() - began)
        pilot_cost = sorted(noop)[len(noop) // 2]
        for label, keys in ACTIONS:
            started = time.perf_counter()
            for key in keys:
                await pilot.press(key)
            await pilot.pause()
            handled = time.perf_counter() - started - pilot_cost * len(keys)
            await app.workers.wait_for_complete()
            await pilot.pause()
            ready = time.perf_counter() - started - pilot_cost * len(keys)
            results.append((label, max(0.0, handled) / len(keys), max(0.0, ready)))
    return load, prepared, results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--baseline", default=str(ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"))
    args = parser.parse_args()
    base_load, base_prepared, base = asyncio.run(measure(args.baseline))
    big_load, big_prepared, big = asyncio.run(measure(args.trace))
    print(f"load to first frame: big {big_load:.2f} s, sample {base_load:.2f} s")
    print(f"background tables ready: big {big_prepared:.2f} s, sample {base_prepared:.2f} s")
    print(f"{'action':<28} {'key ms (big)':>12} {'ready ms (big)':>14} {'key ms (sample)':>15} {'ratio':>6}")
    for (label, key_ms, ready), (_, base_key, _) in zip(big, base):
        ratio = f"{key_ms / base_key:6.1f}" if base_key > 1e-4 else "     -"
        print(f"{label:<28} {key_ms * 1000:12.1f} {ready * 1000:14.1f} {base_key * 1000:15.1f} {ratio}")
    worst = max(key for _, key, _ in big) * 1000
    print(f"slowest key press with the big trace: {worst:.1f} ms (target <= 50 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
