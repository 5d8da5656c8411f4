"""``tuiprof open SNAP`` on a terminal: an allocator snapshot's peak, what holds it, its segments
and its out-of-memory errors, with the explorer's keys.

A :class:`TableApp` like diff mode: the snapshot is read and analysed in the load worker (with
its progress on the loading panel; a bad file ends the app and is one line on stderr), then the
pages (tui/views/snapshot.py) draw the :class:`SnapshotState` the app assigns: ``d`` the next
GPU, ``o`` the peak or the first OOM of the GPU, enter on an OOM that one.  Filter, sort,
export and help are the explorer's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.reactive import reactive
from textual.widgets import ContentSwitcher, Static

from tuiprof.analysis.snapshot import OutOfMemory, SnapshotModel
from tuiprof.analysis.snapshot_trace import PeakPlace
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
from tuiprof.tui.messages import ShowOom, SnapshotReady
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.table_app import TableApp
from tuiprof.tui.views import view_keys
from tuiprof.tui.views.snapshot import (
    DETAIL_COMMANDS,
    SNAPSHOT_PAGES,
    DetailScroll,
    PeakPage,
    SnapshotState,
    SnapshotView,
    snapshot_page,
)
from tuiprof.tui.widgets.filter_bar import FilterBar
from tuiprof.tui.widgets.header import tab_line
from tuiprof.tui.widgets.key_bar import KeyBar
from tuiprof.tui.widgets.loading import LoadingPanel

SNAPSHOT_COMMANDS: tuple[Command, ...] = (
    *shared_commands(),
    Command("d", "next_device", "Next GPU", "the next GPU (cuda:0, cuda:1, ...)", show=True),
    Command(
        "o", "toggle_oom", "Peak/OOM", "the peak, or the GPU's first out-of-memory error: what held memory", show=True
    ),
    Command(
        "f",
        "focus_detail",
        "Stack",
        "the detail pane (the highlighted stack in full): focus it to scroll, or back to the table",
        show=True,
    ),
    Command(
        "t",
        "toggle_torch",
        "Torch frames",
        "hide or show torch's frames (its package and native code) in the stack; › marks your code",
        show=True,
    ),
)
SNAPSHOT_PAGE_KEYS = view_keys(SNAPSHOT_PAGES)
ENTER_HELP = "on the OOMs page: what held memory at the highlighted OOM"  # the explorer's drill-in means this here

# Reads and analyses the snapshot, reporting progress: (model, where the peak fell in a trace or None).
SnapshotLoader = Callable[[Callable[[str, float | None], None]], tuple[SnapshotModel, PeakPlace | None]]


class SnapshotApp(TableApp):
    CSS_PATH = "explorer.tcss"
    TITLE = "tuiprof snapshot"
    BINDINGS = bindings(SNAPSHOT_COMMANDS)  # and the page keys (TableApp.host_views)
    commands = SNAPSHOT_COMMANDS

    state: reactive[SnapshotState | None] = reactive(None, init=False)

    def __init__(self, load: SnapshotLoader, title: str, export_dir: Path | None = None) -> None:
        super().__init__(export_dir)
        self.load = load
        self.title_text = title
        self.host_views(SNAPSHOT_PAGE_KEYS)

    @classmethod
    def keymap_commands(cls) -> tuple[Command, ...]:
        return (*SNAPSHOT_COMMANDS, *view_commands(SNAPSHOT_PAGE_KEYS), *TABLE_COMMANDS, *DETAIL_COMMANDS)

    def compose(self) -> ComposeResult:
        yield Static("tuiprof snapshot", id="header")
        yield LoadingPanel(self.title_text, live=False, id="loading")
        with ContentSwitcher(initial=SNAPSHOT_PAGES[0].view_id, id="views"):
            for page in SNAPSHOT_PAGES:
                yield snapshot_page(page).data_bind(SnapshotApp.state)
        yield FilterBar(id="filter")
        yield KeyBar()

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        loaded = self.load_or_fail(lambda: self.load(self.report_progress))
        if loaded is not None:
            self.post_message(SnapshotReady(*loaded))

    def on_snapshot_ready(self, message: SnapshotReady) -> None:
        model = message.model
        self.query_one(LoadingPanel).display = False
        self.query_one("#views").display = True
        device = max(model.peaks, key=lambda p: p.allocated).device if model.peaks else 0
        self.state = SnapshotState(model, device, None, message.place)
        self.action_show_view(self.asked_for or SNAPSHOT_PAGES[0].view_id)
        self.asked_for = None
        self.refresh_bindings()

    @property
    def loaded(self) -> bool:
        return self.state is not None

    def view(self, view_id: str | None = None) -> SnapshotView:
        return self.query_one(f"#{view_id or self.current_view}", SnapshotView)

    def watch_state(self) -> None:
        self.draw_tabs()

    def draw_tabs(self) -> None:
        """The header: the file, the GPU and moment shown, then the page tabs."""
        state = self.state
        if state is None:
            return
        header = self.query_one("#header", Static)
        width = max(20, header.size.width or 78)
        moment = "first OOM" if state.oom is not None and state.oom is self._first_oom() else "OOM"
        line = Text(
            f"{plain(state.model.snapshot.source)} · cuda:{state.device} · {'peak' if state.oom is None else moment}",
            no_wrap=True,
            overflow="ellipsis",
        )
        tabs = tab_line(shown_view_keys(self.view_keys, self.keymap), self.current_view, width)
        header.update(Group(line, tabs))

    def _first_oom(self) -> OutOfMemory | None:
        state = self.state
        return next((o for o in state.model.ooms if o.device == state.device), None) if state else None

    # ------------------------------------------------------------ snapshot keys

    def action_next_device(self) -> None:
        state = self.state
        if state is None:
            return
        count = max(1, len(state.model.peaks))
        self.state = replace(state, device=(state.device + 1) % count, oom=None)

    def action_toggle_oom(self) -> None:
        state = self.state
        if state is None:
            return
        if state.oom is not None:
            self.state = replace(state, oom=None)
            return
        first = self._first_oom()
        if first is None:
            self.notify(f"no out-of-memory error on cuda:{state.device}", markup=False)  # text, never markup
            return
        self.state = replace(state, oom=first)
        self.action_show_view(SNAPSHOT_PAGES[0].view_id)

    def action_focus_detail(self) -> None:
        if self.state is not None:
            self.view().toggle_detail_focus()

    def action_toggle_torch(self) -> None:
        page = self.query_one(f"#{SNAPSHOT_PAGES[0].view_id}", PeakPage)
        page.torch_hidden = not page.torch_hidden
        if self.current_view != page.id:
            self.notify(
                f"torch's frames {'hidden' if page.torch_hidden else 'shown'} in the Peak page's stacks", markup=False
            )

    def on_show_oom(self, message: ShowOom) -> None:
        """Enter on the OOMs page: what held memory at that OOM, on the Peak page."""
        if self.state is not None:
            self.state = replace(self.state, device=message.oom.device, oom=message.oom)
            self.action_show_view(SNAPSHOT_PAGES[0].view_id)

    # ------------------------------------------------------------ back, export, help, quit

    async def action_back(self) -> None:
        """esc: clear the filter; else from the detail pane to the table; else back to the Peak
        page; there, from an OOM to the peak."""
        state = self.state
        if state is None or self.clear_filter():
            return
        if isinstance(self.focused, DetailScroll):
            self.view().toggle_detail_focus()
            return
        if self.current_view != SNAPSHOT_PAGES[0].view_id:
            self.action_show_view(SNAPSHOT_PAGES[0].view_id)
        elif state.oom is not None:
            self.state = replace(state, oom=None)

    def action_export(self, fmt: str) -> None:
        state = self.state
        if state is not None:
            moment = "peak" if state.oom is None else f"oom{state.oom.index}"
            self.write_export(
                self.view().export_rows(),
                f"cuda{state.device}-{moment}",
                fmt,
                f"allocator snapshot {state.model.snapshot.source}",
            )

    def action_help(self) -> None:
        view = self.view()
        panes = [replace(c, help=ENTER_HELP) if c.action == "select" else c for c in pane_commands(view)]
        keys = self.help_keys(panes)
        self.push_screen(HelpScreen(f"snapshot: {view.page.title}", keys, view.help_columns()))

    async def action_quit(self) -> None:
        self.exit(self.quit_code())


def run_snapshot_explorer(load: SnapshotLoader, title: str) -> int:
    return run_app(SnapshotApp(load, title))
