"""What keeps the explorer's keys fast (issue 29 item 3): work a key does not repeat.

Speed itself is shown by scripts/bench_ui.py (docs/big-traces.md); these tests check the
behaviour that buys it: a switch back to a view draws nothing anew, a toggle refills only the
view shown (the others when shown), and on a big trace the detail pane waits for held keys
to stop yet ends on the row the cursor is on.
"""

from __future__ import annotations

import gc
import threading
from types import SimpleNamespace

import numpy as np

from tests.conftest import SAMPLES
from tests.helpers.tui import loaded, plain_text
from tuiprof.report.memory_chart import CategoryCurve, MemoryCurve
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.views import base as views_base
from tuiprof.tui.views import memory as memory_view
from tuiprof.tui.views.memory import MemoryView
from tuiprof.tui.views.operators import OperatorsView
from tuiprof.tui.widgets.row_table import RowTable

SAMPLE = SAMPLES / "resnet18_cpu.pt.trace.json.gz"


async def test_switching_back_to_memory_draws_neither_its_chart_nor_its_table_again(monkeypatch) -> None:
    """A view is shown again as it was left: its chart was drawn anew on every show (a Resize
    comes each time), which was most of a switch to Memory on a big trace."""
    charts = []
    draw = memory_view.memory_view_chart
    monkeypatch.setattr(memory_view, "memory_view_chart", lambda *args, **kw: charts.append(1) or draw(*args, **kw))
    filled = []
    set_data = RowTable.set_data
    monkeypatch.setattr(RowTable, "set_data", lambda self, *a, **kw: filled.append(self.id) or set_data(self, *a, **kw))
    app = ExplorerApp(FileSource(str(SAMPLE)))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("5", "3")
        await loaded(pilot)
        charts.clear()
        filled.clear()
        for key in ("5", "3", "5", "1", "5"):
            await pilot.press(key)
            await pilot.pause()
        assert app.current_view == "memory"
        assert charts == [] and filled == []
        assert app.query_one("#memory-chart").size.height > 0  # still drawn: the one drawn before


async def test_a_toggle_refills_a_hidden_view_only_once_it_is_shown(monkeypatch) -> None:
    """i on Operators: Operators regroups at once; Memory's operator table (hidden) regroups
    when shown, not at the key press, and then shows the same groups as Operators."""
    refills = []
    show_options = MemoryView.show_options
    monkeypatch.setattr(MemoryView, "show_options", lambda self, model: refills.append(1) or show_options(self, model))
    app = ExplorerApp(FileSource(str(SAMPLE)))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("5")  # the memory view's first table: operators (no categories in this sample)
        await loaded(pilot)
        memory_rows = len(app.query_one("#memory-ops", RowTable).all_rows)
        await pilot.press("3")
        operators = app.query_one("#operators-table", RowTable)
        by_name = len(operators.all_rows)
        refills.clear()
        await pilot.press("i")
        await loaded(pilot)
        by_shape = len(operators.all_rows)
        assert by_shape > by_name and memory_rows == by_name  # the toggle changes what this sample shows
        assert refills == []  # the hidden Memory view did nothing at the key press
        await pilot.press("5")
        await loaded(pilot)
        assert refills == [1]
        assert len(app.query_one("#memory-ops", RowTable).all_rows) == by_shape


async def test_held_keys_on_a_big_trace_show_the_detail_once_they_stop(monkeypatch) -> None:
    """On a big trace a detail costs tens of ms: ten fast moves compute it for the first and
    the last row, not ten times, off the UI thread; the pane then shows the row under the cursor."""
    monkeypatch.setattr(views_base, "ASYNC_CALLS", 0)  # the sample counts as a big trace
    monkeypatch.setattr(
        views_base, "DETAIL_SETTLE_S", 0.5, raising=False
    )  # the moves below come faster: "keys repeating"
    details, on_ui_thread = [], []
    detail_text = OperatorsView.detail_text

    def recording(self, row):
        details.append(row)
        on_ui_thread.append(threading.current_thread() is threading.main_thread())
        return detail_text(self, row)

    monkeypatch.setattr(OperatorsView, "detail_text", recording)
    app = ExplorerApp(FileSource(str(SAMPLE)))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        await loaded(pilot)
        view = app.query_one("#operators", OperatorsView)
        table = app.query_one("#operators-table", RowTable)
        await pilot.pause(0.6)
        await pilot.press("j")  # a move after a rest: worked out at once
        await app.workers.wait_for_complete()
        assert details[-1] is table.current_row
        details.clear()
        for _ in range(10):
            await pilot.press("j")
        assert details == [] and view.detail_pending()
        while view.detail_pending():
            await pilot.pause(0.05)
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert table.cursor == 11
        assert details == [table.current_row]
        name = table.current_row["name"]
        assert name in plain_text(app.query_one("#operators-detail").content).replace("\n", "")
        assert not any(on_ui_thread)  # worked out in a worker: a key never waits for a detail


async def test_the_memory_curve_is_bucketed_ahead_not_at_the_first_switch(monkeypatch) -> None:
    """The Memory view's curve buckets every allocator point (millions on a 1 GB trace): done
    in the background once the view is mounted, so the first switch to it does none of it."""
    computed_on = []
    bucket = MemoryCurve._bucket

    def recording(self, width):
        if width not in getattr(self, "_buckets", {}):  # to be computed now
            computed_on.append(threading.current_thread() is threading.main_thread())
        return bucket(self, width)

    monkeypatch.setattr(MemoryCurve, "_bucket", recording)
    app = ExplorerApp(FileSource(str(SAMPLE)))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await loaded(pilot)
        computed_on.clear()  # the Overview's own small curve, drawn with the first frame
        await pilot.press("5")
        await pilot.pause()
        assert computed_on == []
        assert "CPU memory" in plain_text(app.query_one("#memory-chart").content)  # (this renders it at 200 columns)


def _plain_curve_buckets(times, allocated, reserved, peak_ns, width):
    """MemoryCurve's columns by the loop the chart used before (one Python step per point)."""
    first, span = times[0], max(1, times[-1] - times[0])
    alloc, kept = [0] * width, [0] * width if any(reserved) else []
    for index, time_ns in enumerate(times):
        column = min(width - 1, (time_ns - first) * width // span)
        alloc[column] = max(alloc[column], allocated[index])
        if kept:
            kept[column] = max(kept[column], reserved[index])
    for column in range(1, width):
        if alloc[column] == 0:
            alloc[column] = alloc[column - 1]
        if kept and kept[column] == 0:
            kept[column] = kept[column - 1]
    return alloc, kept, min(width - 1, (peak_ns - first) * width // span)


def test_curve_columns_are_the_highest_point_of_each_bucket() -> None:
    random = np.random.default_rng(7)
    for width, points, with_reserved in ((10, 3, True), (80, 1000, True), (57, 5000, False), (200, 150, True)):
        times = tuple(int(t) for t in np.sort(random.integers(0, 10**9, points)))
        allocated = tuple(int(b) * (i % 7 != 0) for i, b in enumerate(random.integers(0, 10**6, points)))
        reserved = (
            tuple(a + int(r) for a, r in zip(allocated, random.integers(0, 10**5, points))) if with_reserved else ()
        )
        peak = max(range(points), key=allocated.__getitem__)
        timeline = SimpleNamespace(times_ns=times, allocated=allocated, reserved=reserved, peak_ns=times[peak])
        curve = MemoryCurve(timeline, 0)  # type: ignore[arg-type]
        expected = _plain_curve_buckets(times, allocated, reserved or (0,) * points, times[peak], width)
        assert curve._bucket(width) == (expected[0], expected[1] if with_reserved else [], expected[2])


def test_stacked_columns_are_the_highest_point_of_each_bucket_the_latest_of_equals() -> None:
    random = np.random.default_rng(11)
    for width, points in ((10, 4), (64, 800), (150, 3000)):
        times = np.sort(random.integers(0, 10**9, points)).astype(np.int64)
        stacked = random.integers(0, 4, (points, 3)).astype(np.int64)  # few levels: many equal totals
        memory = SimpleNamespace(times_ns=times, bytes=stacked, categories=("a", "b", "c"), peak_index=points // 2)
        first, span = int(times[0]), max(1, int(times[-1]) - int(times[0]))
        best = [-1] * width
        for point in range(points):  # plain Python: the highest total of a column, the latest of equals
            column = min(width - 1, (int(times[point]) - first) * width // span)
            if best[column] < 0 or stacked[point].sum() >= stacked[best[column]].sum():
                best[column] = point
        expected, last = [], [0, 0, 0]
        for column in range(width):
            last = stacked[best[column]].tolist() if best[column] >= 0 else last
            expected.append(last)
        stacks, _ = CategoryCurve(memory, 0)._bucket(width)  # type: ignore[arg-type]
        assert stacks == expected


async def test_what_the_explorer_froze_for_the_collector_is_released_when_it_ends() -> None:
    """gc.freeze() keeps the model and the widgets out of collections while the app runs; once
    it ends they go back, or a process running many apps (the tests) would keep their cycles."""
    app = ExplorerApp(FileSource(str(SAMPLE)))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await loaded(pilot)
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0
