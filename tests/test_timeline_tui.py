"""The Timeline view driven by its keys, reading the screen back (synthetic trace
with known answers from test_timeline.py, and the H100 ViT trace)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import ROOT, needs_shared
from tests.test_timeline import H100, _synthetic_events
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.views import view_keys
from tuiprof.tui.widgets.row_table import RowTable
from tuiprof.tui.widgets.timeline_canvas import TimelineCanvas

TIMELINE_KEY = next(key for key, view_id, _ in view_keys() if view_id == "timeline")
US = 1000


@pytest.fixture()
def synthetic_path(tmp_path):
    path = tmp_path / "synthetic.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": _synthetic_events()}))
    return str(path)


async def _open_timeline(app: ExplorerApp, pilot) -> TimelineCanvas:
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.press(TIMELINE_KEY)
    await app.workers.wait_for_complete()
    await pilot.pause()
    assert app.current_view == "timeline"
    return app.query_one(TimelineCanvas)


async def _press(app: ExplorerApp, pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
    await app.workers.wait_for_complete()
    await pilot.pause()


def _screen(canvas: TimelineCanvas) -> list[str]:
    return canvas.render().plain.splitlines()


def _detail(app: ExplorerApp) -> str:
    return str(app.query_one("#timeline-detail").render())


def _lane_line(canvas: TimelineCanvas, label: str) -> str:
    return next(line for line in _screen(canvas) if line.startswith(label))


async def test_opens_on_the_first_step_and_zooms_around_the_cursor(synthetic_path) -> None:
    app = ExplorerApp(FileSource(synthetic_path))
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = await _open_timeline(app, pilot)
        assert (canvas.start_ns, canvas.end_ns, canvas.cursor_ns) == (100 * US, 1000 * US, 100 * US)
        assert _screen(canvas)[0].startswith("0.000us to 900.000us")
        assert "stream 7" in canvas.render().plain and "device idle" in canvas.render().plain
        await _press(app, pilot, "plus")  # the cursor sits at the window's start: the window halves to the right
        assert (canvas.start_ns, canvas.end_ns) == (100 * US, 550 * US)
        assert _screen(canvas)[0].startswith("0.000us to 450.000us")
        await _press(app, pilot, "minus")
        assert (canvas.start_ns, canvas.end_ns) == (100 * US, 1000 * US)


async def test_pan_moves_window_and_cursor(synthetic_path) -> None:
    app = ExplorerApp(FileSource(synthetic_path))
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = await _open_timeline(app, pilot)
        await _press(app, pilot, "l")
        shift = 900 * US // 8
        assert (canvas.start_ns, canvas.cursor_ns) == (100 * US + shift, 100 * US + shift)
        await _press(app, pilot, "right", "h", "left")
        assert (canvas.start_ns, canvas.cursor_ns) == (100 * US, 100 * US)


async def test_lanes_slices_detail_and_links(synthetic_path) -> None:
    app = ExplorerApp(FileSource(synthetic_path))
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = await _open_timeline(app, pilot)
        keys = [lane.key for lane in canvas.lanes]
        await _press(app, pilot, *["j"] * keys.index("gpu/7"))
        assert canvas.lane.key == "gpu/7" and _screen(canvas)[0].endswith("stream 7")
        await _press(app, pilot, "w")  # next slice: the conv kernel at 200 us
        assert canvas.cursor_ns == 200 * US and canvas.selected.name == "conv_kernel"
        assert "conv_kernel" in _detail(app) and "launched by: aten::convolution" in _detail(app)
        assert [s.name for s in canvas.linked] == ["aten::convolution"]  # highlighted in its lane too
        await _press(app, pilot, "w", "b")
        assert canvas.selected.name == "conv_kernel"
        await _press(app, pilot, "k", "enter")  # the lane above (thread 11): nothing at 200 us
        assert "nothing under the cursor" in _detail(app)
        await _press(app, pilot, "down", "enter")
        assert canvas.selected.name == "conv_kernel"
        await _press(app, pilot, "o")  # its row in the Kernels table
        assert app.current_view == "kernels"
        table = app.query_one("#kernels-table", RowTable)
        assert table.current_row["name"] == "conv_kernel"


async def test_idle_gaps_and_steps(synthetic_path) -> None:
    app = ExplorerApp(FileSource(synthetic_path))
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = await _open_timeline(app, pilot)
        await _press(app, pilot, "g")  # idle 600-700 us (the one at 100 us starts under the cursor)
        assert (canvas.selected.start_ns, canvas.selected.end_ns) == (600 * US, 700 * US)
        assert canvas.lane.key == "idle" and "idle" in _detail(app) and "duration 100.000us" in _detail(app)
        await _press(app, pilot, "g")
        assert canvas.selected.start_ns == 720 * US
        await _press(app, pilot, "G")
        assert canvas.selected.start_ns == 600 * US
        await _press(app, pilot, "plus", "plus", "f")  # fit the step again
        assert (canvas.start_ns, canvas.end_ns) == (100 * US, 1000 * US)
        for key in ("n", "p"):  # one step: stays
            await _press(app, pilot, key)
            assert (canvas.start_ns, canvas.end_ns) == (100 * US, 1000 * US)
        await _press(app, pilot, "F")
        assert (canvas.start_ns, canvas.end_ns) == (canvas.timeline.begin_ns, canvas.timeline.end_ns)


async def test_range_selection_statistics(synthetic_path) -> None:
    app = ExplorerApp(FileSource(synthetic_path))
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = await _open_timeline(app, pilot)
        await _press(app, pilot, "v", "l", "l", "l", "l")  # 100 us to 100 + 4 * 112.5 = 550 us
        assert canvas.selected_range == (100 * US, 550 * US)
        text = _detail(app)
        assert text.startswith("range 0.000us to 450.000us")
        assert "stream 7 77.78%" in text  # 200-550 us busy of 450 us
        assert "operators:" in text and "kernels:" in text and "conv_kernel" in text
        await _press(app, pilot, "v")
        assert canvas.selected_range is None


@needs_shared
async def test_h100_depth_expands_and_idle_gap_is_visible() -> None:
    app = ExplorerApp(FileSource(str(H100)))
    async with app.run_test(size=(120, 40)) as pilot:
        canvas = await _open_timeline(app, pilot)
        assert _lane_line(canvas, "  depth 2 +2")
        lanes = len(canvas.lanes)
        await _press(app, pilot, "j")  # thread 5617
        await _press(app, pilot, "space")
        assert len(canvas.lanes) == lanes + 2 and _lane_line(canvas, "  depth 4")
        await _press(app, pilot, "space")
        assert len(canvas.lanes) == lanes
        idle = _lane_line(canvas, "device idle")
        assert "█" in idle  # the step is mostly idle on the device
        await _press(app, pilot, "g", "g")
        gap = canvas.selected
        assert gap.lane.key == "idle" and gap.duration_ns > (canvas.end_ns - canvas.start_ns) // canvas.columns


@needs_shared
@pytest.mark.parametrize(
    ("size", "keys"),
    [
        ((80, 24), []),  # the whole step
        ((120, 40), []),
        ((120, 40), ["g", "plus", "plus", "plus", "k", "k", "k", "w"]),  # zoomed into an idle gap, the next kernel's detail
    ],
    ids=["step-80x24", "step-120x40", "idle-gap-120x40"],
)
def test_timeline_screens(snap_compare, size, keys) -> None:
    async def open_timeline(pilot) -> None:
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press(TIMELINE_KEY)
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    app = ExplorerApp(FileSource(str(H100)))
    assert snap_compare(app, terminal_size=size, press=keys, run_before=open_timeline)


async def test_t_shows_a_table_row_in_the_timeline_and_enter_on_a_step_fits_it() -> None:
    app = ExplorerApp(FileSource(str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz")))  # works without ../shared
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("3", "T")  # Operators: the top operator's longest call
        await app.workers.wait_for_complete()
        await pilot.pause()
        canvas = app.query_one(TimelineCanvas)
        assert app.current_view == "timeline"
        assert canvas.selected is not None and canvas.selected.name == "aten::addmm"
        assert canvas.start_ns <= canvas.selected.start_ns < canvas.end_ns
        assert canvas.lane.key == canvas.selected.lane.key
        await pilot.press("4", "T")  # Kernels: the top kernel's longest launch
        await pilot.pause()
        kernels = app.query_one("#kernels-table", RowTable)
        assert canvas.selected.lane.group == "gpu"
        assert canvas.selected.duration_ns / 1000 == pytest.approx(kernels.current_row["max_us"])
        await pilot.press("6", "enter")  # Steps: the step's window
        await pilot.pause()
        step = app.model.steps[0]
        assert app.current_view == "timeline"
        assert canvas.start_ns == step.start_ns and canvas.end_ns >= step.start_ns + round(step.duration_us * 1000) - canvas.columns
