"""The panel shown while a trace loads or a live capture runs: title, bar,
progress text, and what q does now.

The panel keeps the elapsed time itself and redraws it twice a second: a
loader reports when it has news, and between two reports (the analysis of
a big trace, torch's import) a time written into the text stood still, as
if the load had hung."""

from __future__ import annotations

import time

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Center, Vertical
from textual.widgets import ProgressBar, Static

from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import format_clock


class LoadingPanel(Vertical):
    def __init__(self, title: str, live: bool, **kwargs) -> None:
        super().__init__(**kwargs)
        self.title_text = title
        self.live = live
        self.started = time.monotonic()
        self.text = ""

    def on_mount(self) -> None:
        self.clock = self.set_interval(0.5, self._show_text)

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Opening {plain(self.title_text, DISPLAY_CHARS)}"), id="loading-title")
        with Center():  # align: center does not centre a ProgressBar in a Vertical
            yield ProgressBar(id="loading-bar", show_eta=False)
        yield Static("", id="loading-text")
        yield Static("q: stop and show what was captured" if self.live else "q: cancel", id="loading-hint")

    def advance(self, text: str, fraction: float | None) -> None:
        bar = self.query_one(ProgressBar)
        if fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=100 * fraction)
        self.text = text
        self._show_text()

    def _show_text(self) -> None:
        if not self.display:  # loaded: the panel is hidden for good
            self.clock.stop()
            return
        elapsed = format_clock(time.monotonic() - self.started)
        self.query_one("#loading-text", Static).update(Text(f"{self.text} · {elapsed}" if self.text else elapsed))

    def stopping(self) -> None:
        self.query_one("#loading-hint", Static).update("stopping after this step… (q again: quit now)")
