#!/usr/bin/env python3
"""Time from ``tuiprof open TRACE`` starting to its first full frame.

Each run is a fresh interpreter (imports included), measured from before the
process is started to the first screen update the app hands to its driver
once it holds the model (what a terminal would be sent), headless (Textual's
test driver at 120x40: the same compose, load and render as a terminal,
without the terminal's own drawing); "settled" is when the app is idle
again after it (the views not shown first are mounted then).  A bare
``python -c pass`` in the same run is the floor.  "cpu s" is the child's
own CPU time: on a shared, busy machine wall time includes waiting for a core.

    python scripts/bench_startup.py [TRACE] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"

CHILD = r"""
import asyncio, json, resource, sys, time
sys.path.insert(0, ROOT)
imported = None

async def first_frame(path):
    global imported
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.sources import FileSource
    imported = time.monotonic()
    app = ExplorerApp(FileSource(path))
    drawn = []
    display = app._display

    def first_frame_drawn(screen, update):  # what a terminal would be sent, headless or not
        if app.model is not None and update is not None and not drawn:
            drawn.append(time.monotonic())
        display(screen, update)

    app._display = first_frame_drawn
    async with app.run_test(size=(120, 40)) as pilot:
        while app.model is None and not app.error_text:
            await asyncio.sleep(0.005)
        await pilot.pause()  # the frame with the model on screen, and what the app does right after
        settled = time.monotonic()
        while not drawn:
            await asyncio.sleep(0.005)
        return drawn[0], settled

shown, settled = asyncio.run(first_frame(sys.argv[1]))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"shown": shown, "settled": settled, "imported": imported, "cpu": usage.ru_utime + usage.ru_stime}))
""".replace("ROOT", repr(str(ROOT)))


def run_child(code: str, *args: str) -> tuple[float, dict]:
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    ended = time.monotonic()
    if result.returncode != 0:
        raise SystemExit(result.stderr)
    lines = result.stdout.strip().splitlines()
    return started, json.loads(lines[-1]) if lines else {
        "shown": ended,
        "settled": ended,
        "imported": ended,
        "cpu": 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace", nargs="?", default=str(SAMPLE))
    parser.add_argument("--repeat", type=int, default=5, help="runs; the median is printed")
    args = parser.parse_args()
    bare, frames, settled, imports, cpus = [], [], [], [], []
    for _ in range(args.repeat):
        started, _ = run_child("pass")
        bare.append(time.monotonic() - started)
        started, run = run_child(CHILD, args.trace)
        frames.append(run["shown"] - started)
        settled.append(run["settled"] - started)
        imports.append(run["imported"] - started)
        cpus.append(run["cpu"])

    def median(values: list[float]) -> float:
        return sorted(values)[len(values) // 2]

    print(f"python -c pass:              {median(bare):.2f} s")
    print(
        f"tuiprof open: UI imported at {median(imports):.2f} s, first full frame at {median(frames):.2f} s "
        f"(target <= 0.5 s), settled at {median(settled):.2f} s (cpu {median(cpus):.2f} s; median of {args.repeat})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
