"""Nothing left behind: temporary files and folders, and worker processes, end with us.

A big ``.json.gz`` (or a trace read from a pipe) is inflated into a
temporary file of hundreds of MB.  An SSH drop (SIGHUP), a ``kill`` (SIGTERM)
or Ctrl-C must not leave it in ``TMPDIR``, nor leave decode or rank workers
running.  Whatever creates such a file (or a folder: Dask's scratch space) or
process registers it here; the handlers installed by
:func:`install_signal_handlers` (from the main thread, at start) remove the
files and kill the processes, then let the signal do what it did before (the
previous handler, or the default: exit 128+N).  ``atexit`` does the same on a
normal exit.  SIGKILL cannot be caught: workers exit when their
pipe closes (:mod:`tuiprof.trace.parallel`).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from typing import IO

# Re-entrant: the signal handler runs in the main thread, which may hold it (registering a file)
# when the signal comes; a plain Lock waited on itself for ever.
_lock = threading.RLock()
_files: set[str] = set()
_processes: set[subprocess.Popen] = set()
_installed = False
_ignored: set[int] = set()  # signals ignored when the handlers were installed (nohup: SIGHUP)
CAUGHT = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)


def register_process(process: subprocess.Popen) -> None:
    with _lock:
        _processes.add(process)


def forget_process(process: subprocess.Popen) -> None:
    with _lock:
        _processes.discard(process)


@contextlib.contextmanager
def temporary_file(
    prefix: str = "tuiprof-", suffix: str = ".json", directory: str | None = None
) -> Iterator[IO[bytes]]:
    """A temporary binary file in ``directory`` (default ``TMPDIR``), removed when the block
    ends, at exit and on a signal."""
    handle = tempfile.NamedTemporaryFile(prefix=prefix, suffix=suffix, delete=False, dir=directory)
    with _lock:
        _files.add(handle.name)
    try:
        yield handle
    finally:
        handle.close()
        _remove(handle.name)


@contextlib.contextmanager
def temporary_directory(prefix: str = "tuiprof-") -> Iterator[str]:
    """A private (0700) directory in ``TMPDIR``, removed with all it holds when the block
    ends, at exit and on a signal."""
    name = tempfile.mkdtemp(prefix=prefix)
    with _lock:
        _files.add(name)
    try:
        yield name
    finally:
        _remove(name)


def _remove(name: str) -> None:
    if os.path.isdir(name) and not os.path.islink(name):
        shutil.rmtree(name, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            os.unlink(name)
    with _lock:
        _files.discard(name)


def clean_up() -> None:
    """Kill registered workers and remove registered files (idempotent, never raises)."""
    with _lock:
        processes, files = list(_processes), list(_files)
    for process in processes:
        with contextlib.suppress(OSError):
            process.kill()
    for name in files:
        _remove(name)


class Terminated(BaseException):
    """SIGTERM or SIGHUP, raised where a caller asked for it (``run --watch``: the job's history
    gets its end line), like KeyboardInterrupt for SIGINT; then :func:`die_of` the signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Terminations:
    """SIGTERM and SIGHUP while a block runs (:func:`terminations_raise`): the first raises
    :class:`Terminated` in the main thread (the block's ``finally`` clauses run), later ones are
    only recorded, and none once ``raising`` is cleared (what must finish, finishes)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.raising = True

    def handler(self, number: int, frame) -> None:
        self.received.append(number)
        if self.raising:
            self.raising = False
            raise Terminated(number)


@contextlib.contextmanager
def terminations_raise() -> Iterator[Terminations]:
    """SIGTERM and SIGHUP raise :class:`Terminated` while the block runs (main thread only); the
    handlers before are put back after it, and the caller ends with :func:`die_of` if any came.
    A signal the process ignores stays ignored (``nohup tuiprof run --watch``: SIGHUP)."""
    terminations = Terminations()
    previous = {
        signum: signal.signal(signum, terminations.handler)
        for signum in (signal.SIGTERM, signal.SIGHUP)
        if signum not in _ignored and signal.getsignal(signum) != signal.SIG_IGN
    }
    try:
        yield terminations
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def die_of(signum: int) -> None:
    """Clean up, then end this process by the signal's default action (exit status 128+N)."""
    clean_up()
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def install_signal_handlers() -> None:
    """Clean up on SIGTERM, SIGHUP and SIGINT, then behave as before.  Main thread only."""
    global _installed
    if _installed or threading.current_thread() is not threading.main_thread():
        return
    _installed = True
    atexit.register(clean_up)
    for signum in CAUGHT:
        previous = signal.getsignal(signum)
        if previous == signal.SIG_IGN:
            _ignored.add(signum)

        def handler(number, frame, previous=previous):
            if callable(previous):
                clean_up()
                return previous(number, frame)  # SIGINT: KeyboardInterrupt, as before
            if previous == signal.SIG_IGN:
                clean_up()
                return None
            die_of(number)
            return None

        signal.signal(signum, handler)
