"""Keep the explorer on the terminal while a capture sends fd 2 to a log.

Kineto prints straight to file descriptor 2, past ``sys.stderr``, so a
capture points fd 2 at a log file (:func:`tuiprof.capture.session.native_stderr_to`).
Textual's Linux driver draws on ``sys.__stderr__`` -- fd 2 -- so without
this the whole UI would go into that log and the screen would look hung.
The driver is given a duplicate of the terminal's descriptor instead, taken
before any redirection.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from textual.app import App


def terminal_duplicate() -> TextIO:
    """A new file object on what fd 2 is now (the terminal), unaffected by a later ``dup2`` onto fd 2."""
    stream = sys.__stderr__
    if stream is None:  # started without a stderr (pythonw): no terminal to draw on
        raise OSError("no terminal: the process has no stderr")
    return open(  # noqa: SIM115 - the caller closes it
        os.dup(stream.fileno()), "w", encoding=stream.encoding or "utf-8", errors="replace", closefd=True
    )


@contextmanager
def drawing_on_terminal(app: App) -> Iterator[None]:
    """Run ``app`` inside this block: its driver writes to a private duplicate of the terminal."""
    base: Any = app.driver_class  # Any: a class chosen at run time (the platform's driver) is no static base
    terminal = terminal_duplicate()

    class TerminalDriver(base):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            if hasattr(self, "_file"):  # textual's Linux driver: the stream its writer thread draws on
                self._file = terminal

    app.driver_class = TerminalDriver
    try:
        yield
    finally:
        app.driver_class = base
        terminal.close()
