"""The header: the trace in one line, then the view tabs and the active toggles.

Every tab is named when they all fit; else the page of tabs that holds the current one, and
how many are left out on each side (docs/views.md: how any number of views stays reachable)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
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
        shown = [
            (key, view_id, view)
            for key, view_id, view in self.tabs
            if view_id == self.current or view.available(self.model, self.log_lines)
        ]
        toggles = [
            name
            for on, name in ((self.options.group_by_shape, "by shape"), (self.options.top_level_only, "top-level"))
            if on
        ]
        marker = f"  [{', '.join(toggles)}]" if toggles else ""
        tabs = tab_line(shown, self.current, width - len(marker))
        if marker:
            tabs.append(marker, style="bold yellow")
        body: RenderableType = Group(header_line(self.model, width), tabs)
        self.update(body)


def tab_line(tabs: Sequence[tuple[str, str, Any]], current: str, room: int) -> Text:
    """The view tabs ((key, view id, view with a ``title``) each) in ``room`` cells, every
    shown tab named: all of them, spaced wide then tight, when they fit; else the page of
    tabs that holds the current one and the count left out on each side (docs/views.md)."""
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
    """The page of tabs that holds the one at ``at``, and how many are left out on each side
    (`` ‹+2 3 Operators 4 Kernels 5 Memory +4›``: < and > reach them, V lists all).

    Pages, not a window centred on the current tab: the tabs are cut into pages from the left
    (the last page filled back from the end), so moving between the tabs of a page keeps the
    line as it is, and the line changes only when the current tab leaves the page."""
    pages = _pages(len(labels), lambda lo, hi: _cells(labels, lo, hi) <= room)
    lo, hi = next(page for page in pages if page[0] <= at <= page[1])
    line = Text(no_wrap=True, overflow="ellipsis")
    line.append(_left(lo), style="bold")
    line.append_text(_tabs(labels[lo : hi + 1]))
    line.append(_right(len(labels) - 1 - hi), style="bold")
    return line


def _pages(count: int, fits: Callable[[int, int], bool]) -> list[tuple[int, int]]:
    """(first, last) index of each page of ``count`` tabs: as many as fit from the left, page
    after page; the last page reaches back from the end as far as it fits.  A tab too wide for
    any page is a page of its own (its line is cut with an ellipsis)."""
    pages: list[tuple[int, int]] = []
    lo = 0
    while lo < count:
        hi = lo
        while hi + 1 < count and fits(lo, hi + 1):
            hi += 1
        if hi == count - 1 and pages:  # the last page: filled back from the end
            while lo > 0 and fits(lo - 1, hi):
                lo -= 1
        pages.append((lo, hi))
        lo = hi + 1
    return pages


def _cells(labels: list[tuple[str, str]], lo: int, hi: int) -> int:
    """Cells of the tabs ``lo``..``hi`` with the counts of those left out on each side."""
    return sum(len(label) for label, _ in labels[lo : hi + 1]) + len(_left(lo)) + len(_right(len(labels) - 1 - hi))


def _left(hidden: int) -> str:
    return f" ‹+{hidden}" if hidden else ""


def _right(hidden: int) -> str:
    return f" +{hidden}›" if hidden else ""
