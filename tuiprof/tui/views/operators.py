"""Operators: every column of ``key_averages().table()``, a detail pane, and
enter for every call of the highlighted operator."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.worker import get_current_worker

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.timeline import CallTarget
from tuiprof.report.details import operator_text
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.views import CALL_COLUMNS, OperatorRow, Row, build_call_rows
from tuiprof.tui.screens.events import EventListScreen
from tuiprof.tui.views.base import ASYNC_CALLS, TraceTableView
from tuiprof.tui.widgets.row_table import RowTable


class OperatorsView(TraceTableView):
    view_id = "operators"
    title = "Operators"

    def timeline_target(self) -> CallTarget | None:
        return self.longest_call_of(self.query_one(RowTable).current_row)

    def show_model(self, model: TraceModel) -> None:
        super().show_model(model)
        if len(model.calls) > ASYNC_CALLS:
            self.run_worker(self._prepare_toggled_tables, thread=True, group="prepare")

    def show_options(self, model: TraceModel) -> None:
        self.fill_table(self.query_one(RowTable), self.table_view(), self.options)

    def _prepare_toggled_tables(self) -> None:
        """Big traces: build the i and t groupings ahead, so the toggles answer from cache."""
        model = self.model
        assert model is not None
        for shapes, top in ((False, True), (True, False)):
            if get_current_worker().is_cancelled:
                return
            model.operators(group_by_shape=shapes, top_level_only=top)

    def detail_text(self, row: Row) -> RenderableType:
        return (
            operator_text(self.model, row.item) if self.model is not None and isinstance(row, OperatorRow) else Text()
        )

    @on(RowTable.Selected, "#operators-table")
    def _list_calls(self, event: RowTable.Selected) -> None:
        """Enter on an operator: every one of its calls (rows built off the UI thread)."""
        model = self.model
        if model is None or not isinstance(event.row, OperatorRow):
            return
        stats = event.row.item
        title = f"{plain(stats.name, DISPLAY_CHARS)}: {stats.calls:,} calls (esc: back)"
        self.app.push_screen(
            EventListScreen(title, "calls", CALL_COLUMNS, lambda: build_call_rows(model, stats.rows), "cpu_total_us")
        )
