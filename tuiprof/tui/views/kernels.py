"""Kernels (GPU traces): one row per kernel, memcpy and memset; enter lists every launch."""

from __future__ import annotations

from rich.console import RenderableType
from textual import on

from tuiprof.analysis.ranking import longest_launch
from tuiprof.analysis.timeline import DeviceTarget
from tuiprof.report.details import CappedHead, kernel_text
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.views import LAUNCH_COLUMNS, Row, build_launch_rows
from tuiprof.tui.screens.events import EventListScreen
from tuiprof.tui.views.base import TraceTableView
from tuiprof.tui.widgets.row_table import RowTable

CPU_ONLY = "CPU-only profile: no device activity (no kernels, memcpys or memsets) in this trace"


class KernelsView(TraceTableView):
    view_id = "kernels"
    title = "Kernels"
    empty_message = CPU_ONLY

    def timeline_target(self) -> DeviceTarget | None:
        row = self.query_one(RowTable).current_row
        launch = longest_launch(self.model, row["_stats"].rows) if row and self.model else None
        return DeviceTarget(launch) if launch is not None else None

    def detail_text(self, row: Row) -> RenderableType:
        return CappedHead(kernel_text(row["_stats"]))  # the signature in 2 lines at most: the times stay in view

    @on(RowTable.Selected, "#kernels-table")
    def _list_launches(self, event: RowTable.Selected) -> None:
        model = self.model
        if event.row is None or model is None:
            return
        stats = event.row["_stats"]
        title = f"{plain(stats.name, DISPLAY_CHARS)}: {stats.calls:,} launches (esc: back)"
        self.app.push_screen(
            EventListScreen(
                title, "launches", LAUNCH_COLUMNS, lambda: build_launch_rows(model, stats.rows), "duration_us"
            )
        )
