"""Steps: each ProfilerStep#N with data loading and the device breakdown."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.report.details import step_text
from tuiprof.report.views import TRACE_VIEWS, Row, View
from tuiprof.tui.messages import ShowInTimeline
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.row_table import RowTable

NO_STEPS = "no ProfilerStep#N spans: profile with a schedule and call prof.step()"


class StepsView(ExplorerView):
    view_id = "steps"
    title = "Steps"

    def compose(self) -> ComposeResult:
        yield RowTable(id="steps-table")
        yield Static(id="step-detail", classes="detail")

    def timeline_target(self) -> tuple | None:
        row = self.query_one(RowTable).current_row
        step = row["_stats"] if row else None
        return ("window", step.start_ns, step.start_ns + round(step.duration_us * 1000)) if step else None

    def help_columns(self) -> View:
        return TRACE_VIEWS["steps"]

    def show_model(self, model: TraceModel) -> None:
        table = self.query_one(RowTable)
        table.empty_message = NO_STEPS
        self.fill_table(table, TRACE_VIEWS["steps"], self.options)

    @on(RowTable.Selected, "#steps-table")
    def _step_selected(self, event: RowTable.Selected) -> None:
        """Enter on a step: its window in the Timeline."""
        target = self.timeline_target()
        if target is not None:
            self.post_message(ShowInTimeline(target))

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        self.query_one("#step-detail", Static).update(step_text(row["_stats"]) if row is not None else Text())
