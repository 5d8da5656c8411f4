"""Every use of Textual's private API, in one place (Textual is pinned exactly: 8.2.8).

Each function names what it reaches into and why no public API does it.  A Textual upgrade
checks this module first: tests/tui/test_textual_internals.py fails when a name is gone.
"""

from __future__ import annotations

import os
import tempfile
import traceback
from collections.abc import Iterable
from pathlib import Path

from textual.app import App
from textual.binding import BindingsMap, BindingType
from textual.keys import _normalize_key_list
from textual.notifications import Notification

DEBUG_ENV = "TUIPROF_DEBUG"


def normalize_key_list(keys: str) -> str:
    """``textual.keys._normalize_key_list`` (8.2.8): a keymap's keys spelled as Textual binds
    them (``ctrl+c,f1``); Textual's keymap loader uses it and exports no public equivalent."""
    return _normalize_key_list(keys)


def add_bindings(app: App, bindings: Iterable[BindingType]) -> None:
    """Bind ``bindings`` on this app instance, not its class (``App._bindings``, 8.2.8): an
    explorer may be given its views, and a class-level BINDINGS is fixed at import."""
    app._bindings = BindingsMap.merge([app._bindings, BindingsMap(list(bindings))])


def withdraw_notification(app: App, toast: Notification) -> None:
    """Take one toast off the screen before its timeout (``App._notifications`` and
    ``App._unnotify``, 8.2.8): Textual can only clear all of them."""
    if toast in app._notifications:
        app._unnotify(toast)


class InternalErrorPolicy(App[int]):
    """An App base: an unhandled exception in the UI ends the app with one line on stderr
    (``internal error: ...``, as the command line gives), never Rich's traceback with the
    locals of every frame (trace contents included).  With TUIPROF_DEBUG=1 the traceback is
    written to a file, whose name the line gives.  Textual's own bookkeeping (the exception
    kept for Pilot, the exit code) is left as it is: only ``App._fatal_error`` (8.2.8), the
    part that renders the traceback, is replaced."""

    internal_error: str = ""  # the line to print once the terminal is restored

    def _fatal_error(self) -> None:
        error = getattr(self, "_exception", None)
        text = f"{type(error).__name__}: {error}" if error is not None else "unknown error"
        if os.environ.get(DEBUG_ENV):
            where = write_traceback(error)
            self.internal_error = f"internal error: {text} (traceback in {where})"
        else:
            self.internal_error = f"internal error: {text} (set {DEBUG_ENV}=1 for a traceback)"
        self._close_messages_no_wait()  # what Textual's own _fatal_error ends with


def write_traceback(error: BaseException | None) -> Path:
    """The traceback of ``error`` in a new file of the temporary folder (kept: it is for the user)."""
    handle, name = tempfile.mkstemp(prefix="tuiprof-traceback-", suffix=".txt")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        if error is not None:
            out.write("".join(traceback.format_exception(type(error), error, error.__traceback__)))
    return Path(name)
