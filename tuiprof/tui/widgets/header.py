"""The header: the trace in one line, then the view tabs and the active toggles.

Every tab is named when they all fit; else the tabs around the current one that fit, and
how many are left out on each side (docs/views.md: how any number of views stays reachable)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

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

    def __init__(self, tabs: Sequence[tuple[str, str, Any]], **kwargs) -> None:
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
        tabs = tab_line(shown, self.current, width - len(marker))
        if marker:
            tabs.append(marker, style="bold yellow")
        body: RenderableType = Group(header_line(self.model, width), tabs)
        self.update(body)


def tab_line(tabs: Sequence[tuple[str, str, Any]], current: str, room: int) -> Text:
    """The view tabs ((key, view id, view with a ``title``) each) in ``room`` cells, every
    shown tab named: all of them, spaced wide then tight, when they fit; else the tabs
    around the current one that fit and the count left out on each side (docs/views.md)."""
    for wide in (True, False):
        line = _tabs(_labels(tabs, current, wide))
        if line.cell_len <= room:
            return line
    return _window(_labels(tabs, current, False), next((i for i, tab in enumerate(tabs) if tab[1] == current), 0), room)


def _labels(tabs: Sequence[tuple[str, str, Any]], current: str, wide: bool) -> list[tuple[str, str]]:
    """(label, style) per tab: `` 1 Overview `` (wide) or `` 1 Overview`` (tight: the same
    label whichever tab is current, so the line never shifts); a view past the tenth has no key."""
    labels = []
    for key, view_id, view in tabs:
        named = f"{key} {view.title}" if key else view.title
        labels.append((f" {named} " if wide else f" {named}", "reverse bold" if view_id == current else "dim"))
    return labels


def _tabs(labels: list[tuple[str, str]]) -> Text:
    line = Text(no_wrap=True, overflow="ellipsis")
    for label, style in labels:
        line.append(label, style=style)
    return line


def _window(labels: list[tuple[str, str]], at: int, room: int) -> Text:
    """The tabs that fit around the one at ``at``, and how many are left out on each side
    (`` ‹2 3 Operators 4 Kernels 5 Memory 4›``: < and > reach them, V lists all)."""

    def cells(lo: int, hi: int) -> int:
        return sum(len(label) for label, _ in labels[lo : hi + 1]) + len(_left(lo)) + len(_right(len(labels) - 1 - hi))

    lo = hi = at
    grown = True
    while grown:  # one more tab on the right, then one on the left, while they fit
        grown = False
        if hi + 1 < len(labels) and cells(lo, hi + 1) <= room:
            hi, grown = hi + 1, True
        if lo > 0 and cells(lo - 1, hi) <= room:
            lo, grown = lo - 1, True
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(_left(lo), style="bold")
    line.append_text(_tabs(labels[lo : hi + 1]))
    line.append(_right(len(labels) - 1 - hi), style="bold")
    return line


def _left(hidden: int) -> str:
    return f" ‹{hidden}" if hidden else ""


def _right(hidden: int) -> str:
    return f" {hidden}›" if hidden else ""
