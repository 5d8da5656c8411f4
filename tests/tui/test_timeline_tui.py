"""The Timeline view driven by its keys, reading the screen back (synthetic trace
with known answers from test_timeline.py, and the H100 ViT trace)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ROOT, needs_shared
from tests.helpers.gpu_trace import GpuTrace
from tests.helpers.snapshot_views import SNAPSHOT_VIEWS
from tests.helpers.timeline import H100, complete_event, synthetic_events
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
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": synthetic_events()}))
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


def _drawn(canvas: TimelineCanvas) -> list[str]:
    """The canvas as the terminal shows it (a line too long for the widget wraps there, not in render())."""
    return ["".join(segment.text for segment in canvas.render_line(y)) for y in range(canvas.size.height)]


def _lanes_drawn(canvas: TimelineCanvas) -> list[str]:
    """The labels of the lane rows on screen (below the status line and the ruler)."""
    return [line[:16].strip() for line in _drawn(canvas)[3:] if line[:16].strip()]


@pytest.fixture()
def many_lanes_path(tmp_path):
    """The synthetic trace, a second step (1000-1900 us) and three more threads: 14 lanes,
    more than the 12 rows an 80x24 terminal has for them."""
    extra = [
        complete_event("user_annotation", "ProfilerStep#2", 1000, 900),
        complete_event("cpu_op", "aten::relu", 1100, 200, **{"External id": 30}),
        *(
            complete_event("cpu_op", f"aten::worker_{tid}", 300, 100, tid=tid, **{"External id": tid})
            for tid in (12, 13, 14)
        ),
    ]
    path = tmp_path / "many_lanes.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": synthetic_events() + extra}))
    return str(path)


async def test_jumps_keep_the_step_lanes_and_the_selected_lane_in_view(many_lanes_path) -> None:
    """g put the cursor on device idle (the last lane) and scrolled the step lanes away;
    n, p and f then fitted steps whose lane was out of view."""
    app = ExplorerApp(FileSource(many_lanes_path))
    async with app.run_test(size=(80, 24)) as pilot:
        canvas = await _open_timeline(app, pilot)
        rows = canvas.size.height - 3
        assert len(canvas.lanes) == 14 > rows
        assert _lanes_drawn(canvas)[:2] == ["steps", "phases"]
        for keys in (["g"], ["n"], ["p"], ["f"]):
            await _press(app, pilot, *keys)
            drawn = _lanes_drawn(canvas)
            assert canvas.lane.key == "idle" and drawn[:2] == ["steps", "phases"] and drawn[-1] == "device idle", (
                keys,
                drawn,
            )
            assert len(drawn) == rows  # every row holds a lane
            assert drawn[2].startswith("thread ")  # a depth lane whose thread scrolled off says whose it is


async def test_t_from_another_view_shows_the_step_lanes_and_the_calls_thread(many_lanes_path) -> None:
    """T from Operators scrolled for a canvas not yet laid out (height 0): one lane at the
    top, the call's, the step and thread lanes above it out of view, the rows below empty."""
    app = ExplorerApp(FileSource(many_lanes_path))
    async with app.run_test(size=(80, 24)) as pilot:
        canvas = await _open_timeline(app, pilot)
        rows = canvas.size.height - 3
        await _press(app, pilot, "g", "3", "T")  # from the idle lane, at the bottom
        assert app.current_view == "timeline"
        drawn = _lanes_drawn(canvas)
        assert drawn[:2] == ["steps", "phases"] and canvas.selected.lane.label.strip() in drawn, drawn
        assert len(drawn) == rows and drawn[2] == "thread 10"  # the lanes above the call's, down from the top


async def test_the_status_line_fits_60_columns_and_the_idle_lane_stays_in_view() -> None:
    """At 60x20, after zooming in and g, the status line wrapped onto the ruler's row and
    pushed the selected lane (device idle, the last) below the canvas."""
    app = ExplorerApp(FileSource(str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz")))
    async with app.run_test(size=(60, 20)) as pilot:
        canvas = await _open_timeline(app, pilot)
        await _press(app, pilot, "plus", "plus", "plus", "g")
        drawn = _drawn(canvas)
        assert canvas.lane.key == "idle" and canvas.selected is not None
        assert drawn[0].rstrip().endswith("· device idle") and drawn[0].startswith("0.000us to ")
        assert drawn[1].strip().startswith("0us") and "┬" in drawn[2]  # the ruler, right below
        assert "device idle" in _lanes_drawn(canvas) and _lanes_drawn(canvas)[0] == "steps"


async def test_t_on_an_operator_shows_its_call_and_the_kernel_it_launched(tmp_path) -> None:
    """The device runs behind the host: aten::linear [10, 40) us launches its GEMM through
    aten::addmm, and the GEMM runs at [600, 680) us.  T zoomed to 3x the call, [-20, 70) us,
    and left the kernel off-screen; the window now holds the call and the kernel."""
    trace = GpuTrace()
    trace.step(1, 0, 1000)
    trace.op("aten::linear", 10, 30)
    addmm = trace.op("aten::addmm", 12, 26)
    trace.launch(addmm, "gemm_kernel", 14, 5, 600, 80, stream=7)
    path = trace.write(tmp_path / "lagging.pt.trace.json")
    app = ExplorerApp(FileSource(str(path)))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await _press(app, pilot, "3", "slash", *"aten::linear", "enter", "T")
        canvas = app.query_one(TimelineCanvas)
        assert app.current_view == "timeline" and canvas.selected.name == "aten::linear"
        origin = canvas.timeline.begin_ns  # the step's start, the trace's first event: 0 us
        assert canvas.start_ns - origin <= 10 * US and canvas.end_ns - origin >= 680 * US
        assert canvas.end_ns - canvas.start_ns <= 2 * 680 * US  # zoomed to them, not the whole step
        stream = next(line for line in _drawn(canvas) if line.startswith("stream 7"))
        assert stream[17:].strip(), stream  # the kernel's cells are on screen


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
        (
            (120, 40),
            ["g", "plus", "plus", "plus", "k", "k", "k", "w"],
        ),  # zoomed into an idle gap, the next kernel's detail
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

    app = ExplorerApp(FileSource(str(H100)), views=SNAPSHOT_VIEWS)
    assert snap_compare(app, terminal_size=size, press=keys, run_before=open_timeline)


async def test_t_shows_a_table_row_in_the_timeline_and_enter_on_a_step_fits_it() -> None:
    app = ExplorerApp(
        FileSource(str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz"))
    )  # works without ../shared
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
        assert (
            canvas.start_ns == step.start_ns
            and canvas.end_ns >= step.start_ns + round(step.duration_us * 1000) - canvas.columns
        )


async def test_t_on_a_modules_operator_and_on_a_step_selects_them_in_the_timeline() -> None:
    """T from Modules selects the longest call of the operator under the cursor (inside the
    module), T from Steps fits the step's window: the expected call and window are recomputed
    here from the trace's calls."""
    app = ExplorerApp(FileSource(str(ROOT / "sample_traces" / "tiny_transformer_cpu.pt.trace.json.gz")))
    async with app.run_test(size=(120, 40)) as pilot:
        await _press(app, pilot, "2", "enter")  # Modules: into the top module's operators
        table = app.query_one("#module-ops", RowTable)
        rows = table.current_row.item.rows
        calls = app.model.calls
        longest = max(rows, key=lambda row: (calls.end_ns[row] - calls.start_ns[row], -row))
        await _press(app, pilot, "T")
        canvas = app.query_one(TimelineCanvas)
        assert app.current_view == "timeline"
        assert canvas.selected is not None and canvas.selected.ref == longest
        assert canvas.selected.name == calls.name(longest)
        await _press(app, pilot, "6")  # Steps: the window of the step under the cursor
        step = app.query_one("#steps-table", RowTable).current_row["name"]
        await _press(app, pilot, "T")
        step_row = next(row for row in range(len(calls)) if calls.name(row) == step)
        assert app.current_view == "timeline"
        assert (canvas.start_ns, canvas.cursor_ns) == (calls.start_ns[step_row], calls.start_ns[step_row])
        assert canvas.end_ns >= calls.end_ns[step_row] - canvas.columns  # fitted to whole columns


async def test_g_says_why_it_finds_no_gap_and_enter_on_an_idle_slice_shows_it(tmp_path) -> None:
    """A hundred kernels 9 us long, 1 us apart, over a 1 ms step: at 80 columns a column is
    ~16 us, so no idle gap is one column wide.  `g` did nothing and said nothing."""
    trace = GpuTrace()
    trace.step(1, 0, 1000)
    for i in range(100):
        call = trace.op("aten::relu", i * 10, 2)
        trace.launch(call, "relu_kernel", i * 10 + 0.5, 1, i * 10, 9, stream=7)
    path = trace.write(tmp_path / "packed.pt.trace.json")
    app = ExplorerApp(FileSource(str(path)))
    async with app.run_test(size=(80, 24)) as pilot:
        canvas = await _open_timeline(app, pilot)
        window = (canvas.start_ns, canvas.end_ns)
        await _press(app, pilot, "g")
        assert (canvas.start_ns, canvas.end_ns) == window and canvas.selected is None
        assert _drawn(canvas)[0].startswith("no idle gap of a column at this zoom: + to zoom in")
        await _press(app, pilot, "plus", "plus", "plus", "plus", "plus", "g")  # a column under 1 us
        gap = canvas.selected
        assert gap is not None and gap.lane.key == "idle" and gap.duration_ns == 1 * US
        assert "no idle gap" not in _drawn(canvas)[0]
        await _press(app, pilot, "h", "enter")  # off the gap, then back onto an idle slice of the lane
        canvas.cursor_ns = gap.start_ns
        canvas.selected = None
        await _press(app, pilot, "enter")
        assert canvas.selected is not None and canvas.selected.lane.key == "idle"
        assert "idle" in _detail(app) and "duration 1.000us" in _detail(app)


async def test_status_line_and_ruler_share_one_unit_and_a_backward_call_names_its_module() -> None:
    """ResNet's step lasted 1.909s to 2.863s over a ruler of `2000ms 2200ms`; the detail of
    aten::convolution_backward said only `inside: ConvolutionBackward0` (autograd runs it in
    no module; ResNet's convolutions are all Conv2d modules, charged by autograd)."""
    app = ExplorerApp(FileSource(str(ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz")))
    async with app.run_test(size=(80, 24)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await _press(app, pilot, "3", "slash", *"aten::convolution_backward", "enter", "T")
        canvas = app.query_one(TimelineCanvas)
        assert canvas.selected is not None and canvas.selected.name == "aten::convolution_backward"
        detail = _detail(app)
        assert "module: " in detail and "Conv2d_" in detail and "(backward)" in detail, detail
        for keys in ((), ("minus",), ("minus", "minus", "minus"), ("F",)):
            await _press(app, pilot, *keys)
            drawn = _drawn(canvas)
            status_units = set(re.findall(r"\d([a-z]+) to [-\d.]+([a-z]+)", drawn[0])[0])
            ruler_units = set(re.findall(r"\d([a-z]+)", drawn[1]))
            assert len(status_units) == 1 and ruler_units == status_units, (drawn[0], drawn[1])
