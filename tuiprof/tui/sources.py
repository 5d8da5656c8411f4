"""Where the explorer's model comes from, run in a worker thread.

A source is any callable ``(report, cancelled) -> (model, log_lines)``:
``report(text, fraction)`` shows progress, ``cancelled()`` says the user
pressed q.  ``live`` says whether it is a capture still running (q then stops
it after the step and shows what was recorded, instead of quitting).  The file
source lives here; the live source lives in
``tuiprof.capture`` (the only package that imports torch).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from tuiprof.analysis import analyze
from tuiprof.analysis.model import TraceModel
from tuiprof.report.units import format_mib_progress
from tuiprof.trace import LoadProgress, load_trace
from tuiprof.trace.cache import save_in_background

Report = Callable[[str, "float | None"], None]


class LoadCancelled(Exception):
    """The user asked to stop loading."""


class ModelSource(Protocol):
    title: str
    live: bool  # a capture still running: the first q stops it and shows what it recorded

    def __call__(self, report: Report, cancelled: Callable[[], bool]) -> tuple[TraceModel, list[str]]: ...


class FileSource:
    """Open a trace file or run directory."""

    live = False

    def __init__(self, path: str, select: str | None = None) -> None:
        self.path = path
        self.select = select
        self.title = path

    def __call__(self, report: Report, cancelled: Callable[[], bool]) -> tuple[TraceModel, list[str]]:
        def on_progress(progress: LoadProgress) -> None:
            if cancelled():
                raise LoadCancelled
            events = f", {progress.events:,} events" if progress.events else ""
            report(
                f"{progress.phase} {format_mib_progress(progress.done_bytes, progress.total_bytes)}{events}",
                progress.done_bytes / progress.total_bytes if progress.total_bytes else None,
            )

        store = load_trace(self.path, self.select, on_progress)
        if cancelled():
            raise LoadCancelled
        report(f"analysing {store.event_count:,} events", None)
        model = analyze(store)
        save_in_background(store)  # its columns go to the cache while the model is shown
        return model, list(model.log_lines)  # a saved live capture keeps the profiler's log


class PreparedSource:
    """A model already built (``tuiprof run`` analyses before the UI starts)."""

    live = False

    def __init__(self, model: TraceModel, title: str, log_lines: list[str] | None = None) -> None:
        self.model = model
        self.title = title
        self.log_lines = log_lines or []

    def __call__(self, report: Report, cancelled: Callable[[], bool]) -> tuple[TraceModel, list[str]]:
        return self.model, self.log_lines
