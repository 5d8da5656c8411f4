"""What every app of views shares (the explorer, diff mode, the snapshot and watch apps):
the view host (the views in key order, switching between them by key, by < and >, and from
the views palette), the keymap, ``?`` and the palette, quitting cleanly on signals, a load
worker whose progress shows in the loading panel and whose error ends the app (one line on
stderr once the terminal is restored, as every other bad input gives), the filter bar, esc
clearing it, and writing an export of whatever view is current."""

from __future__ import annotations

import asyncio
import concurrent.futures
import signal
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TypeVar

from textual import on
from textual.app import SystemCommand
from textual.screen import Screen
from textual.widgets import ContentSwitcher

from tuiprof.cleanup import clean_up
from tuiprof.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TraceError
from tuiprof.report.export import ExportError, write_export
from tuiprof.report.plain import plain
from tuiprof.report.render import ExportOrigin, render_export
from tuiprof.report.views import Column, Row
from tuiprof.tui.commands import Command, Viewable, ViewKey, bindings, help_rows, palette_commands, view_commands
from tuiprof.tui.keymap import load_keymap
from tuiprof.tui.messages import LoadAdvanced, LoadFailed
from tuiprof.tui.screens.views_palette import views_palette
from tuiprof.tui.sources import LoadCancelled
from tuiprof.tui.textual_internals import InternalErrorPolicy, add_bindings
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.filter_bar import FilterBar
from tuiprof.tui.widgets.loading import LoadingPanel
from tuiprof.tui.widgets.row_table import RowTable

QUIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)  # kill, an SSH drop, kill -INT
T = TypeVar("T")


class AbandonableExecutor(concurrent.futures.ThreadPoolExecutor):  # the kind asyncio accepts as its default
    """Runs the app's thread workers (loading, analysing a run, switching rank) each on a daemon
    thread that nothing waits for.

    asyncio's default pool is joined when the loop closes and again at interpreter exit, so a
    quit (q, Ctrl-C, SIGTERM, SIGHUP) during an analysis restored the terminal and then waited
    for the analysis to end: 77 s on a big diff, forever on a parent-id loop.  With this one the
    process ends at once and the analysis with it; temporary files and worker processes go with
    :mod:`tuiprof.cleanup` (its signal handlers and ``atexit``).  A thread inside one long C call
    that holds the GIL still delays the exit until that call returns."""

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:  # handed to the awaiting worker, as the default pool does
                future.set_exception(exc)
            else:
                future.set_result(result)

        threading.Thread(target=run, name="tuiprof-worker", daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Nothing to wait for: a worker still running is abandoned with the process."""


class TableApp(InternalErrorPolicy):
    """An app of views, loaded in a worker: the one view host of every app (tui/keymap.py ``every_app``).
    Subclasses call :meth:`host_views` (tui/views: ``view_keys``), set ``commands`` (their command
    table) and give ``keymap_commands()`` (every id their keymap may name), ``_load()`` (a worker
    that calls :meth:`load_or_fail`), ``loaded`` and ``draw_tabs()``, and compose ``#views`` (a ContentSwitcher of ``ExplorerView`` widgets), a ``LoadingPanel`` and
    a ``FilterBar``."""

    commands: tuple[Command, ...] = ()

    def __init__(self, export_dir: Path | None = None) -> None:
        super().__init__()
        self.export_dir = export_dir or Path.cwd()  # where e/E write
        self.error_text = ""  # a load error, printed on stderr after the app ends
        self.quitting = False  # exit() was called: views mounted meanwhile draw nothing
        self.view_keys: list[ViewKey] = []  # (key, view id, view), in key order: host_views()
        self.previous_view = ""  # esc goes back to it
        self.asked_for: str | None = None  # a view key pressed while loading: shown once loaded
        self._views_switcher: ContentSwitcher | None = None  # views_switcher
        self.keymap, self.keymap_problem = load_keymap(self.keymap_commands())  # the user's keys, by binding id
        self.set_keymap(self.keymap)

    # Actions on what is loaded: off the key bar (and inert) until it is there.
    ACTIONS_ON_LOADED = frozenset(
        {"filter", "toggle_shapes", "toggle_top_level", "export", "switch_rank", "show_in_timeline"}
    )

    @property
    def loaded(self) -> bool:
        raise NotImplementedError

    @classmethod
    def keymap_commands(cls) -> tuple[Command, ...]:
        """Every command bound in the app, its screens and widgets: the ids its keymap may name."""
        raise NotImplementedError

    # Actions on the rows of the current view: off the key bar (and inert) on a view with none
    # (Kernels on a CPU trace, Ranks on one trace): nothing to filter, export, group or cut.
    ACTIONS_ON_ROWS = frozenset({"filter", "toggle_shapes", "toggle_top_level", "export"})

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in self.ACTIONS_ON_LOADED and not self.loaded:
            return False
        if action in self.ACTIONS_ON_ROWS and not self.toggled_on(action) and self.views_switcher is not None:
            return not self.view().has_no_rows()
        return True

    def toggled_on(self, action: str) -> bool:
        """Whether the toggle ``action`` is on: then it stays on the key bar of an empty view,
        the way back (by input shape can leave a table empty)."""
        return False

    # ------------------------------------------------------------ the view host

    def host_views(self, view_keys: list[ViewKey]) -> None:
        """Host these views (tui/views: ``view_keys``): each keyed one is bound to its key as a
        command with an id (``view.operators``), so a keymap remaps it.  Bound per app, not per
        class, because an explorer may be given its views (``ExplorerApp(source, views=...)``)."""
        self.view_keys = view_keys
        add_bindings(self, bindings(view_commands(view_keys)))

    @property
    def views_switcher(self) -> ContentSwitcher | None:
        """``#views``, once composed (None before).  Looked up once, not per call: the key bar
        asks ``check_action`` of every binding after each key, and a query walked the whole
        DOM each time (an eighth of a view switch's cost)."""
        if self._views_switcher is None and self.is_attached:
            self._views_switcher = next(iter(self.query("#views").results(ContentSwitcher)), None)
        return self._views_switcher

    @property
    def current_view(self) -> str:
        switcher = self.views_switcher
        return (switcher.current if switcher is not None else None) or self.view_keys[0][1]

    def view(self, view_id: str | None = None) -> ExplorerView:
        switcher = self.views_switcher
        assert switcher is not None, "the views are composed before anything asks for one"
        return switcher.get_child_by_id(view_id or self.current_view, ExplorerView)

    def shows(self, view: Viewable) -> bool:
        """Whether the header lists ``view`` (the explorer leaves out views with nothing for
        the trace; their key and the palette still reach them)."""
        return True

    def draw_tabs(self) -> None:
        """The current view changed: redraw the header's tabs."""

    def action_show_view(self, view_id: str) -> None:
        if not self.loaded:
            self.asked_for = view_id  # typed ahead: shown once loaded
            return
        if view_id != self.current_view:
            self.previous_view = self.current_view
        assert self.views_switcher is not None
        self.view(view_id).catch_up()
        self.views_switcher.current = view_id
        self.screen.set_focus(self.view(view_id).focus_target())  # now: keys typed right after go there
        self.draw_tabs()

    def action_cycle_view(self, step: int) -> None:
        """< and >: the previous / next of the views the header lists (wrapping), so every
        view is a few keys away, also those past the tenth, which have no key."""
        if not self.loaded:
            return
        listed = [view_id for _, view_id, view in self.view_keys if view_id == self.current_view or self.shows(view)]
        self.action_show_view(listed[(listed.index(self.current_view) + step) % len(listed)])

    def action_views(self) -> None:
        """V: the views palette, every view named with its key."""
        self.push_screen(views_palette())

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        table = self.view().active_table() if self.loaded else None
        yield from palette_commands(self, self.view_keys, table, self.commands, self.keymap)

    def help_keys(self, panes: Iterable[Command]) -> list[tuple[str, str]]:
        """The ``?`` rows: the app's keys, every view (those past the tenth named too), ``panes``' keys."""
        unkeyed = [view.title for key, _, view in self.view_keys if not key]
        return help_rows(view_commands(self.view_keys), self.commands, panes, self.keymap, unkeyed)

    def _load(self) -> object:
        """Start loading (a ``@work`` method in each app: it returns its Worker)."""
        raise NotImplementedError

    def on_mount(self) -> None:
        self.query_one("#views").display = False
        if self.keymap_problem:
            self.notify(self.keymap_problem, title="Keymap not applied", severity="warning", timeout=10, markup=False)
        loop = asyncio.get_running_loop()
        loop.set_default_executor(AbandonableExecutor())  # thread workers never hold up a quit
        for (
            signum
        ) in QUIT_SIGNALS:  # quit like q does, so the terminal is restored (default: die in the alternate screen)
            loop.add_signal_handler(signum, self._quit_on_signal, signum)
        self._load()

    def exit(self, *args, **kwargs) -> None:
        self.quitting = True
        super().exit(*args, **kwargs)

    def quit_code(self) -> int:
        """The exit code of a quit now: before anything is shown, "stopped by the user"
        (130, as the exit codes in docs/commands.md and a live capture's q say), else 0.  (A load error
        ends the app by itself, with that error's code.)"""
        return 0 if self.loaded else EXIT_INTERRUPTED

    def _quit_on_signal(self, signum: int) -> None:
        clean_up()  # temporary inflated traces and decode workers go now, not only at exit
        self.exit(128 + signum)

    # ------------------------------------------------------------ loading

    def load_or_fail(self, load: Callable[[], T]) -> T | None:
        """Run ``load`` (in the load worker): a bad input or a bug becomes a
        ``LoadFailed`` that ends the app (None), never a crash."""
        try:
            return load()
        except LoadCancelled:
            raise
        except TraceError as exc:
            self.post_message(LoadFailed(str(exc), exc.exit_code))
        except Exception as exc:  # a bug: shown, not a crash
            self.post_message(LoadFailed(f"internal error: {type(exc).__name__}: {exc}", EXIT_INTERNAL))
        return None

    def load_or_notify(self, load: Callable[[], T]) -> T | None:
        """Run ``load`` in a worker once the app shows a model: a problem is a notification, not a crash."""
        try:
            return load()
        except TraceError as exc:
            self.call_from_thread(self.notify, str(exc), severity="error", markup=False)
        except Exception as exc:  # a bug: shown, not a crash
            self.call_from_thread(
                self.notify, f"internal error: {type(exc).__name__}: {exc}", severity="error", markup=False
            )
        return None

    def report_progress(self, text: str, fraction: float | None) -> None:
        """A loader's progress callback (any thread)."""
        self.post_message(LoadAdvanced(text, fraction))

    def on_load_advanced(self, message: LoadAdvanced) -> None:
        self.query_one(LoadingPanel).advance(message.text, message.fraction)

    def on_load_failed(self, message: LoadFailed) -> None:
        """A trace that cannot be shown (a truncated gzip, damage found past the first bytes, a
        capture that failed): quit at once with its exit code; ``run_app`` prints the one line
        once the terminal is restored.  An error page that waited for q was the one bad input
        that did not end with a line on stderr and exit 2 straight away."""
        self.error_text = message.text
        self.exit(message.exit_code)

    # ------------------------------------------------------------ filter and export

    def action_filter(self) -> None:
        if self.loaded and not self.query_one(FilterBar).open_for(self.view()):
            self.notify("This view has nothing to filter.", severity="warning")

    @on(FilterBar.Submitted)
    def _filter_kept(self) -> None:
        self.screen.set_focus(self.view().focus_target())

    def clear_filter(self) -> bool:
        """esc's first job: clear the filter; False when there was none (esc then means "back")."""
        if not self.query_one(FilterBar).clear_for(self.view()):
            return False
        self.screen.set_focus(self.view().focus_target())
        return True

    def write_export(
        self,
        exported: tuple[str, list[Row], tuple[Column, ...]] | None,
        stem: str,
        fmt: str,
        source: str,
        settings: tuple[str, ...] = (),
    ) -> None:
        """Write what a view exports to ``tuiprof-<what>[-<stem>].<fmt>`` in the export folder,
        with where it came from (``source``, the sort and filter of the table that shows the
        rows, the toggles in ``settings``: report.render.render_export)."""
        if exported is None:
            self.notify("Nothing to export in this view.", severity="warning")
            return
        what, rows, columns = exported
        origin = self._export_origin(what, rows, source, settings)
        try:  # a new file, never through a planted symlink; a fresh name when one exists
            path = write_export(
                self.export_dir,
                f"tuiprof-{what}{'-' + stem if stem else ''}",
                f".{fmt}",
                render_export(rows, columns, fmt, origin),
            )
        except ExportError as exc:
            self.notify(str(exc), title="Export failed", severity="error", markup=False)
            return
        message = f"Wrote {len(rows):,} rows to {plain(str(path))}"
        self.notify(message, title="Export", timeout=6, markup=False)

    def _export_origin(self, what: str, rows: list[Row], source: str, settings: tuple[str, ...]) -> ExportOrigin:
        """The sort and filter of the table showing ``rows`` (none: rows built for the export,
        such as every module of the tree, come in the view's order, unfiltered)."""
        table = next((t for t in self.screen.query(RowTable) if t.rows is rows), None)
        if table is None:
            return ExportOrigin(what, source, settings=settings)
        return ExportOrigin(
            what, source, table.sort_key, table.descending, table.filter_text, settings, len(table.all_rows)
        )
