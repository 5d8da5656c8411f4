"""The page of ``tuiprof open DIR`` on a watch folder: the job's lines, the step-time chart and
the captures (report/watch.py ``WATCH_LIST``).

Like the snapshot app's pages it is not an explorer view of a TraceModel: the watch app assigns
a :class:`WatchState`, built off the UI thread by :func:`watch_state` (the history grows while
the job runs: summarising and charting 10,000 steps is milliseconds a second), and the page only
draws it.  Paths and the job's command are data: every text is a ``rich.text.Text`` or a cell.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Static

from tuiprof.analysis.watch import WatchSummary, summarise_watch
from tuiprof.report.views import Column, Row, View, ViewOptions
from tuiprof.report.watch import WATCH_LIST, chart_text, header_lines
from tuiprof.trace.watch import History
from tuiprof.tui.commands import TABLE_COMMANDS, bindings
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.row_table import RowTable

CHART_PADDING = 2  # the chart's padding, left and right
OPEN_HELP = "open the highlighted capture in the explorer (closing it comes back here)"


@dataclass(frozen=True, eq=False)  # compared by identity: a new state is a new drawing
class WatchState:
    summary: WatchSummary
    rows: list[Row]  # WATCH_LIST's, in the order the captures were taken
    job: Text  # the job's lines (header_lines)
    chart: Text
    width: int  # the chart's width in cells


def watch_state(history: History, width: int) -> WatchState:
    """Everything the page draws for ``history`` at ``width`` cells (run in a worker: it reads
    the whole history)."""
    summary = summarise_watch(history)
    chart_width = max(20, width - CHART_PADDING)
    return WatchState(
        summary,
        WATCH_LIST.build(summary, ViewOptions()),
        Text("\n".join(header_lines(summary))),
        chart_text(history, chart_width),
        width,
    )


@dataclass(frozen=True)
class WatchPage:
    view_id: str
    title: str


WATCH_PAGES: tuple[WatchPage, ...] = (WatchPage(WATCH_LIST.name, WATCH_LIST.title),)

# The list's keys: a table's, enter named for what it does here (and on the key bar).
CAPTURE_TABLE_COMMANDS = tuple(
    replace(c, help=OPEN_HELP, show=True) if c.action == "select" else c for c in TABLE_COMMANDS
)


class CapturesTable(RowTable):
    PANE_COMMANDS = CAPTURE_TABLE_COMMANDS
    BINDINGS = bindings(CAPTURE_TABLE_COMMANDS)


class WatchView(ExplorerView):
    """The job's lines, the chart, the captures; the cursor stays on its capture as the list grows."""

    DEFAULT_CSS = """
    WatchView #job { height: auto; padding: 0 1; }
    WatchView #chart { height: auto; padding: 0 1; }
    WatchView CapturesTable { height: 1fr; }
    """
    state: reactive[WatchState | None] = reactive(None, init=False)

    class Resized(Message):
        """The page's width changed: the app builds the chart again (in its worker)."""

    def __init__(self, page: WatchPage, **kwargs) -> None:
        super().__init__(id=page.view_id, **kwargs)
        self.page = page

    def compose(self) -> ComposeResult:
        yield Static(id="job")
        yield Static(id="chart")
        yield CapturesTable(id=f"{self.page.view_id}-table")

    def watch_state(self, state: WatchState | None) -> None:
        if state is None or self.app_quitting():
            return
        self.query_one("#job", Static).update(state.job)
        self.query_one("#chart", Static).update(state.chart)
        table = self.query_one(CapturesTable)
        kept = table.current_row
        table.empty_message = "no capture yet"
        table.set_data(WATCH_LIST.columns, state.rows, table.sort_key, table.descending)
        if kept is not None:  # new rows: the cursor goes back to the capture it was on
            table.select_where(lambda row: row.get("path") == kept.get("path"))

    def on_resize(self, event: events.Resize) -> None:
        if self.state is not None and event.size.width != self.state.width:
            self.post_message(self.Resized())

    def selected_path(self) -> str | None:
        """The highlighted capture's path (None: no capture)."""
        row = self.query_one(CapturesTable).current_row
        return str(row["path"]) if row is not None else None

    def help_columns(self) -> View:
        return WATCH_LIST

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]] | None:
        table = self.query_one(CapturesTable)
        return (WATCH_LIST.name, table.rows, table.columns)
