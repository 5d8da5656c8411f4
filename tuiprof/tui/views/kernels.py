"""Kernels (GPU traces): one row per kernel, memcpy and memset; enter lists every launch."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text
from textual import on

from tuiprof.analysis.ranking import longest_launch
from tuiprof.analysis.timeline import DeviceTarget
from tuiprof.report.details import CappedHead, kernel_text
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.views import LAUNCH_COLUMNS, KernelRow, Row, build_launch_rows
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
        launch = longest_launch(self.model, row.item.rows) if isinstance(row, KernelRow) and self.model else None
        return DeviceTarget(launch) if launch is not None else None

    def detail_text(self, row: Row) -> RenderableType:
        if not isinstance(row, KernelRow):
            return Text()
        return CappedHead(kernel_text(row.item))  # the signature in 2 lines at most: the times stay in view

    @on(RowTable.Selected, "#kernels-table")
    def _list_launches(self, event: RowTable.Selected) -> None:
        model = self.model
        if model is None or not isinstance(event.row, KernelRow):
            return
        stats = event.row.item
        title = f"{plain(stats.name, DISPLAY_CHARS)}: {stats.calls:,} launches (esc: back)"
        self.app.push_screen(
            EventListScreen(
                title, "launches", LAUNCH_COLUMNS, lambda: build_launch_rows(model, stats.rows), "duration_us"
            )
        )
