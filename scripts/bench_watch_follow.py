#!/usr/bin/env python3
"""What following a running job costs the watch app's UI thread (``tuiprof open DIR`` while the
job runs): the longest the event loop is held during one follow tick, with a long history.

A watch folder of ``--steps`` steps (two captures, no end line) is opened headless at 120x40;
then, ``--ticks`` times, one step is appended to ``watch.jsonl`` and the event loop's longest
stall is measured (a 1 ms sleep timed in a loop) until the job line shows the new step count.
A key pressed meanwhile waits that long.  Also timed: the UI thread's own follow work per tick,
the method it runs for a tick: ``WatchApp.on_watch_read`` (drawing what a worker read and built)
where it exists, else ``WatchApp._follow`` (the app before it joined TableApp, commit f53b6a1:
reading, summarising and drawing on the UI thread).  Printed: each tick's stall and the medians.

    python scripts/bench_watch_follow.py [--steps 10000] [--ticks 5]

The app is ``tuiprof.tui.watch_app.WatchApp(reader)`` of the checkout the script sits in (run the
script of an exported older checkout to measure that one).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from rich.console import Console  # noqa: E402

from tuiprof.trace.watch import HistoryReader  # noqa: E402
from tuiprof.tui.watch_app import WatchApp  # noqa: E402

CAPTURES = ("step000007-healthy.pt.trace.json.gz", "step000042-slow.pt.trace.json.gz")


def make_history(directory: Path, steps: int) -> None:
    """A running job's history: 1 ms steps, slower from the middle on, two captures (their trace
    files are not read by the list)."""
    lines = [
        {
            "format": "tuiprof-watch",
            "version": 2,
            "pid": 1,
            "started": 0,
            "what": "train.py",
            "settings": {"ratio": 1.2, "window": 50, "held": 3, "warmup_steps": 5},
        }
    ]
    for step in range(1, steps + 1):
        wall = 0.0015 if step > steps // 2 else 0.001
        lines.append({"s": step, "t": step * 0.01, "w": wall, "q": 0.0001, **({"p": 1} if 6 <= step <= 9 else {})})
        if step == 9:
            lines.append(
                {"e": "capture", "trigger": "healthy", "first_step": 7, "last_step": 9, "path": CAPTURES[0], "bytes": 1}
            )
        if step == steps // 2 + 10:
            lines.append(
                {"e": "trigger", "step": step, "trigger": "slow", "why": "3 steps over", "first_slow": step - 3}
            )
            lines.append(
                {
                    "e": "capture",
                    "trigger": "slow",
                    "first_step": step + 1,
                    "last_step": step + 3,
                    "path": CAPTURES[1],
                    "bytes": 1,
                }
            )
    (directory / "watch.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))


def job_line(app: WatchApp) -> str:
    console = Console(width=200, color_system=None, file=io.StringIO())
    console.print(app.query_one("#job").render())
    return console.file.getvalue()  # type: ignore[attr-defined]


def timed(method_name: str, spent: list[float]) -> None:
    """Wrap ``WatchApp.<method_name>`` so that each call's time is appended to ``spent``."""
    method = getattr(WatchApp, method_name)

    def run(self, *args):
        start = time.perf_counter()
        method(self, *args)
        spent.append(time.perf_counter() - start)

    setattr(WatchApp, method_name, run)


async def measure(directory: Path, steps: int, ticks: int, spent: list[float]) -> list[float]:
    reader = HistoryReader(directory)
    reader.read_new()
    app = WatchApp(reader)
    stalls = []
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause(0.5)
        spent.clear()
        for tick in range(1, ticks + 1):
            with open(directory / "watch.jsonl", "a") as history:
                history.write(json.dumps({"s": steps + tick, "t": 1e3 + tick, "w": 0.0015}) + "\n")
            wanted = f"{steps + tick} steps"
            longest, deadline = 0.0, time.perf_counter() + 5.0
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                await asyncio.sleep(0.001)
                longest = max(longest, time.perf_counter() - start - 0.001)
                if wanted in job_line(app):
                    break
            else:
                raise SystemExit(f"tick {tick}: the job line never showed {wanted}")
            for _ in range(50):  # the drawing that follows the update
                start = time.perf_counter()
                await asyncio.sleep(0.001)
                longest = max(longest, time.perf_counter() - start - 0.001)
            stalls.append(longest)
        await pilot.press("q")
    return stalls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--ticks", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder) / "w"
        directory.mkdir()
        make_history(directory, args.steps)
        ui_method = "on_watch_read" if hasattr(WatchApp, "on_watch_read") else "_follow"
        spent: list[float] = []
        timed(ui_method, spent)
        stalls = asyncio.run(measure(directory, args.steps, args.ticks, spent))
    print(f"watch app, {args.steps:,}-step history, {args.ticks} follow ticks, load average {os.getloadavg()[0]:.2f}")
    print("longest event-loop stall per tick: " + " ".join(f"{s * 1e3:.1f}" for s in stalls) + " ms")
    print(f"median stall {statistics.median(stalls) * 1e3:.1f} ms")
    print(
        f"UI thread's follow work (WatchApp.{ui_method}), median of {len(spent)} calls: {statistics.median(spent) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
