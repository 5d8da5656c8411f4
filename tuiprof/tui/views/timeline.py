"""Timeline: every thread, GPU stream, step, memory curve and device-idle gap over time.

The lanes are indexed once, in a worker thread, as soon as the model arrives
(``build_timeline``); each key press then draws one frame from the indexes.
The detail pane shows the slice under the cursor after ``enter`` (with its
launch/kernel links highlighted in the lanes) or the statistics of a range
marked with ``v``, computed off the UI thread (a range over a 1 GB trace
aggregates a million calls).
"""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.timeline import Timeline, build_timeline
from tuiprof.report.timeline import range_text, slice_text
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.timeline_canvas import TimelineCanvas

HINT = "enter: detail · v: range · g: next idle gap · f: fit step · +/-: zoom · h/l: pan · j/k: lane · w/b: slice"


class TimelineView(ExplorerView):
    view_id = "timeline"
    title = "Timeline"
    _pending: tuple | None = None  # a T target that arrived before the timeline's index

    def compose(self) -> ComposeResult:
        yield TimelineCanvas(id="timeline-canvas")
        yield Static(Text(HINT, style="dim"), id="timeline-detail", classes="detail")

    def focus_target(self) -> Widget:
        return self.query_one(TimelineCanvas)

    def show_model(self, model: TraceModel) -> None:
        # Workers get the model through a closure: ``@work`` would put repr() of its arguments
        # into the worker's description, and the repr of a 1 GB trace's model is gigabytes.
        self.run_worker(lambda: self._build(model), thread=True, exclusive=True, group="timeline-build")

    def _build(self, model: TraceModel) -> None:
        timeline = build_timeline(model)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._show_timeline, timeline)

    def _show_timeline(self, timeline: Timeline) -> None:
        self.query_one(TimelineCanvas).show(timeline)
        if self._pending is not None:  # a T pressed elsewhere before the index was ready
            self.show_target(self._pending)

    def show_target(self, target: tuple) -> None:
        """Select what another view's ``T`` asked for: ("call", row), ("device", index), ("window", start, end)."""
        timeline, canvas = self.timeline, self.query_one(TimelineCanvas)
        if timeline is None or timeline.model is not self.model:
            self._pending = target
            return
        self._pending = None
        kind, *where = target
        if kind == "window":
            canvas.show_window(*where)
            return
        item = timeline.call_slice(where[0]) if kind == "call" else timeline.device_slice(where[0])
        if item is None:
            self.app.bell()
            return
        # A call with the device work it launched: on a GPU the kernels run later, often off a window around the call.
        canvas.reveal(item, timeline.launched_span(where[0]) if kind == "call" else None)

    @property
    def timeline(self) -> Timeline | None:
        return self.query_one(TimelineCanvas).timeline

    @on(TimelineCanvas.Focused)
    def _focused(self, message: TimelineCanvas.Focused) -> None:
        timeline = self.timeline
        pane = self.query_one("#timeline-detail", Static)
        if timeline is None:
            return
        if message.selected_range is not None:
            start, end = message.selected_range
            self.run_worker(lambda: self._range_stats(timeline, start, end), thread=True, exclusive=True, group="timeline-range")
        elif message.item is not None:
            pane.update(slice_text(timeline, timeline.detail(message.item)))
        else:
            pane.update(Text("nothing under the cursor in this lane", style="dim"))

    def _range_stats(self, timeline: Timeline, start_ns: int, end_ns: int) -> None:
        stats = timeline.range_stats(start_ns, end_ns, self.query_one(TimelineCanvas).lanes)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.query_one("#timeline-detail", Static).update, range_text(timeline, stats))
