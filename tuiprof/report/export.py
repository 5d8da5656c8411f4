"""Writing an export file without following anyone's symlink or overwriting anything.

An export name is predictable (``tuiprof-operators-<stem>.csv``), so a
symlink planted under that name would make a plain ``write_text`` overwrite
its target (a shell rc file) with text chosen by the trace.  Files are
created exclusively (``O_CREAT | O_EXCL | O_NOFOLLOW``); when the name is
taken, ``-1``, ``-2``... are tried.  Failures raise :class:`ExportError`,
whose message names the folder and the reason, for the UI to show.
"""

from __future__ import annotations

import os
from pathlib import Path

from tuiprof.report.plain import plain

_ATTEMPTS = 1000
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class ExportError(Exception):
    """An export that could not be written; ``str()`` is one plain line for the user."""


def write_export(directory: Path, stem: str, suffix: str, content: str) -> Path:
    """Write ``content`` to a new file ``directory/stem+suffix`` (or ``stem-N+suffix``) and return its path.

    ``stem`` may come from a trace's file name: path separators and control
    characters in it are replaced, so the file always lands in ``directory``.
    """
    safe_stem = "".join("_" if ch in "/\\\x00" or not ch.isprintable() else ch for ch in stem)[:150] or "export"
    data = content.encode("utf-8")
    for attempt in range(_ATTEMPTS):
        name = f"{safe_stem}{suffix}" if attempt == 0 else f"{safe_stem}-{attempt}{suffix}"
        path = Path(directory) / name
        try:
            fd = os.open(path, _FLAGS, 0o644)
        except FileExistsError:
            continue  # taken (a file, or a symlink we must not follow): try the next name
        except OSError as exc:
            raise ExportError(f"cannot write an export into {plain(str(directory))}: {exc.strerror}") from None
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            path.unlink(missing_ok=True)
            raise ExportError(f"cannot write {plain(str(path))}: {exc.strerror}") from None
        return path
    raise ExportError(f"cannot write an export into {plain(str(directory))}: {_ATTEMPTS} names are taken")
