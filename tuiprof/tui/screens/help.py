"""Help for the current view: every key (from the command table) and what
every column of the focused table means."""

from __future__ import annotations

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from tuiprof.report.views import View


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,q,question_mark,f1", "dismiss", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: round $accent; background: $surface; padding: 0 0 0 1; }
    HelpScreen Static { margin-right: 1; }
    """  # the margin: a blank column between the text and the scrollbar (they touched)

    def __init__(self, view_title: str, keys: list[tuple[str, str]], columns: View | None) -> None:
        super().__init__()
        self.view_title = view_title
        self.keys = keys
        self.columns = columns

    def compose(self) -> ComposeResult:
        keys = Table(box=None, show_header=False, pad_edge=False)
        keys.add_column(style="bold cyan", no_wrap=True)
        keys.add_column()
        for key, what in self.keys:
            keys.add_row(key, what)
        parts: list[RenderableType] = [Text(f"Help - {self.view_title} (esc to close)", style="bold"), keys]
        if self.columns is not None:
            columns = Table(
                box=None, show_header=False, pad_edge=False, title=f"{self.columns.title} columns", title_justify="left"
            )
            columns.add_column(style="bold", no_wrap=True)
            columns.add_column()
            for column in self.columns.columns:
                columns.add_row(column.header, column.help)
            parts += [Text(), columns]
        with VerticalScroll():
            for part in parts:
                yield Static(part)
