"""Overview: the findings, step time, top modules, operators and kernels, memory."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.report.findings import findings
from tuiprof.report.overview import overview
from tuiprof.report.views import Column
from tuiprof.tui.commands import Command, bindings
from tuiprof.tui.views.base import ExplorerView

FINDING_COLUMNS = (
    Column("id", "Finding", "text", "Stable id of the rule (report/findings.py)."),
    Column("severity", "Severity", "text", "warning: costs time now; info: how the trace was recorded."),
    Column("text", "Text", "text", "What the Overview says."),
)

PAGE_COMMANDS: tuple[Command, ...] = (
    Command("j", "scroll_down", "Down", "scroll down", scope="page", palette=False),
    Command("k", "scroll_up", "Up", "scroll up", scope="page", palette=False),
    Command("g", "scroll_home", "Top", "top of the page", scope="page", palette=False),
    Command("G", "scroll_end", "Bottom", "end of the page", scope="page", palette=False),
)


class OverviewScroll(VerticalScroll):
    """The Overview page scrolls with the keys the tables use."""

    PANE_COMMANDS = PAGE_COMMANDS
    BINDINGS = bindings(PAGE_COMMANDS)


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
        rows = [{"id": f.id, "severity": f.severity, "text": f.text} for f in findings(self.model)]
        return ("overview-findings", rows, FINDING_COLUMNS)
