"""What keeps the explorer's keys fast (issue 29 item 3): work a key does not repeat.

Speed itself is shown by scripts/bench_ui.py (docs/big-traces.md); these tests check the
behaviour that buys it: a switch back to a view draws nothing anew, a toggle refills only the
view shown (the others when shown), and on a big trace the detail pane waits for held keys
to stop yet ends on the row the cursor is on.
"""

from __future__ import annotations

import io

from rich.console import Console

from tests.conftest import SAMPLES
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.views import base as views_base
from tuiprof.tui.views import memory as memory_view
from tuiprof.tui.views.memory import MemoryView
from tuiprof.tui.views.operators import OperatorsView
from tuiprof.tui.widgets.row_table import RowTable

SAMPLE = SAMPLES / "resnet18_cpu.pt.trace.json.gz"


async def _loaded(app: ExplorerApp, pilot) -> None:
    await app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


def _text(widget) -> str:
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


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
        await _loaded(app, pilot)
        await pilot.press("5", "3")
        await _loaded(app, pilot)
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
        await _loaded(app, pilot)
        await pilot.press("5")  # the memory view's first table: operators (no categories in this sample)
        await _loaded(app, pilot)
        memory_rows = len(app.query_one("#memory-ops", RowTable).all_rows)
        await pilot.press("3")
        operators = app.query_one("#operators-table", RowTable)
        by_name = len(operators.all_rows)
        refills.clear()
        await pilot.press("i")
        await _loaded(app, pilot)
        by_shape = len(operators.all_rows)
        assert by_shape > by_name and memory_rows == by_name  # the toggle changes what this sample shows
        assert refills == []  # the hidden Memory view did nothing at the key press
        await pilot.press("5")
        await _loaded(app, pilot)
        assert refills == [1]
        assert len(app.query_one("#memory-ops", RowTable).all_rows) == by_shape


async def test_held_keys_on_a_big_trace_show_the_detail_once_they_stop(monkeypatch) -> None:
    """On a big trace a detail costs tens of ms: ten fast moves compute it for the first and
    the last row, not ten times; the pane then shows the row under the cursor."""
    monkeypatch.setattr(views_base, "ASYNC_CALLS", 0)  # the sample counts as a big trace
    monkeypatch.setattr(
        views_base, "DETAIL_SETTLE_S", 0.5, raising=False
    )  # the moves below come faster: "keys repeating"
    details = []
    detail_text = OperatorsView.detail_text
    monkeypatch.setattr(OperatorsView, "detail_text", lambda self, row: details.append(row) or detail_text(self, row))
    app = ExplorerApp(FileSource(str(SAMPLE)))
    async with app.run_test(size=(120, 40)) as pilot:
        await _loaded(app, pilot)
        await pilot.press("3")
        await _loaded(app, pilot)
        view = app.query_one("#operators", OperatorsView)
        table = app.query_one("#operators-table", RowTable)
        await pilot.pause(0.6)
        await pilot.press("j")  # a move after a rest: shown at once
        assert details[-1] is table.current_row
        details.clear()
        for _ in range(10):
            await pilot.press("j")
        assert details == [] and view.detail_pending()
        while view.detail_pending():
            await pilot.pause(0.05)
        assert table.cursor == 11
        assert details == [table.current_row]
        name = table.current_row["name"]
        assert name in _text(app.query_one("#operators-detail")).replace("\n", "")
