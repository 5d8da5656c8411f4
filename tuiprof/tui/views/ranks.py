"""Ranks: every rank of the run the trace belongs to, one row each, the straggler named.

The explorer holds one rank's full model; this view asks the analysis layer for
every rank's summary (sidecars, or worker processes) off the UI thread, once
per run directory (the Collectives view shares it).
"""

from __future__ import annotations

import threading
from pathlib import Path

from rich.console import RenderableType
from textual.worker import get_current_worker

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranks import RunSummary, summarise_run
from tuiprof.errors import TraceError
from tuiprof.report.details import rank_text
from tuiprof.report.views import RUN_VIEWS, Row, View, ViewOptions
from tuiprof.trace.run import open_run
from tuiprof.tui.views.base import TableDetailView
from tuiprof.tui.widgets.row_table import RowTable

NOT_DISTRIBUTED = "a single-process trace: open a run directory of a distributed run (one trace per rank)"
_runs: dict[Path, RunSummary | str] = {}
_runs_lock = threading.Lock()


def run_of(model: TraceModel) -> RunSummary | str:
    """The run summary of the trace's directory (computed once; a problem as text)."""
    directory = Path(model.info.source).parent
    with _runs_lock:
        if directory not in _runs:
            try:
                _runs[directory] = summarise_run(open_run(directory))
            except TraceError as exc:
                _runs[directory] = str(exc)
        return _runs[directory]


class RunView(TableDetailView):
    """A view of every rank: the run view of the same name (RUN_VIEWS) and a detail pane."""

    run: RunSummary | None = None

    @classmethod
    def available(cls, model: TraceModel, log_lines: tuple[str, ...]) -> bool:
        return (model.info.world_size or 0) > 1

    def help_columns(self) -> View:
        return RUN_VIEWS[self.view_id]

    def show_model(self, model: TraceModel) -> None:
        table = self.query_one(RowTable)
        if not self.available(model, ()):
            table.empty_message = NOT_DISTRIBUTED
            table.set_data(RUN_VIEWS[self.view_id].columns, [])
            return
        table.empty_message = f"summarising {model.info.world_size} ranks…"
        table.set_data(RUN_VIEWS[self.view_id].columns, [])
        self.run_worker(lambda: self._load(model), thread=True, exclusive=True, group=f"run-{self.view_id}")

    def _load(self, model: TraceModel) -> None:
        run = run_of(model)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_run, run)

    def _show_run(self, run: RunSummary | str) -> None:
        table = self.query_one(RowTable)
        view = RUN_VIEWS[self.view_id]
        if isinstance(run, str):
            table.empty_message = run
            table.set_data(view.columns, [])
            return
        self.run = run
        table.set_data(view.visible_columns(ViewOptions(), run), view.build(run, ViewOptions()), view.default_sort)
        self.select_shown_rank()

    def select_shown_rank(self) -> None:
        """The cursor on the row of the rank the explorer shows (a table of ranks only): after
        ``]`` the rows are drawn again for the new model and the cursor follows it."""


class RanksView(RunView):
    view_id = "ranks"
    title = "Ranks"

    def detail_text(self, row: Row) -> RenderableType:
        return rank_text(row, self.run.problems if self.run else ())

    def select_shown_rank(self) -> None:
        if self.model is not None and self.model.info.rank is not None:
            rank = self.model.info.rank
            self.query_one(RowTable).select_where(lambda row: row.get("rank") == rank)
