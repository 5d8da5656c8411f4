"""Overview: the findings, step time, top modules, operators and kernels, memory."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.report.overview import overview
from tuiprof.report.views import FINDING_COLUMNS, build_finding_rows
from tuiprof.tui.views.base import ExplorerView


class OverviewScroll(VerticalScroll):
    """The Overview page scrolls with the keys the tables use."""

    BINDINGS = [
        Binding("j", "scroll_down", "Down", show=False),
        Binding("k", "scroll_up", "Up", show=False),
        Binding("g", "scroll_home", "Top", show=False),
        Binding("G", "scroll_end", "Bottom", show=False),
    ]


class OverviewView(ExplorerView):
    view_id = "overview"
    title = "Overview"

    def compose(self) -> ComposeResult:
        with OverviewScroll(id="overview-scroll"):
            yield Static(id="overview-body")

    def focus_target(self):
        return self.query_one("#overview-scroll")

    def show_model(self, model: TraceModel) -> None:
        self.query_one("#overview-body", Static).update(overview(model))

    def export_rows(self):
        """The findings, the part of the Overview no other view has."""
        assert self.model is not None
        return ("overview-findings", build_finding_rows(self.model), FINDING_COLUMNS)
