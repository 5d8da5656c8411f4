"""Help for the focused pane: its keys and what every column means."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tuiprof.report.views import View

KEYS = [
    ("1-7", "switch view: Overview, Modules, Operators, Kernels, Memory, Steps, Log"),
    ("tab / shift+tab", "next / previous pane"),
    ("↑↓ j k, PgUp PgDn, g G", "move, page, top, bottom"),
    ("← → h l, space", "tree: collapse / expand"),
    ("enter", "drill in: an operator's calls, a kernel's launches, a module's operator in the Operators view"),
    ("s / r", "sort by the next column / reverse (or click a header)"),
    ("/", "filter rows by name; esc clears"),
    ("i", "group operators by input shape"),
    ("t", "top-level operators only (ProfilerStep spans do not count as parents)"),
    ("e / E", "export the current table as CSV / JSON (sort and filter kept)"),
    ("ctrl+p", "command palette: every action, sort by any column"),
    ("q", "quit"),
]


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; padding: 0 1; }
    """

    def __init__(self, view_name: str, view: View | None, bindings) -> None:
        super().__init__()
        self.view_name = view_name
        self.view = view

    def compose(self) -> ComposeResult:
        keys = Table(box=None, show_header=False, pad_edge=False)
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, what in KEYS:
            keys.add_row(key, what)
        parts = [Text(f"Help - {self.view_name} (esc to close)", style="bold"), keys]
        if self.view is not None:
            columns = Table(box=None, show_header=False, pad_edge=False, title=f"{self.view.title} columns", title_justify="left")
            columns.add_column(style="bold", no_wrap=True)
            columns.add_column()
            for column in self.view.columns:
                columns.add_row(column.header, column.help)
            parts += [Text(), columns]
        with VerticalScroll():
            for part in parts:
                yield Static(part)
