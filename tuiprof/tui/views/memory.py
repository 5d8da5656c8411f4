"""Memory: the curve per device (stacked by torch's categories when a tuiprof
capture saved them, else allocated and reserved), the peak marked, and one
table at a time (``m`` cycles): the modules holding the peak's bytes, the
allocations live at it, the remedies' arithmetic, and the per-operator
allocation table.  Everything drawn here is computed in analysis/memory_peak.py
and drawn or worded in report/memory_chart.py and report/memory_texts.py:
this view only places it and follows the keys."""

from __future__ import annotations

import io

from rich.console import Console, Group
from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.timeline import CallTarget
from tuiprof.report.memory_chart import memory_view_chart
from tuiprof.report.memory_texts import allocation_detail, module_memory_detail, what_if_text
from tuiprof.report.views import (
    TRACE_VIEWS,
    AllocationRow,
    ModuleMemoryRow,
    Row,
    View,
    WhatIfRow,
    memory_operator_columns,
)
from tuiprof.tui.commands import MEMORY_COMMANDS, bindings
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.row_table import RowTable

CHARTS = 2  # devices charted (the first when the terminal is short); the table covers all
TWO_CHARTS_ROWS = 32  # a chart takes ~8 rows: below this many, two left the table no row at 60x20
TALL_CURVE_ROWS = 36  # from this terminal height the categorised curve gets 6 lines, not 4
CHART_PADDING = 2  # cells of #memory-chart's padding (explorer.tcss): its content is this much narrower
DETAIL_ROWS = 30  # below this terminal height the detail pane leaves its rows to the table (80x24: 5 rows)
# The tables ``m`` cycles through: with torch's categories, and without (a file from elsewhere).
CATEGORISED_TABLES = ("memory-modules", "memory-allocations", "memory-what-ifs", "operators")
ALLOCATOR_TABLES = ("operators", "memory-allocations", "memory-modules")
# Each fits with "  m: next table" in 60 columns (its Static is one line: a longer one lost the key's name).
TABLE_TITLES = {
    "memory-modules": "Modules at the peak, submodules included",
    "memory-allocations": "Allocations live at the peak",
    "memory-what-ifs": "What would lower the peak",
    "operators": "Operators: bytes allocated minus freed",
}


def _draw_ahead(chart: Group, width: int) -> None:
    """Render ``chart`` once at ``width`` (a worker): its curves keep their columns per width
    (report/memory_chart.py), so the first switch to the view only lays them out.  A 1 GB
    trace has millions of allocator points: bucketing them took most of a second."""
    Console(width=width, file=io.StringIO()).render_lines(chart, pad=False)


class MemoryView(ExplorerView):
    view_id = "memory"
    title = "Memory"
    # The categorised peak as the stacked curve, the others as the tables m cycles through.
    summary_views = ("memory-categories", "memory-modules", "memory-allocations", "memory-what-ifs")
    BINDINGS = bindings(MEMORY_COMMANDS)
    PANE_COMMANDS = MEMORY_COMMANDS  # what ? lists for this view, with its table's keys
    _charted: int = 0  # charts drawn for the terminal's height
    _table: str = ""  # the TRACE_VIEWS name of the table shown
    _chart_drawn: tuple | None = None  # (model, charts, height, compact) of the chart shown

    def compose(self) -> ComposeResult:
        yield Static(id="memory-chart")
        yield Static(id="memory-table-title")
        yield RowTable(id="memory-ops")
        yield Static(id="memory-detail", classes="detail")

    def timeline_target(self) -> CallTarget | None:
        return self.longest_call_of(self.query_one(RowTable).current_row) if self._table == "operators" else None

    def help_columns(self) -> View:
        return TRACE_VIEWS[self._table or "operators"]

    def _tables(self, model: TraceModel) -> tuple[str, ...]:
        return CATEGORISED_TABLES if model.memory_categories else ALLOCATOR_TABLES

    def _charts(self) -> int:
        return CHARTS if self.app.size.height >= TWO_CHARTS_ROWS else 1

    def on_show(self) -> None:
        """Shown: the modules table scrolls to its cursor (set while the view was hidden)."""
        self._select_most_activations()

    def _select_most_activations(self) -> None:
        if self._table != "memory-modules" or self.model is None or self.model.memory_breakdown is None:
            return
        most = self.model.memory_breakdown.most_activations  # the module a user checkpoints first
        if most is not None:
            self.query_one(RowTable).select_where(lambda row: isinstance(row, ModuleMemoryRow) and row.item is most)

    def on_resize(self) -> None:
        if self.model is not None:
            self._draw_charts(self.model)  # the table stays as it is
        self._show_detail_pane()

    def _show_detail_pane(self) -> None:
        """Operator rows have no detail; a short terminal needs every row for the table."""
        pane = self.query_one("#memory-detail", Static)
        pane.display = self._table != "operators" and self.app.size.height >= DETAIL_ROWS

    def show_model(self, model: TraceModel) -> None:
        self._table = self._tables(model)[0]
        self._draw_charts(model)
        self.show_options(model)

    def action_next_table(self) -> None:
        if self.model is None:
            return
        tables = self._tables(self.model)
        self._table = tables[(tables.index(self._table) + 1) % len(tables)] if self._table in tables else tables[0]
        self.show_options(self.model)

    def _draw_charts(self, model: TraceModel) -> None:
        """The charts for the terminal's height; not again for the same (a Resize comes each
        time the view is shown, and a new chart is drawn anew: most of a switch to this view)."""
        self._charted = self._charts()
        rows = self.app.size.height
        categorised_height = 6 if rows >= TALL_CURVE_ROWS else 4 if rows >= DETAIL_ROWS else 3
        height = categorised_height if model.categorised_peak is not None else 4
        compact = rows < DETAIL_ROWS
        if self._chart_drawn == (model, self._charted, height, compact):
            return
        self._chart_drawn = (model, self._charted, height, compact)
        chart = memory_view_chart(model, self._charted, height, compact=compact)
        self.query_one("#memory-chart", Static).update(chart)
        if not self.display:  # mounted hidden after the first frame: draw it ahead, off the UI thread
            width = self.app.size.width - CHART_PADDING
            self.run_worker(lambda: _draw_ahead(chart, width), thread=True, exclusive=True, group="memory-chart")

    def show_options(self, model: TraceModel) -> None:
        table = self.query_one(RowTable)
        title = Text(TABLE_TITLES[self._table], style="bold")
        title.append("  m: next table", style="dim")
        self.query_one("#memory-table-title", Static).update(title)
        self._show_detail_pane()
        if self._table != "operators":
            view = TRACE_VIEWS[self._table]
            table.set_data(
                view.visible_columns(self.options, model), view.build(model, self.options), view.default_sort
            )
            self._select_most_activations()
            self.show_detail(table, table.current_row)
            return
        columns, sort = memory_operator_columns(self.options, model)
        self.fill_table(table, TRACE_VIEWS["operators"], self.options, columns=columns, default_sort=sort)

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        text = Text()
        if isinstance(row, ModuleMemoryRow) and self.model is not None and self.model.memory_breakdown is not None:
            text = module_memory_detail(self.model.memory_breakdown, row.item)
        elif isinstance(row, AllocationRow):
            text = allocation_detail(row.item)
        elif isinstance(row, WhatIfRow):
            text = Text(what_if_text(row.item))
        self.query_one("#memory-detail", Static).update(text)
