"""The header: the trace in one line, then the view tabs and the active toggles.

Every tab is named when they all fit; else the tabs around the current one that fit, and
how many are left out on each side (docs/views.md: how any number of views stays reachable)."""

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
        room = width - len(marker)
        tabs = self._tabs(shown, wide=True)
        if tabs.cell_len > room:
            tabs = self._tabs(shown, wide=False)
        if tabs.cell_len > room:
            tabs = self._window(shown, room)
        if marker:
            tabs.append(marker, style="bold yellow")
        body: RenderableType = Group(header_line(self.model, width), tabs)
        self.update(body)

    def _labels(self, shown: list[tuple[str, str, type]], wide: bool) -> list[tuple[str, str]]:
        """(label, style) per tab: `` 1 Overview `` (wide) or `` 1 Overview`` (tight: the same
        label whichever tab is current, so the line never shifts); a view past the tenth has no key."""
        labels = []
        for key, view_id, view in shown:
            named = f"{key} {view.title}" if key else view.title
            labels.append((f" {named} " if wide else f" {named}", "reverse bold" if view_id == self.current else "dim"))
        return labels

    def _tabs(self, shown: list[tuple[str, str, type]], wide: bool) -> Text:
        """Every tab, named."""
        tabs = Text(no_wrap=True, overflow="ellipsis")
        for label, style in self._labels(shown, wide):
            tabs.append(label, style=style)
        return tabs

    def _window(self, shown: list[tuple[str, str, type]], room: int) -> Text:
        """The tabs that fit around the current one, every one named, and how many are left
        out on each side (`` ‹2 3 Operators 4 Kernels 5 Memory 4›``: < and > reach them, V lists all)."""
        labels = self._labels(shown, wide=False)
        at = next((i for i, (_, view_id, _) in enumerate(shown) if view_id == self.current), 0)

        def cells(lo: int, hi: int) -> int:
            return sum(len(label) for label, _ in labels[lo : hi + 1]) + len(self._left(lo)) + len(self._right(len(labels) - 1 - hi))

        lo = hi = at
        grown = True
        while grown:  # one more tab on the right, then one on the left, while they fit
            grown = False
            if hi + 1 < len(labels) and cells(lo, hi + 1) <= room:
                hi, grown = hi + 1, True
            if lo > 0 and cells(lo - 1, hi) <= room:
                lo, grown = lo - 1, True
        tabs = Text(no_wrap=True, overflow="ellipsis")
        tabs.append(self._left(lo), style="bold")
        for label, style in labels[lo : hi + 1]:
            tabs.append(label, style=style)
        tabs.append(self._right(len(labels) - 1 - hi), style="bold")
        return tabs

    @staticmethod
    def _left(hidden: int) -> str:
        return f" ‹{hidden}" if hidden else ""

    @staticmethod
    def _right(hidden: int) -> str:
        return f" {hidden}›" if hidden else ""
