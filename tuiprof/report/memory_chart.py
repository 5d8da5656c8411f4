"""Allocated and reserved memory over time, drawn with block characters."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from tuiprof.analysis.memory import MemoryTimeline
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import format_bytes, format_us

LEVELS = " ▁▂▃▄▅▆▇█"


class MemoryCurve:
    """A rich renderable: one column per time bucket, height = chart lines."""

    def __init__(self, timeline: MemoryTimeline, origin_ns: int, height: int = 6, peak_label: str = "") -> None:
        self.timeline = timeline
        self.origin_ns = origin_ns
        self.height = height
        self.peak_label = peak_label

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        timeline = self.timeline
        axis = 10
        width = max(10, options.max_width - axis - 1)
        buckets_alloc, buckets_reserved, peak_column = self._bucket(width)
        top = max(max(buckets_alloc), max(buckets_reserved or [0])) or 1
        for line in range(self.height, 0, -1):
            text = Text(format_bytes(int(top * line / self.height)).rjust(axis) + " " if line in (self.height, 1) else " " * (axis + 1), style="dim")
            for column in range(width):
                alloc = buckets_alloc[column] / top * self.height
                reserved = (buckets_reserved[column] / top * self.height) if buckets_reserved else 0.0
                char, style = _cell(alloc, reserved, line)
                if column == peak_column and style != "dim":
                    style = "bold red"
                text.append(char, style=style)
            yield text
        start = format_us(0)
        end = format_us((timeline.times_ns[-1] - self.origin_ns) / 1000) if timeline.times_ns else start
        yield Text(" " * (axis + 1) + start + end.rjust(width - len(start)), style="dim")
        legend = Text(" " * (axis + 1))
        legend.append("█ allocated", style="cyan")
        if any(timeline.reserved):
            legend.append("  █ reserved", style="blue")
        legend.append(f"  ▲ peak {format_bytes(timeline.peak_bytes)} at {format_us((timeline.peak_ns - self.origin_ns) / 1000)}", style="bold red")
        if self.peak_label:
            legend.append(f" in {plain(self.peak_label, DISPLAY_CHARS)}", style="red")  # operator and module names
        yield legend

    def _bucket(self, width: int) -> tuple[list[int], list[int], int]:
        times = self.timeline.times_ns
        if not times:
            return [0] * width, [], -1
        first, last = times[0], times[-1]
        span = max(1, last - first)
        alloc = [0] * width
        reserved = [0] * width if any(self.timeline.reserved) else []  # the CPU allocator reports none
        for index, time_ns in enumerate(times):
            column = min(width - 1, (time_ns - first) * width // span)
            alloc[column] = max(alloc[column], self.timeline.allocated[index])
            if reserved:
                reserved[column] = max(reserved[column], self.timeline.reserved[index])
        for column in range(1, width):  # carry the level through empty buckets
            if alloc[column] == 0:
                alloc[column] = alloc[column - 1]
            if reserved and reserved[column] == 0:
                reserved[column] = reserved[column - 1]
        peak_column = min(width - 1, (self.timeline.peak_ns - first) * width // span)
        return alloc, reserved, peak_column


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
