"""Memory: allocated (and reserved) over time per device, the peak marked, and
the per-operator allocation table."""

from __future__ import annotations

from dataclasses import replace

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.report.memory_chart import MemoryCurve
from tuiprof.report.views import TRACE_VIEWS, View
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.row_table import RowTable

MEMORY_COLUMNS = ("name", "self_cpu_mem_bytes", "cpu_mem_bytes", "self_device_mem_bytes", "device_mem_bytes", "calls")
CHARTS = 2  # devices charted (the first when the terminal is short); the table covers all
TWO_CHARTS_ROWS = 32  # a chart takes ~8 rows: below this many, two left the table no row at 60x20
NO_MEMORY = "No [memory] events: profile with profile_memory=True."


class MemoryView(ExplorerView):
    view_id = "memory"
    title = "Memory"
    _charted: int | None = None  # charts drawn for the terminal's height

    def compose(self) -> ComposeResult:
        yield Static(id="memory-chart")
        yield RowTable(id="memory-ops")

    def timeline_target(self) -> tuple | None:
        return self.longest_call_of(self.query_one(RowTable).current_row)

    def help_columns(self) -> View:
        return TRACE_VIEWS["operators"]

    def _charts(self) -> int:
        return CHARTS if self.app.size.height >= TWO_CHARTS_ROWS else 1

    def on_resize(self) -> None:
        if self.model is not None and self._charts() != self._charted:
            self._draw_charts(self.model)  # the table stays as it is

    def show_model(self, model: TraceModel) -> None:
        self._draw_charts(model)
        self.show_options(model)

    def _draw_charts(self, model: TraceModel) -> None:
        chart = self.query_one("#memory-chart", Static)
        self._charted = self._charts()
        if not model.memory:
            chart.update(Text(NO_MEMORY))  # plain: "[memory]" is no markup
        else:
            origin = model.calls.start_ns[0] if len(model.calls) else 0
            curves: list = []
            for timeline in model.memory[: self._charted]:
                label = ""
                if timeline.peak_operator_row >= 0:
                    label = model.calls.name(timeline.peak_operator_row)
                    node = model.modules.by_frame.get(model.calls.module[timeline.peak_operator_row])
                    if node is not None:
                        label += f" ({node.label})"
                curves += [Text(f"{timeline.device} memory", style="bold"), MemoryCurve(timeline, origin, 4, label)]
            chart.update(Group(*curves))

    def show_options(self, model: TraceModel) -> None:
        view = TRACE_VIEWS["operators"]
        shown = {c.key for c in view.visible_columns(self.options, model)}
        # Every memory column is what this view is for: none is dropped at 80 columns.
        columns = tuple(replace(view.column(key), narrow=True) for key in MEMORY_COLUMNS if key in shown)
        sort = "self_device_mem_bytes" if any(not t.is_cpu for t in model.memory) else "self_cpu_mem_bytes"
        self.fill_table(self.query_one(RowTable), view, self.options, columns=columns, default_sort=sort)
