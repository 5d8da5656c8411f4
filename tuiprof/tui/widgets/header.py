"""The header: the trace in one line, then the view tabs and the active toggles."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widgets import Static

from tuiprof.analysis.model import TraceModel
from tuiprof.report.header import header_line
from tuiprof.report.views import ViewOptions


class ExplorerHeader(Static):
    model: reactive[TraceModel | None] = reactive(None, init=False)
    options: reactive[ViewOptions] = reactive(ViewOptions, init=False)
    log_lines: reactive[tuple[str, ...]] = reactive((), init=False)
    current: reactive[str] = reactive("", init=False)

    def __init__(self, tabs: list[tuple[str, str, type]], **kwargs) -> None:
        super().__init__("tuiprof", **kwargs)
        self.tabs = tabs  # (key, view id, view class)

    def watch_model(self) -> None:
        self._draw()

    def watch_options(self) -> None:
        self._draw()

    def watch_current(self) -> None:
        self._draw()

    def on_resize(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self.model is None:
            return
        width = max(20, self.size.width or 78)  # the content area: the padding is already out
        shown = [(key, view_id, view) for key, view_id, view in self.tabs
                 if view_id == self.current or view.available(self.model, self.log_lines)]
        toggles = [name for on, name in ((self.options.group_by_shape, "by shape"), (self.options.top_level_only, "top-level")) if on]
        marker = f"  [{', '.join(toggles)}]" if toggles else ""
        for spacing in ("wide", "tight", "keys"):  # keys only, the current view named, when nothing else fits
            tabs = self._tabs(shown, spacing)
            if tabs.cell_len + len(marker) <= width:
                break
        if marker:
            tabs.append(marker, style="bold yellow")
        body: RenderableType = Group(header_line(self.model, width), tabs)
        self.update(body)

    def _tabs(self, shown: list[tuple[str, str, type]], spacing: str) -> Text:
        """``wide``: `` 1 Overview  2 Modules ``; ``tight``: `` 1 Overview 2 Modules`` (the seven
        tabs of a trace fit 80 columns); ``keys``: `` 1 Overview  2  3 ``."""
        tabs = Text(no_wrap=True, overflow="ellipsis")
        for key, view_id, view in shown:
            current = view_id == self.current
            named = f"{key} {view.title}" if key else view.title
            if spacing == "keys" and not current and key:
                label = f" {key} "
            elif spacing == "tight":  # the same label whichever tab is current: the line never shifts
                label = f" {named}"
            else:
                label = f" {named} "
            tabs.append(label, style="reverse bold" if current else "dim")
        return tabs
