"""The apps in a real pseudo-terminal: a signal quits them with the terminal restored."""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES, make_watch_folder
from tests.helpers.terminal import LEAVE_ALT_SCREEN, SHOW_CURSOR, drain_until_exit, read_until


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
@pytest.mark.parametrize("app", ["explorer", "watch"])
def test_signal_restores_the_terminal(tmp_path, app: str, signum: int) -> None:
    """Every app quits on a signal as q would (a bare App, the watch app once, died in the
    alternate screen with the signal's default action)."""
    if app == "explorer":
        path, ready = SAMPLES / "resnet18_cpu.pt.trace.json.gz", b"Top module"
    else:  # a running job's watch folder: the app is following it
        path, ready = make_watch_folder(tmp_path, steps=44, ended=False), b"train.py"
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tuiprof", "open", str(path)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    try:
        screen = read_until(leader, ready, 60)
        assert ready in screen, screen[-400:]
        process.send_signal(signum)
        rest = drain_until_exit(
            leader, process, 30
        )  # a terminal keeps reading: the app's last frames must not block it
        code = process.wait(timeout=1)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    assert code == 128 + signum
    assert LEAVE_ALT_SCREEN in rest and SHOW_CURSOR in rest


def test_a_truncated_gzip_ends_the_explorer_with_one_line_and_exit_2(tmp_path) -> None:
    """Its first bytes pass the check made before the explorer starts, and the load found
    the damage after the first frame: a full-screen error waited for q.  Now the explorer
    ends by itself, restores the terminal, then prints one line and exits 2."""
    truncated = tmp_path / "truncated.json.gz"
    truncated.write_bytes((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()[:100_000])
    leader, follower = pty.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "80", "LINES": "24"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tuiprof", "open", str(truncated)],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    os.close(follower)
    try:
        seen = drain_until_exit(leader, process, 60)  # no key is ever sent
        code = process.wait(timeout=1)
    finally:
        if process.poll() is None:
            process.kill()
        os.close(leader)
    assert code == 2
    after = seen.rpartition(LEAVE_ALT_SCREEN)[2]  # what stays on the terminal once the app is gone
    text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", after).decode()  # the terminal modes turned off
    lines = [line for line in text.splitlines() if line.strip()]
    # one message, wrapped at the terminal's width as every notice is (print_notice)
    assert len([line for line in lines if not line.startswith("  ")]) == 1 and max(map(len, lines)) <= 80, lines
    assert lines[0].startswith("tuiprof: ") and "gzip file is truncated" in " ".join(map(str.strip, lines)), lines
