"""Which watch folder a watched process writes: ``tuiprof capture PID``'s per-user registry.

A watched job (rank 0 under torchrun: the only one that takes capture
requests) writes one file per process, ``REGISTRY/<pid>``, holding the
absolute path of its watch folder, and removes it when the watch closes.
``REGISTRY`` is ``$XDG_RUNTIME_DIR/tuiprof/watching`` (per user, cleared at
logout), else ``$XDG_CACHE_HOME/tuiprof/watching`` (``~/.cache`` when unset).

Nothing in it can be used by another user: the folder is created 0700, each
entry 0600, and ``capture PID`` trusts an entry only when

- the folder and the entry are this user's and open to nobody else
  (a regular file, mode without group/other bits),
- the process ``PID`` is alive and this user's (``kill(pid, 0)``), and
- the folder it names is this user's and its history's header names ``PID``
  (an entry left by a killed job, whose pid was reused since, names a folder
  whose header names another pid: stale).

The request then goes through the folder, as ``capture DIR`` (the folder's
own owner checks apply).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tuiprof.errors import TraceError
from tuiprof.trace.cache import cache_root
from tuiprof.trace.source import read_regular_file
from tuiprof.trace.watch import HistoryReader, history_path

MAX_PID = 2**31 - 1  # a pid_t: kill() of a larger number raised OverflowError (issue 42)
ENTRY_BYTES = 4096  # PATH_MAX: an entry holds one absolute path


def registry_folder() -> Path:
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return Path(runtime) / "tuiprof" / "watching"
    return cache_root() / "watching"


def pid_from(text: str) -> int:
    """``capture PID``'s number, if a process could have it; one TraceError (exit 2) otherwise."""
    if len(text) > len(str(MAX_PID)) or not 0 < int(text) <= MAX_PID:
        raise TraceError(
            f"capture {text[:24]}",
            f"not a process id (1 to {MAX_PID})",
            "pass the pid of a job started with run --watch, or its watch folder",
        )
    return int(text)


def register(pid: int, directory: Path) -> Path:
    """Write ``REGISTRY/<pid>`` naming ``directory``; returns the entry (removed by :func:`unregister`).

    Raises OSError when it cannot be written (the watcher then goes on without it)."""
    folder = registry_folder()
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    _check_private(folder, stat.S_ISDIR)
    entry = folder / str(pid)
    entry.unlink(missing_ok=True)  # a dead job's entry under a reused pid
    fd = os.open(entry, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, os.fsencode(str(directory.resolve())))
    finally:
        os.close(fd)
    return entry


def unregister(entry: Path) -> None:
    entry.unlink(missing_ok=True)


def watched_directory(pid: int) -> Path:
    """The watch folder of this user's live watched process ``pid``; one TraceError (exit 2) otherwise."""
    source = f"capture {pid}"
    folder = registry_folder()
    entry = folder / str(pid)
    try:
        _check_private(folder, stat.S_ISDIR)
        _check_private(entry, stat.S_ISREG)
        directory = _named_folder(read_regular_file(entry, ENTRY_BYTES))
    except FileNotFoundError:
        raise TraceError(
            source,
            f"no watched process of yours has this pid (no {entry})",
            "pass the pid of a job started with run --watch, or its watch folder",
        ) from None
    except (OSError, ValueError) as exc:
        raise TraceError(
            source, f"its registry entry {entry} is not trusted ({exc})", "pass the watch folder instead"
        ) from None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        raise TraceError(
            source, f"the process has ended (stale entry {entry})", "remove the entry; pass a running job's pid"
        ) from None
    except PermissionError:
        raise TraceError(
            source, "the process belongs to another user", "ask for captures only of your own jobs"
        ) from None
    if _header_pid(directory) != pid:
        raise TraceError(
            source,
            f"stale entry {entry}: {directory} is not this process's watch folder",
            "remove the entry; pass the watch folder instead",
        )
    return directory


def _named_folder(data: bytes) -> Path:
    """The folder an entry names: one absolute path, as :func:`register` writes it (ValueError otherwise:
    a NUL in it raised from ``stat``, exit 1)."""
    if not data.startswith(b"/") or b"\0" in data:
        raise ValueError("not one absolute path")
    return Path(os.fsdecode(data))


def _check_private(path: Path, kind) -> None:
    """This user's, of the expected kind, open to nobody else (ValueError otherwise)."""
    info = os.lstat(path)
    if not kind(info.st_mode):
        raise ValueError("not a regular file" if kind is stat.S_ISREG else "not a folder")
    if info.st_uid != os.getuid():
        raise ValueError("owned by another user")
    if info.st_mode & 0o077:
        raise ValueError(f"mode {stat.S_IMODE(info.st_mode):o}, open to other users")


def _header_pid(directory: Path) -> int | None:
    """The pid in the folder's history header, when the folder is this user's and holds one."""
    try:
        if directory.stat().st_uid != os.getuid() or not history_path(directory).is_file():
            return None
        reader = HistoryReader(directory)
        reader.read_new()
        return reader.history.pid
    except (OSError, TraceError):
        return None
