"""``--trace``: an allocator snapshot's peak placed in a profiler trace of the same run.

The snapshot (tests/helpers/snapshot_gen.py) and the trace (tests/helpers/gpu_trace.py) are put on one clock by
construction: the snapshot's times are epoch microseconds, the trace's events are laid out around
the generator's peak time, with and without Kineto's ``baseTimeNanoseconds``.
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.gpu_trace import EPOCH_US, GpuTrace
from tests.helpers.snapshot_gen import make_snapshot
from tuiprof.analysis.snapshot import analyze_snapshot
from tuiprof.analysis.snapshot_trace import place_peak
from tuiprof.report.snapshot import placement_line
from tuiprof.trace import load_trace
from tuiprof.trace.snapshot import decode_snapshot

OFFSET_US = 50_000  # the snapshot's first entry, after the trace's epoch


def _peak_us(expected) -> int:
    device = max(expected.peak_bytes, key=lambda d: (expected.peak_bytes[d], -d))
    return expected.peak_time_us[device]


def _trace_around(peak_us: int, base_ns: int) -> GpuTrace:
    """Events placed (in trace us after EPOCH_US) so that the answer is known: step 2 holds the
    peak; on the main thread aten::linear (in module Linear_0) holds aten::addmm, which holds it;
    another thread runs a later-starting aten::copy_ across it, which is not the step's thread."""
    at = peak_us - EPOCH_US - base_ns // 1000  # the peak in the trace's own ts
    trace = GpuTrace()
    if base_ns:
        trace.members["baseTimeNanoseconds"] = base_ns
    trace.step(1, at - 3000, 2000)
    trace.step(2, at - 1000, 2000)
    linear = trace.module("Linear_0", at - 30, 60)
    assert linear
    trace.op("aten::linear", at - 20, 40)
    trace.op("aten::addmm", at - 5, 10)
    trace.op("aten::mul", at + 10, 5)  # after the peak: not running then
    trace.op("aten::copy_", at - 1, 2, tid=99)
    return trace


@pytest.mark.parametrize("base_ns", [0, 2_000_000_000_000], ids=["ts-since-epoch", "base-time"])
def test_the_peak_is_placed_in_its_step_and_innermost_operator(tmp_path: Path, base_ns: int) -> None:
    data, expected = make_snapshot(4, steps=200, time_origin_us=EPOCH_US + base_ns // 1000 + OFFSET_US)
    path = _trace_around(_peak_us(expected), base_ns).write(tmp_path / "run.pt.trace.json")
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    place = place_peak(model, load_trace(path))
    assert place.inside and place.peak_ns == _peak_us(expected) * 1000
    assert (place.step, place.operator, place.module) == ("ProfilerStep#2", "aten::addmm", "Linear_0")
    line = placement_line(place)
    assert "peak at step 2, during aten::addmm (module Linear_0)" in line


def test_a_trace_of_another_time_range_says_so_in_one_line(tmp_path: Path) -> None:
    data, expected = make_snapshot(4, steps=200, time_origin_us=EPOCH_US + OFFSET_US)
    path = _trace_around(_peak_us(expected) + 7_200_000_000, 0).write(
        tmp_path / "other.pt.trace.json"
    )  # two hours later
    snap = tmp_path / "snap.pickle"
    snap.write_bytes(pickle.dumps(data))
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(snap), "--trace", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stdout.splitlines() if "not in the trace" in line]
    assert len(said) == 1 and "2.0 h before" in said[0], result.stdout
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(snap), "--trace", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    placed = json.loads(result.stdout)["trace"]
    assert placed["inside"] is False and placed["step"] is None


def test_summary_says_where_the_peak_fell(tmp_path: Path) -> None:
    data, expected = make_snapshot(4, steps=200, time_origin_us=EPOCH_US + OFFSET_US)
    path = _trace_around(_peak_us(expected), 0).write(tmp_path / "run.pt.trace.json")
    snap = tmp_path / "snap.pickle"
    snap.write_bytes(pickle.dumps(data))
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(snap), "--trace", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert "peak at step 2, during aten::addmm (module Linear_0)" in result.stdout.splitlines()[1]


async def test_the_app_says_where_the_peak_fell_and_shows_each_stacks_module(tmp_path: Path) -> None:
    from textual.widgets import Static

    from tuiprof.tui.snapshot_app import SnapshotApp
    from tuiprof.tui.widgets.row_table import RowTable

    data, expected = make_snapshot(4, steps=200, modules=True, time_origin_us=EPOCH_US + OFFSET_US)
    path = _trace_around(_peak_us(expected), 0).write(tmp_path / "run.pt.trace.json")
    model = analyze_snapshot(decode_snapshot(data, "gen.pickle"))
    app = SnapshotApp(lambda report: (model, place_peak(model, load_trace(path))), "gen.pickle")
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert "peak at step 2, during aten::addmm (module Linear_0)" in str(
            app.query_one("#snap-headline", Static).render()
        )
        shown = {row["module"] for row in app.query_one("#snap-peak-table", RowTable).rows}
        assert (
            shown <= {"model.py:15 > linear.py", "model.py:16 > linear.py", "model.py", "(outside any module)"}
            and len(shown) >= 2
        )
        assert "module: " in str(app.query_one("#snap-peak-detail", Static).render())
