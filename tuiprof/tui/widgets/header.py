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
        self._line: Text | None = None

    def watch_model(self, model: TraceModel | None) -> None:
        self._line = header_line(model) if model is not None else None
        self._draw()

    def watch_options(self) -> None:
        self._draw()

    def watch_current(self) -> None:
        self._draw()

    def _draw(self) -> None:
        if self.model is None or self._line is None:
            return
        tabs = Text(no_wrap=True, overflow="ellipsis")
        for key, view_id, view in self.tabs:
            if view_id != self.current and not view.available(self.model, self.log_lines):
                continue
            tabs.append(f" {key} {view.title} " if key else f" {view.title} ", style="reverse bold" if view_id == self.current else "dim")
        toggles = [name for on, name in ((self.options.group_by_shape, "by shape"), (self.options.top_level_only, "top-level")) if on]
        if toggles:
            tabs.append("  [" + ", ".join(toggles) + "]", style="bold yellow")
        body: RenderableType = Group(self._line, tabs)
        self.update(body)
