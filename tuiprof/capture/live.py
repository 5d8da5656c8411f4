"""A live capture as a model source: profile, then analyse, with progress.

Used by the explorer (in its worker thread) and by ``--no-tui`` alike, so
both see the same model: the trace file's analysis plus what only the live
run knows (torch's FLOPs, qualified module names, parameters, shapes).
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from tuiprof.analysis import load_model
from tuiprof.analysis.live import apply_live_facts
from tuiprof.analysis.model import TraceModel
from tuiprof.capture.config import CaptureConfig, CaptureProgress
from tuiprof.errors import TraceError


class NothingCaptured(TraceError):
    """Stopped before the first active step: there is no trace to show."""

    exit_code = 130

    def __init__(self, model: str) -> None:
        super().__init__(model, "stopped before any step was recorded", "let it reach the active steps")


class LiveCapture:
    """Profile ``config`` into ``trace_path`` and build the model.

    Kineto's native log lines go to a file (never onto the screen) and come
    back as ``log_lines``.
    """

    def __init__(self, config: CaptureConfig, trace_path: Path | None = None) -> None:
        self.config = config
        self.scratch = Path(tempfile.mkdtemp(prefix="tuiprof-"))
        self.trace_path = trace_path or self.scratch / f"{_slug(config.model)}.pt.trace.json.gz"
        self.log_path = self.scratch / "profiler.log"
        self.title = f"live {config.model}"
        self.stop = threading.Event()
        self.result = None  # CaptureResult once captured

    def capture(self, on_progress: Callable[[CaptureProgress], None] | None = None):
        """Run the capture (imports torch: seconds, so the UI is already up)."""
        from tuiprof.capture.session import native_stderr_to, profile_training

        with native_stderr_to(self.log_path):
            self.result = profile_training(self.config, self.trace_path, on_progress, self.stop)
        self.result.facts.log_lines = self.log_lines()
        return self.result

    def build_model(self) -> TraceModel:
        result = self.result
        if result is None or result.trace_path is None:
            raise NothingCaptured(self.config.model)
        return apply_live_facts(load_model(result.trace_path), result.facts)

    def log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    # The explorer's source protocol (tuiprof.tui.sources.ModelSource).
    def __call__(self, report, cancelled) -> tuple[TraceModel, list[str]]:
        report("loading torch", None)

        def on_progress(progress: CaptureProgress) -> None:
            if cancelled():
                self.stop.set()  # ends the loop after this step; what was recorded is kept
            report(describe_progress(progress), progress.step / progress.total_steps if progress.total_steps else None)

        self.capture(on_progress)
        report("analysing the captured trace", None)
        return self.build_model(), self.log_lines()


def describe_progress(progress: CaptureProgress) -> str:
    if progress.phase == "setup":
        return f"{progress.message} · {progress.elapsed_s:.1f} s"
    text = f"step {min(progress.step + 1, progress.total_steps)}/{progress.total_steps} · {progress.phase} · {progress.elapsed_s:.1f} s"
    if progress.loss is not None:
        text += f" · loss {progress.loss:.4f}"
    if progress.message:
        text += f" · {progress.message}"
    return text


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name.split(":")[-1])
