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
from tuiprof.analysis.timeline import CallTarget, DeviceTarget, Timeline, TimelineTarget, WindowTarget, build_timeline
from tuiprof.report.timeline import range_text, slice_text
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.timeline_canvas import TimelineCanvas

HINT = "enter: detail · v: range · g: next idle gap · f: fit step · +/-: zoom · h/l: pan · j/k: lane · w/b: slice"


class TimelineView(ExplorerView):
    view_id = "timeline"
    title = "Timeline"
    _pending: TimelineTarget | None = None  # a T target that arrived before the timeline's index

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

    def show_target(self, target: TimelineTarget) -> None:
        """Select what another view's ``T`` asked for: a call, a device event or a step's window."""
        timeline, canvas = self.timeline, self.query_one(TimelineCanvas)
        if timeline is None or timeline.model is not self.model:
            self._pending = target
            return
        self._pending = None
        match target:
            case WindowTarget(start_ns, end_ns):
                canvas.show_window(start_ns, end_ns)
                return
            case CallTarget(row):
                # The call with the device work it launched: on a GPU the kernels run later, often off a window around the call.
                item, launched = timeline.call_slice(row), timeline.launched_span(row)
            case DeviceTarget(index):
                item, launched = timeline.device_slice(index), None
        if item is None:
            self.app.bell()
            return
        canvas.reveal(item, launched)

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
            self.run_worker(
                lambda: self._range_stats(timeline, start, end), thread=True, exclusive=True, group="timeline-range"
            )
        elif message.item is not None:
            pane.update(slice_text(timeline, timeline.detail(message.item)))
        else:
            pane.update(Text("nothing under the cursor in this lane", style="dim"))

    def _range_stats(self, timeline: Timeline, start_ns: int, end_ns: int) -> None:
        stats = timeline.range_stats(start_ns, end_ns, self.query_one(TimelineCanvas).lanes)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self.query_one("#timeline-detail", Static).update, range_text(timeline, stats))
