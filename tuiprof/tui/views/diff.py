"""Diff mode's views (``tuiprof diff A B`` on a terminal): the Diff overview and
one A/B/delta table per level.

They are not in :data:`tuiprof.tui.views.EXPLORER_VIEWS`: those draw one TraceModel,
these draw a :class:`TraceDiff` (two runs), which the diff app assigns to
their ``diff`` reactive.  Like every view they compute nothing: the diff
comes from analysis/diff.py, its texts and columns from report/diff.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from tuiprof.analysis.diff import TraceDiff
from tuiprof.report.diff import diff_columns, diff_row, overview_text, row_detail, shown_columns
from tuiprof.report.views import Column, Row, View
from tuiprof.tui.views.base import ExplorerView, TableDetailView
from tuiprof.tui.widgets.row_table import RowTable

DEFAULT_SORT = "abs_delta"
# d cycles the sort through these: A's value, B's value, the size of the change.
SORT_CYCLE = ("a", "b", "abs_delta")


@dataclass(frozen=True)
class DiffPage:
    """One page of diff mode: its key order is DIFF_PAGES' order."""

    view_id: str
    title: str
    tables: tuple[str, ...]  # the diff tables it shows, i cycles them; () for the overview


DIFF_PAGES: tuple[DiffPage, ...] = (
    DiffPage("diff-overview", "Diff", ()),
    DiffPage("diff-ops", "Operators", ("ops", "shapes")),
    DiffPage("diff-modules", "Modules", ("modules",)),
    DiffPage("diff-kernels", "Kernels", ("kernels", "launchers")),
    DiffPage("diff-steps", "Steps", ("steps",)),
    DiffPage("diff-memory", "Memory", ("memory",)),
)


class DiffView(ExplorerView):
    """A page of diff mode, drawn from the ``diff`` the app assigns (the
    single-trace reactives stay unset)."""

    DEFAULT_CSS = """
    #diff-overview-scroll { padding: 0 1; }
    DiffView RowTable { height: 1fr; }
    """
    diff: reactive[TraceDiff | None] = reactive(None, init=False)

    def __init__(self, page: DiffPage, **kwargs) -> None:
        super().__init__(id=page.view_id, **kwargs)
        self.page = page

    def watch_diff(self, diff: TraceDiff | None) -> None:
        if diff is not None:
            self.show_diff(diff)

    def show_diff(self, diff: TraceDiff) -> None:
        raise NotImplementedError

    def toggle_grouping(self) -> bool:
        """``i``: the view's other grouping; False when it has none."""
        return False


class DiffOverviewView(DiffView):
    def compose(self) -> ComposeResult:
        with VerticalScroll(id="diff-overview-scroll"):
            yield Static(id="diff-overview-body")

    def focus_target(self) -> Widget:
        return self.query_one("#diff-overview-scroll")

    def show_diff(self, diff: TraceDiff) -> None:
        self.query_one("#diff-overview-body", Static).update(overview_text(diff))

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]] | None:
        """The contributors: the overview's own table."""
        assert self.diff is not None
        rows = [diff_row(r) for r in self.diff.verdict.contributors]
        return ("diff-contributors", rows, diff_columns(self.diff.table("ops")))


class DiffTableView(DiffView, TableDetailView):
    """One level of the diff (operators, modules, ...), with an alternative
    grouping on ``i`` where the level has one (by input shape, by launcher)."""

    def __init__(self, page: DiffPage, **kwargs) -> None:
        super().__init__(page, **kwargs)
        self.shown = page.tables[0]

    def show_diff(self, diff: TraceDiff) -> None:
        table = self.query_one(RowTable)
        data = diff.table(self.shown)
        table.empty_message = data.note or "nothing to compare"
        sort = table.sort_key if table.sort_key else DEFAULT_SORT
        rows = [diff_row(r) for r in data.rows]
        table.set_data(shown_columns(data, rows, hidden=()), rows, sort, table.descending)

    def toggle_grouping(self) -> bool:
        tables = self.page.tables
        if len(tables) < 2:
            return False
        self.shown = tables[(tables.index(self.shown) + 1) % len(tables)]
        if self.diff is not None:
            self.show_diff(self.diff)
        return True

    def cycle_sort(self) -> str:
        """``d``: sort by A, then B, then the size of the change (descending)."""
        table = self.query_one(RowTable)
        at = SORT_CYCLE.index(table.sort_key) if table.sort_key in SORT_CYCLE else -1
        key = SORT_CYCLE[(at + 1) % len(SORT_CYCLE)]
        table.sort_by(key, descending=True)
        return key

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]] | None:
        table = self.query_one(RowTable)
        return (f"diff-{self.shown}", table.rows, table.columns)

    def help_columns(self) -> View | None:
        if self.diff is None:
            return None
        data = self.diff.table(self.shown)
        return View(
            data.name, f"{data.title} ({data.metric})", diff_columns(data), DEFAULT_SORT, lambda model, options: []
        )

    def detail_text(self, row: Row) -> RenderableType:
        return row_detail(self.diff.table(self.shown), row) if self.diff is not None else Text()


def diff_view(page: DiffPage) -> DiffView:
    return DiffTableView(page) if page.tables else DiffOverviewView(page)
