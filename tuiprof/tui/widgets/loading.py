"""The panel shown while a trace loads or a live capture runs: title, bar,
progress text, and what q does now."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ProgressBar, Static

from tuiprof.report.plain import DISPLAY_CHARS, plain


class LoadingPanel(Vertical):
    def __init__(self, title: str, live: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.title_text = title
        self.live = live

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Opening {plain(self.title_text, DISPLAY_CHARS)}"), id="loading-title")
        yield ProgressBar(id="loading-bar", show_eta=False)
        yield Static("", id="loading-text")
        yield Static("q: stop and show what was captured" if self.live else "q: cancel", id="loading-hint")

    def advance(self, text: str, fraction: float | None) -> None:
        bar = self.query_one(ProgressBar)
        if fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=100 * fraction)
        self.query_one("#loading-text", Static).update(Text(text))

    def fail(self, text: str) -> None:
        self.query_one(ProgressBar).display = False
        self.query_one("#loading-title", Static).update(Text("Cannot capture" if self.live else "Cannot open this trace", style="bold red"))
        self.query_one("#loading-text", Static).update(Text(plain(text, 2 * DISPLAY_CHARS)))
        self.query_one("#loading-hint", Static).update("q: quit")

    def stopping(self) -> None:
        self.query_one("#loading-hint", Static).update("stopping after this step… (q again: quit now)")
