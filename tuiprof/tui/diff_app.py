"""Diff mode: the explorer over two runs (``tuiprof diff A B`` on a terminal).

It loads both sides in a worker, compares them (analysis/diff.py) and shows
the Diff overview and one A/B/delta table per level (tui/views/diff.py).
Keys come from the command table like the single-trace explorer's; ``x``
swaps A and B, ``d`` cycles the sort between A, B and the size of the change.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.reactive import reactive
from textual.widgets import ContentSwitcher, Footer, Input, Static

from tuiprof.analysis.diff import TraceDiff, diff_traces, load_side, side_label
from tuiprof.analysis.model import TraceModel
from tuiprof.errors import EXIT_INTERNAL, TraceError
from tuiprof.report.diff import verdict_style, verdict_text
from tuiprof.report.render import render_rows
from tuiprof.tui.commands import APP_COMMANDS, NAVIGATION_HELP, TABLE_COMMANDS, Command, bindings, help_rows
from tuiprof.tui.messages import DiffReady, LoadFailed
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.views.diff import DIFF_VIEWS, DiffTableView, DiffView
from tuiprof.tui.widgets.loading import LoadingPanel

# The single-trace explorer's keys that mean the same here (i: the other grouping).
SHARED_ACTIONS = ("quit", "help", "filter", "back", "toggle_shapes", "export('csv')", "export('json')")
DIFF_COMMANDS: tuple[Command, ...] = (
    *(c for c in APP_COMMANDS if c.action in SHARED_ACTIONS and c.keys != "i"),
    Command("i", "toggle_shapes", "Grouping", "operators by input shape, kernels by launching operator (and back)", show=True),
    Command("x", "swap", "Swap A/B", "swap A and B: the verdict and every delta change sign", show=True),
    Command("d", "cycle_sort", "A/B/delta", "sort by A, then by B, then by the size of the change", show=True),
)


class DiffSource:
    """Both sides of a diff, as ``load_side`` reads them (files, run directories, ranks)."""

    def __init__(self, a: str, b: str, select: str | None = None, ranks: str | None = None, metric: str = "auto") -> None:
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


class DiffApp(App[int]):
    CSS_PATH = "explorer.tcss"
    TITLE = "tuiprof diff"
    BINDINGS = [
        *bindings(DIFF_COMMANDS),
        *[Binding(str(key), f"show_view('{view.view_id}')", view.title, show=False) for key, view in enumerate(DIFF_VIEWS, 1)],
    ]

    diff: reactive[TraceDiff | None] = reactive(None, init=False)

    def __init__(self, source: DiffSource, export_dir: Path | None = None) -> None:
        super().__init__()
        self.source = source
        self.export_dir = export_dir or Path.cwd()
        self.exit_code = 0
        self.error_text = ""
        self.sides: tuple[list[TraceModel], list[TraceModel]] | None = None

    def compose(self) -> ComposeResult:
        yield Static("tuiprof diff", id="header")
        yield LoadingPanel(self.source.title, live=False, id="loading")
        with ContentSwitcher(initial=DIFF_VIEWS[0].view_id, id="views"):
            for view in DIFF_VIEWS:
                yield view(id=view.view_id).data_bind(DiffApp.diff)
        yield Input(placeholder="filter by name (enter: keep, esc: clear)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#views").display = False
        self._show_filter_box(False)
        self._load()

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        try:
            side_a, side_b = self.source(lambda text, fraction: self.call_from_thread(self._progress, text))
            diff = self._compare(side_a, side_b)
        except TraceError as exc:
            self.post_message(LoadFailed(str(exc), exc.exit_code))
            return
        except Exception as exc:  # a bug: shown, not a crash
            self.post_message(LoadFailed(f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL))
            return
        self.sides = (side_a, side_b)
        self.post_message(DiffReady(diff))

    def _compare(self, side_a: list[TraceModel], side_b: list[TraceModel]) -> TraceDiff:
        return diff_traces(side_a, side_b, metric=self.source.metric, label_a=side_label(side_a), label_b=side_label(side_b))

    def _progress(self, text: str) -> None:
        self.query_one(LoadingPanel).advance(text, None)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.exit_code = message.exit_code
        self.error_text = message.text
        self.query_one(LoadingPanel).fail(message.text)

    def on_diff_ready(self, message: DiffReady) -> None:
        self.query_one(LoadingPanel).display = False
        self.query_one("#views").display = True
        self.diff = message.diff
        self.action_show_view(DIFF_VIEWS[0].view_id)

    # ------------------------------------------------------------ views

    @property
    def current_view(self) -> str:
        return self.query_one("#views", ContentSwitcher).current or DIFF_VIEWS[0].view_id

    def view(self) -> DiffView:
        return self.query_one(f"#{self.current_view}", DiffView)

    def action_show_view(self, view_id: str) -> None:
        if self.diff is None:
            return
        self.query_one("#views", ContentSwitcher).current = view_id
        self.screen.set_focus(self.view().focus_target())
        self._draw_header()

    def watch_diff(self) -> None:
        self._draw_header()

    def _draw_header(self) -> None:
        if self.diff is None or not self.is_mounted:
            return
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append(verdict_text(self.diff.verdict), style=verdict_style(self.diff.verdict))
        tabs = Text(no_wrap=True, overflow="ellipsis")
        for key, view in enumerate(DIFF_VIEWS, 1):
            tabs.append(f" {key} {view.title} ", style="reverse bold" if view.view_id == self.current_view else "dim")
        self.query_one("#header", Static).update(Text("\n").join([line, tabs]))

    # ------------------------------------------------------------ diff keys

    def action_swap(self) -> None:
        """Make B the baseline: compare again with the sides exchanged."""
        if self.sides is None:
            return
        self.sides = (self.sides[1], self.sides[0])
        self.diff = self._compare(*self.sides)
        self.notify(f"A is now {self.diff.label_a}", title="Swapped", timeout=4, markup=False)

    def action_cycle_sort(self) -> None:
        view = self.view()
        if isinstance(view, DiffTableView):
            key = view.cycle_sort()
            self.notify({"a": "by A", "b": "by B", "abs_delta": "by the size of the change"}[key], title="Sort", timeout=2)

    def action_toggle_shapes(self) -> None:
        if self.diff is not None and not self.view().toggle_grouping():
            self.notify("This view has one grouping.", severity="warning")

    # ------------------------------------------------------------ filter, export, help, back, quit

    def action_filter(self) -> None:
        table = self.view().active_table() if self.diff is not None else None
        if table is None:
            self.notify("This view has no table to filter.", severity="warning")
            return
        box = self._show_filter_box(True)
        box.value = table.filter_text
        box.focus()

    def _show_filter_box(self, shown: bool) -> Input:
        box = self.query_one("#filter", Input)
        box.display = shown
        box.disabled = not shown
        return box

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        table = self.view().active_table()
        if table is not None:
            table.set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self._show_filter_box(False)
        self.screen.set_focus(self.view().focus_target())

    def action_back(self) -> None:
        if self.diff is None:
            return
        box = self.query_one("#filter", Input)
        table = self.view().active_table()
        if box.display or (table is not None and table.filter_text):
            box.value = ""
            self._show_filter_box(False)
            if table is not None:
                table.set_filter("")
            self.screen.set_focus(self.view().focus_target())
        else:
            self.action_show_view(DIFF_VIEWS[0].view_id)

    def action_export(self, fmt: str) -> None:
        exported = self.view().export_rows() if self.diff is not None else None
        if exported is None:
            self.notify("Nothing to export in this view.", severity="warning")
            return
        what, rows, columns = exported
        path = self.export_dir / f"tuiprof-{what}.{fmt}"
        try:
            path.write_text(render_rows(rows, columns, fmt))
        except OSError as exc:
            self.notify(f"Cannot write {path}: {exc.strerror or exc}", title="Export failed", severity="error", markup=False)
            return
        self.notify(f"Wrote {len(rows):,} rows to {path}", title="Export", timeout=6, markup=False)

    def action_help(self) -> None:
        view = self.view()
        keys = [*help_rows(DIFF_COMMANDS), (f"1-{len(DIFF_VIEWS)}", "views: " + ", ".join(v.title for v in DIFF_VIEWS)),
                *NAVIGATION_HELP, *help_rows(TABLE_COMMANDS)]
        self.push_screen(HelpScreen(f"diff: {view.title}", keys, view.help_columns()))

    def action_quit(self) -> None:
        self.exit(self.exit_code)


def run_diff_explorer(source: DiffSource) -> int:
    """Run diff mode; a load error is also left on stderr."""
    app = DiffApp(source)
    result = app.run()
    if app.error_text:
        print(f"tuiprof: {app.error_text}", file=sys.stderr)
    return int(result or 0)
