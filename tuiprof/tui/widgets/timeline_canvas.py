"""The Timeline drawn in the terminal: lanes of block elements under a ruler, a cursor,
zoom and pan by keys.

The widget only keeps where the user looks (window, cursor, lane, range,
expanded threads) and asks the :class:`~tuiprof.analysis.timeline.Timeline`
for one frame per refresh: columns x lanes x log(events), whatever the trace.
What a cursor or a range means (a slice's detail, a range's tables) goes out
as :class:`TimelineCanvas.Focused` for the view's detail pane.
"""

from __future__ import annotations

from functools import lru_cache

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from tuiprof.analysis.operators import STEP_WILDCARD
from tuiprof.analysis.timeline import DEFAULT_DEPTH, Lane, Slice, Timeline
from tuiprof.report.names import cut_end
from tuiprof.report.timeline import LABEL_WIDTH, LaneLine, draw, fit, ruler, window_text
from tuiprof.tui.commands import Command, bindings

PAN_FRACTION = 8  # h/l move the window by 1/8 of its width
ALL_DEPTHS = 1_000
HEADER_LINES = 3  # status line, ruler labels, ruler marks

TIMELINE_COMMANDS: tuple[Command, ...] = (
    Command(
        "plus,equals_sign",
        "zoom(0.5)",
        "Zoom in",
        "timeline: zoom in around the cursor",
        scope="timeline",
        show=True,
        display="+",
        palette=False,
    ),
    Command(
        "minus",
        "zoom(2.0)",
        "Zoom out",
        "timeline: zoom out around the cursor",
        scope="timeline",
        show=True,
        display="-",
        palette=False,
    ),
    Command(
        "left,h",
        "pan(-1)",
        "Pan left",
        "timeline: pan left (the cursor moves along)",
        scope="timeline",
        display="← h",
        palette=False,
    ),
    Command("right,l", "pan(1)", "Pan right", "timeline: pan right", scope="timeline", display="→ l", palette=False),
    Command(
        "up,k",
        "lane(-1)",
        "Lane up",
        "timeline: cursor to the lane above",
        scope="timeline",
        display="↑ k",
        palette=False,
    ),
    Command(
        "down,j",
        "lane(1)",
        "Lane down",
        "timeline: cursor to the lane below",
        scope="timeline",
        display="↓ j",
        palette=False,
    ),
    Command(
        "w", "slice(1)", "Next slice", "timeline: cursor to the next slice of the lane", scope="timeline", palette=False
    ),
    Command(
        "b",
        "slice(-1)",
        "Prev slice",
        "timeline: cursor to the previous slice of the lane",
        scope="timeline",
        palette=False,
    ),
    Command(
        "f",
        "fit_step",
        "Fit step",
        "timeline: fit the step under the cursor (the whole trace without steps)",
        scope="timeline",
        show=True,
        palette=False,
    ),
    Command("F", "fit_all", "Fit all", "timeline: fit the whole trace", scope="timeline", display="F", palette=False),
    # n/p, not ]/[: those switch the rank of a distributed run in every view.
    Command("n", "step(1)", "Next step", "timeline: fit the next step", scope="timeline", palette=False),
    Command("p", "step(-1)", "Prev step", "timeline: fit the previous step", scope="timeline", palette=False),
    Command(
        "g",
        "gap(1)",
        "Idle gap",
        "timeline: next device-idle gap at least one column wide",
        scope="timeline",
        show=True,
        palette=False,
    ),
    Command(
        "G",
        "gap(-1)",
        "Prev gap",
        "timeline: previous device-idle gap at least one column wide",
        scope="timeline",
        display="G",
        palette=False,
    ),
    Command(
        "enter",
        "open_slice",
        "Detail",
        "timeline: the slice under the cursor: detail, launch/kernel links highlighted",
        scope="timeline",
        palette=False,
    ),
    Command(
        "v",
        "toggle_range",
        "Range",
        "timeline: start / end a range at the cursor: busy % per lane, top operators and kernels",
        scope="timeline",
        show=True,
        palette=False,
    ),
    Command(
        "space",
        "toggle_depth",
        "Depth",
        "timeline: show all nesting depths of the cursor's thread, or the first 3",
        scope="timeline",
        palette=False,
    ),
    Command(
        "o",
        "open_table",
        "Table",
        "timeline: the selected slice's row in Operators / Kernels",
        scope="timeline",
        palette=False,
    ),
)

GROUP_STYLES = {"step": "blue", "cpu": "cyan", "python": "magenta", "memory": "bright_blue", "idle": "red"}
KIND_STYLES = {
    "gpu": ("green", "yellow", "bright_yellow", "bright_red"),  # kernel, memcpy, memset, communication
    "step": ("blue", "green", "magenta", "yellow"),  # phases: data loading, forward, backward, optimizer
}


class TimelineCanvas(Widget, can_focus=True):
    DEFAULT_CSS = (
        "TimelineCanvas { height: 1fr; text-wrap: nowrap; text-overflow: clip; }"  # a wrapped line pushes a lane out
    )
    PANE_COMMANDS = TIMELINE_COMMANDS  # what ? lists in the Timeline view
    BINDINGS = bindings(TIMELINE_COMMANDS)

    class Focused(Message):
        """What the cursor points at changed: a slice (or None), or a range (start, end)."""

        def __init__(self, item: Slice | None, selected_range: tuple[int, int] | None) -> None:
            super().__init__()
            self.item = item
            self.selected_range = selected_range

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: Timeline | None = None
        self.start_ns = self.end_ns = self.cursor_ns = 0
        self.lane_index = 0
        self.top = 0  # first lane shown below the step lanes (set when drawn: _lanes_in_view)
        self.anchor_ns: int | None = None  # range selection start
        self.depths: dict[str, int] = {}
        self.selected: Slice | None = None
        self.linked: list[Slice] = []
        self.notice = ""  # why the last key did nothing, in place of the status line until the next move

    # ------------------------------------------------------------ state

    def show(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.start_ns, self.end_ns = timeline.begin_ns, timeline.end_ns
        self.cursor_ns = timeline.begin_ns
        if timeline.steps:
            first = timeline.steps[0]
            self.start_ns, self.end_ns, self.cursor_ns = first.start_ns, first.end_ns, first.start_ns
        self.refresh()

    @property
    def lanes(self) -> list[Lane]:
        return self.timeline.select(None, self.depths) if self.timeline else []

    @property
    def lane(self) -> Lane | None:
        lanes = self.lanes
        return lanes[min(self.lane_index, len(lanes) - 1)] if lanes else None

    @property
    def columns(self) -> int:
        return max(1, self.size.width - LABEL_WIDTH - 1)

    @property
    def selected_range(self) -> tuple[int, int] | None:
        if self.anchor_ns is None:
            return None
        return min(self.anchor_ns, self.cursor_ns), max(self.anchor_ns, self.cursor_ns)

    def _set_window(self, start: int, end: int) -> None:
        """Move the window, at least one ns per column, at most twice the trace."""
        timeline = self.timeline
        assert timeline is not None
        span = timeline.end_ns - timeline.begin_ns
        width = min(max(end - start, self.columns), 2 * span + self.columns)
        start = min(max(start, timeline.begin_ns - width // 2), timeline.end_ns - width // 2)
        self.start_ns, self.end_ns = start, start + width

    def _see(self, time_ns: int) -> None:
        """Centre the window on ``time_ns`` when it lies outside."""
        if not self.start_ns <= time_ns < self.end_ns:
            width = self.end_ns - self.start_ns
            self._set_window(time_ns - width // 2, time_ns - width // 2 + width)

    def _moved(self) -> None:
        self.notice = ""
        self.cursor_ns = min(max(self.cursor_ns, self.start_ns), self.end_ns - 1)
        self.refresh()
        if self.selected_range is not None:
            self.post_message(self.Focused(None, self.selected_range))

    def _select(self, item: Slice | None) -> None:
        self.selected = item
        self.linked = self.timeline.detail(item).links if item is not None and self.timeline else []
        self.post_message(self.Focused(item, self.selected_range))

    def reveal(self, item: Slice, with_span: tuple[int, int] | None = None) -> None:
        """Select ``item`` and show it: its lane (every depth of its thread when it lies deep),
        the window a few times its length around it, or around it and ``with_span`` (the
        device work a call launched), the cursor on its start."""
        lane = item.lane
        if lane.group in ("cpu", "python") and lane.depth >= self.depths.get(lane.thread, DEFAULT_DEPTH):
            self.depths[lane.thread] = ALL_DEPTHS
        keys = [shown.key for shown in self.lanes]
        self.lane_index = keys.index(lane.key) if lane.key in keys else self.lane_index
        if lane.group in ("cpu", "python"):  # the thread's first lane on top, where room allows: it names the thread
            scrolled = [shown for shown in self.lanes if shown.group != "step"]
            self.top = next(
                (i for i, shown in enumerate(scrolled) if (shown.group, shown.thread) == (lane.group, lane.thread)),
                self.top,
            )
        start, end = item.start_ns, item.end_ns
        if with_span is not None:
            start, end = min(start, with_span[0]), max(end, with_span[1])
        margin = max(item.duration_ns, (end - start) // 16)
        self.show_window(start - margin, end + margin)
        self.cursor_ns = item.start_ns
        self._select(item)
        self._moved()

    def show_window(self, start_ns: int, end_ns: int) -> None:
        """Fit ``start_ns``..``end_ns`` (a step's window) with the cursor at its start."""
        self._set_window(start_ns, end_ns)
        self.cursor_ns = start_ns
        self._moved()

    # ------------------------------------------------------------ actions

    def action_zoom(self, factor: float) -> None:
        if self.timeline is None:
            return
        left = round((self.cursor_ns - self.start_ns) * factor)
        right = round((self.end_ns - self.cursor_ns) * factor)
        self._set_window(self.cursor_ns - left, self.cursor_ns + right)
        self._moved()

    def action_pan(self, direction: int) -> None:
        if self.timeline is None:
            return
        shift = direction * max(1, (self.end_ns - self.start_ns) // PAN_FRACTION)
        offset = self.cursor_ns - self.start_ns
        self._set_window(self.start_ns + shift, self.end_ns + shift)
        self.cursor_ns = self.start_ns + offset
        self._moved()

    def action_lane(self, direction: int) -> None:
        self.lane_index = min(max(0, self.lane_index + direction), max(0, len(self.lanes) - 1))
        self._moved()

    def action_slice(self, direction: int) -> None:
        lane = self.lane
        if self.timeline is None or lane is None:
            return
        item = self.timeline.next_slice(lane, self.cursor_ns, forward=direction > 0)
        if item is None:
            self.app.bell()
            return
        self.cursor_ns = item.start_ns
        self._see(item.start_ns)
        self._moved()
        self._select(item)

    def _fit(self, start: int, end: int) -> None:
        self._set_window(start, end)
        self.cursor_ns = start
        self._moved()

    def action_fit_all(self) -> None:
        if self.timeline is not None:
            self._fit(self.timeline.begin_ns, self.timeline.end_ns)

    def action_fit_step(self) -> None:
        timeline = self.timeline
        if timeline is None:
            return
        at = timeline.step_at(self.cursor_ns)
        if at < 0:
            self.action_fit_all()
            return
        self._fit(timeline.steps[at].start_ns, timeline.steps[at].end_ns)

    def action_step(self, direction: int) -> None:
        timeline = self.timeline
        if timeline is None or not timeline.steps:
            self.app.bell()
            return
        at = min(max(0, timeline.step_at(self.cursor_ns) + direction), len(timeline.steps) - 1)
        self._fit(timeline.steps[at].start_ns, timeline.steps[at].end_ns)

    def action_gap(self, direction: int) -> None:
        timeline = self.timeline
        if timeline is None:
            return
        cell = (self.end_ns - self.start_ns) // self.columns
        gap = timeline.next_idle_gap(self.cursor_ns, min_ns=cell, forward=direction > 0)
        if gap is None:
            self.notice = no_gap_notice(timeline, self.cursor_ns, direction > 0)
            self.refresh()
            self.app.bell()
            return
        self.cursor_ns = gap.start_ns
        if gap.duration_ns > (self.end_ns - self.start_ns) * 3 // 4:  # show the whole gap with some context
            margin = gap.duration_ns // 4
            self._set_window(gap.start_ns - margin, gap.end_ns + margin)
        self._see(gap.start_ns)
        idle = timeline.idle
        if idle is not None and idle in self.lanes:
            self.lane_index = self.lanes.index(idle)
        self._moved()
        self._select(gap)

    def action_open_slice(self) -> None:
        lane = self.lane
        if self.timeline is None or lane is None:
            return
        item = self.timeline.slice_at(lane, self.cursor_ns)
        if item is None:
            self.app.bell()
        self._select(item)
        self.refresh()

    def action_toggle_range(self) -> None:
        self.anchor_ns = self.cursor_ns if self.anchor_ns is None else None
        self.refresh()
        self.post_message(self.Focused(self.selected, self.selected_range))

    def action_toggle_depth(self) -> None:
        lane = self.lane
        if lane is None or lane.group not in ("cpu", "python"):
            return
        shown = self.depths.get(lane.thread, DEFAULT_DEPTH)
        self.depths[lane.thread] = DEFAULT_DEPTH if shown > DEFAULT_DEPTH else ALL_DEPTHS
        self._moved()

    def action_open_table(self) -> None:
        from tuiprof.tui.messages import JumpTo

        item = self.selected
        if item is None or item.lane.group not in ("cpu", "gpu", "step"):
            self.app.bell()
            return
        view = "kernels" if item.lane.group == "gpu" else "operators"
        name = STEP_WILDCARD if item.lane.key == "step" else item.name  # the Operators row of every step
        self.post_message(JumpTo(view, name))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        """The wheel zooms around the cursor, where the terminal sends wheel events."""
        event.stop()
        self.action_zoom(0.5)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        event.stop()
        self.action_zoom(2.0)

    # ------------------------------------------------------------ drawing

    def render(self) -> Text:
        timeline = self.timeline
        if timeline is None:
            return Text("building the timeline…", style="dim")
        columns = self.columns
        lanes = self.lanes
        lane = self.lane
        text = Text(no_wrap=True, overflow="crop")
        if self.notice:
            text.append(cut_end(self.notice, self.size.width), style="bold yellow")
        else:
            text.append_text(
                window_text(timeline, self.start_ns, self.end_ns, columns, self.cursor_ns, lane, self.size.width)
            )
        labels, marks = ruler(timeline, self.start_ns, self.end_ns, columns)
        pad = " " * (LABEL_WIDTH + 1)
        text.append("\n" + pad + labels + "\n" + pad + marks, style="dim")
        shown = self._lanes_in_view(lanes, lane, self.size.height - HEADER_LINES)
        cursor_column = self._column(self.cursor_ns)
        chosen = self._chosen_columns(shown)
        in_range = self._range_columns()
        for line in draw(timeline, self.start_ns, self.end_ns, columns, shown):
            text.append("\n")
            text.append(fit(line.label, LABEL_WIDTH) + " ", style="reverse" if line.lane is lane else "bold")
            self._append_cells(text, line, cursor_column, chosen.get(line.lane.key, set()), in_range)
        return text

    def _lanes_in_view(self, lanes: list[Lane], current: Lane | None, rows: int) -> list[Lane]:
        """The lanes drawn in ``rows`` lines: the step lanes always (a jump to a step, a gap or
        a call is read against them), then the others from ``top``, moved just enough to show
        the cursor's lane (``current``) and no further down than the last lane needs.

        Worked out when drawn, with the canvas's height: a ``T`` from another view moves the
        cursor before the canvas is laid out, and scrolling then, for a height of 0, left
        one lane at the top (the call's) and the step and thread lanes above it out of view."""
        pinned = [lane for lane in lanes if lane.group == "step"]
        others = [lane for lane in lanes if lane.group != "step"]
        room = max(1, rows - len(pinned))
        top = min(self.top, max(0, len(others) - room))
        if current is not None and current.group != "step":
            at = next(i for i, lane in enumerate(others) if lane is current)
            top = min(max(top, at - room + 1), at)
        self.top = top
        return pinned + others[top : top + room]

    def _column(self, time_ns: int) -> int:
        return (time_ns - self.start_ns) * self.columns // max(1, self.end_ns - self.start_ns)

    def _columns_of(self, start: int, end: int) -> set[int]:
        first, last = max(0, self._column(start)), min(self.columns - 1, self._column(max(start, end - 1)))
        return set(range(first, last + 1))

    def _chosen_columns(self, lanes: list[Lane]) -> dict[str, set[int]]:
        """Columns of the selected slice and of the slices linked to it, per lane."""
        marked: dict[str, set[int]] = {}
        for item in [self.selected, *self.linked] if self.selected is not None else []:
            marked.setdefault(item.lane.key, set()).update(self._columns_of(item.start_ns, item.end_ns))
        return marked

    def _range_columns(self) -> set[int]:
        selected = self.selected_range
        return self._columns_of(*selected) if selected is not None else set()

    def _append_cells(self, text: Text, line: LaneLine, cursor: int, chosen: set[int], in_range: set[int]) -> None:
        """Cells in runs of one style: colour from the event kind, the cursor reversed,
        the selected and linked slices underlined, a selected range on a grey background."""
        group = line.lane.group
        by_kind = group == "gpu" or line.lane.key == "phase"  # the lanes coloured by event kind
        palette = KIND_STYLES.get(group, ()) if by_kind else ()
        base = GROUP_STYLES.get(group, "white")
        run_style: Style | None = None
        run = ""
        for column, char in enumerate(line.cells):
            kind = line.kinds[column]
            colour = palette[kind] if 0 <= kind < len(palette) else base
            style = _style(colour, column == cursor, column in chosen, line.boxed[column], column in in_range)
            if style is not run_style and run:
                text.append(run, style=run_style)
                run = ""
            run_style = style
            run += char
        if run:
            text.append(run, style=run_style)


def no_gap_notice(timeline: Timeline, cursor_ns: int, forward: bool) -> str:
    """Why ``g`` (``G``) found no idle gap at least one column wide: none at this zoom (a
    shorter one lies that way), none further that way, or no device in the trace."""
    if timeline.idle is None:
        return "no device-idle lane: the trace has no device activity"
    if timeline.next_idle_gap(cursor_ns, min_ns=1, forward=forward) is not None:
        return "no idle gap of a column at this zoom: + to zoom in"
    return f"no idle gap {'after' if forward else 'before'} the cursor: {'G' if forward else 'g'} for the {'previous' if forward else 'next'} one"


@lru_cache(maxsize=512)
def _style(colour: str, cursor: bool, chosen: bool, boxed: bool, in_range: bool) -> Style:
    """One Style object per combination (a frame has thousands of cells and few combinations)."""
    return Style(
        color=colour, reverse=cursor, underline=chosen, bold=chosen or boxed, bgcolor="grey23" if in_range else None
    )
