"""What every view of the explorer is: a widget that owns its tables, its detail
pane and its empty state, and is only assigned the model.

The app binds ``model``, ``options`` and ``log_lines`` into every view
(``data_bind``); a view draws them in ``show_model``/``show_options`` and never
computes a statistic (analysis/ and report/ do).  A new view is a subclass in a
module of its own plus one line in :mod:`tuiprof.tui.views`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranking import longest_call
from tuiprof.analysis.timeline import CallTarget, TimelineTarget
from tuiprof.report.views import TRACE_VIEWS, Column, OperatorRow, Row, View, ViewOptions, sort_rows
from tuiprof.tui.widgets.row_table import RowTable

ASYNC_CALLS = 50_000  # operator calls above which a table's rows are built off the UI thread
DETAIL_SETTLE_S = 0.1  # big traces: moves closer than this are keys repeating; the detail waits for a rest


class ExplorerView(Vertical):
    view_id: ClassVar[str]
    title: ClassVar[str]
    # The summary views (report/catalog.py) this view shows besides the one named like it:
    # a table of a trace has its own explorer view or is shown inside one (tests/cli/test_catalog.py).
    summary_views: ClassVar[tuple[str, ...]] = ()

    model: reactive[TraceModel | None] = reactive(None, init=False)
    options: reactive[ViewOptions] = reactive(ViewOptions, init=False)
    log_lines: reactive[tuple[str, ...]] = reactive((), init=False)
    _last_highlight = 0.0  # time.monotonic() of the last cursor move in one of the view's tables
    _detail_timer: Timer | None = None  # the detail pane waiting for the cursor to rest
    _stale_options = False  # the toggles changed while the view was hidden: refill when shown

    @classmethod
    def available(cls, model: TraceModel, log_lines: tuple[str, ...]) -> bool:
        """Whether the header lists this view for this trace (its key works regardless)."""
        return True

    # ------------------------------------------------------------ what the app asks

    def focus_target(self) -> Widget:
        """Where the keyboard goes when the view is shown."""
        return self.active_table() or self

    def active_table(self) -> RowTable | None:
        """The table that /, s, r, e and the palette's sorts act on."""
        focused = self.screen.focused if self.is_attached else None
        if isinstance(focused, RowTable) and self in focused.ancestors:
            return focused
        return next(iter(self.query(RowTable)), None)

    def has_no_rows(self) -> bool:
        """Whether the view has no rows at all (not: none left by the filter): then the keys
        that act on rows (filter, export, by shape, top-level, sort) are off the key bar."""
        table = self.active_table()
        return table is not None and not table.all_rows

    def filter_target(self):
        """What / narrows: anything with ``filter_text`` and ``set_filter`` (a table, the module tree)."""
        return self.active_table()

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]] | None:
        """(what, rows, columns) as the view shows them; None: nothing to export."""
        table = self.active_table()
        return (self.view_id, table.rows, table.columns) if table is not None else None

    def timeline_target(self) -> TimelineTarget | None:
        """What ``T`` shows in the Timeline for the cursor's row (None: nothing to show)."""
        return None

    def longest_call_of(self, row: Row | None) -> CallTarget | None:
        """``T`` on an operator row: its longest call."""
        call = longest_call(self.model, row.item.rows) if isinstance(row, OperatorRow) and self.model else None
        return CallTarget(call) if call is not None else None

    def help_columns(self) -> View | None:
        """The report view whose columns ? explains."""
        return None

    def select_name(self, name: str) -> None:
        """Put the cursor on the row named ``name`` (a jump from another view)."""
        table = self.active_table()
        if table is not None:
            table.select_where(lambda row: row.get("name") == name)

    # ------------------------------------------------------------ drawing

    def watch_model(self, model: TraceModel | None) -> None:
        # Not while the app quits: a view mounted then (app._mount_other_views) is torn down
        # before its panes are composed, and drawing into it raised NoMatches (a SIGHUP right
        # after the first frame hung in Textual's rendering of that error).
        if model is not None and not self.app_quitting():
            self.show_model(model)

    def app_quitting(self) -> bool:
        """Whether the app hosting the view quits (``TableApp.quitting``)."""
        from tuiprof.tui.table_app import TableApp  # here: the host imports the views

        app = self.app
        return isinstance(app, TableApp) and app.quitting

    def watch_options(self, old: ViewOptions, new: ViewOptions) -> None:
        """The i/t toggles: the view shown refills now, a hidden one when next shown
        (``catch_up``): every view refilling its tables made a toggle cost them all."""
        if self.model is None or old == new:
            return
        if self.display:  # the shown view (the switcher hides the others)
            self.show_options(self.model)
        else:
            self._stale_options = True

    def catch_up(self) -> None:
        """About to be shown (the app's ``action_show_view``): draw the toggles changed while hidden."""
        if self._stale_options and self.model is not None:
            self._stale_options = False
            self.show_options(self.model)

    def show_model(self, model: TraceModel) -> None:
        raise NotImplementedError

    def show_options(self, model: TraceModel) -> None:
        """The i/t toggles changed: views with operator tables refill them."""

    def fill_table(
        self,
        table: RowTable,
        view: View,
        options: ViewOptions,
        columns: tuple[Column, ...] | None = None,
        default_sort: str | None = None,
    ) -> None:
        """Rows for a table: at once when cheap, else built in a worker (operator
        tables of traces with hundreds of thousands of calls take longer than a key press may)."""
        model = self.model
        assert model is not None
        columns = columns or view.visible_columns(options, model)
        sort = (
            table.sort_key
            if table.sort_key in {c.key for c in columns}
            else (default_sort or view.default_sort_for(model))
        )
        descending = table.descending if table.sort_key == sort else True
        if view.walks_calls and len(model.calls) > ASYNC_CALLS:  # even a cached table has rows to build
            table.empty_message = "computing…"
            table.set_data(columns, [], sort, descending)
            # A closure, not arguments: a worker's description holds the repr() of its arguments,
            # and the repr of a module filter on a big trace is its whole subtree.
            self.run_worker(
                lambda: self._rows_in_background(table, view, options, columns, sort, descending),
                thread=True,
                exclusive=True,
                group=f"rows-{table.id}",
                description=f"rows of {table.id}",
            )
            return
        table.set_data(columns, view.build(model, options), sort, descending)

    def _rows_in_background(
        self,
        table: RowTable,
        view: View,
        options: ViewOptions,
        columns: tuple[Column, ...],
        sort: str,
        descending: bool,
    ) -> None:
        assert self.model is not None
        rows = sort_rows(view.build(self.model, options), sort, descending) if sort else view.build(self.model, options)
        if not get_current_worker().is_cancelled:  # a newer request for this table won
            self.app.call_from_thread(table.set_data, columns, rows, sort, descending, True)

    @on(RowTable.Highlighted)
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        """The detail pane follows the cursor.  On a big trace a detail walks the operator's
        calls (its modules, its launches): tens of ms, so a held j would queue one per key.
        There a move that comes within ``DETAIL_SETTLE_S`` of the previous one (keys
        repeating) waits until the cursor rests, and the pane then shows the row the cursor
        is on; a single move still shows at once.  Small traces: always at once."""
        now = time.monotonic()
        repeating = now - self._last_highlight < DETAIL_SETTLE_S
        self._last_highlight = now
        if self._detail_timer is not None:
            self._detail_timer.stop()
            self._detail_timer = None
        if repeating and self.model is not None and len(self.model.calls) > ASYNC_CALLS:
            table = event.table
            self._detail_timer = self.set_timer(DETAIL_SETTLE_S, lambda: self._cursor_rested(table))
            return
        self.show_detail(event.table, event.row)

    def _cursor_rested(self, table: RowTable) -> None:
        self._detail_timer = None
        self.show_detail(table, table.current_row)

    def detail_pending(self) -> bool:
        """Whether the detail pane waits for the cursor to rest (scripts/bench_ui.py waits for it)."""
        return self._detail_timer is not None

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        """The cursor moved in one of the view's tables: update its detail pane."""

    def update_detail(
        self, pane: Static, table: RowTable, row: Row | None, text_of: Callable[[Row], RenderableType]
    ) -> None:
        """Show ``text_of(row)`` in ``pane``.  On a big trace it is worked out in a worker: an
        operator's detail walks its calls (26 ms for the 460k launches of a 1 GB trace), which
        a sort or a toggle (the cursor goes to the first row) must not wait for; the pane shows
        it once ready if the cursor is still on that row, and keeps the last detail meanwhile."""
        if row is None:
            pane.update(Text())
        elif self.model is None or len(self.model.calls) <= ASYNC_CALLS:
            pane.update(text_of(row))
        else:
            self.run_worker(
                lambda: self._detail_worked_out(pane, table, row, text_of),
                thread=True,
                exclusive=True,
                group=f"detail-{self.id}",
                description="detail",
            )

    def _detail_worked_out(
        self, pane: Static, table: RowTable, row: Row, text_of: Callable[[Row], RenderableType]
    ) -> None:
        text = text_of(row)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(lambda: pane.update(text) if table.current_row is row else None)


class TableDetailView(ExplorerView):
    """One table and a detail pane under it for the cursor's row (Operators, Kernels, Steps,
    the run views, diff mode's tables): the table is ``#<id>-table``, the pane ``#<id>-detail``."""

    def compose(self) -> ComposeResult:
        yield RowTable(id=f"{self.id}-table")
        yield Static(id=f"{self.id}-detail", classes="detail")

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        self.update_detail(self.query_one(f"#{self.id}-detail", Static), table, row, self.detail_text)

    def detail_text(self, row: Row) -> RenderableType:
        """What the detail pane says about ``row``."""
        raise NotImplementedError


class TraceTableView(TableDetailView):
    """A table of one trace: the summary view of the same name (report/catalog.py)."""

    empty_message: ClassVar[str] = "nothing to show"  # what an empty table means, and what to do

    def table_view(self) -> View:
        return TRACE_VIEWS[self.view_id]

    def help_columns(self) -> View:
        return self.table_view()

    def show_model(self, model: TraceModel) -> None:
        table = self.query_one(RowTable)
        table.empty_message = self.empty_message
        self.fill_table(table, self.table_view(), self.options)
