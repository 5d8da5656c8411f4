"""Reading an app's bytes from a real pseudo-terminal (tests/tui/test_terminal.py,
tests/hostile/test_hostile_quit.py)."""

from __future__ import annotations

import os
import select
import subprocess
import time

LEAVE_ALT_SCREEN = b"\x1b[?1049l"
SHOW_CURSOR = b"\x1b[?25h"


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    """What the app writes until ``needle`` shows (or ``timeout`` seconds pass)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and needle not in seen:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                seen += os.read(fd, 65536)
            except OSError:
                break
    return seen


def drain_until_exit(fd: int, process: subprocess.Popen, timeout: float) -> bytes:
    """What the app writes until it exits (and a moment after, for the last bytes)."""
    seen = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        exited = process.poll() is not None
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            try:
                seen += os.read(fd, 65536)
                continue
            except OSError:
                break
        if exited:
            break
    return seen
