"""Watching a job (issue 27): the history, the slow rule, captures and the faults.

The job is ``tests/helpers/watch_script.py``: a tiny MLP whose DataLoader sleeps
``--stall-ms`` per batch from step 50 on -- the stall, its step and its cause
are known by construction.  The oracles read the files themselves (the
history's JSON lines, the capture's Chrome trace events), never through the
code under test.
"""

from __future__ import annotations

import gzip
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.cli import tuiprof
from tests.helpers.watch_history import history_lines
from tuiprof.errors import TraceError

SCRIPT = str(ROOT / "tests" / "helpers" / "watch_script.py")
STALL_FROM, STALL_MS = 50, 10.0
# A short rule for a short job: judged from step 5+20 on, 3 slow steps in a row.
FAST_RULE = ["--watch-warmup", "5", "--watch-threshold", "1.2:20:3", "--watch-cooldown", "5"]


def _kept_healthy(lines: list[dict]) -> dict:
    """The healthy capture: the last one not dropped (one whose steps were outliers is taken again)."""
    dropped = {line["path"] for line in lines if line.get("e") == "dropped"}
    return [c for c in lines if c.get("e") == "capture" and c["trigger"] == "healthy" and c["path"] not in dropped][-1]


def _trace_steps(path: Path) -> dict[int, dict[str, float]]:
    """Per ProfilerStep#N of a capture, read from its events: the step's and its data loading's time (us)."""
    with gzip.open(path) as file:
        events = [e for e in json.load(file)["traceEvents"] if e.get("ph") == "X"]
    steps = {}
    for event in events:
        if event["name"].startswith("ProfilerStep#"):
            start, end = event["ts"], event["ts"] + event["dur"]
            loading = sum(
                e["dur"] for e in events if e["name"].startswith("enumerate(DataLoader)") and start <= e["ts"] < end
            )
            steps[int(event["name"].split("#")[1])] = {"step": event["dur"], "data": loading}
    return steps


@pytest.fixture(scope="module")
def stalled_run(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    directory = tmp_path_factory.mktemp("watch") / "w"
    result = tuiprof(
        "run",
        "--watch",
        str(directory),
        *FAST_RULE,
        SCRIPT,
        "80",
        "--stall-from",
        str(STALL_FROM),
        "--stall-ms",
        str(STALL_MS),
    )
    return directory, result


def test_a_stall_from_step_50_is_captured_and_shows_as_data_loading(stalled_run) -> None:
    directory, result = stalled_run
    assert result.returncode == 0, result.stderr
    lines = history_lines(directory)
    steps = [line for line in lines if "s" in line]
    assert [s["s"] for s in steps] == list(range(1, 81))
    captures = [line for line in lines if line.get("e") == "capture"]
    healthy = [_kept_healthy(lines)]
    slow = [c for c in captures if c["trigger"] == "slow" and c["first_step"] >= STALL_FROM]
    assert healthy[0]["last_step"] < STALL_FROM, captures
    assert slow, captures
    # Caught within 5 steps of the stall's first step, which the trigger names.
    trigger = [line for line in lines if line.get("e") == "trigger" and line["trigger"] == "slow"][-1]
    assert STALL_FROM <= trigger["step"] <= STALL_FROM + 5 and trigger["first_slow"] == STALL_FROM, trigger
    # The capture's steps, from its own events: the job's step numbers, each loading for >= the stall.
    traced = _trace_steps(directory / slow[0]["path"])
    assert sorted(traced) == list(range(slow[0]["first_step"], slow[0]["last_step"] + 1))
    assert all(s["data"] >= STALL_MS * 1000 for s in traced.values()), traced
    assert all(s["data"] < STALL_MS * 1000 for s in _trace_steps(directory / healthy[0]["path"]).values())
    # The history's data loading times say the same, without the profiler.
    assert all(s["d"] >= STALL_MS / 1000 for s in steps if s["s"] >= STALL_FROM)


def test_the_comparison_with_the_healthy_capture_names_data_loading_first(stalled_run) -> None:
    from rich.console import Console

    from tuiprof.analysis.watch import compare_captures
    from tuiprof.report.watch import comparison_text

    directory, _ = stalled_run
    captures = [line for line in history_lines(directory) if line.get("e") == "capture"]
    healthy = _kept_healthy(history_lines(directory))
    slow = next(c for c in captures if c["trigger"] == "slow" and c["first_step"] >= STALL_FROM)
    comparison = compare_captures(str(directory / healthy["path"]), str(directory / slow["path"]))
    assert comparison.parts[0].part == "data loading"
    assert comparison.parts[0].delta_us >= STALL_MS * 1000 * 0.9
    console = Console(width=200, color_system=None, record=True, file=open(os.devnull, "w"))
    console.print(comparison_text(comparison))
    text = console.export_text().splitlines()
    # the verdict first (on a loaded machine the healthy trace's steps can be noisy enough for it to
    # say that no change per step is above the noise; then it says that)
    assert text[0].startswith("B is ") and "slower" in text[0] or text[0].startswith("no change per step")
    where = text.index("where the step time went (median per step, healthy -> this capture):")
    assert text[where + 1].strip().startswith("data loading: +")


def test_summary_view_watch_lists_the_captures_against_the_healthy_median(stalled_run) -> None:
    directory, _ = stalled_run
    lines = history_lines(directory)
    result = tuiprof("summary", str(directory), "--view", "watch", "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    captures = [line for line in lines if line.get("e") == "capture"]
    assert [(r["trigger"], r["first_step"], r["last_step"]) for r in rows] == [
        (c["trigger"], c["first_step"], c["last_step"]) for c in captures
    ]
    wall = {line["s"]: line["w"] for line in lines if "s" in line}
    own = {line["s"]: line["w"] - line.get("q", 0.0) for line in lines if "s" in line}  # less the wait for a CPU

    def median_us(capture: dict, times: dict[int, float]) -> float:
        return statistics.median(times[s] for s in range(capture["first_step"], capture["last_step"] + 1)) * 1e6

    healthy = _kept_healthy(lines)
    for row, capture in zip(rows, captures):
        assert row["path"] == str(directory / capture["path"])
        assert row["median_step_us"] == pytest.approx(median_us(capture, wall), abs=1e-3)  # exports: times to the ns
        if row["trigger"] != "healthy":
            ratio = median_us(capture, own) / median_us(healthy, own)
            assert row["vs_healthy"] == pytest.approx(ratio, abs=1e-3)  # ratios: 3 decimals
            assert row["verdict"] == ("slower" if ratio > 1.2 else "not slower")
    text = tuiprof("summary", str(directory), "--view", "watch")
    assert text.returncode == 0 and "80 steps, finished" in text.stdout
    assert healthy["path"].removesuffix(".pt.trace.json.gz") in text.stdout


def test_summary_view_watch_refuses_sort_in_one_line(stalled_run) -> None:
    result = tuiprof("summary", str(stalled_run[0]), "--view", "watch", "--sort", "trigger")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--sort trigger" in result.stderr


def test_capture_on_demand_arrives_within_two_steps(tmp_path) -> None:
    directory, marker = tmp_path / "w", tmp_path / "paused"
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuiprof",
            "run",
            "--watch",
            str(directory),
            "--watch-warmup",
            "200",
            SCRIPT,
            "60",
            "--pause-at",
            "30",
            "--pause-s",
            "2",
            "--marker",
            str(marker),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the job never reached step 30"
        asked = tuiprof("capture", str(directory), "--timeout", "60")  # step 30 has ended; step 31 runs
    finally:
        job.communicate(timeout=120)
    assert job.returncode == 0
    assert asked.returncode == 0, asked.stderr
    demand = [line for line in history_lines(directory) if line.get("e") == "capture" and line["trigger"] == "demand"]
    assert len(demand) == 1
    # Asked during step 31: it ends, the profiler warms up in 32, records from 33 -- two steps on.
    assert demand[0]["first_step"] <= 33, demand
    assert f"steps {demand[0]['first_step']}-{demand[0]['last_step']} captured" in asked.stderr


def test_capture_by_pid_finds_the_watch_folder_and_captures(tmp_path) -> None:
    directory, marker, runtime = tmp_path / "w", tmp_path / "paused", tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    job = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tuiprof",
            "run",
            "--watch",
            str(directory),
            "--watch-warmup",
            "200",
            SCRIPT,
            "60",
            "--pause-at",
            "30",
            "--pause-s",
            "2",
            "--marker",
            str(marker),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    entry = runtime / "tuiprof" / "watching" / str(job.pid)
    try:
        deadline = time.monotonic() + 90
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), "the job never reached step 30"
        # the registry entry: the job's own, private, naming its folder
        assert entry.read_text() == str(directory.resolve()) and entry.stat().st_mode & 0o777 == 0o600
        asked = subprocess.run(
            [sys.executable, "-m", "tuiprof", "capture", str(job.pid), "--timeout", "60"],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
            env=env,
        )
    finally:
        job.communicate(timeout=120)
    assert job.returncode == 0
    assert asked.returncode == 0, asked.stderr
    demand = [line for line in history_lines(directory) if line.get("e") == "capture" and line["trigger"] == "demand"]
    assert len(demand) == 1 and demand[0]["first_step"] <= 33, demand
    assert not entry.exists()  # removed when the watch closed


def _registry_entry(runtime: Path, pid: int, directory: Path, mode: int = 0o600) -> Path:
    folder = runtime / "tuiprof" / "watching"
    folder.mkdir(parents=True, mode=0o700, exist_ok=True)
    entry = folder / str(pid)
    entry.write_text(str(directory))
    entry.chmod(mode)
    return entry


def _watch_folder(path: Path, pid: int) -> Path:
    path.mkdir(mode=0o700)
    header = {"format": "tuiprof-watch", "version": 1, "pid": pid, "started": 1.0, "what": "x.py", "settings": {}}
    (path / "watch.jsonl").write_text(json.dumps(header) + "\n")
    return path


@pytest.mark.parametrize("case", ["not watched", "ended", "pid reused", "entry open to others"])
def test_capture_by_pid_refuses_what_it_cannot_trust_in_one_line(tmp_path, case: str) -> None:
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    alive = os.getpid()  # this test's process: alive, ours
    ended = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    ).stdout.strip()
    pid, problem = {
        "not watched": (alive, "no watched process of yours has this pid"),
        "ended": (int(ended), "the process has ended"),
        "pid reused": (alive, "is not this process's watch folder"),
        "entry open to others": (alive, "mode 644, open to other users"),
    }[case]
    if case != "not watched":
        header_pid = 1 if case == "pid reused" else pid  # the folder of another (earlier) process
        _registry_entry(
            runtime, pid, _watch_folder(tmp_path / "w", header_pid), 0o644 if case == "entry open to others" else 0o600
        )
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "capture", str(pid), "--timeout", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"tuiprof: capture {pid}: ") and problem in result.stderr, result.stderr
    assert not (tmp_path / "w" / "capture.request").exists()


def test_capture_by_pid_refuses_another_users_process(tmp_path, monkeypatch) -> None:
    from tuiprof.capture import watch_registry

    def not_permitted(pid: int, signal: int) -> None:  # kill(pid, 0) on another user's process (we may be root here)
        raise PermissionError(1, "Operation not permitted")

    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    _registry_entry(runtime, 4242, _watch_folder(tmp_path / "w", 4242))
    monkeypatch.setattr(watch_registry.os, "kill", not_permitted)
    with pytest.raises(TraceError, match="belongs to another user"):
        watch_registry.watched_directory(4242)


def test_capture_refuses_a_folder_that_is_not_watched(tmp_path) -> None:
    result = tuiprof("capture", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "not a watch folder" in result.stderr


@pytest.mark.parametrize("case", ["under a file", "another user's"])
def test_an_unusable_watch_dir_is_one_line_and_exit_2_before_the_script_starts(tmp_path, case) -> None:
    marker = tmp_path / "started"
    script = tmp_path / "job.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    if case == "under a file":
        (tmp_path / "file").write_text("")
        directory = tmp_path / "file" / "w"
    else:
        if os.getuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        directory = tmp_path / "w"
        directory.mkdir()
        os.chown(directory, 65534, 65534)
    result = tuiprof("run", "--watch", str(directory), str(script))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith(f"tuiprof: --watch {directory}: ")
    assert not marker.exists()


def test_a_crashing_script_leaves_a_readable_history(tmp_path) -> None:
    from tuiprof.trace.watch import read_history

    directory = tmp_path / "w"
    result = tuiprof("run", "--watch", str(directory), SCRIPT, "40", "--crash-at", "20")
    assert result.returncode == 1
    assert "RuntimeError: crashed on purpose at step 20" in result.stderr  # the script's own traceback
    history = read_history(directory)
    assert history.steps == list(range(1, 20)) and history.end_status == "crashed"
    assert len(history_lines(directory)) == 1 + 19 + 2 + 1  # header, steps, healthy trigger and capture, end


# ------------------------------------------------------------------ in this process (tuiprof.watch)


def _train(watcher, steps: int, slow_steps: range = range(0), slow_s: float = 0.02) -> None:
    import torch
    from torch import nn

    model = nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(1, steps + 1):
        loss = model(torch.randn(4, 8)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step in slow_steps:
            time.sleep(slow_s)
        if watcher.on == "manual":
            watcher.step()


def test_a_profiler_that_cannot_start_is_written_down_and_the_job_goes_on(tmp_path) -> None:
    import torch

    import tuiprof

    with torch.profiler.profile():  # another profiler is active: the watcher's cannot start
        with tuiprof.watch(tmp_path / "w", warmup_steps=2) as watcher:
            _train(watcher, 10)
    lines = history_lines(tmp_path / "w")
    assert [line["s"] for line in lines if "s" in line] == list(range(1, 11))
    failures = [line for line in lines if line.get("e") == "failure"]
    assert len(failures) == 1 and failures[0]["step"] == 2 and "another profiler is recording" in failures[0]["what"]
    assert not [line for line in lines if line.get("e") == "capture"] and lines[-1]["status"] == "finished"


def test_a_full_disk_during_a_capture_is_written_down_and_the_job_goes_on(tmp_path, monkeypatch) -> None:
    import errno

    import tuiprof
    from tuiprof.capture import session

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(session, "write_trace", full)
    with tuiprof.watch(tmp_path / "w", warmup_steps=2, on="manual") as watcher:
        _train(watcher, 10)
    lines = history_lines(tmp_path / "w")
    failures = [line for line in lines if line.get("e") == "failure"]
    assert len(failures) == 1 and "No space left on device" in failures[0]["what"], lines
    assert [line["s"] for line in lines if "s" in line] == list(range(1, 11))
    assert sorted(p.name for p in (tmp_path / "w").iterdir()) == ["profiler.log", "watch.jsonl"]  # no partial trace


def test_captures_stay_within_the_limit_oldest_slow_first_healthy_kept(tmp_path) -> None:
    import tuiprof

    directory = tmp_path / "w"
    # healthy at 3 (4-7 profiled, 8 writing); the baseline from 9; every 20 steps; slow from the sleeps
    # at 26-30 (seen from 26, after the every-20 capture); at most 3 kept: the slow one goes first.
    with tuiprof.watch(
        directory, on="manual", threshold="1.5:5:2", warmup_steps=3, every=20, keep=3, cooldown=0
    ) as watcher:
        _train(watcher, 70, slow_steps=range(26, 31), slow_s=0.05)
        _train(watcher, 0)
    lines = history_lines(directory)
    written = [line for line in lines if line.get("e") == "capture"]
    dropped = [line["path"] for line in lines if line.get("e") == "dropped"]
    kept = [c for c in written if c["path"] not in dropped]
    assert any(c["trigger"] == "slow" for c in written), written
    assert dropped and len(kept) == 3 and kept[0]["trigger"] == "healthy"
    assert sorted(p.name for p in directory.glob("*.gz")) == sorted(c["path"] for c in kept)
    # Each drop took the oldest slow capture while one was kept, else the oldest every-N one.
    alive: list[dict] = []
    for line in lines:
        if line.get("e") == "capture":
            alive.append(line)
        elif line.get("e") == "dropped" and "taken again" in line["why"]:  # a healthy window of outliers
            expected = next(c for c in alive if c["trigger"] == "healthy")
            assert line["path"] == expected["path"]
            alive.remove(expected)
        elif line.get("e") == "dropped":
            slow = [c for c in alive if c["trigger"] == "slow"]
            expected = (slow or [c for c in alive if c["trigger"] == "every"])[0]
            assert line["path"] == expected["path"]
            alive.remove(expected)


def test_the_slow_rule_matches_a_plain_recomputation() -> None:
    """The detector against the rule's words, recomputed with plain lists: the baseline is the median
    of the last N normal steps (at least 5 before judging); K slow steps in a row and 2 more fire;
    a slow step never enters the baseline."""
    import random

    from tuiprof.analysis.watch import SlowDetector, SlowRule

    rule = SlowRule(ratio=1.2, window=7, held=2, warmup=4)
    generator = random.Random(3)
    times = [generator.choice([1.0, 1.1, 1.3, 2.0, 2.5, 0.9]) for _ in range(400)]
    detector = SlowDetector(rule)
    fired = [step for step, t in enumerate(times, 1) if detector.observe(step, t)]
    expected: list[int] = []
    normal: list[float] = []
    run: list[float] = []
    for step, t in enumerate(times, 1):
        if step <= rule.warmup:
            continue
        if len(normal) < 5:
            normal.append(t)
            continue
        if t <= rule.ratio * statistics.median(normal[-rule.window :]):
            run, normal = [], normal + [t]
            continue
        run.append(t)
        if len(run) == rule.held + 2:
            expected.append(step)
            run = []
    assert fired == expected and len(fired) > 3


def test_noise_just_before_a_slowdown_is_not_named_its_first_step() -> None:
    # Beside a CPU hog a step that lost its caches to it takes 1.5x: two of them right before the
    # slowdown make five slow steps in a row from step 78, but the slowdown starts at 80.
    from tuiprof.analysis.watch import SlowDetector, SlowRule

    times = {78: 1.5, 79: 1.3, **{step: 4.0 for step in range(80, 90)}}
    detector = SlowDetector(SlowRule())
    fired = next(step for step in range(1, 90) if detector.observe(step, times.get(step, 1.0)))
    assert fired == 82 and detector.first_slow == 80
    # Three steps of another job's 1.3x, then a 4x slowdown from 60 (seen on this shared machine).
    times = {57: 1.3, 58: 1.3, 59: 1.4, **{step: 4.0 for step in range(60, 70)}}
    detector = SlowDetector(SlowRule())
    fired = next(step for step in range(1, 70) if detector.observe(step, times.get(step, 1.0)))
    assert fired == 61 and detector.first_slow == 60


def test_the_wait_for_a_cpu_is_read_on_both_sides_of_the_clock(tmp_path, monkeypatch) -> None:
    # Preempted between the clock and the wait: the wait would count in this step and the wall time
    # in the next (seen: a step of 2.3 ms that "waited" 8.1 ms).  The pair is read again.
    import types

    import tuiprof.capture.watch as watch_module
    from tuiprof.capture.config import CaptureConfig

    watcher = watch_module.Watcher(tmp_path / "w", watch_module.WatchSettings(), CaptureConfig(), "x.py", "manual")
    reads, clock = iter([0, 1_000_000, 9_000_000, 9_000_000]), iter([1.0, 1.01])
    monkeypatch.setattr(watch_module, "time", types.SimpleNamespace(perf_counter=lambda: next(clock)))
    monkeypatch.setattr(watcher, "_cpu_wait_ns", lambda: next(reads))
    watcher._schedstat = 0
    assert watcher._boundary() == (1.01, pytest.approx(0.009))


# ------------------------------------------------------------------ the slow rule on a synthetic clock


class _Clock:
    """Stands in for ``time`` in tuiprof.capture.watch: each step takes what the test says."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    @staticmethod
    def time() -> float:
        return time.time()


def _synthetic_watch(tmp_path, monkeypatch, step_ms, steps: int, wait_ms=lambda step: 0.0) -> Path:
    """A job watched in this process whose step N takes ``step_ms(N)`` ms (``wait_ms(N)`` of it
    waiting for a CPU); the captures are real profiler sessions (recording nothing optional: a
    few seconds less each).  The default settings: warm-up 10, 1.2:50:3, cooldown 100, profiler
    warmup 1 and 3 active steps."""
    import torch

    import tuiprof.capture.watch as watch_module
    from tuiprof.capture.config import CaptureConfig

    clock = _Clock()
    monkeypatch.setattr(watch_module, "time", clock)
    waits: list[float] = []
    boundary = lambda self: (clock.now, waits[-1] if waits else 0.0)  # noqa: E731
    monkeypatch.setattr(watch_module.Watcher, "_boundary", boundary, raising=False)
    directory = tmp_path / "w"
    weight = torch.ones(4, requires_grad=True)
    light = CaptureConfig(record_shapes=False, profile_memory=False, with_stack=False, with_flops=False)
    with watch_module.Watcher(directory, watch_module.WatchSettings(), light, "synthetic.py", "manual") as watcher:
        for step in range(1, steps + 1):
            (weight * 2).sum().backward()  # something for the profiler to record
            clock.now += step_ms(step) / 1000
            waits.append(wait_ms(step) / 1000)
            watcher.step()
    return directory


def _slow_triggers(directory: Path) -> list[dict]:
    return [line for line in history_lines(directory) if line.get("e") == "trigger" and line["trigger"] == "slow"]


def _rows(directory: Path) -> list[dict]:
    from tuiprof.analysis.watch import summarise_watch
    from tuiprof.report.watch import watch_rows
    from tuiprof.trace.watch import read_history

    return watch_rows(summarise_watch(read_history(directory)), with_dropped=True)


def test_a_slowdown_from_step_30_is_caught_within_5_steps_and_its_first_step_named(tmp_path, monkeypatch) -> None:
    # The old rule judged nothing before its 50-step window was full (step 65) and by then the
    # slowdown was the median: never caught.
    slow = {step: (3, 4, 5, 6)[step % 4] for step in range(30, 61)}
    directory = _synthetic_watch(tmp_path, monkeypatch, lambda step: slow.get(step, 1.0 + step % 3 * 0.05), 60)
    triggers = _slow_triggers(directory)
    assert triggers and 30 <= triggers[0]["step"] <= 35, triggers
    assert triggers[0]["first_slow"] == 30 and "slow from step 30" in triggers[0]["why"]
    slow_rows = [row for row in _rows(directory) if row["trigger"] == "slow"]
    assert slow_rows and slow_rows[0]["verdict"] == "slower" and slow_rows[0]["slow_from"] == 30


def test_noise_at_steps_70_to_72_is_not_confirmed_and_the_slowdown_at_80_is_caught(tmp_path, monkeypatch) -> None:
    # The old rule fired on the three noisy steps and its 100-step cooldown then hid the slowdown.
    def step_ms(step: int) -> float:
        return 3.0 if 70 <= step <= 72 else 4.0 if step >= 80 else 1.0

    triggers = _slow_triggers(_synthetic_watch(tmp_path, monkeypatch, step_ms, 95))
    assert [t["step"] for t in triggers][:1] == [84] and triggers[0]["first_slow"] == 80, triggers


def test_a_capture_that_was_not_slower_is_labelled_and_starts_no_cooldown(tmp_path, monkeypatch, capsys) -> None:
    # Noise long enough to be confirmed (steps 70-75) is over when its capture records (76-78).
    def step_ms(step: int) -> float:
        return 3.0 if 70 <= step <= 75 else 4.0 if step >= 90 else 1.0

    directory = _synthetic_watch(tmp_path, monkeypatch, step_ms, 110)
    assert [(t["step"], t["first_slow"]) for t in _slow_triggers(directory)] == [(74, 70), (94, 90)]
    rows = [(row["trigger"], row["first_step"], row["verdict"]) for row in _rows(directory)]
    assert rows == [("healthy", 12, ""), ("slow", 76, "not slower"), ("slow", 96, "slower")]
    result = tuiprof("summary", str(directory), "--view", "watch")
    assert result.returncode == 0 and "1 slow capture not slower than the healthy one (steps 76-78)" in result.stdout
    assert "not slower" in next(line for line in result.stdout.splitlines() if "step000076-slow" in line)


def test_an_outlier_healthy_window_is_taken_again(tmp_path, monkeypatch) -> None:
    # Two of the healthy window's three steps (12-14) were slowed 5x by something that came and went.
    directory = _synthetic_watch(tmp_path, monkeypatch, lambda step: 5.0 if step in (12, 13) else 1.0, 30)
    lines = history_lines(directory)
    healthy = [line for line in lines if line.get("e") == "capture" and line["trigger"] == "healthy"]
    assert [(c["first_step"], c["last_step"]) for c in healthy] == [(12, 14), (17, 19)]
    dropped = [line for line in lines if line.get("e") == "dropped"]
    assert [d["path"] for d in dropped] == [healthy[0]["path"]] and "outliers" in dropped[0]["why"]
    retake = [line for line in lines if line.get("e") == "trigger" and line["trigger"] == "healthy"][1]
    assert retake["step"] == 15 and "were outliers" in retake["why"]
    assert sorted(p.name for p in directory.glob("*.gz")) == [healthy[1]["path"]]


def test_a_step_slowed_only_by_waiting_for_a_cpu_is_not_slow(tmp_path, monkeypatch) -> None:
    # Another process takes the CPU from step 30 on: every step waits 3 ms more for it.  The wait is
    # recorded (q) and left out of what the rule judges; a real slowdown from step 70 is caught.
    def step_ms(step: int) -> float:
        return (4.0 if step >= 30 else 1.0) + (3.0 if step >= 70 else 0.0)

    directory = _synthetic_watch(tmp_path, monkeypatch, step_ms, 90, wait_ms=lambda step: 3.0 if step >= 30 else 0.0)
    assert [t["first_slow"] for t in _slow_triggers(directory)] == [70]
    steps = {line["s"]: line for line in history_lines(directory) if "s" in line}
    assert steps[40]["q"] == pytest.approx(0.003) and steps[20]["q"] == 0


# ------------------------------------------------------------------ the history as input


def _history(tmp_path: Path, body: bytes) -> Path:
    directory = tmp_path / "w"
    directory.mkdir()
    header = b'{"format":"tuiprof-watch","version":1,"pid":1,"started":0,"what":"x.py","settings":{}}\n'
    (directory / "watch.jsonl").write_bytes(header + body)
    return directory


def test_a_history_being_written_is_read_up_to_its_last_whole_line(tmp_path) -> None:
    from tuiprof.trace.watch import read_history

    history = read_history(
        _history(tmp_path, b'{"s":1,"t":0.5,"w":0.5}\n{"s":2,"t":1.0,"w":0.5,"d":0.1}\n{"s":3,"t":1.')
    )
    assert history.steps == [1, 2] and history.data_s == [None, 0.1] and history.end_status is None


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"s":1,"t":0.5,"w":-1}\n', ":2: 'w' is not a time >= 0"),
        (b'{"s":2,"t":0.5,"w":1}\n{"s":1,"t":0.6,"w":1}\n', ":3: step 1 comes after step 2"),
        (b"[1]\n", ":2: the line is not a JSON object"),
        (
            b'{"e":"capture","trigger":"slow","first_step":1,"last_step":2,"path":"../x","bytes":1}\n',
            "not a file name inside",
        ),
        (b'{"e":"trigger","step":1,"trigger":"[red]x","why":""}\n', "'trigger' is not one of"),
    ],
)
def test_a_bad_history_line_is_one_error_naming_the_line(tmp_path, body: bytes, problem: str) -> None:
    from tuiprof.trace.watch import read_history

    with pytest.raises(TraceError) as error:
        read_history(_history(tmp_path, body))
    assert problem in str(error.value)


def _settings_history(tmp_path: Path, settings: str) -> Path:
    directory = tmp_path / "w"
    directory.mkdir(parents=True)
    # version 1: what an older tuiprof wrote is checked the same
    header = f'{{"format":"tuiprof-watch","version":1,"pid":1,"started":0,"what":"x.py","settings":{settings}}}\n'
    (directory / "watch.jsonl").write_text(header + '{"s":1,"t":0.5,"w":0.5}\n')
    return directory


@pytest.mark.parametrize("value", ['"abc"', '"1e5"', '{"a": 1}', "1.5", "-3", "true"])
def test_a_setting_that_is_not_a_whole_number_is_one_error_naming_line_1(tmp_path, value: str) -> None:
    # Issue 42 item 4: a non-integer warmup_steps was a Rich traceback in the watch explorer.
    from tuiprof.trace.watch import read_history

    directory = _settings_history(tmp_path, f'{{"warmup_steps": {value}}}')
    with pytest.raises(TraceError) as error:
        read_history(directory)
    assert "watch.jsonl:1: 'warmup_steps' is not a whole number >= 0" in str(error.value)
    result = tuiprof("open", str(directory))  # off a terminal: the summary, and the same one line
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "warmup_steps" in result.stderr


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_escapes_in_the_settings_never_reach_the_terminal(tmp_path, fmt: str) -> None:
    # Issue 42 item 2: the settings' values were printed raw in the "slow rule:" line (OSC 0, OSC 52).
    osc = "\\u001b]0;pwned\\u0007\\u001b]52;c;cHduZWQ=\\u0007"
    typed = _settings_history(tmp_path / "typed", f'{{"ratio": "{osc}"}}')  # a text where a number goes
    extra = _settings_history(tmp_path / "extra", f'{{"ratio": 1.5, "window": 9, "note": "{osc}"}}')  # unknown
    results = [tuiprof("summary", str(d), "--view", "watch", "--format", fmt) for d in (typed, extra)]
    for result in results:
        assert not set("\x1b\x07\x9b\x9d") & set(result.stdout + result.stderr), result
    assert results[0].returncode == 2 and "'ratio' is not a number >= 0" in results[0].stderr
    assert results[1].returncode == 0 and "over 1.5x the median of the last 9" in results[1].stdout


def test_a_newer_history_version_is_refused_in_one_line(tmp_path) -> None:
    directory = tmp_path / "w"
    directory.mkdir()
    (directory / "watch.jsonl").write_text(
        '{"format":"tuiprof-watch","version":4,"pid":1,"started":0,"what":"x","settings":{}}\n'
    )
    result = tuiprof("summary", str(directory), "--view", "watch")
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "version 4" in result.stderr


def test_run_help_states_the_slow_rule() -> None:
    result = tuiprof("run", "--help")
    text = " ".join(result.stdout.split())
    assert (
        "K steps in a row over RATIO x the median of the last N normal (unprofiled, not slow) steps, confirmed by 2 more"
        in text
    )


@pytest.mark.parametrize("width", [60, 80])
def test_summary_view_watch_fits_the_terminal(stalled_run, monkeypatch, capsys, width: int) -> None:
    import os as os_module

    import tuiprof.report.watch as report
    from tuiprof.analysis.watch import summarise_watch
    from tuiprof.report import render
    from tuiprof.trace.watch import read_history

    monkeypatch.setenv("COLUMNS", str(width))
    monkeypatch.setattr(report, "stdout_is_terminal", lambda: True)
    monkeypatch.setattr(render, "stdout_is_terminal", lambda: True)
    monkeypatch.setattr(
        report.shutil, "get_terminal_size", lambda *args, **kwargs: os_module.terminal_size((width, 24))
    )
    report.print_watch_summary(summarise_watch(read_history(stalled_run[0])), "table", None)
    lines = capsys.readouterr().out.splitlines()
    healthy = _kept_healthy(history_lines(stalled_run[0]))["path"].removesuffix(".pt.trace.json.gz")
    assert any(healthy in line for line in lines)
    assert max(len(line) for line in lines) <= width, lines


def test_under_torchrun_every_rank_captures_the_same_steps_and_the_ranks_view_names_the_slowed_rank(tmp_path) -> None:
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.trace.run import open_run

    directory = tmp_path / "w"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",  # a free port: another torchrun (a test beside it, another user) may hold 29500
            "--nproc-per-node",
            "2",
            "-m",
            "tuiprof",
            "run",
            "--watch",
            str(directory),
            *FAST_RULE,
            str(ROOT / "tests" / "helpers" / "watch_ddp_script.py"),
            "150",
            "--stall-from",
            "70",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    captures = {}
    for rank, name in ((0, "watch.jsonl"), (1, "watch.rank1.jsonl")):
        lines = [json.loads(line) for line in (directory / name).read_text().splitlines()]
        captures[rank] = [
            (c["trigger"], c["first_step"], c["last_step"], c["path"]) for c in lines if c.get("e") == "capture"
        ]
    assert captures[0] == captures[1], captures  # the same steps on every rank
    slow = [c for c in captures[0] if c[0] == "slow"]
    assert slow and slow[0][1] >= 70 and captures[0][0][0] == "healthy" and captures[0][0][2] < 70, captures
    run = summarise_run(open_run(directory / slow[0][3]), workers=1, use_sidecars=False)
    assert [r.rank for r in run.ranks] == [0, 1] and list(run.stragglers()) == [1]
    # rank 1 loads 40 ms slower per step (by construction); the others wait for it
    assert run.ranks[1].steps[0].data_loading_us >= 40_000 > run.ranks[0].steps[0].data_loading_us
    # d in the watch explorer: the verdict, then the straggler, before rank 0's own parts
    from rich.console import Console

    from tuiprof.analysis.watch import compare_captures
    from tuiprof.report.watch import comparison_text

    healthy = next(c for c in captures[0] if c[0] == "healthy")
    console = Console(width=200, color_system=None, record=True, file=open(os.devnull, "w"))
    console.print(comparison_text(compare_captures(str(directory / healthy[3]), str(directory / slow[0][3]))))
    text = console.export_text().splitlines()
    assert text[0].startswith("B is ") and text[1].startswith("straggler: rank 1: ") and "Data load" in text[1]


@pytest.mark.parametrize("option", [["--save", "x.json.gz"], ["--continue"], ["--repeat", "2"], ["--wait", "0"]])
def test_watch_refuses_one_off_capture_options(tmp_path, option: list[str]) -> None:
    result = tuiprof("run", "--watch", str(tmp_path / "w"), *option, SCRIPT, "5")
    assert (
        result.returncode == 2
        and result.stderr.count("\n") == 1
        and f"run --watch {option[0]}: not used" in result.stderr
    )


def test_catch_keeps_the_one_slow_step(tmp_path) -> None:
    directory = tmp_path / "w"
    result = tuiprof(
        "run",
        "--watch",
        str(directory),
        "--catch",
        "--watch-warmup",
        "5",
        "--watch-threshold",
        "3:20:1",
        "--watch-cooldown",
        "0",
        SCRIPT,
        "50",
        "--slow-step",
        "40",
        "--slow-ms",
        "200",
    )
    assert result.returncode == 0, result.stderr
    captures = [line for line in history_lines(directory) if line.get("e") == "capture"]
    slow = [c for c in captures if c["trigger"] == "slow" and c["first_step"] == 40]
    assert len(slow) == 1 and slow[0]["last_step"] == 40, captures
    traced = _trace_steps(directory / slow[0]["path"])
    assert list(traced) == [40] and traced[40]["step"] >= 200_000  # the step, with its 200 ms sleep
    # Only the kept steps are on disk: every other step's trace was dropped.
    assert sorted(p.name for p in directory.glob("*.gz")) == sorted(c["path"] for c in captures)
    assert [c["trigger"] for c in captures].count("healthy") == 1


def test_catch_under_torchrun_keeps_the_same_one_slow_step_on_every_rank(tmp_path) -> None:
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.trace.run import open_run

    directory = tmp_path / "w"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",  # a free port: another torchrun (a test beside it, another user) may hold 29500
            "--nproc-per-node",
            "2",
            "-m",
            "tuiprof",
            "run",
            "--watch",
            str(directory),
            "--catch",
            "--watch-warmup",
            "5",
            "--watch-threshold",
            "3:10:1",
            "--watch-cooldown",
            "0",
            str(ROOT / "tests" / "helpers" / "watch_ddp_script.py"),
            "30",
            "--stall-from",
            "0",
            "--slow-step",
            "20",
            "--slow-ms",
            "1000",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    captures = {}
    for rank, name in ((0, "watch.jsonl"), (1, "watch.rank1.jsonl")):
        lines = [json.loads(line) for line in (directory / name).read_text().splitlines()]
        captures[rank] = [
            (c["trigger"], c["first_step"], c["last_step"], c["path"]) for c in lines if c.get("e") == "capture"
        ]
    assert captures[0] == captures[1], captures  # the same kept steps on every rank
    rank1 = [json.loads(line) for line in (directory / "watch.rank1.jsonl").read_text().splitlines()]
    assert [t["why"] for t in rank1 if t.get("e") == "trigger"] == [
        "rank 0 kept step 5",
        "rank 0 kept step 20",
    ]  # rank 0 decided
    assert ("slow", 20, 20, "step000020-slow") in captures[0] and captures[0][0][:3] == ("healthy", 5, 5), captures
    # Only the kept steps are on disk, one run directory each, one trace per rank.
    assert sorted(p.name for p in directory.iterdir() if p.is_dir()) == sorted(c[3] for c in captures[0])
    slow = directory / "step000020-slow"
    assert sorted(p.name for p in slow.iterdir()) == ["trace.rank0.pt.trace.json.gz", "trace.rank1.pt.trace.json.gz"]
    # rank 1 loaded step 20's batch 1 s slower (by construction); each rank's trace holds step 20 alone
    traced = {rank: _trace_steps(slow / f"trace.rank{rank}.pt.trace.json.gz") for rank in (0, 1)}
    assert list(traced[0]) == list(traced[1]) == [20]
    assert traced[1][20]["data"] >= 1_000_000 > traced[0][20]["data"]
    run = summarise_run(open_run(slow), workers=1, use_sidecars=False)  # it opens as a run directory
    assert [r.rank for r in run.ranks] == [0, 1] and list(run.stragglers()) == [1]


def test_on_a_gpu_each_step_gets_its_device_time_without_a_sync(tmp_path) -> None:
    import torch

    import tuiprof
    from tuiprof.trace.watch import read_history

    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    a = torch.randn(2048, 2048, device="cuda")
    with tuiprof.watch(tmp_path / "w", on="manual", healthy=False) as watcher:
        for step in range(1, 21):
            for _ in range(10):
                a = (a @ a).tanh()
            watcher.step()
            if step == 1:
                first_boundary = time.perf_counter()
        torch.cuda.synchronize()  # every event done: close reads them all (the watcher itself never syncs)
        all_done = time.perf_counter()
    history = read_history(tmp_path / "w")
    assert sorted(history.device_s) == list(range(2, 21))  # a pair per step from the second boundary on
    assert all(t > 0 for t in history.device_s.values())
    # the events span the device's work from the first boundary to the last: within that wall time
    assert sum(history.device_s.values()) <= all_done - first_boundary + 0.001
