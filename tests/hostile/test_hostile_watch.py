"""What ``tuiprof capture`` and the watcher read and write in a watch folder and the registry of
watched jobs (issue 42): files tuiprof wrote itself, which a stranger could have planted or
damaged, are checked like a trace -- no link followed, no number past its type, one line and
exit 2 for what cannot be used.  The oracles are the files on disk and the exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.processes import bytes_read
from tests.helpers.watch_history import history_lines


def _tuiprof(*argv: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuiprof", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout,
        env=env or dict(os.environ),
    )


def _watch_folder(path: Path, pid: int) -> Path:
    """A folder as a running watched job leaves it: the history's header, no end line."""
    path.mkdir(mode=0o700)
    header = {"format": "tuiprof-watch", "version": 2, "pid": pid, "started": 1.0, "what": "x.py", "settings": {}}
    (path / "watch.jsonl").write_text(json.dumps(header) + "\n")
    return path


@pytest.mark.parametrize("target", ["nowhere", "a file of mine"])
def test_capture_never_follows_a_planted_request_link(tmp_path, target: str) -> None:
    """Issue 42, item 6: ``capture DIR`` opened ``DIR/capture.request`` with O_CREAT alone, so a
    planted link made its target outside the folder (or opened a file of the user's)."""
    directory = _watch_folder(tmp_path / "w", os.getpid())
    outside = tmp_path / "outside"
    outside.mkdir()
    aim = outside / "created"
    if target == "a file of mine":
        aim.write_text("mine\n")
    (directory / "capture.request").symlink_to(aim)
    result = _tuiprof("capture", str(directory), "--timeout", "0.3")
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "capture.request: is not a request of yours" in result.stderr
    assert list(outside.iterdir()) == ([aim] if target == "a file of mine" else [])
    if target == "a file of mine":
        assert aim.read_text() == "mine\n"


def test_the_watcher_does_not_take_a_planted_request_link(tmp_path) -> None:
    """A link named capture.request to a file of the user's looked like the user's request
    (``stat`` follows the link to its target's owner); it is removed, not taken."""
    from tuiprof.capture.config import CaptureConfig
    from tuiprof.capture.watch import Watcher, WatchSettings

    directory = tmp_path / "w"
    directory.mkdir(mode=0o700)
    (tmp_path / "mine").write_text("")
    watcher = Watcher(directory, WatchSettings(), CaptureConfig(), "x.py", on="manual")
    (directory / "capture.request").symlink_to(tmp_path / "mine")
    assert not watcher._request_waiting()
    assert not (directory / "capture.request").is_symlink()
    (directory / "capture.request").write_text("")  # the user's own request is taken
    assert watcher._request_waiting()


def _registry_entry(runtime: Path, name: str, content: bytes) -> Path:
    folder = runtime / "tuiprof" / "watching"
    folder.mkdir(parents=True, mode=0o700, exist_ok=True)
    entry = folder / name
    entry.write_bytes(content)
    entry.chmod(0o600)
    return entry


@pytest.mark.parametrize(
    "case, problem",
    [
        ("a NUL in the path", "is not trusted (not one absolute path)"),
        ("a relative path", "is not trusted (not one absolute path)"),
        ("a pid past 32 bits", "not a process id"),
        ("a pid past a C long", "not a process id"),
        ("a pid of 0", "not a process id"),
        ("5,000 digits", "cannot be used (File name too long)"),
        ("an entry of 100 kB", "is not trusted"),
    ],
)
def test_capture_pid_with_a_malformed_registry_entry_is_one_line(tmp_path, case: str, problem: str) -> None:
    """Issue 42, item 9: a NUL in the stored path raised ValueError, a pid past 32 bits or a C long
    OverflowError (exit 1).  Each is one line and exit 2 now, and nothing is requested."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    directory = _watch_folder(tmp_path / "w", os.getpid())
    pid = {
        "a pid past 32 bits": str(2**32 + os.getpid()),
        "a pid past a C long": str(2**64),
        "a pid of 0": "0",
        "5,000 digits": "9" * 5000,
    }.get(case, str(os.getpid()))
    content = {
        "a NUL in the path": bytes(directory) + b"\0/etc",
        "a relative path": b"w",
        "an entry of 100 kB": bytes(directory) + b"/" * 100_000,
    }.get(case, bytes(directory))
    if len(pid) < 200:
        _registry_entry(runtime, pid, content)
    result = _tuiprof("capture", pid, "--timeout", "0.3", env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)))
    assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, result.stderr
    assert problem in result.stderr and "internal error" not in result.stderr, result.stderr
    assert not (directory / "capture.request").exists()


def _paused_job(
    tmp_path: Path, runtime: Path, pause_s: float = 60, nohup: bool = False
) -> tuple[subprocess.Popen, Path, Path]:
    """``run --watch`` of the watch tests' tiny MLP (20 steps), paused after step 5 (its marker says
    so); ``nohup``: started with SIGHUP ignored, as ``nohup`` starts it."""
    directory, marker = tmp_path / "w", tmp_path / "paused"
    script = str(ROOT / "tests" / "helpers" / "watch_script.py")
    job = subprocess.Popen(
        [sys.executable, "-m", "tuiprof", "run", "--watch", str(directory), script, "20"]
        + ["--pause-at", "5", "--pause-s", str(pause_s), "--marker", str(marker)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, XDG_RUNTIME_DIR=str(runtime)),
        preexec_fn=(lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN)) if nohup else None,
    )
    deadline = time.monotonic() + 90
    while not marker.exists() and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.05)
    assert marker.exists(), job.communicate(timeout=30)
    time.sleep(0.6)  # the step lines are written every 0.5 s
    return job, directory, runtime / "tuiprof" / "watching" / str(job.pid)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGKILL])
def test_a_watched_job_ended_by_a_signal_leaves_a_history_with_an_end_line(tmp_path, signum: int) -> None:
    """Issue 42, item 13: SIGTERM to ``run --watch`` left no end line and its registry entry
    behind.  Now SIGTERM and SIGHUP end the script like Ctrl-C (its ``finally`` clauses run), the
    history ends ``terminated``, the entry goes, and the process dies of the signal.  SIGKILL
    cannot be caught: the next reader writes the ``killed`` end line once the job's lock on the
    history is gone -- and not while the job runs."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    job, directory, entry = _paused_job(tmp_path, runtime)
    try:
        assert entry.exists()
        running = _tuiprof("summary", str(directory), "--view", "watch", "--format", "json")
        assert running.returncode == 0, running.stderr
        assert not [line for line in history_lines(directory) if line.get("e") == "end"]  # alive: no reader ends it
        started = time.monotonic()
        job.send_signal(signum)
        _, stderr = job.communicate(timeout=30)
        ended_in = time.monotonic() - started
    finally:
        job.kill()
    assert job.returncode == -signum, stderr
    assert ended_in < 5, ended_in
    lines = history_lines(directory)
    steps = [line["s"] for line in lines if "s" in line]
    if signum == signal.SIGKILL:
        assert "e" not in lines[-1] and steps == list(range(1, len(steps) + 1))  # no word from the job
        read = _tuiprof("summary", str(directory), "--view", "watch", "--format", "json")
        assert read.returncode == 0, read.stderr
        lines = history_lines(directory)
        assert lines[-1] == {"e": "end", "step": steps[-1], "status": "killed"}
        again = _tuiprof("summary", str(directory), "--view", "watch", "--format", "json")
        assert history_lines(directory) == lines and again.stdout == read.stdout  # written once
    else:
        assert lines[-1] == {"e": "end", "step": 5, "status": "terminated"}, lines[-3:]
        assert "5 steps watched (terminated)" in stderr
        assert not entry.exists()
        assert steps == list(range(1, 6))


def test_a_history_is_read_in_pieces_and_a_planted_huge_one_costs_no_memory(tmp_path) -> None:
    """A 3 GB sparse watch.jsonl after a valid header was read whole (``file.read()``) before
    its first line was checked: now in pieces of 16 MB, and a line past 64 kB is refused."""
    from tuiprof.errors import TraceError
    from tuiprof.trace.watch import read_history

    directory = _watch_folder(tmp_path / "w", 1)
    with open(directory / "watch.jsonl", "r+b") as file:
        file.truncate(3 << 30)  # NULs after the header: no disk
    before = bytes_read()
    with pytest.raises(TraceError, match="watch.jsonl:2: the line is too long"):
        read_history(directory)
    assert bytes_read() - before < 64 << 20


def test_a_watched_job_under_nohup_goes_on_after_sighup(tmp_path) -> None:
    """``nohup tuiprof run --watch``: SIGHUP is ignored, and stays ignored while the script runs
    (the handler that writes the end line on SIGHUP is only for a signal the job would die of)."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    job, directory, _ = _paused_job(tmp_path, runtime, pause_s=2, nohup=True)
    try:
        job.send_signal(signal.SIGHUP)
        _, stderr = job.communicate(timeout=60)
    finally:
        job.kill()
    assert job.returncode == 0, stderr
    assert history_lines(directory)[-1] == {"e": "end", "step": 20, "status": "finished"}


def test_a_script_name_that_is_no_utf8_is_written_and_read_back(tmp_path) -> None:
    """A script whose file name has a byte that is no UTF-8 (argv[0] holds a lone surrogate):
    orjson refused the header, and ``tuiprof.watch`` raised in the user's job before its first
    step.  The byte is written as its escape, and the history reads back."""
    from tuiprof.trace.watch import event_line, header_line, read_history

    name = os.fsdecode(b"train\x9b.py")
    directory = tmp_path / "w"
    directory.mkdir()
    (directory / "watch.jsonl").write_bytes(
        header_line(1, 0.0, name, {}) + event_line("failure", step=1, what=f"cannot write {name}")
    )
    lines = history_lines(directory)
    assert lines[0]["what"] == "train\\x9b.py" and lines[1]["what"] == "cannot write train\\x9b.py"
    assert read_history(directory).what == "train\\x9b.py"
