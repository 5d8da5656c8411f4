"""A live capture as a model source: profile, then analyse, with progress.

Used by the explorer (in its worker thread) and by ``--no-tui`` alike, so
both see the same model: the trace's analysis plus what only the live run
knows (torch's FLOPs, qualified module names, parameters, shapes), which is
also saved in the trace (:mod:`tuiprof.trace.live`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tuiprof.analysis import analyze
from tuiprof.analysis.model import TraceModel
from tuiprof.capture.config import ANALYSING, SAVING, CaptureConfig, CaptureProgress
from tuiprof.errors import EXIT_INTERRUPTED, TraceError
from tuiprof.report.units import format_clock
from tuiprof.trace import load_trace

if TYPE_CHECKING:  # it imports torch
    from tuiprof.capture.session import CaptureResult


class NothingCaptured(TraceError):
    """Stopped before an active step finished: there is no trace to show."""

    exit_code = EXIT_INTERRUPTED

    def __init__(self, config: CaptureConfig, steps_done: int) -> None:
        first = config.wait + config.warmup + 1
        last = config.wait + config.warmup + config.active
        recorded = f"step {first}" if first == last else f"steps {first}-{last}"
        if steps_done == 0:
            where = "stopped before the first step"
        else:
            where = f"stopped after step {steps_done}/{config.total_steps} ({config.phase_of(steps_done - 1)})"
        fix = "let it run into the active steps, or lower --wait/--warmup"
        if steps_done == 0 and config.wait + config.warmup == 0:
            fix = "let it run through its first step"  # stopped during torch's import or the model's build
        super().__init__(
            config.model,
            f"{where}: nothing was recorded yet (the profiler records {recorded}; "
            f"wait {config.wait}, warmup {config.warmup}, active {config.active})",
            fix,
        )


class LiveCapture:
    """Profile ``config`` into ``trace_path`` and build the model.

    Kineto's native log lines go to ``scratch/profiler.log`` (never onto the
    screen) and come back as ``log_lines``.  ``scratch`` belongs to the
    caller, who removes it.
    """

    live = True  # the explorer's source protocol: q stops the capture and shows what it recorded

    def __init__(
        self, config: CaptureConfig, scratch: Path, trace_path: Path | None = None, started: float | None = None
    ) -> None:
        self.config = config
        self.trace_path = trace_path or scratch / f"{_slug(config.model)}.pt.trace.json.gz"
        self.log_path = scratch / "profiler.log"
        self.title = f"live {config.model}"
        self.stop = threading.Event()
        self.started = time.perf_counter() if started is None else started  # progress counts from here
        self.result: CaptureResult | None = None  # once captured
        self.capture_s = 0.0  # seconds from the start to the trace written, once captured

    def capture(
        self, on_progress: Callable[[CaptureProgress], None] | None = None, stopped: Callable[[], bool] | None = None
    ):
        """Run the capture (imports torch: seconds, so the UI is already up)."""
        if on_progress:
            on_progress(
                CaptureProgress(
                    0, self.config.total_steps, "setup", time.perf_counter() - self.started, None, "importing torch"
                )
            )
        from tuiprof.capture.session import native_stderr_to, profile_training

        with native_stderr_to(self.log_path):
            self.result = profile_training(
                self.config,
                self.trace_path,
                on_progress,
                stopped or self.stop.is_set,
                started=self.started,
                read_log=self.log_lines,
            )
        self.result.facts.log_lines = self.log_lines()
        self.capture_s = time.perf_counter() - self.started  # the exit line's time: not the explorer's
        return self.result

    def build_model(self) -> TraceModel:
        result = self.result
        if result is None or result.trace_path is None:
            raise NothingCaptured(self.config, result.steps_done if result else 0)
        return analyze(load_trace(result.trace_path), result.facts)

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    # The explorer's source protocol (tuiprof.tui.sources.ModelSource).
    def __call__(self, report, cancelled) -> tuple[TraceModel, list[str]]:
        def on_progress(progress: CaptureProgress) -> None:
            total = progress.total_steps
            report(
                describe_progress(progress, elapsed=False),
                progress.step / total if total and progress.phase != "setup" else None,
            )

        self.capture(on_progress, lambda: cancelled() or self.stop.is_set())
        report(ANALYSING, None)
        return self.build_model(), self.log_lines()


def describe_progress(progress: CaptureProgress, elapsed: bool = True) -> str:
    """``ProfilerStep#2 (3/5) · active · 4.2s · loss 2.3026`` (the loss of the step before):
    the step as the trace names it (torch numbers them from 0), then how far the run is;
    ``writing the trace…`` after the last step (torch's export takes seconds).

    ``elapsed=False`` for the explorer's loading panel, which shows its own clock."""
    clock = f" · {format_clock(progress.elapsed_s)}" if elapsed else ""
    if progress.phase == "setup":
        return f"{progress.message}…{clock}"
    if progress.phase == SAVING:
        return f"writing the trace ({progress.step}/{progress.total_steps} steps run)…{clock}"
    if progress.phase == "done":  # ``step`` counts the steps that finished, none is running
        text = f"{progress.step}/{progress.total_steps} steps run · done{clock}"
    else:
        number = min(progress.step + 1, progress.total_steps)
        text = f"ProfilerStep#{number - 1} ({number}/{progress.total_steps}) · {progress.phase}{clock}"
    if progress.loss is not None:
        text += f" · loss {progress.loss:.4f}"
    if progress.message:
        text += f" · {progress.message}"
    return text


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name.split(":")[-1])
