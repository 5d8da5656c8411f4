"""Steps: each ProfilerStep#N with data loading and the device breakdown."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual import on

from tuiprof.analysis.timeline import WindowTarget
from tuiprof.report.details import step_text
from tuiprof.report.views import Row, StepRow
from tuiprof.tui.messages import ShowInTimeline
from tuiprof.tui.views.base import TraceTableView
from tuiprof.tui.widgets.row_table import RowTable

NO_STEPS = "no ProfilerStep#N spans: profile with a schedule and call prof.step()"


class StepsView(TraceTableView):
    view_id = "steps"
    title = "Steps"
    empty_message = NO_STEPS

    def timeline_target(self) -> WindowTarget | None:
        row = self.query_one(RowTable).current_row
        return WindowTarget(row.item.start_ns, row.item.end_ns) if isinstance(row, StepRow) else None

    @on(RowTable.Selected, "#steps-table")
    def _step_selected(self, event: RowTable.Selected) -> None:
        """Enter on a step: its window in the Timeline."""
        target = self.timeline_target()
        if target is not None:
            self.post_message(ShowInTimeline(target))

    def detail_text(self, row: Row) -> RenderableType:
        return step_text(row.item) if isinstance(row, StepRow) else Text()
