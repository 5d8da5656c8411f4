"""Watch a long job with the profiler off; capture a few steps when they turn slow or on demand.

A :class:`Watcher` runs in the job's process.  At every step boundary (the
optimizer-step hook ``tuiprof run`` uses, or ``watcher.step()``) it

1. appends the step to the history (``DIR/watch.jsonl``, format in
   :mod:`tuiprof.trace.watch`): its wall time, the time spent in
   ``DataLoader.__next__`` within it (a patched ``__next__``, two clock
   reads), and on a GPU a CUDA event pair per step, read once the events
   have completed (``query()``, never a sync);
2. decides whether to capture: the healthy window right after the warm-up
   (taken again when its own steps were outliers); the slow rule
   (:mod:`tuiprof.analysis.watch`); a request file ``DIR/capture.request``
   from ``tuiprof capture DIR`` (owned by this user, else ignored); every N
   steps;
3. runs ``torch.profiler`` over the next steps (wait 0, warmup W, active M),
   numbered with the job's step numbers, and writes each capture as a normal
   trace file in DIR;
4. compares a capture's steps with the healthy window's (:meth:`Watcher._judge`):
   a slow capture that was not slower starts no cooldown (it was noise; the
   real slowdown may come next).

Bounded: at most ``keep`` captures and ``disk_mb`` of them (the oldest slow
ones go first, then every-N, then on-demand ones; the healthy one stays), a
cooldown in steps between slow/every triggers.  Nothing the watcher does may
stop the job: a profiler that cannot start (another one is active), a disk
that fills up, a history that cannot be written -- each becomes a
``failure`` line in the history (when it can still be written) and a line
on stderr, and the job goes on.

``--catch`` (:meth:`Watcher._start_catching`) profiles every step instead and
keeps the steps over the threshold; under torchrun rank 0 decides and the
other ranks follow (:mod:`tuiprof.capture.watch_ranks`).  ``docs/watch.md``
has the rules and the measured costs.
"""

from __future__ import annotations

import os
import shutil
import stat
import statistics
import sys
import time
from collections import deque
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tuiprof.analysis.watch import HEALTHY_SPREAD, SlowDetector, SlowRule, is_slower, outlier_window
from tuiprof.capture.config import CaptureConfig
from tuiprof.capture.watch_ranks import lead_steps
from tuiprof.errors import TraceError
from tuiprof.report.render import print_notice
from tuiprof.trace.watch import (
    REQUEST_NAME,
    TRIGGERS,
    device_line,
    event_line,
    header_line,
    history_path,
    lock_history,
    step_line,
)

# Dropped first when over the limits: slow, then every-N, then on-demand captures (oldest first).
DROP_ORDER = ("slow", "every", "demand")
# A capture is not started when the disk has less free space than this (bytes).
MIN_FREE_BYTES = 64 * 1024 * 1024
PROFILER_LOG = "profiler.log"
# Step lines are written together at most this often (one write() per step would cost more than
# the 1 % budget on sub-millisecond steps); events, and the end, are written at once.  A job
# killed without a word (SIGKILL) loses at most this much of its history.
FLUSH_SECONDS = 0.5
# The capture request is looked for at most this often (a stat() per step would cost too much).
REQUEST_CHECK_SECONDS = 0.2
MAX_PENDING_DEVICE_STEPS = 256  # CUDA event pairs not yet complete; older ones are given up
# Linux's scheduler statistics of the calling thread: ns on a CPU, ns waiting for one (runnable while
# another process ran), time slices.  A step's wait is what another process's load added to it.
SCHEDSTAT = "/proc/thread-self/schedstat"
# The healthy window is taken at most this often (the first one and two more when the steps of
# one before were outliers): a job too noisy for three tries keeps its last one.
MAX_HEALTHY_TAKES = 3


@dataclass(frozen=True)
class WatchSettings:
    """What to watch for and how much to keep (``tuiprof run --watch``'s options)."""

    rule: SlowRule = SlowRule()
    every: int = 0  # capture every N steps (0: never)
    warmup: int = 1  # profiler schedule of a capture: warmup steps, then
    active: int = 3  # active (recorded) steps
    keep: int = 10  # captures kept at most (the healthy one included)
    disk_mb: float = 1024.0  # their total size at most
    cooldown: int = 100  # steps after a capture before a slow or every-N trigger
    healthy: bool = True  # capture a healthy window right after the warm-up
    catch: bool = False  # profile every step; keep the trace of each step over the threshold (and the healthy one)

    def as_dict(self) -> dict[str, Any]:
        rule = self.rule
        return {
            "ratio": rule.ratio,
            "window": rule.window,
            "held": rule.held,
            "warmup_steps": rule.warmup,
            "every": self.every,
            "profiler_warmup": self.warmup,
            "active": self.active,
            "keep": self.keep,
            "disk_mb": self.disk_mb,
            "cooldown": self.cooldown,
            "catch": self.catch,
        }


def prepare_directory(directory: Path, rank: int = 0) -> None:
    """Create DIR (and missing parents) or check it: this user's, writable, without a history yet.

    Called before the job starts: a bad DIR is one line and exit 2, not a job
    that runs for hours unwatched."""
    source = f"--watch {directory}"
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise TraceError(source, f"cannot create the folder ({exc.strerror})", "pick a folder you can write") from None
    if not directory.is_dir():
        raise TraceError(source, "not a folder", "pick a folder")
    if directory.stat().st_uid != os.getuid():
        raise TraceError(
            source,
            "the folder belongs to another user (its capture requests could come from them)",
            "pick a folder of your own",
        )
    if not os.access(directory, os.W_OK | os.X_OK):
        raise TraceError(source, "cannot write into the folder", "pick a folder you can write")
    if history_path(directory, rank).exists():
        raise TraceError(
            source,
            f"already holds a watch history ({history_path(directory, rank).name})",
            "pick an empty folder or remove the old one",
        )


@dataclass
class _Kept:
    trigger: str
    path: Path
    bytes: int


class Watcher:
    """Step timing, triggers and captures for one process (see the module docstring).

    ``on="optimizer"``: steps end at every ``optimizer.step()`` (a global
    hook); ``on="manual"``: the caller calls :meth:`step` at the end of each.
    """

    def __init__(
        self, directory: Path, settings: WatchSettings, config: CaptureConfig, what: str, on: str = "optimizer"
    ) -> None:
        if on not in ("optimizer", "manual"):
            raise ValueError(f"on must be 'optimizer' or 'manual', not {on!r}")
        self.directory = directory
        self.settings = settings
        self.config = config
        self.what = what
        self.on = on
        from tuiprof.capture.distributed import torchrun_launch
        from tuiprof.capture.watch_ranks import RankChannel

        self.launch = torchrun_launch()  # under torchrun: rank 0 decides, the others follow
        self.rank = self.launch.rank if self.launch else 0
        self._channel = RankChannel() if self.launch else None
        self._scheduled: tuple[int, str] | None = None  # the boundary a decided capture starts at, its trigger
        self.step_number = 0
        self.detector = SlowDetector(settings.rule)
        self.kept: list[_Kept] = []
        self._fd: int | None = None
        self._started = 0.0
        self._last = 0.0
        self._data_s = 0.0
        self._loader_seen = False
        self._profiler: Any = None
        self._windows: Any = None
        self._profiled = False  # a trace was written (or the profiler stopped) in the current step
        self._caught: str | None = None  # --catch: the trigger the step being closed is kept for (None: dropped)
        self._window_due = False  # --catch: a step ended; its window is closed at the next safe point
        self._cuda: Any = None  # torch.cuda, once started
        self._cooldown_until = 0
        self._cooldown_before = 0  # the cooldown before the last slow capture's (a not-slower one gives it back)
        self._healthy_done = not settings.healthy
        self._healthy_takes = 0
        self._healthy_median: float | None = None  # the healthy window's median own time (profiled), once judged
        self._retake_why = ""  # why the healthy window is taken again (empty: it is not)
        self._own: dict[int, float] = {}  # the own times of the last steps (a capture's are judged at its end)
        self._schedstat: int | None = None  # SCHEDSTAT of the thread that started the watch (None: not on Linux)
        self._waited_ns = 0
        self._request = directory / REQUEST_NAME
        self._hooks: list[Any] = []
        self._device_events: deque = deque()
        self._previous_event: Any = None
        self._write_failed = False
        self._pending: list[str] = []  # step lines not written yet
        self._flush_at = 0.0
        self._next_request_check = 0.0
        self._registered: Path | None = None  # this process's entry in the capture PID registry

    # ------------------------------------------------------------ life

    def start(self) -> Watcher:
        import torch
        from torch.utils.data.dataloader import _BaseDataLoaderIter

        prepare_directory(self.directory, self.rank)
        self._fd = os.open(
            history_path(self.directory, self.rank), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600
        )
        locked = lock_history(self._fd)  # for its life: a reader ends the history of a killed job
        self._write(header_line(os.getpid(), time.time(), self.what, self.settings.as_dict(), flock=locked))
        if self.rank == 0:  # ``tuiprof capture PID`` finds DIR here (rank 0 alone takes requests)
            from tuiprof.capture.watch_registry import register

            try:
                self._registered = register(os.getpid(), self.directory)
            except (OSError, ValueError) as exc:
                self._fail(
                    f"tuiprof capture {os.getpid()} will not find this job (registry: {exc}); use tuiprof capture DIR"
                )
        self._open_schedstat()
        self._started = self._last = self._boundary()[0]
        original = _BaseDataLoaderIter.__next__
        watcher = self

        def timed_next(iterator: Any) -> Any:
            if watcher._window_due:
                watcher._close_due_window()
            begin = time.perf_counter()
            try:
                return original(iterator)
            finally:
                watcher._data_s += time.perf_counter() - begin
                watcher._loader_seen = True

        # Wrapped for the job's life (put back by the hook below): a monkeypatch mypy cannot type.
        _BaseDataLoaderIter.__next__ = timed_next  # type: ignore[method-assign,assignment]
        self._hooks.append(lambda: setattr(_BaseDataLoaderIter, "__next__", original))
        if self.on == "optimizer":
            from torch.optim.optimizer import register_optimizer_step_post_hook

            handle = register_optimizer_step_post_hook(lambda optimizer, args, kwargs: self.step())
            self._hooks.append(handle.remove)
        self._cuda = torch.cuda
        if self.settings.catch:
            self._start_catching()
            if self.on == "optimizer":  # the window closes before the next forward (or data loading)
                from torch.nn.modules.module import register_module_forward_pre_hook

                handle = register_module_forward_pre_hook(
                    lambda module, args: self._close_due_window() if self._window_due else None
                )
                self._hooks.append(handle.remove)
        return self

    def close(self, status: str = "finished") -> None:
        """Stop a running capture (its finished steps are written), unhook, write the end line."""
        if self._fd is None:
            return
        if self._window_due:
            self._close_due_window()
        if self._profiler is not None:
            self._stop_profiler()
        for undo in reversed(self._hooks):
            undo()
        self._hooks.clear()
        self._read_device_times()
        if self._registered is not None:
            from tuiprof.capture.watch_registry import unregister

            unregister(self._registered)
            self._registered = None
        self._write(event_line("end", step=self.step_number, status=status))
        os.close(self._fd)
        self._fd = None
        if self._schedstat is not None:
            os.close(self._schedstat)
            self._schedstat = None

    def __enter__(self) -> Watcher:
        return self if self._fd is not None else self.start()

    def __exit__(self, kind, value, traceback) -> None:
        self.close("finished" if kind is None else "interrupted" if issubclass(kind, KeyboardInterrupt) else "crashed")

    # ------------------------------------------------------------ steps

    def step(self) -> None:
        """The end of a step: record it, then start, advance or finish a capture."""
        now, waited = self._boundary()
        wall = now - self._last
        self._last = now
        self.step_number += 1
        step = self.step_number
        capturing = self._profiler is not None
        profiled = self._profiled or capturing
        # Judged by the slow rule: steps like the others -- unprofiled, or (--catch) all profiled alike.
        judged = not self._profiled and (self.settings.catch or not capturing)
        self._profiled = False
        own = max(0.0, wall - (waited or 0.0))  # what the slow rule and the verdicts judge
        self._own[step] = own
        self._own.pop(step - self.settings.warmup - self.settings.active - 4, None)
        self._pending.append(
            step_line(step, now - self._started, wall, self._data_s if self._loader_seen else None, profiled, waited)
        )
        self._data_s = 0.0
        if now >= self._flush_at:
            self._flush()
            self._flush_at = now + FLUSH_SECONDS
        if self._cuda.is_initialized():
            self._time_device(step)
        try:
            fires = judged and self.detector.observe(step, own)
            if self.settings.catch:
                self._catch(step, judged and self.detector.last_over, now, capturing)
                return
            if capturing:
                self._advance_profiler()
                return
            if self._scheduled is None:
                self._decide(step, fires, now, wall)
            if self._scheduled is not None and step >= self._scheduled[0]:
                trigger = self._scheduled[1]
                self._scheduled = None
                self._start_capture(trigger, step)
        except Exception as exc:  # the watcher never stops the job
            self._fail(f"watcher error: {type(exc).__name__}: {exc}")
            if self._profiler is not None:
                self._stop_profiler()

    def _open_schedstat(self) -> None:
        try:
            self._schedstat = os.open(SCHEDSTAT, os.O_RDONLY)
        except OSError:  # not Linux, or no scheduler statistics: steps are judged on their wall time
            return
        self._waited_ns = self._cpu_wait_ns() or 0

    def _cpu_wait_ns(self) -> int | None:
        """The watching thread's time waiting for a CPU so far (ns; None: it cannot be read)."""
        try:
            return int(os.pread(self._schedstat, 128, 0).split()[1])  # type: ignore[arg-type]
        except (OSError, ValueError, IndexError):
            return None

    def _boundary(self) -> tuple[float, float | None]:
        """The step boundary: its time, and how long the step waited for a CPU (s; None: not known).

        The wait is read on both sides of the clock, again when the two differ: a preemption
        between two single reads would put its wait in one step's wall time and the other's wait
        (seen here: a step of 2.3 ms that had "waited" 8.1 ms, the next one none in 10.6 ms)."""
        if self._schedstat is None:
            return time.perf_counter(), None
        for _ in range(3):
            before = self._cpu_wait_ns()
            now = time.perf_counter()
            after = self._cpu_wait_ns()
            if after is None or before == after:
                break
        if after is None:  # it cannot be read any more: wall times from here on
            os.close(self._schedstat)
            self._schedstat = None
            return now, None
        waited, self._waited_ns = after - self._waited_ns, after
        return now, waited / 1e9

    def _decide(self, step: int, slow: bool, now: float, wall: float) -> None:
        """Schedule a capture: now, or (torchrun) at the boundary rank 0 picked for every rank."""
        if self._channel is not None and self.rank != 0:
            order = self._channel.poll(now)
            if order is None:
                return
            boundary, trigger = order
            if trigger not in TRIGGERS:
                self._fail(f"rank 0 sent an unknown trigger {trigger[:20]!r}")
            elif step > boundary:
                self._fail(f"rank 0's {trigger} capture from step {boundary + 1} was heard at step {step}: skipped")
            else:
                self._write(event_line("trigger", step=step, trigger=trigger, why=f"rank 0: from step {boundary + 1}"))
                self._scheduled = (boundary, trigger)
            return
        found, why = self._trigger(step, slow, now)
        if not found:
            return
        trigger, boundary = found, step
        if self._channel is not None:
            ahead = step + lead_steps(self.detector.median_s or wall)
            if self._channel.announce(ahead, trigger):  # no process group yet: this rank alone, now
                boundary = ahead
                why += f"; every rank from step {boundary + 1}"
        self._write_trigger(step, trigger, why)
        self._scheduled = (boundary, trigger)

    def _write_trigger(self, step: int, trigger: str, why: str) -> None:
        slow = {"first_slow": self.detector.first_slow} if trigger == "slow" else {}
        self._write(event_line("trigger", step=step, trigger=trigger, why=why, **slow))

    def _trigger(self, step: int, slow: bool, now: float) -> tuple[str | None, str]:
        if now >= self._next_request_check:
            self._next_request_check = now + REQUEST_CHECK_SECONDS
            if self._request_waiting():
                return "demand", "tuiprof capture was run"
        detector = self.detector
        if not self._healthy_done and step >= self.settings.rule.warmup and not slow:
            if not (detector.suspecting or detector.last_over):  # taken again: at a normal step
                self._healthy_done = True
                return (
                    "healthy",
                    self._retake_why or f"the healthy window, after {self.settings.rule.warmup} warm-up steps",
                )
        if step < self._cooldown_until:
            return None, ""
        median = detector.median_s or 0.0
        if slow:
            rule = self.settings.rule
            baseline = (
                f"{rule.ratio:g}x the median {median * 1000:.3g} ms of {detector.baseline_steps} normal steps "
                "(CPU wait left out)"
            )
            if self.settings.catch:
                return "slow", f"step {step} over {baseline}"
            first = detector.first_slow
            return "slow", f"slow from step {first}: steps {first}-{step}, {rule.held} in a row over {baseline}"
        if self.settings.every and step % self.settings.every == 0:
            return "every", f"every {self.settings.every} steps"
        return None, ""

    def _request_waiting(self) -> bool:
        """A ``tuiprof capture DIR`` request: removed, and taken when this user made it (a regular
        file of this user's: a link is not followed to its target's owner)."""
        try:
            status = os.lstat(self._request)
            os.unlink(self._request)
        except OSError:
            return False
        return stat.S_ISREG(status.st_mode) and status.st_uid == os.getuid()

    # ------------------------------------------------------------ device time

    def _time_device(self, step: int) -> None:
        event = self._cuda.Event(enable_timing=True)
        event.record()
        if self._previous_event is not None:
            self._device_events.append((step, self._previous_event, event))
            if len(self._device_events) > MAX_PENDING_DEVICE_STEPS:
                self._device_events.popleft()
        self._previous_event = event
        self._read_device_times()

    def _read_device_times(self) -> None:
        """Write the device time of each step whose end event has completed (no sync)."""
        events = self._device_events
        while events and events[0][2].query():
            step, begin, end = events.popleft()
            self._pending.append(device_line(step, begin.elapsed_time(end) / 1000))

    # ------------------------------------------------------------ captures

    def _start_capture(self, trigger: str, step: int) -> None:
        from tuiprof.capture.session import TraceWindows, make_profiler

        settings = self.settings
        if trigger != "healthy":  # the healthy window is taken early: no cooldown after it
            self._start_cooldown(step + settings.warmup + settings.active + settings.cooldown)
        else:  # taken again: the one before goes (its steps were outliers)
            for index, kept in enumerate(self.kept):
                if kept.trigger == "healthy":
                    self._drop(index, self._retake_why or "rank 0 took the healthy window again")
                    break
        free = shutil.disk_usage(self.directory).free
        if free < MIN_FREE_BYTES:
            self._fail(f"no capture at step {step}: {free // 2**20} MiB free on the disk of {self.directory}")
            return
        path = self._capture_path(step + 1 + settings.warmup, trigger)
        config = replace(self.config, wait=0, warmup=settings.warmup, active=settings.active, repeat=1)
        windows = TraceWindows(lambda prof, window: self._save(prof, window, trigger, path))
        if _another_profiler_records():
            self._fail(f"no capture at step {step}: another profiler is recording (torch would hand it over to ours)")
            return
        try:
            profiler = make_profiler(config, self._cuda.is_initialized(), windows, first_step=step + 1)
            with self._profiler_log():
                profiler.start()
        except Exception as exc:  # another profiler is active, Kineto refused, ...
            self._fail(f"the profiler could not start at step {step}: {type(exc).__name__}: {exc}")
            return
        self._profiler, self._windows = profiler, windows

    # ------------------------------------------------------------ --catch

    def _start_catching(self) -> None:
        """One profiler for the whole job, a window per step (wait 0, warmup 0, active 1, repeated):
        each step's trace is ready at its boundary, written only when :meth:`_catch` says so."""
        import warnings

        from tuiprof.capture.session import TraceWindows, make_profiler

        config = replace(self.config, wait=0, warmup=0, active=1, repeat=0)
        windows = TraceWindows(self._save_caught, keep_last=True)
        if _another_profiler_records():
            self._fail("--catch: another profiler is recording (torch would hand it over to ours); watching only")
            return
        try:
            with warnings.catch_warnings():  # "won't be using warmup": by design, every step is recorded
                warnings.simplefilter("ignore")
                profiler = make_profiler(config, self._cuda.is_initialized(), windows, first_step=1)
            with self._profiler_log():
                profiler.start()
        except Exception as exc:
            self._fail(f"--catch: the profiler could not start: {type(exc).__name__}: {exc}; watching only")
            return
        self._profiler, self._windows = profiler, windows

    def _catch(self, step: int, over: bool, now: float, capturing: bool) -> None:
        """The step ended: its trace is kept for a trigger (healthy, a step over the threshold,
        demand, every N), else dropped by the profiler at once.  Under torchrun rank 0 decides
        and publishes its verdict (even when its own profiler failed); the other ranks take it
        when they close the step's window (:meth:`_close_due_window`).

        Its window is closed at the next safe point, not here: closing a profiler session
        and opening the next inside ``optimizer.step()`` (its ``record_function`` still
        open) crashes Kineto after a few cycles (torch 2.14, seen: a segfault in
        ``stop_trace``).  The safe point is the start of the next forward or data loading,
        which in a training loop is right after the optimizer step."""
        if not self._follows_rank0():
            trigger, why = self._trigger(step, over, now)
            if trigger:
                if trigger == "slow":
                    self.detector.first_slow = step
                self._write_trigger(step, trigger, why)
                if trigger in ("slow", "every"):
                    self._start_cooldown(step + self.settings.cooldown)
            if self._channel is not None:
                self._channel.publish_verdict(step, trigger)
            self._caught = trigger
        if not capturing:
            self._caught = None
            return
        self._window_due = True
        if self.on == "manual":
            self._close_due_window()

    def _follows_rank0(self) -> bool:
        """Under torchrun, every rank but 0 takes rank 0's decisions."""
        return self._channel is not None and self.rank != 0

    def _take_verdict(self) -> bool:
        """A rank other than 0, ``--catch``: whether (and for what) rank 0 kept the step whose window
        closes now; False when rank 0 gave no verdict in time (this rank then stops profiling)."""
        step = self.step_number
        assert self._channel is not None  # only ranks that follow rank 0 take verdicts
        try:
            self._caught = self._channel.verdict(step)
        except Exception as exc:  # rank 0 silent (TimeoutError) or the store gone: keep nothing more
            self._fail(f"--catch: {exc}; watching only")
            self._stop_profiler()
            return False
        if self._caught:
            self._write(event_line("trigger", step=step, trigger=self._caught, why=f"rank 0 kept step {step}"))
        return True

    def _close_due_window(self) -> None:
        self._window_due = False
        if self._follows_rank0() and not self._take_verdict():
            return
        try:
            with self._profiler_log():
                self._profiler.step()
        except Exception as exc:  # the watcher never stops the job
            self._fail(f"--catch: the profiler failed: {type(exc).__name__}: {exc}; watching only")
            self._profiler = None
        finally:
            self._caught = None

    def _save_caught(self, prof: Any, window: Any) -> None:
        if self._caught is None or not window.steps:
            return
        if shutil.disk_usage(self.directory).free < MIN_FREE_BYTES:
            self._fail(
                f"step {window.steps[-1]} not kept: under {MIN_FREE_BYTES // 2**20} MiB free on the disk of {self.directory}"
            )
            return
        step = window.steps[-1]  # every step is its own window (the ones before it were dropped)
        window = replace(window, steps=[step])
        self._save(prof, window, self._caught, self._capture_path(step, self._caught))
        self._profiled = True  # writing the trace lands in the next step

    def _advance_profiler(self) -> None:
        with self._profiler_log():
            self._profiler.step()
        if self._windows.complete:
            self._stop_profiler()

    def _stop_profiler(self) -> None:
        """Stop the profiler (once its window is written, or when the job ends inside one)."""
        profiler, self._profiler = self._profiler, None
        self._windows.stopping = True
        self._profiled = True  # writing the trace lands in the next step
        try:
            with self._profiler_log():
                profiler.stop()
        except Exception as exc:
            self._fail(f"the profiler failed to stop: {type(exc).__name__}: {exc}")

    def _save(self, prof: Any, window: Any, trigger: str, path: Path) -> None:
        """The profiler's window is complete (or cut short): write it, then keep within the limits."""
        from tuiprof.capture.distributed import write_rank_trace
        from tuiprof.capture.session import torch_flops, write_trace
        from tuiprof.trace.live import LiveFacts

        if not window.steps:
            return
        facts = LiveFacts()
        try:
            if self.config.with_flops:
                facts.flops_by_external_id = torch_flops(prof)
            (write_rank_trace if self.launch else write_trace)(prof, path, facts, window.unfinished_step)
            size = path.stat().st_size
        except Exception as exc:  # a full disk (ENOSPC), a quota, a failed export
            path.unlink(missing_ok=True)
            self._fail(f"capture {path.name} not written: {type(exc).__name__}: {exc}")
            return
        self._write(
            event_line(
                "capture",
                trigger=trigger,
                first_step=window.steps[0],
                last_step=window.steps[-1],
                path=self._entry(path),
                bytes=size,
            )
        )
        self.kept.append(_Kept(trigger, path, size))
        if not self._follows_rank0():  # rank 0 (or a lone process) decides what comes next
            self._judge(trigger, [self._own[s] for s in window.steps if s in self._own], path.name)
        self._keep_within_limits()

    def _start_cooldown(self, until: int) -> None:
        self._cooldown_before, self._cooldown_until = self._cooldown_until, until

    def _judge(self, trigger: str, own: list[float], name: str) -> None:
        """A capture is written: its steps' own times against the healthy window's.

        - the healthy window itself: when its own steps were outliers (its median over
          ``HEALTHY_SPREAD`` x its fastest) it is taken again, at the next normal step (at most
          ``MAX_HEALTHY_TAKES`` times);
        - a capture slower than the healthy window: a slow one starts the baseline again (the job's
          new level);
        - a slow capture that was not: noise that passed the rule.  It gives the cooldown back
          and the rule waits for a normal step before it fires again;
        - a capture faster than the healthy window by more than ``HEALTHY_SPREAD``: the healthy
          window's steps were the outliers; it is taken again."""
        ratio = self.settings.rule.ratio
        if not own:
            return
        median = statistics.median(own)
        if trigger == "healthy":
            self._healthy_takes += 1
            if outlier_window(own) and self._healthy_takes < MAX_HEALTHY_TAKES:
                self._retake(
                    f"taken again: the steps of {name} were outliers (median {median * 1000:.3g} ms, over "
                    f"{HEALTHY_SPREAD:g}x its fastest {min(own) * 1000:.3g} ms)"
                )
            else:
                self._healthy_median = median
            return
        healthy = self._healthy_median
        if healthy is None:
            return
        if is_slower(median, healthy, ratio):
            if trigger == "slow":
                self.detector.rebase()
            return
        if trigger == "slow":
            self._cooldown_until = self._cooldown_before
            self.detector.disarm()
        if is_slower(healthy, median, HEALTHY_SPREAD) and self._healthy_takes < MAX_HEALTHY_TAKES:
            self._retake(
                f"taken again: {name} ran faster (median {median * 1000:.3g} ms) than the healthy window "
                f"({healthy * 1000:.3g} ms): its steps were outliers"
            )

    def _retake(self, why: str) -> None:
        self._healthy_done = False
        self._healthy_median = None
        self._retake_why = why

    def _keep_within_limits(self) -> None:
        budget = self.settings.disk_mb * 2**20
        while len(self.kept) > self.settings.keep or sum(k.bytes for k in self.kept) > budget:
            droppable = sorted(
                (DROP_ORDER.index(k.trigger), i) for i, k in enumerate(self.kept) if k.trigger in DROP_ORDER
            )
            if not droppable:
                return
            index = droppable[0][1]
            why = (
                f"over {self.settings.keep} captures" if len(self.kept) > self.settings.keep else "over the disk budget"
            )
            self._drop(index, why)

    def _drop(self, index: int, why: str) -> None:
        gone = self.kept.pop(index)
        gone.path.unlink(missing_ok=True)
        if self.launch:
            try:
                gone.path.parent.rmdir()  # the last rank to drop its file removes the capture's folder
            except OSError:
                pass
        self._write(event_line("dropped", path=self._entry(gone.path), why=why))

    def _capture_path(self, first_step: int, trigger: str) -> Path:
        """Where a capture from ``first_step`` goes: a trace file in DIR, or (torchrun) this rank's file
        in the capture's run directory, one file per rank, which opens in the ranks views."""
        if not self.launch:
            return self.directory / f"step{first_step:06d}-{trigger}.pt.trace.json.gz"
        from tuiprof.capture.distributed import rank_trace_path

        return rank_trace_path(
            self.directory / f"step{first_step:06d}-{trigger}" / "trace.pt.trace.json.gz", self.launch
        )

    def _entry(self, path: Path) -> str:
        """A capture's path in the history: its file, or (torchrun) its run directory, relative to DIR."""
        return path.relative_to(self.directory).parts[0]

    def _profiler_log(self):
        """Kineto's own lines (``profiler_start``, warnings) go to ``DIR/profiler.log``, not the job's stderr."""
        from tuiprof.capture.session import native_stderr_to

        return native_stderr_to(self.directory / PROFILER_LOG)

    # ------------------------------------------------------------ writing

    def _write(self, line: bytes) -> None:
        """Write ``line`` (an event) now, after the step lines before it."""
        self._flush()
        self._append(line)

    def _flush(self) -> None:
        if self._pending:
            lines, self._pending = self._pending, []
            self._append("".join(lines).encode())

    def _append(self, data: bytes) -> None:
        if self._fd is None:
            return
        try:
            os.write(self._fd, data)
        except OSError as exc:
            if not self._write_failed:
                self._write_failed = True
                print_notice(
                    f"tuiprof: --watch: the history in {self.directory} cannot be written ({exc.strerror}); "
                    "the job goes on"
                )

    def _fail(self, what: str) -> None:
        print_notice(f"tuiprof: --watch: {what}; the job goes on")
        self._write(event_line("failure", step=self.step_number, what=what))


def _another_profiler_records() -> bool:
    """Whether a torch profiler records now (the job's own ``torch.profiler.profile``): starting
    ours would end its session.  One in its wait or warmup steps does not show here."""
    import torch

    return bool(torch._C._autograd._profiler_enabled())


def watch(
    directory: str | os.PathLike[str],
    *,
    on: str = "optimizer",
    threshold: str = "1.2:50:3",
    warmup_steps: int = 10,
    every: int = 0,
    active: int = 3,
    keep: int = 10,
    disk_mb: float = 1024.0,
    cooldown: int = 100,
    healthy: bool = True,
    catch: bool = False,
) -> Watcher:
    """Watch this process's training steps into ``directory`` (``tuiprof.watch``); already started.

    ``with tuiprof.watch("runs/w") as w: train()`` closes it at the end of the
    block (a crash is recorded as such); ``w = tuiprof.watch(DIR, on="manual")``
    with ``w.step()`` at the end of each step and ``w.close()`` at the end.
    ``threshold``: ``RATIO[:N[:K]]`` (:func:`tuiprof.analysis.watch.parse_slow_rule`).
    """
    import atexit

    from tuiprof.analysis.watch import parse_slow_rule

    settings = WatchSettings(
        parse_slow_rule(threshold, warmup_steps), every, 1, active, keep, disk_mb, cooldown, healthy, catch
    )
    watcher = Watcher(
        Path(directory), settings, CaptureConfig(), Path(sys.argv[0]).name if sys.argv[0] else "python", on
    )
    watcher.start()
    atexit.register(watcher.close)
    return watcher
