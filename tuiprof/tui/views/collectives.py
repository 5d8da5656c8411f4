"""Collectives: each collective matched across the run's ranks, who arrived last, who waited."""

from __future__ import annotations

from rich.console import RenderableType

from tuiprof.report.details import collective_text
from tuiprof.report.views import Row
from tuiprof.tui.views.ranks import RunView


class CollectivesView(RunView):
    view_id = "collectives"
    title = "Collectives"

    def detail_text(self, row: Row) -> RenderableType:
        return collective_text(row)
