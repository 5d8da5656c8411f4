"""Whether a process tuiprof started is still there (tests/hostile: no worker outlives tuiprof)."""

from __future__ import annotations

from pathlib import Path


def running(pid: int) -> bool:
    """The process exists and is not a zombie (Linux: /proc)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
