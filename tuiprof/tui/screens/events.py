"""Every call of one operator, or every launch of one kernel: a raw-event list.

Big traces have operators called hundreds of thousands of times; the list
is a RowTable, which draws only the visible lines.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static

from tuiprof.report.render import render_rows
from tuiprof.report.views import Column, Row
from tuiprof.tui.widgets.row_table import RowTable


class EventListScreen(Screen[None]):
    BINDINGS = [
        Binding("escape,q", "dismiss", "Back"),
        Binding("e", "export('csv')", "Export"),
        Binding("E", "export('json')", "Export JSON", show=False),
    ]
    DEFAULT_CSS = """
    EventListScreen #event-title { height: 1; background: $panel; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    EventListScreen RowTable { height: 1fr; }
    """

    def __init__(self, title: str, columns: tuple[Column, ...], rows: list[Row], sort: str, export_path: Path) -> None:
        super().__init__()
        self.title_text = title
        self.columns = columns
        self.rows = rows
        self.sort = sort
        self.export_path = export_path

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title_text, style="bold", no_wrap=True, overflow="ellipsis"), id="event-title")
        yield RowTable(id="event-table")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(RowTable)
        table.set_data(self.columns, self.rows, self.sort)
        table.focus()

    def action_export(self, fmt: str) -> None:
        table = self.query_one(RowTable)
        path = self.export_path.with_suffix(f".{fmt}")
        path.write_text(render_rows(table.rows, table.columns, fmt))
        self.notify(f"Wrote {len(table.rows)} rows to {path}", title="Export", timeout=6)
