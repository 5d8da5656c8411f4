"""``tuiprof open DIR`` on a watch folder: the step-time history as a chart, triggers marked,
and the list of captures.

A :class:`TableApp` like the snapshot app, so it has what every app of tuiprof has: the keymap,
``?``, the palette, the filter, export of the list (``e``/``E``), quitting on signals and the
one-line error policy.  Enter opens the selected capture in the explorer; ``d`` compares it with
the healthy capture (the verdict first, then where the step time went, then the operator diff),
and from there ``D`` opens the full diff explorer.  While the job runs (its history has no end
line) the chart and the list follow it: every second a worker reads what was appended and builds
the page (tui/views/watch.py ``watch_state``); the UI thread only draws it.  The explorers run
after this app exits and it comes back when they are closed (:func:`run_watch_explorer`).
Reading is :mod:`tuiprof.trace.watch`, numbers :mod:`tuiprof.analysis.watch`, texts
:mod:`tuiprof.report.watch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import ContentSwitcher, Static
from textual.worker import Worker

from tuiprof.analysis.watch import CaptureComparison, compare_captures
from tuiprof.errors import TraceError
from tuiprof.report.plain import plain
from tuiprof.report.watch import capture_label, comparison_text
from tuiprof.trace.watch import HistoryReader
from tuiprof.tui.app import run_app, run_explorer
from tuiprof.tui.commands import Command, bindings, pane_commands, shared_commands, view_commands
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.table_app import TableApp
from tuiprof.tui.views import view_keys
from tuiprof.tui.views.watch import (
    CAPTURE_TABLE_COMMANDS,
    WATCH_PAGES,
    CapturesTable,
    WatchState,
    WatchView,
    watch_state,
)
from tuiprof.tui.widgets.filter_bar import FilterBar
from tuiprof.tui.widgets.key_bar import KeyBar
from tuiprof.tui.widgets.loading import LoadingPanel

FOLLOW_SECONDS = 1.0

WATCH_COMMANDS: tuple[Command, ...] = (
    *shared_commands(),
    Command(
        "d",
        "compare",
        "Diff vs healthy",
        "the highlighted capture against the healthy one: the verdict, where the step time went, "
        "the operators (D there: the full diff)",
        show=True,
    ),
)
COMPARE_COMMANDS: tuple[Command, ...] = (
    Command("escape,q", "back", "Back", "back to the captures", scope="compare", show=True, display="esc q"),
    Command("D", "full_diff", "Full diff", "the full diff explorer of the two captures", scope="compare", show=True),
)
WATCH_PAGE_KEYS = view_keys(WATCH_PAGES)
# What acts on the list: off while a comparison covers it.
ACTIONS_ON_LIST = frozenset({"filter", "export", "compare", "views", "cycle_view", "show_view"})


@dataclass
class WatchRead(Message):
    """A worker read the history (first, or what the running job appended) and built the page."""

    state: WatchState


class CompareScreen(Screen):
    """A capture against the healthy one (computed in a worker: two traces are loaded)."""

    BINDINGS = bindings(COMPARE_COMMANDS)

    def __init__(self, healthy: str, other: str) -> None:
        super().__init__()
        self.paths = (healthy, other)
        self.label = plain(capture_label(other))  # a file name: its control characters shown, not sent
        self.comparison: CaptureComparison | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"comparing {self.label} with the healthy capture..."), id="compare-title")
        with VerticalScroll():
            yield Static(id="comparison")
        yield KeyBar()

    def on_mount(self) -> None:
        self._compare()

    @work(thread=True, exclusive=True)
    def _compare(self) -> None:
        try:
            comparison = compare_captures(*self.paths)
        except TraceError as exc:
            self.app.call_from_thread(self._show, Text(f"cannot compare: {plain(str(exc))}"))
            return
        self.comparison = comparison
        self.app.call_from_thread(self._show, comparison_text(comparison))

    def _show(self, text: Text) -> None:
        self.query_one("#compare-title", Static).update(Text(f"{self.label} against the healthy capture"))
        self.query_one("#comparison", Static).update(text)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_full_diff(self) -> None:
        app = self.app
        if isinstance(app, WatchApp):
            app.leave_for("diff", *self.paths)


class WatchApp(TableApp):
    CSS_PATH = "explorer.tcss"
    TITLE = "tuiprof watch"
    BINDINGS = bindings(WATCH_COMMANDS)  # and the page key (TableApp.host_views)
    commands = WATCH_COMMANDS

    state: reactive[WatchState | None] = reactive(None, init=False)

    def __init__(self, reader: HistoryReader, export_dir: Path | None = None) -> None:
        super().__init__(export_dir)
        self.reader = reader  # read by one worker at a time: the load, then each follow
        self.next_action: tuple[str, ...] | None = None  # what run_watch_explorer runs once this app has exited
        self._reading: Worker | None = None  # the worker reading the history now, if any
        self._follow_timer: Timer | None = None  # while following a running job
        self.host_views(WATCH_PAGE_KEYS)

    @classmethod
    def keymap_commands(cls) -> tuple[Command, ...]:
        return (*WATCH_COMMANDS, *view_commands(WATCH_PAGE_KEYS), *CAPTURE_TABLE_COMMANDS, *COMPARE_COMMANDS)

    def compose(self) -> ComposeResult:
        yield LoadingPanel(str(self.reader.history.directory), live=False, id="loading")
        with ContentSwitcher(initial=WATCH_PAGES[0].view_id, id="views"):
            for page in WATCH_PAGES:
                yield WatchView(page).data_bind(WatchApp.state)
        yield FilterBar(id="filter")
        yield KeyBar()

    # ------------------------------------------------------------ reading and following

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        width = self.size.width
        state = self.load_or_fail(lambda: self._read(width))
        if state is not None:
            self.post_message(WatchRead(state))

    def _read(self, width: int) -> WatchState:
        """What was appended to the history, and the page drawn from all of it (in a worker)."""
        self.report_progress(f"reading {self.reader.history.path}", None)
        self.reader.read_new()
        return watch_state(self.reader.history, width)

    def _follow_tick(self) -> None:
        """Every second while the job runs, and when the page's width changes: read and build the
        page in a worker, unless one is still at it (one reader, one worker at a time)."""
        if self.state is not None and (self._reading is None or self._reading.is_finished):
            self._reading = self._follow(self.size.width, self.state.width, self._follow_timer is not None)

    @work(thread=True, group="follow")
    def _follow(self, width: int, drawn_width: int, read: bool) -> None:
        """``read``: the job runs (else only a new width is drawn)."""
        try:
            if (read and self.reader.read_new()) or width != drawn_width:
                self.post_message(WatchRead(watch_state(self.reader.history, width)))
        except TraceError as exc:  # damage written after the start: said once, the list stays as it was
            self.call_from_thread(self._stop_following, str(exc))

    def _stop_following(self, problem: str) -> None:
        if self._follow_timer is not None:
            self._follow_timer.stop()
            self._follow_timer = None
        self.notify(f"{plain(problem)}; no longer following the job", severity="error", timeout=10, markup=False)

    def on_watch_read(self, message: WatchRead) -> None:
        first = self.state is None
        self.state = message.state
        if first:
            self.query_one(LoadingPanel).display = False
            self.query_one("#views").display = True
            self.action_show_view(self.asked_for or WATCH_PAGES[0].view_id)
            self.asked_for = None
            self.refresh_bindings()
            if message.state.summary.history.end_status is None:
                self._follow_timer = self.set_interval(FOLLOW_SECONDS, self._follow_tick)
        elif message.state.summary.history.end_status is not None and self._follow_timer is not None:
            self._follow_timer.stop()  # the job has ended: nothing more will be appended
            self._follow_timer = None
        if message.state.width != self.size.width:  # resized while it was built
            self._follow_tick()

    def on_watch_view_resized(self) -> None:
        self._follow_tick()

    # ------------------------------------------------------------ the list's keys

    @property
    def loaded(self) -> bool:
        return self.state is not None

    def view(self, view_id: str | None = None) -> WatchView:
        return self.query_one(f"#{view_id or self.current_view}", WatchView)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if isinstance(self.screen, CompareScreen) and action in ACTIONS_ON_LIST:
            return False
        return super().check_action(action, parameters)

    @on(CapturesTable.Selected)
    def _open_capture(self, event: CapturesTable.Selected) -> None:
        path = self.view().selected_path() if event.row is not None else None
        if path is not None:
            self.leave_for("open", path)

    def action_compare(self) -> None:
        state = self.state
        selected = self.view().selected_path() if state is not None else None
        if state is None or selected is None:
            return
        healthy = state.summary.healthy
        if healthy is None or healthy.capture.dropped is not None:
            self.notify("no healthy capture to compare with", severity="warning")
            return
        healthy_path = str(state.summary.history.directory / healthy.capture.path)
        if selected == healthy_path:
            self.notify("this is the healthy capture: pick another", severity="warning")
            return
        self.push_screen(CompareScreen(healthy_path, selected))

    def leave_for(self, *action: str) -> None:
        """Exit, and have :func:`run_watch_explorer` run ``action`` (``open PATH``, ``diff A B``)."""
        self.next_action = action
        self.exit(0)

    # ------------------------------------------------------------ back, export, help, quit

    async def action_back(self) -> None:
        """esc: clear the filter (the list is the one page)."""
        if self.state is not None:
            self.clear_filter()

    def action_export(self, fmt: str) -> None:
        if self.state is not None:
            directory = self.reader.history.directory
            self.write_export(self.view().export_rows(), directory.name, fmt, f"watch folder {directory}")

    def action_help(self) -> None:
        if isinstance(self.screen, CompareScreen):  # its own keys, and ? (the list's act on the list)
            shown = (*COMPARE_COMMANDS, *(c for c in self.commands if c.action == "help"))
            keys = [(c.shown_keys(self.keymap), c.help) for c in shown]
            self.push_screen(HelpScreen("watch: a capture against the healthy one", keys, None))
            return
        view = self.view()
        self.push_screen(
            HelpScreen(f"watch: {view.page.title}", self.help_keys(pane_commands(view)), view.help_columns())
        )

    async def action_quit(self) -> None:
        self.exit(self.quit_code())


def run_watch_explorer(directory: str) -> int:
    """The watch app; an explorer it asks for runs in its place, then the watch app comes back."""
    from tuiprof.trace.watch import read_history  # bad input: one line before any screen

    read_history(directory)
    while True:
        app = WatchApp(HistoryReader(directory))
        status = run_app(app)
        if app.next_action is None:
            return status
        kind, *paths = app.next_action
        if kind == "open":
            run_explorer(paths[0])
        else:
            from tuiprof.tui.diff_app import DiffSource, run_diff_explorer  # diff mode loads with its first use

            run_diff_explorer(DiffSource(*paths))
