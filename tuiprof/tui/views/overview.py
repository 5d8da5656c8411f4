"""Overview: the findings, step time, top modules, operators and kernels, memory."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static
from textual.worker import get_current_worker

from tuiprof.analysis.model import TraceModel
from tuiprof.report.findings import FINDING_COLUMNS, Finding, finding_rows, findings, straggler
from tuiprof.report.overview import overview
from tuiprof.tui.commands import Command, bindings
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.views.ranks import RunView, run_of

OVERVIEW_COMMANDS: tuple[Command, ...] = (
    Command("j", "scroll_down", "Down", "scroll down", scope="overview", palette=False),
    Command("k", "scroll_up", "Up", "scroll up", scope="overview", palette=False),
    Command("g", "scroll_home", "Top", "the first line", scope="overview", palette=False),
    Command("G", "scroll_end", "Bottom", "the last line", scope="overview", palette=False),
)


class OverviewScroll(VerticalScroll):
    """The Overview page scrolls with the keys the tables use."""

    PANE_COMMANDS = OVERVIEW_COMMANDS  # what ? lists in the Overview
    BINDINGS = bindings(OVERVIEW_COMMANDS)


class OverviewView(ExplorerView):
    view_id = "overview"
    title = "Overview"
    run_findings: tuple[Finding, ...] = ()  # the run's, once summarised

    def compose(self) -> ComposeResult:
        with OverviewScroll(id="overview-scroll"):
            yield Static(id="overview-body")

    def focus_target(self):
        return self.query_one("#overview-scroll")

    def show_model(self, model: TraceModel) -> None:
        self.run_findings = ()
        self.query_one("#overview-body", Static).update(overview(model, self.pointer))
        if RunView.available(model, ()):  # a rank of a run: name the run's straggler first
            # the run the Ranks view summarises too (once, whichever asks first)
            self.run_worker(lambda: self._load_run(model), thread=True, exclusive=True, group="overview-run")

    def _load_run(self, model: TraceModel) -> None:
        run = run_of(model)
        if isinstance(run, str):  # the Ranks view says what is wrong with the run
            return
        found = tuple(f for f in (straggler(run),) if f is not None)
        if found and not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_run_findings, model, found)

    def _show_run_findings(self, model: TraceModel, found: tuple[Finding, ...]) -> None:
        if model is self.model:
            self.run_findings = found
            self.query_one("#overview-body", Static).update(overview(model, self.pointer, found))

    def export_rows(self):
        """The findings, the part of the Overview no other view has."""
        assert self.model is not None
        return (
            "overview-findings",
            finding_rows((*self.run_findings, *findings(self.model)), self.pointer),
            FINDING_COLUMNS,
        )

    def pointer(self, see: str) -> str:
        """Where a finding's details are, in the explorer: ``the Memory view (5)`` for a
        table shown inside a view (``summary_views``); '' for a view this app lacks."""
        from tuiprof.tui.views import view_keys  # the registry imports this module

        for key, view_id, view in view_keys(getattr(self.app, "views", ())):
            if see == view_id or see in getattr(view, "summary_views", ()):
                return f"the {view.title} view ({key})" if key else f"the {view.title} view (< >)"
        return ""
