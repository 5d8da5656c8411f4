"""Memory over time drawn with block characters: allocated and reserved, or stacked by torch's
categories; every curve's y axis starts at 0 (``0 B`` on its bottom line), the peak is marked
``▲`` under its column, the phase letters and categories are named in the legend lines."""

from __future__ import annotations

import numpy as np
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.text import Text

from tuiprof.analysis.memory import MemoryTimeline
from tuiprof.analysis.memory_categories import CategorisedMemory
from tuiprof.analysis.model import TraceModel
from tuiprof.report.memory_texts import ALLOCATOR_PEAK, NEEDS_CAPTURE_SHORT, PEAK, before_trace_sentence, peak_title
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import SIZE_CHARS, format_bytes, format_us
from tuiprof.report.views import category_words

LEVELS = " ▁▂▃▄▅▆▇█"


class MemoryCurve:
    """A rich renderable: one column per time bucket, height = chart lines."""

    def __init__(self, timeline: MemoryTimeline, origin_ns: int, height: int = 6, peak_label: str = "") -> None:
        self.timeline = timeline
        self.origin_ns = origin_ns
        self.height = height
        self.peak_label = peak_label
        self._buckets: dict[int, tuple[list[int], list[int], int]] = {}  # per width: _bucket

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        timeline = self.timeline
        axis = SIZE_CHARS
        width = max(10, options.max_width - axis - 1)
        buckets_alloc, buckets_reserved, peak_column = self._bucket(width)
        top = max(max(buckets_alloc), max(buckets_reserved or [0])) or 1
        for line in range(self.height, 0, -1):
            text = _chart_row(top, line, self.height, axis)
            for column in range(width):
                alloc = buckets_alloc[column] / top * self.height
                reserved = (buckets_reserved[column] / top * self.height) if buckets_reserved else 0.0
                char, style = _cell(alloc, reserved, line)
                if column == peak_column and style != "dim":
                    style = "bold red"
                text.append(char, style=style)
            yield text
        start = (
            format_us((int(timeline.times_ns[0]) - self.origin_ns) / 1000) if len(timeline.times_ns) else format_us(0)
        )
        end = format_us((int(timeline.times_ns[-1]) - self.origin_ns) / 1000) if len(timeline.times_ns) else start
        yield _time_axis(start, end, width, axis, peak_column)
        legend = Text(" " * (axis + 1))
        legend.append("█ allocated", style="cyan")
        if buckets_reserved:  # some reserved bytes (the CPU allocator reports none)
            legend.append("  █ reserved", style="blue")
        legend.append(
            f"  ▲ {ALLOCATOR_PEAK} {format_bytes(timeline.peak_bytes)} at {format_us((timeline.peak_ns - self.origin_ns) / 1000)}",
            style="bold red",
        )
        if self.peak_label:
            legend.append(f" in {plain(self.peak_label, DISPLAY_CHARS)}", style="red")  # operator and module names
        yield legend

    def _bucket(self, width: int) -> tuple[list[int], list[int], int]:
        """Per column the highest allocated and reserved bytes (empty columns carry the last
        level; no reserved columns when the allocator reported none) and the peak's column.
        Kept per width: a chart is measured and drawn at one width, and the Memory view draws
        it ahead in the background (a 1 GB trace has millions of points)."""
        if width not in self._buckets:
            self._buckets[width] = self._bucket_anew(width)
        return self._buckets[width]

    def _bucket_anew(self, width: int) -> tuple[list[int], list[int], int]:
        timeline = self.timeline
        if not len(timeline.times_ns):
            return [0] * width, [], -1
        times = np.asarray(timeline.times_ns, dtype=np.int64)
        first = int(times[0])
        span = max(1, int(times[-1]) - first)
        columns = np.minimum(width - 1, (times - first) * width // span)

        def highest(values: tuple[int, ...] | np.ndarray) -> list[int]:
            levels = np.zeros(width, dtype=np.int64)
            np.maximum.at(levels, columns, np.asarray(values, dtype=np.int64))
            filled = np.where(levels != 0, np.arange(width), 0)  # carry the level through empty buckets
            return levels[np.maximum.accumulate(filled)].tolist()

        reserved = np.asarray(timeline.reserved, dtype=np.int64)
        peak_column = min(width - 1, (timeline.peak_ns - first) * width // span)
        return highest(timeline.allocated), highest(reserved) if reserved.any() else [], peak_column


def _chart_row(top: int, line: int, height: int, axis: int) -> Text:
    """A chart line with its axis label, dim; the cells appended after keep their own colour
    (with the whole line dim they drew in another colour than the legend's)."""
    text = Text()
    text.append(_axis_label(top, line, height, axis), style="dim")
    return text


def _axis_label(top: int, line: int, height: int, axis: int) -> str:
    """The y axis: the top line's level, ``0 B`` on the bottom line (every curve starts at 0)."""
    if line == height:
        return format_bytes(top).rjust(axis) + " "
    if line == 1:
        return "0 B".rjust(axis) + " "
    return " " * (axis + 1)


def _time_axis(start: str, end: str, width: int, axis: int, peak_column: int) -> Text:
    """``start ... ▲ ... end``: the time axis with the peak's column marked; a time label the
    mark would fall on gives way to it (the legend says when the peak was)."""
    if peak_column < len(start) + 1:
        start = ""
    elif peak_column >= width - len(end) - 1:
        end = ""
    text = Text(" " * (axis + 1) + start + end.rjust(width - len(start)), style="dim")
    if 0 <= peak_column < width:
        at = axis + 1 + peak_column
        text = text[:at] + Text("▲", style="bold red") + text[at + 1 :]
    return text


def _cell(alloc: float, reserved: float, line: int) -> tuple[str, str]:
    """The character for chart row ``line`` (1 = bottom) of one column."""
    if alloc >= line:
        return "█", "cyan"
    if alloc > line - 1:
        return LEVELS[int((alloc - (line - 1)) * 8)], "cyan"
    if reserved >= line:
        return "█", "blue"
    if reserved > line - 1:
        return LEVELS[int((reserved - (line - 1)) * 8)], "blue"
    return " ", "dim"


# torch's export_memory_timeline colours, in terminal colours.
CATEGORY_STYLES = {
    "parameter": "green",
    "optimizer_state": "yellow",
    "input": "white",
    "temporary": "magenta",
    "activation": "red",
    "gradient": "blue",
    "autograd_detail": "cyan",
    "unknown": "bright_black",
}
PHASE_MARKS = {
    "forward": ("f", "green"),
    "backward": ("b", "red"),
    "optimizer": ("o", "yellow"),
    "data loading": ("d", "cyan"),
}


class CategoryCurve:
    """A rich renderable: memory stacked by torch's categories over time, one
    column per time bucket (the bucket's highest point, so the peak is never
    averaged away), the steps' phases under it and the peak marked."""

    def __init__(
        self,
        memory: CategorisedMemory,
        origin_ns: int,
        height: int = 4,
        phases: tuple[tuple[int, int, str], ...] = (),
        compact: bool = False,
    ) -> None:
        self.memory = memory
        self.origin_ns = origin_ns
        self.height = height
        self.phases = phases
        # compact (a short terminal): no time axis, one legend flow that also says how much
        # of the peak came from before the trace (else a line of its own, memory_view_chart)
        self.compact = compact
        self._buckets: dict[int, tuple[list[list[int]], int]] = {}  # per width: _bucket

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        memory = self.memory
        axis = SIZE_CHARS
        width = max(10, options.max_width - axis - 1)
        columns, peak_column = self._bucket(width)
        top = memory.peak_bytes or 1
        for line in range(self.height, 0, -1):
            text = _chart_row(top, line, self.height, axis)
            for stack in columns:
                text.append(*self._cell(stack, top, line))
            yield text
        phase_row = Text("phase".rjust(axis) + " ", style="dim")
        for column in range(width):
            mark, style = self._phase_at(column, width)
            phase_row.append(
                "▲" if column == peak_column else mark, style="bold red" if column == peak_column else style
            )
        yield phase_row
        times = memory.times_ns
        start = format_us((int(times[0]) - self.origin_ns) / 1000)
        end = format_us((int(times[-1]) - self.origin_ns) / 1000)
        if not self.compact:
            yield Text(" " * (axis + 1) + start + end.rjust(width - len(start)), style="dim")
        shown = [c for c, total in zip(memory.categories, memory.bytes.max(axis=0).tolist()) if total > 0]
        entries = [Text("█ ", style=CATEGORY_STYLES.get(c, "")) + Text(category_words(c)) for c in shown]
        phase_names = sorted({name for *_, name in self.phases}, key=list(PHASE_MARKS).index)
        marks = [Text(f"{PHASE_MARKS[p][0]} {p}", style="dim") for p in phase_names]
        if self.compact:
            marks.append(Text(f"▲ {PEAK}", style="bold red"))
            before = memory.before_trace_bytes
            if before_trace_sentence(memory.peak_bytes, before) is not None:
                marks.append(Text(f"{format_bytes(before)} of it from before the trace", style="dim"))
            yield from _legend_lines(entries + marks, options.max_width, axis)
            return
        marks.append(Text(f"▲ {PEAK} {format_bytes(memory.peak_bytes)}", style="bold red"))
        yield from _legend_lines(entries, options.max_width, axis)
        yield from _legend_lines(marks, options.max_width, axis, "phase: ")

    def _bucket(self, width: int) -> tuple[list[list[int]], int]:
        """Per column, the category bytes of its highest point (empty columns carry the last
        level; of equal points the latest), and the peak's column.  Kept per width, as
        MemoryCurve's."""
        if width not in self._buckets:
            self._buckets[width] = self._bucket_anew(width)
        return self._buckets[width]

    def _bucket_anew(self, width: int) -> tuple[list[list[int]], int]:
        memory = self.memory
        times = memory.times_ns
        first, span = int(times[0]), max(1, int(times[-1]) - int(times[0]))
        columns_of = np.minimum(width - 1, (times - first) * width // span)
        totals = memory.bytes.sum(axis=1)
        points = np.arange(len(totals))
        order = np.lexsort((points, totals, columns_of))  # by column, then height, then time
        ordered_columns = columns_of[order]
        highest = np.append(ordered_columns[1:] != ordered_columns[:-1], True)  # each column's last
        best = np.full(width, -1, dtype=np.int64)
        best[ordered_columns[highest]] = order[highest]
        stacks: list[list[int]] = []
        last = [0] * len(memory.categories)
        for column in range(width):
            if best[column] >= 0:
                last = memory.bytes[best[column]].tolist()
            stacks.append(last)
        return stacks, int(columns_of[memory.peak_index])

    def _cell(self, stack: list[int], top: int, line: int) -> tuple[str, str]:
        """The character and style of chart row ``line`` (1 = bottom) of one column."""
        scale = self.height / top
        filled = sum(stack) * scale - (line - 1)
        if filled <= 0:
            return " ", "dim"
        level = min(filled, 1.0)
        # the category at the middle of the cell (the top of the stack for a partial cell)
        point = (line - 1) + level / 2
        running = 0.0
        style = ""
        for category, size in zip(self.memory.categories, stack):
            running += size * scale
            if size and running >= point:
                style = CATEGORY_STYLES.get(category, "")
                break
        return ("█" if level >= 1 else LEVELS[max(1, int(level * 8))]), style

    def _phase_at(self, column: int, width: int) -> tuple[str, str]:
        times = self.memory.times_ns
        first, span = int(times[0]), max(1, int(times[-1]) - int(times[0]))
        middle = first + (2 * column + 1) * span // (2 * width)
        for start, end, phase in self.phases:
            if start <= middle < end:
                return PHASE_MARKS.get(phase, (" ", ""))
        return " ", "dim"


def _legend_lines(entries: list[Text], width: int, axis: int, lead: str = "") -> list[Text]:
    """``entries`` two spaces apart, under the curve when they fit, as many lines as they need
    (an entry is never cut); ``lead`` names the line (``phase: ``)."""
    indent = " " * (axis + 1) if sum(e.cell_len + 2 for e in entries) + len(lead) + axis + 1 <= width else ""
    lines: list[Text] = []
    line = Text(indent + lead, style="dim")
    for entry in entries:
        if line.cell_len > len(indent + lead) and line.cell_len + 2 + entry.cell_len > width:
            lines.append(line)
            line = Text(indent + " " * len(lead))
        elif line.cell_len > len(indent + lead):
            line.append("  ")
        line.append_text(entry)
    lines.append(line)
    return lines


NO_MEMORY = "No [memory] events: profile with profile_memory=True."


def memory_view_chart(model: TraceModel, devices: int, height: int, compact: bool = False) -> Group:
    """What the Memory view draws above its table: the curve stacked by torch's categories under
    its peak's title, else the allocator curve of up to ``devices`` devices (the peak's operator
    and module named) and why there are no categories; then how much of the peak the trace never
    saw allocated.  ``height``: lines of a curve; ``compact``: a short terminal's (fewer lines)."""
    figure = model.peak_figure
    if figure is None:
        return Group(Text(NO_MEMORY))  # plain: "[memory]" is no markup
    blocks: list = []
    # A file's breakdown (allocations searched in the calls) waits until its table is asked for.
    breakdown = model.memory_breakdown if model.categorised_peak is not None else None
    if breakdown is not None and breakdown.memory is not None:
        blocks += [
            peak_title(breakdown),
            CategoryCurve(breakdown.memory, model.calls.origin_ns, height, breakdown.phases, compact),
        ]
        if compact:  # the legend said how much came from before the trace
            return Group(*blocks)
    else:
        for timeline in model.memory[:devices]:
            blocks += [
                Text(f"{timeline.device} memory", style="bold"),
                MemoryCurve(timeline, model.calls.origin_ns, height, peak_label(model, timeline)),
            ]
        blocks.append(
            Text(model.memory_categories_problem or NEEDS_CAPTURE_SHORT, style="dim", no_wrap=True, overflow="ellipsis")
        )
    before = before_trace_sentence(figure.bytes, figure.before_trace_bytes)
    if before is not None:  # a short terminal: the sentence's first half, on one line
        short = before.partition(":")[0]
        blocks.append(Text(short if compact else before, style="dim", no_wrap=compact, overflow="ellipsis"))
    return Group(*blocks)


def peak_label(model: TraceModel, timeline: MemoryTimeline) -> str:
    """``aten::gelu (GELUActivation_1)``: the operator running at the allocator's peak and its module."""
    row = timeline.peak_operator_row
    if row < 0:
        return ""
    node = model.modules.by_frame.get(model.calls.module[row])
    return model.calls.name(row) + (f" ({node.label})" if node is not None else "")
