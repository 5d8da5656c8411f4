"""Diff mode's views (``tuiprof diff A B`` on a terminal): the Diff overview and
one A/B/delta table per level.

They are not in :data:`tuiprof.tui.views.VIEWS`: those draw one TraceModel,
these draw a :class:`TraceDiff` (two runs), which the diff app assigns to
their ``diff`` reactive.  Like every view they compute nothing: the diff
comes from analysis/diff.py, its texts and columns from report/diff.py.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Static

from tuiprof.analysis.diff import TraceDiff
from tuiprof.report.diff import diff_columns, diff_row, overview_text, row_detail, shown_columns
from tuiprof.report.views import Column, Row, View
from tuiprof.tui.widgets.row_table import RowTable

DEFAULT_SORT = "abs_delta"
# d cycles the sort through these: A's value, B's value, the size of the change.
SORT_CYCLE = ("a", "b", "abs_delta")


class DiffView(Vertical):
    """A page of diff mode: drawn from the ``diff`` the app assigns."""

    DEFAULT_CSS = """
    DiffView { height: 1fr; }
    DiffView RowTable { height: 1fr; }
    #diff-overview-scroll { padding: 0 1; }
    """
    view_id: ClassVar[str]
    title: ClassVar[str]
    diff: reactive[TraceDiff | None] = reactive(None, init=False)

    def watch_diff(self, diff: TraceDiff | None) -> None:
        if diff is not None:
            self.show_diff(diff)

    def show_diff(self, diff: TraceDiff) -> None:
        raise NotImplementedError

    def focus_target(self) -> Widget:
        return self.active_table() or self

    def active_table(self) -> RowTable | None:
        return next(iter(self.query(RowTable)), None)

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]] | None:
        table = self.active_table()
        return (self.view_id, table.rows, table.columns) if table is not None else None

    def help_columns(self) -> View | None:
        return None

    def toggle_grouping(self) -> bool:
        """``i``: the view's other grouping; False when it has none."""
        return False


class DiffOverviewView(DiffView):
    view_id = "diff-overview"
    title = "Diff"

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


class DiffTableView(DiffView):
    """One level of the diff (operators, modules, ...), with an alternative
    grouping on ``i`` where the level has one (by input shape, by launcher)."""

    tables: ClassVar[tuple[str, ...]]  # the diff tables this view shows; i cycles them

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.shown = self.tables[0]

    def compose(self) -> ComposeResult:
        yield RowTable(id=f"{self.view_id}-table")
        yield Static(id=f"{self.view_id}-detail", classes="detail")

    def show_diff(self, diff: TraceDiff) -> None:
        table = self.query_one(RowTable)
        data = diff.table(self.shown)
        table.empty_message = data.note or "nothing to compare"
        sort = table.sort_key if table.sort_key else DEFAULT_SORT
        rows = [diff_row(r) for r in data.rows]
        table.set_data(shown_columns(data, rows, hidden=()), rows, sort, table.descending)
        self.border_title = f"{data.title}: {data.metric}"

    def toggle_grouping(self) -> bool:
        if len(self.tables) < 2:
            return False
        self.shown = self.tables[(self.tables.index(self.shown) + 1) % len(self.tables)]
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

    def help_columns(self) -> View | None:
        if self.diff is None:
            return None
        data = self.diff.table(self.shown)
        return View(data.name, f"{data.title} ({data.metric})", diff_columns(data), DEFAULT_SORT, lambda model, options: [])

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        detail = self.query_one(f"#{self.view_id}-detail", Static)
        if event.row is None or self.diff is None:
            detail.update(Text())
            return
        detail.update(row_detail(self.diff.table(self.shown), event.row))


class DiffOperatorsView(DiffTableView):
    view_id = "diff-ops"
    title = "Operators"
    tables = ("ops", "shapes")


class DiffModulesView(DiffTableView):
    view_id = "diff-modules"
    title = "Modules"
    tables = ("modules",)


class DiffKernelsView(DiffTableView):
    view_id = "diff-kernels"
    title = "Kernels"
    tables = ("kernels", "launchers")


class DiffStepsView(DiffTableView):
    view_id = "diff-steps"
    title = "Steps"
    tables = ("steps",)


class DiffMemoryView(DiffTableView):
    view_id = "diff-memory"
    title = "Memory"
    tables = ("memory",)


DIFF_VIEWS: tuple[type[DiffView], ...] = (
    DiffOverviewView, DiffOperatorsView, DiffModulesView, DiffKernelsView, DiffStepsView, DiffMemoryView,
)
