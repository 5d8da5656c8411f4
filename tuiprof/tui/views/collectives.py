"""Collectives: each collective matched across the run's ranks, who arrived last, who waited."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from tuiprof.report.details import collective_text
from tuiprof.report.views import Row
from tuiprof.tui.views.ranks import RunView
from tuiprof.tui.widgets.row_table import RowTable


class CollectivesView(RunView):
    view_id = "collectives"
    title = "Collectives"
    run_view = "collectives"

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        self.query_one("#collectives-detail", Static).update(collective_text(row) if row is not None else Text())
