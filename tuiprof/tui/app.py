"""The explorer: a Textual app over one TraceModel.

It composes the registered views (tuiprof/tui/views/), loads the model in a
worker thread, switches views, and routes the app-wide keys of the command
table (tui/commands.py).  It never parses and never computes: views read the
model, report/ formats it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Sequence
from pathlib import Path

from textual import on, work
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.widgets import ContentSwitcher

from tuiprof.analysis.model import TraceModel
from tuiprof.errors import EXIT_INTERNAL
from tuiprof.report.header import trace_title
from tuiprof.report.plain import plain
from tuiprof.report.render import print_notice
from tuiprof.report.views import ViewOptions
from tuiprof.tui.commands import (
    APP_COMMANDS,
    TABLE_COMMANDS,
    TREE_COMMANDS,
    Command,
    Viewable,
    bindings,
    pane_commands,
    shown_view_keys,
    view_commands,
)
from tuiprof.tui.messages import JumpTo, LoadFinished, ShowInTimeline
from tuiprof.tui.rank_models import RankModels
from tuiprof.tui.screens.events import EVENT_LIST_COMMANDS, EventListScreen
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.sources import FileSource, LoadCancelled, ModelSource
from tuiprof.tui.table_app import TableApp
from tuiprof.tui.views import EXPLORER_VIEWS, view_keys
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.views.overview import OVERVIEW_COMMANDS
from tuiprof.tui.views.timeline import TimelineView
from tuiprof.tui.widgets.filter_bar import FilterBar
from tuiprof.tui.widgets.header import ExplorerHeader
from tuiprof.tui.widgets.key_bar import KeyBar
from tuiprof.tui.widgets.loading import LoadingPanel
from tuiprof.tui.widgets.timeline_canvas import TIMELINE_COMMANDS


class ExplorerApp(TableApp):
    CSS_PATH = "explorer.tcss"
    TITLE = "tuiprof"
    BINDINGS = bindings(APP_COMMANDS)  # and the view keys (TableApp.host_views)
    commands = APP_COMMANDS

    model: reactive[TraceModel | None] = reactive(None, init=False)
    options: reactive[ViewOptions] = reactive(ViewOptions, init=False)
    log_lines: reactive[tuple[str, ...]] = reactive((), init=False)
    _binds = (model, options, log_lines)  # what the header and every view are bound to

    def __init__(
        self, source: ModelSource, export_dir: Path | None = None, views: Sequence[type[ExplorerView]] = EXPLORER_VIEWS
    ) -> None:
        super().__init__(export_dir)
        self.source = source
        self.views = tuple(views)  # tui/views: EXPLORER_VIEWS; a test may give others
        self.host_views(view_keys(self.views))
        self._cancel = threading.Event()
        self.previous_view = self.views[0].view_id
        self.ranks = RankModels()

    @classmethod
    def keymap_commands(cls) -> tuple[Command, ...]:
        return (
            *APP_COMMANDS,
            *view_commands(view_keys()),
            *TABLE_COMMANDS,
            *TREE_COMMANDS,
            *TIMELINE_COMMANDS,
            *OVERVIEW_COMMANDS,
            *EVENT_LIST_COMMANDS,
        )

    def compose(self) -> ComposeResult:
        yield ExplorerHeader(shown_view_keys(self.view_keys, self.keymap), id="header").data_bind(*self._binds)
        yield LoadingPanel(self.source.title, live=self.source.live, id="loading")
        with ContentSwitcher(initial=self.views[0].view_id, id="views"):
            yield self._bound_view(self.views[0])  # the others: mounted after the first frame with the model
        yield FilterBar(id="filter")
        yield KeyBar()

    def _bound_view(self, view: type[ExplorerView]) -> ExplorerView:
        return view(id=view.view_id).data_bind(*self._binds)

    async def _mount_other_views(self) -> None:
        """The views not shown first, mounted (hidden) once the first frame with the model is drawn.

        Composing all of them before it, each building its tables, cost 0.07 s of the ~0.55 s
        from ``tuiprof open`` to the first frame (scripts/bench_startup.py).  Awaited in the
        app's message loop: a key pressed meanwhile is handled once they are all there."""
        if self.quitting:
            return
        switcher = self.query_one("#views", ContentSwitcher)
        missing = [self._bound_view(view) for view in self.views[1:] if not switcher.query(f"#{view.view_id}")]
        for view in missing:
            view.display = False
        await switcher.mount_all(missing)
        # The model and the widgets now live as long as the app: out of the collector's
        # generations, so a full collection (~100k objects: 35-80 ms here) never lands on a
        # key press.  Acyclic objects are still freed by reference counting (a rank switch's
        # old model); only garbage cycles among them would stay, and they hold none.
        gc.freeze()
        if self.asked_for is not None:
            self.action_show_view(self.asked_for)
            self.asked_for = None

    def _quit_on_signal(self, signum: int) -> None:
        self._cancel.set()
        super()._quit_on_signal(signum)

    def on_unmount(self) -> None:
        """What ``_mount_other_views`` froze is the collector's again once the app is done: a
        process that runs many apps (the tests) would otherwise keep their cycles for good."""
        gc.unfreeze()

    # ------------------------------------------------------------ loading

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        try:
            loaded = self.load_or_fail(lambda: self.source(self.report_progress, self._cancel.is_set))
        except LoadCancelled:
            return  # only a quit cancels a load, and it has set the exit code (q: 130, a signal: 128+N)
        if loaded is not None:
            model, log_lines = loaded
            self.post_message(LoadFinished(model, tuple(log_lines)))

    def on_load_finished(self, message: LoadFinished) -> None:
        self.query_one(LoadingPanel).display = False
        self.query_one("#views").display = True
        self.ranks.remember(message.model)
        with self.batch_update():
            self.log_lines = message.log_lines
            self.model = message.model
        self.action_show_view(self.views[0].view_id)  # always the Overview first: it names the top module and operator
        self.refresh_bindings()  # the keys that act on a trace, on the key bar now
        self.call_after_refresh(self._mount_other_views)

    def action_switch_rank(self, step: int) -> None:
        current = self.model
        if current is not None:  # a closure: a worker's description holds the repr() of its arguments
            self.run_worker(
                lambda: self.ranks.switch(self, current, step),
                thread=True,
                exclusive=True,
                group="rank",
                description="switch rank",
            )

    # ------------------------------------------------------------ views

    def shows(self, view: Viewable) -> bool:
        return (
            self.model is not None
            and isinstance(view, type)
            and issubclass(view, ExplorerView)
            and view.available(self.model, self.log_lines)
        )

    def draw_tabs(self) -> None:
        self.query_one(ExplorerHeader).current = self.current_view

    def action_show_in_timeline(self) -> None:
        target = self.view().timeline_target() if self.model is not None else None
        if target is None:
            self.notify("Nothing here to show in the Timeline: pick an operator, kernel or step.", severity="warning")
            return
        self.post_message(ShowInTimeline(target))

    @on(ShowInTimeline)
    def _show_in_timeline(self, message: ShowInTimeline) -> None:
        self.action_show_view("timeline")
        timeline = self.view("timeline")
        if isinstance(timeline, TimelineView):
            timeline.show_target(message.target)

    @on(JumpTo)
    def _jump(self, message: JumpTo) -> None:
        self.action_show_view(message.view)
        self.view(message.view).select_name(message.name)

    # ------------------------------------------------------------ back

    @property
    def loaded(self) -> bool:
        return self.model is not None

    async def action_back(self) -> None:
        """esc: clear the filter if there is one, else back to the previous view."""
        if self.model is None or self.clear_filter():
            return
        first = self.views[0].view_id
        if self.current_view != first:
            self.action_show_view(self.previous_view if self.previous_view != self.current_view else first)

    # ------------------------------------------------------------ toggles, export, help, quit

    def toggled_on(self, action: str) -> bool:
        return {"toggle_shapes": self.options.group_by_shape, "toggle_top_level": self.options.top_level_only}.get(
            action, False
        )

    def action_toggle_shapes(self) -> None:
        self.options = ViewOptions(not self.options.group_by_shape, self.options.top_level_only)

    def action_toggle_top_level(self) -> None:
        self.options = ViewOptions(self.options.group_by_shape, not self.options.top_level_only)

    def action_export(self, fmt: str) -> None:
        if self.model is None:
            return
        source = self.screen if isinstance(self.screen, EventListScreen) else self.view()
        title = trace_title(self.model)
        settings = (
            *(("grouped by input shape",) if self.options.group_by_shape else ()),
            *(("top-level only",) if self.options.top_level_only else ()),
        )
        self.write_export(source.export_rows(), title.split(".")[0] or "trace", fmt, title, settings)

    def action_help(self) -> None:
        view = self.view()
        keys = self.help_keys(pane_commands(view))
        self.push_screen(HelpScreen(view.title, keys, view.help_columns() if self.model is not None else None))

    async def action_quit(self) -> None:
        """Quit; while a live capture runs, the first press stops it and shows what it has."""
        if self.model is None and self.source.live and not self._cancel.is_set():
            self._cancel.set()
            self.query_one(LoadingPanel).stopping()
            return
        self._cancel.set()
        self.exit(self.quit_code())


def run_explorer(path: str, select: str | None = None) -> int:
    return run_app(ExplorerApp(FileSource(path, select)))


def run_app(app: TableApp) -> int:
    """Run the explorer; a load error ends it and is printed on stderr, once the terminal is restored."""
    result = app.run()
    if app.error_text:
        print_notice(f"tuiprof: {plain(app.error_text)}")
    if app.internal_error:  # a bug in the UI: one line, the traceback in a file with TUIPROF_DEBUG=1
        print_notice(f"tuiprof: {plain(app.internal_error, 500)}")
        return EXIT_INTERNAL
    return int(result or 0)
