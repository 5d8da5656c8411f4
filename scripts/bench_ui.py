#!/usr/bin/env python3
"""Key-press latency of the real explorer (Pilot, headless) with a big trace loaded.

Every view is switched to once ("first switch", with the keys inside it right after), then
every view again, twice ("repeat", the slower of the two shown).  For each action it prints:

- ``key ms``: wall time until the key is handled and the screen refreshed, the harness's own cost
  per key press (a key bound to nothing) subtracted;
- ``cpu ms``: the CPU time of the UI thread over the same span, Pilot's own subtracted: what the
  key costs the app, unlike the wall time not stretched by the other processes on a shared box;
- ``ready ms``: until background work the key started (a table built in a worker, the detail
  pane once the cursor rests) has shown its result.

The same actions on the small resnet18 sample, in the same run, are the baseline.

Keys are posted to the app as a terminal's driver posts them, then the script waits until every
widget has handled what is queued and draws the screen at once (:func:`drawn`).  Not
``pilot.press``: after each key it waits for the process to look idle, in sleeps of 20 ms
(``textual._wait.wait_for_idle``, twice a key), so its times fall on steps of ~21 ms whatever the
key costs (41-65 ms for keys of 10-28 ms of CPU, docs/bench-log/big-traces.md); ``--via-pilot`` measures
that way again.  In a terminal, Textual draws a changed screen at its next refresh tick (60 a
second): up to 17 ms on top of ``key ms``.

    python scripts/bench_ui.py /tmp/big.json
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from textual import events  # noqa: E402

from tuiprof.tui.app import ExplorerApp  # noqa: E402
from tuiprof.tui.sources import FileSource  # noqa: E402
from tuiprof.tui.views import EXPLORER_VIEWS, view_keys  # noqa: E402


def busy_threads() -> list[threading.Thread]:
    """Threads other than this one and the analysis stages' pool (analysis/stages.py), whose
    threads wait idle for the next analysis for as long as the process lives."""
    return [
        t
        for t in threading.enumerate()
        if t is not threading.current_thread() and not t.name.startswith("tuiprof-analysis")
    ]


KEYS = {view_id: key for key, view_id, _ in view_keys()}
TITLES = {view.view_id: view.title for view in EXPLORER_VIEWS}

# (label, keys) in the order pressed: each view's first switch, then the keys inside it.
FIRST = [
    ("switch to Operators", [KEYS["operators"]]),
    ("sort: next column", ["s"]),
    ("sort: reverse", ["r"]),
    ("move down 10 rows", ["j"] * 10),  # ready: the detail pane shows the 11th row
    ("page down", ["pagedown"]),
    ("filter 'conv'", ["slash", "c", "o", "n", "v", "enter"]),
    ("clear filter", ["escape"]),
    ("group by input shape", ["i"]),
    ("back to by name", ["i"]),
    ("top-level only", ["t"]),
    ("all operators", ["t"]),
    ("switch to Modules", [KEYS["modules"]]),
    ("tree: down (select module)", ["down"]),
    ("tree: expand", ["space"]),
    ("tree: collapse", ["space"]),
    ("switch to Kernels", [KEYS["kernels"]]),
    ("kernels: move down 10 rows", ["j"] * 10),
    ("switch to Memory", [KEYS["memory"]]),
    ("memory: next table", ["m"]),
    ("memory: move down 10 rows", ["j"] * 10),
    ("switch to Steps", [KEYS["steps"]]),
    ("steps: move down 10 rows", ["j"] * 10),
    ("switch to Overview", [KEYS["overview"]]),
    ("overview: scroll down", ["j"]),
    ("switch to Timeline", [KEYS["timeline"]]),
    ("timeline: zoom in", ["plus"]),
    ("timeline: pan right", ["l"]),
    ("timeline: lane down", ["j"]),
    ("timeline: next slice", ["w"]),
    ("timeline: next idle gap", ["g"]),
    ("timeline: zoom out", ["minus"]),
    ("timeline: fit all", ["F"]),
    ("timeline: next step", ["n"]),
    ("switch to Ranks", [KEYS["ranks"]]),
    ("switch to Collectives", [KEYS["collectives"]]),
    ("switch to Log", [KEYS["log"]]),
]
REPEAT_ORDER = ("operators", "modules", "kernels", "memory", "steps", "overview", "timeline", "ranks", "log")
REPEATS = 2  # rounds of repeat switches; the slower round is shown
Result = tuple[str, float, float, float]  # label, key s, cpu s, ready s (the key's: per key press)


def key_event(key: str) -> events.Key:
    """The Key event a terminal's driver posts for ``key`` (a Pilot key name)."""
    named = {"slash": "/", "plus": "+", "minus": "-", "space": " ", "enter": "\r", "escape": "\x1b"}
    return events.Key(key, named.get(key, key if len(key) == 1 else None))


async def measure(path: str, via_pilot: bool) -> tuple[float, float, list[Result]]:
    app = ExplorerApp(FileSource(path))
    results: list[Result] = []
    async with app.run_test(size=(120, 40)) as pilot:
        started = time.perf_counter()
        await app.workers.wait_for_complete()
        await pilot.pause()
        load = time.perf_counter() - started
        await app.workers.wait_for_complete()  # tables prepared in the background after load
        await pilot.pause()
        while busy_threads() and time.perf_counter() - started < 300:
            await asyncio.sleep(0.1)  # and the cache written after the first frame (a thread of its own)
        prepared = time.perf_counter() - started
        wall_cost, cpu_cost = [], []

        async def send(key: str) -> None:
            if via_pilot:
                await pilot.press(key)  # returns once the app has handled the key's messages
            else:
                app.post_message(key_event(key))
                await pilot._wait_for_screen()

        for _ in range(10):
            began, began_cpu = time.perf_counter(), time.thread_time()
            await send("f12")  # bound to nothing: what the harness itself costs
            await drawn(app, pilot)
            wall_cost.append(time.perf_counter() - began)
            cpu_cost.append(time.thread_time() - began_cpu)
        pilot_wall, pilot_cpu = statistics.median(wall_cost), statistics.median(cpu_cost)

        async def press(label: str, keys: list[str]) -> Result:
            began, began_cpu = time.perf_counter(), time.thread_time()
            for key in keys:
                await send(key)
            await drawn(app, pilot)
            handled = time.perf_counter() - began - pilot_wall * len(keys)
            cpu = time.thread_time() - began_cpu - pilot_cpu * len(keys)
            await settled(app, pilot)
            ready = time.perf_counter() - began - pilot_wall * len(keys)
            return (label, max(0.0, handled) / len(keys), max(0.0, cpu) / len(keys), max(0.0, ready))

        for label, keys in FIRST:
            results.append(await press(label, keys))
        rounds = [[await press(f"repeat: {TITLES[v]}", [KEYS[v]]) for v in REPEAT_ORDER] for _ in range(REPEATS)]
        results.extend(max(tries, key=lambda result: result[1]) for tries in zip(*rounds))
    return load, prepared, results


async def drawn(app: ExplorerApp, pilot) -> None:
    """Lay out and draw what the key changed, now (what the next refresh would do), and what
    that drawing posted (a view's on_show).  Not ``pilot.pause()``: it waits until the process
    is idle, which is never while a worker computes, so a key that starts one (the i and t
    toggles) read as slow as its table."""
    app.screen._on_timer_update()
    await pilot._wait_for_screen()
    app.screen._on_timer_update()
    await pilot._wait_for_screen()


async def settled(app: ExplorerApp, pilot) -> None:
    """Until the workers are done and no view has a detail pane waiting for the cursor to rest."""
    while True:
        await app.workers.wait_for_complete()
        await pilot.pause()
        # getattr: trees before the detail pane waited for the cursor to rest have no detail_pending,
        # and the old tree is the baseline this script runs on (docs/bench-log/big-traces.md).
        if not any(getattr(view, "detail_pending", bool)() for view in app.query("#views > *").results()):
            return
        await asyncio.sleep(0.01)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--baseline", default=str(ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"))
    parser.add_argument("--via-pilot", action="store_true", help="press keys with pilot.press (idle waits of 20 ms)")
    args = parser.parse_args()
    base_load, base_prepared, base = asyncio.run(measure(args.baseline, args.via_pilot))
    big_load, big_prepared, big = asyncio.run(measure(args.trace, args.via_pilot))
    print(f"load to first frame: big {big_load:.2f} s, sample {base_load:.2f} s")
    print(f"background work done: big {big_prepared:.2f} s, sample {base_prepared:.2f} s")
    print(
        f"{'action (big trace; sample)':<30} {'key ms':>7} {'cpu ms':>7} {'ready ms':>9} {'sample key':>11} {'cpu':>6}"
    )
    for (label, key, cpu, ready), (_, base_key, base_cpu, _) in zip(big, base):
        print(
            f"{label:<30} {key * 1000:7.1f} {cpu * 1000:7.1f} {ready * 1000:9.1f} {base_key * 1000:11.1f}"
            f" {base_cpu * 1000:6.1f}"
        )
    firsts = [r for r in big if r[0].startswith("switch to")]
    repeats = [r for r in big if r[0].startswith("repeat:")]
    keys = [r for r in big if not r[0].startswith(("switch to", "repeat:"))]
    for what, rows, target in (
        ("first switch", firsts, 100),
        ("repeat switch", repeats, 50),
        ("in-view key", keys, 50),
    ):
        worst = max(rows, key=lambda result: result[1])
        worst_cpu = max(rows, key=lambda result: result[2])
        print(
            f"slowest {what}: {worst[1] * 1000:.1f} ms ({worst[0]}), cpu {worst_cpu[2] * 1000:.1f} ms"
            f" ({worst_cpu[0]}) (target <= {target} ms)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
