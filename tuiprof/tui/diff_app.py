"""Diff mode: the explorer over two runs (``tuiprof diff A B`` on a terminal).

It loads both sides in a worker, compares them (analysis/diff.py) and shows
the Diff overview and one A/B/delta table per level (tui/views/diff.py).
Keys come from the command table like the single-trace explorer's; ``x``
swaps A and B, ``d`` cycles the sort between A, B and the size of the change.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Group
from textual import work
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.widgets import ContentSwitcher, Static

from tuiprof.analysis.diff import TraceDiff, diff_traces, load_side, side_label
from tuiprof.analysis.model import TraceModel
from tuiprof.report.diff import headline
from tuiprof.report.plain import plain
from tuiprof.tui.app import run_app
from tuiprof.tui.commands import (
    TABLE_COMMANDS,
    Command,
    bindings,
    pane_commands,
    shared_commands,
    shown_view_keys,
    view_commands,
)
from tuiprof.tui.messages import DiffReady
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.table_app import TableApp
from tuiprof.tui.views import view_keys
from tuiprof.tui.views.diff import DIFF_PAGES, DiffTableView, DiffView, diff_view
from tuiprof.tui.widgets.filter_bar import FilterBar
from tuiprof.tui.widgets.header import tab_line
from tuiprof.tui.widgets.key_bar import KeyBar
from tuiprof.tui.widgets.loading import LoadingPanel

DIFF_COMMANDS: tuple[Command, ...] = (
    *shared_commands(),
    Command(
        "i",
        "toggle_shapes",
        "Grouping",
        "operators by input shape, kernels by launching operator (and back)",
        show=True,
    ),
    Command("x", "swap", "Swap A/B", "swap A and B: the verdict and every delta change sign", show=True),
    Command("d", "cycle_sort", "A/B/delta", "sort by A, then by B, then by the size of the change", show=True),
)


DIFF_PAGE_KEYS = view_keys(DIFF_PAGES)  # (key, view id, page) of each page


class DiffSource:
    """Both sides of a diff, as ``load_side`` reads them (files, run directories, ranks)."""

    def __init__(
        self, a: str, b: str, select: str | None = None, ranks: str | None = None, metric: str = "auto"
    ) -> None:
        self.paths = (a, b)
        self.select = select
        self.ranks = ranks
        self.metric = metric
        self.title = f"{a} vs {b}"

    def __call__(self, report: Callable[[str, float | None], None]) -> tuple[list[TraceModel], list[TraceModel]]:
        sides = []
        for label, path in zip("AB", self.paths):
            report(f"loading {label}: {path}", None)
            sides.append(load_side(path, self.select, self.ranks))
        return sides[0], sides[1]


class DiffApp(TableApp):
    CSS_PATH = "explorer.tcss"
    TITLE = "tuiprof diff"
    BINDINGS = bindings(DIFF_COMMANDS)  # and the view keys (TableApp.host_views)
    commands = DIFF_COMMANDS

    diff: reactive[TraceDiff | None] = reactive(None, init=False)

    def __init__(self, source: DiffSource, export_dir: Path | None = None) -> None:
        super().__init__(export_dir)
        self.source = source
        self.sides: tuple[list[TraceModel], list[TraceModel]] | None = None
        self.host_views(DIFF_PAGE_KEYS)

    @classmethod
    def keymap_commands(cls) -> tuple[Command, ...]:
        return (*DIFF_COMMANDS, *view_commands(DIFF_PAGE_KEYS), *TABLE_COMMANDS)

    def compose(self) -> ComposeResult:
        yield Static("tuiprof diff", id="header")
        yield LoadingPanel(self.source.title, live=False, id="loading")
        with ContentSwitcher(initial=DIFF_PAGES[0].view_id, id="views"):
            for page in DIFF_PAGES:
                yield diff_view(page).data_bind(DiffApp.diff)
        yield FilterBar(id="filter")
        yield KeyBar()

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        def load() -> tuple[tuple[list[TraceModel], list[TraceModel]], TraceDiff]:
            sides = self.source(self.report_progress)
            return sides, self._compare(*sides)

        loaded = self.load_or_fail(load)
        if loaded is not None:
            self.sides, diff = loaded
            self.post_message(DiffReady(diff))

    def _compare(self, side_a: list[TraceModel], side_b: list[TraceModel]) -> TraceDiff:
        return diff_traces(
            side_a, side_b, metric=self.source.metric, label_a=side_label(side_a), label_b=side_label(side_b)
        )

    def on_diff_ready(self, message: DiffReady) -> None:
        self.query_one(LoadingPanel).display = False
        self.query_one("#views").display = True
        self.diff = message.diff
        self.action_show_view(self.asked_for or DIFF_PAGES[0].view_id)
        self.asked_for = None
        self.refresh_bindings()  # the keys that act on the diff, on the key bar now

    # ------------------------------------------------------------ views

    def view(self, view_id: str | None = None) -> DiffView:
        return self.query_one(f"#{view_id or self.current_view}", DiffView)

    def watch_diff(self) -> None:
        self.draw_tabs()

    def draw_tabs(self) -> None:
        """The header: the verdict's headline, the page tabs, the grouping shown when not the first."""
        if self.diff is None:
            return
        header = self.query_one("#header", Static)
        line = headline(self.diff, max(20, header.size.width or 78))
        line.no_wrap, line.overflow = True, "ellipsis"
        view = self.view()
        marker = ""
        if isinstance(view, DiffTableView) and view.shown != view.page.tables[0]:
            marker = f"  [{self.diff.table(view.shown).title}]"
        width = max(20, header.size.width or 78)
        tabs = tab_line(shown_view_keys(self.view_keys, self.keymap), self.current_view, width - len(marker))
        tabs.append(marker, style="bold yellow")
        header.update(Group(line, tabs))

    # ------------------------------------------------------------ diff keys

    def action_swap(self) -> None:
        """Make B the baseline: compare again with the sides exchanged."""
        if self.sides is None:
            return
        self.sides = (self.sides[1], self.sides[0])
        self.diff = self._compare(*self.sides)
        message = f"A is now {plain(self.diff.label_a)}"  # a path: plain text
        self.notify(message, title="Swapped", timeout=4, markup=False)

    def action_cycle_sort(self) -> None:
        view = self.view()
        if isinstance(view, DiffTableView):
            key = view.cycle_sort()
            self.notify(
                {"a": "by A", "b": "by B", "abs_delta": "by the size of the change"}[key], title="Sort", timeout=2
            )

    def toggled_on(self, action: str) -> bool:
        view = self.view() if self.diff is not None else None
        return action == "toggle_shapes" and isinstance(view, DiffTableView) and view.shown != view.page.tables[0]

    def action_toggle_shapes(self) -> None:
        if self.diff is not None and not self.view().toggle_grouping():
            self.notify("This view has one grouping.", severity="warning")
        self.draw_tabs()

    # ------------------------------------------------------------ back, export, help, quit

    @property
    def loaded(self) -> bool:
        return self.diff is not None

    async def action_back(self) -> None:
        """esc: clear the filter if there is one, else back to the Diff overview."""
        if self.diff is not None and not self.clear_filter():
            self.action_show_view(DIFF_PAGES[0].view_id)

    def action_export(self, fmt: str) -> None:
        if self.diff is not None:
            self.write_export(
                self.view().export_rows(), "", fmt, f"diff of A {self.diff.label_a} and B {self.diff.label_b}"
            )

    def action_help(self) -> None:
        view = self.view()
        keys = self.help_keys(pane_commands(view))
        self.push_screen(HelpScreen(f"diff: {view.page.title}", keys, view.help_columns()))

    async def action_quit(self) -> None:
        self.exit(self.quit_code())


def run_diff_explorer(source: DiffSource) -> int:
    return run_app(DiffApp(source))
