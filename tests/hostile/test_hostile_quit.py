"""Quit works at every moment: q, Ctrl-C, SIGTERM and SIGHUP end the explorer (and its diff
mode) within seconds while an analysis is running, the terminal restored and temporary files
removed (tui/table_app.py: AbandonableExecutor).  The analysis is made slow on purpose: two
minutes of pure Python in place of the real one."""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import subprocess
import sys
import termios
import threading
import time

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.helpers.terminal import LEAVE_ALT_SCREEN, drain_until_exit, read_until

SAMPLE = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
SLOW_S = 120
QUIT_WITHIN_S = 10
HARNESS = f"""
import sys, time
import tuiprof.tui.diff_app as diff_app, tuiprof.tui.sources as sources

def slow(real):
    def run(*args, **kwargs):
        deadline = time.monotonic() + {SLOW_S}
        while time.monotonic() < deadline:  # pure Python: it holds the GIL but hands it over
            pass
        return real(*args, **kwargs)
    return run

sources.analyze = slow(sources.analyze)
diff_app.load_side = slow(diff_app.load_side)
from tuiprof import cli
sys.exit(cli.main(sys.argv[1:]))
"""


def _terminal_of_its_own() -> None:
    """The pty becomes the child's controlling terminal (/dev/tty: a FIFO's explorer reads keys there)."""
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def _explorer(args: list[str], env: dict) -> tuple[subprocess.Popen, int]:
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-c", HARNESS, *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env={**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24", "PYTHONPATH": str(ROOT), **env},
        preexec_fn=_terminal_of_its_own,
    )
    os.close(follower)
    return process, leader


@pytest.mark.parametrize(
    "command, waiting_for", [(["open"], b"analysing"), (["diff", str(SAMPLE)], b"loading A")], ids=["open", "diff"]
)
@pytest.mark.parametrize(
    "how, code",
    [("q", 130), ("ctrl+c", 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)],
    ids=["q", "ctrl+c", "SIGTERM", "SIGHUP"],
)
def test_quit_while_the_analysis_runs(tmp_path, command, waiting_for, how, code) -> None:
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    fifo = tmp_path / "trace.json.gz"  # a FIFO: spooled to a temporary file in TMPDIR, which must go
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(SAMPLE.read_bytes()), daemon=True)
    writer.start()
    process, leader = _explorer([*command, str(fifo)], {"TMPDIR": str(temporary)})
    try:
        screen = read_until(leader, waiting_for, 60)
        assert waiting_for in screen, screen[-400:]
        quit_at = time.monotonic()
        if how in ("q", "ctrl+c"):
            os.write(leader, b"q" if how == "q" else b"\x03")
        else:
            process.send_signal(how)
        rest = drain_until_exit(leader, process, QUIT_WITHIN_S)
        exited = process.wait(timeout=max(0.1, QUIT_WITHIN_S - (time.monotonic() - quit_at)))
        took = time.monotonic() - quit_at
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    assert exited == code and took < QUIT_WITHIN_S
    assert LEAVE_ALT_SCREEN in rest
    assert list(temporary.iterdir()) == []
