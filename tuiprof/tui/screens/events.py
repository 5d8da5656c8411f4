"""Every call of one operator, or every launch of one kernel: a raw-event list.

Big traces have operators called hundreds of thousands of times: the rows are
built in a worker thread (about 12 us a row) and the list is a RowTable, which
draws only the visible lines.
"""

from __future__ import annotations

from collections.abc import Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.screen import Screen
from textual.widgets import Static

from tuiprof.report.views import Column, Row
from tuiprof.tui.commands import APP_COMMANDS, Command, bindings
from tuiprof.tui.widgets.key_bar import KeyBar
from tuiprof.tui.widgets.row_table import RowTable

# esc/q close the list; e/E are the app's export keys (the same ids: one remap serves both).
EVENT_LIST_COMMANDS: tuple[Command, ...] = (
    Command("escape,q", "dismiss", "Back", "close the list", scope="events", show=True, palette=False),
    *(command for command in APP_COMMANDS if command.action.startswith("export(")),
)


class EventListScreen(Screen[None]):
    BINDINGS = [*bindings(EVENT_LIST_COMMANDS[:1]), *bindings(EVENT_LIST_COMMANDS[1:], namespace="app")]
    DEFAULT_CSS = """
    EventListScreen #event-title { height: 1; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    EventListScreen RowTable { height: 1fr; }
    """

    def __init__(
        self, title: str, what: str, columns: tuple[Column, ...], build_rows: Callable[[], list[Row]], sort: str
    ) -> None:
        super().__init__()
        self.title_text = title
        self.what = what  # "calls": names the export
        self.columns = columns
        self.build_rows = build_rows
        self.sort = sort

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text, style="bold", no_wrap=True, overflow="ellipsis"), id="event-title")
        yield RowTable(id="event-table")
        yield KeyBar()

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.empty_message = "listing…"
        table.set_data(self.columns, [], self.sort)
        table.focus()
        self._build()

    @work(thread=True, exclusive=True)
    def _build(self) -> None:
        rows = self.build_rows()
        self.app.call_from_thread(self._show, rows)

    def _show(self, rows: list[Row]) -> None:
        table = self.query_one(RowTable)
        table.empty_message = "nothing to show"
        table.set_data(self.columns, rows, self.sort)

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]]:
        table = self.query_one(RowTable)
        return (self.what, table.rows, table.columns)
