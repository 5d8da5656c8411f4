"""Steps: each ProfilerStep#N with data loading and the device breakdown."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.report.details import step_text
from tuiprof.report.views import VIEWS, Row, View
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.row_table import RowTable

NO_STEPS = "no ProfilerStep#N spans: profile with a schedule and call prof.step()"


class StepsView(ExplorerView):
    view_id = "steps"
    title = "Steps"

    def compose(self) -> ComposeResult:
        yield RowTable(id="steps-table")
        yield Static(id="step-detail", classes="detail")

    def help_columns(self) -> View:
        return VIEWS["steps"]

    def show_model(self, model: TraceModel) -> None:
        table = self.query_one(RowTable)
        table.empty_message = NO_STEPS
        self.fill_table(table, VIEWS["steps"], self.options)

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        self.query_one("#step-detail", Static).update(step_text(row["_stats"]) if row is not None else Text())
