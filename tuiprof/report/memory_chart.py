"""Memory over time drawn with block characters: allocated and reserved, or stacked by torch's categories."""

from __future__ import annotations

import numpy as np
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from tuiprof.analysis.memory import MemoryTimeline
from tuiprof.analysis.memory_categories import CategorisedMemory
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
CATEGORY_SHORT = {
    "parameter": "params",
    "optimizer_state": "optim",
    "input": "inputs",
    "temporary": "temps",
    "activation": "activ",
    "gradient": "grads",
    "autograd_detail": "autograd",
    "unknown": "unknown",
}
PHASE_MARKS = {"forward": ("f", "green"), "backward": ("b", "red"), "optimizer": ("o", "yellow"), "data loading": ("d", "cyan")}


class CategoryCurve:
    """A rich renderable: memory stacked by torch's categories over time, one
    column per time bucket (the bucket's highest point, so the peak is never
    averaged away), the steps' phases under it and the peak marked."""

    def __init__(
        self, memory: CategorisedMemory, origin_ns: int, height: int = 4,
        phases: tuple[tuple[int, int, str], ...] = (),
    ) -> None:
        self.memory = memory
        self.origin_ns = origin_ns
        self.height = height
        self.phases = phases

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        memory = self.memory
        axis = 10
        width = max(10, options.max_width - axis - 1)
        columns, peak_column = self._bucket(width)
        top = memory.peak_bytes or 1
        for line in range(self.height, 0, -1):
            label = format_bytes(int(top * line / self.height)).rjust(axis) + " " if line in (self.height, 1) else " " * (axis + 1)
            text = Text(label, style="dim")
            for stack in columns:
                text.append(*self._cell(stack, top, line))
            yield text
        marks = Text("phase".rjust(axis) + " ", style="dim")
        for column in range(width):
            mark, style = self._phase_at(column, width)
            marks.append("▲" if column == peak_column else mark, style="bold red" if column == peak_column else style)
        yield marks
        times = memory.times_ns
        start = format_us((int(times[0]) - self.origin_ns) / 1000)
        end = format_us((int(times[-1]) - self.origin_ns) / 1000)
        yield Text(" " * (axis + 1) + start + end.rjust(width - len(start)), style="dim")
        legend = Text()
        shown = [c for c, total in zip(memory.categories, memory.bytes.max(axis=0).tolist()) if total > 0]
        for category in shown:
            legend.append("█", style=CATEGORY_STYLES.get(category, ""))
            legend.append(CATEGORY_SHORT.get(category, category) + " ")
        if legend.cell_len + axis + 1 <= options.max_width:  # under the curve when it fits, else from the left
            legend = Text(" " * (axis + 1)) + legend
        phase_names = sorted({name for *_, name in self.phases}, key=list(PHASE_MARKS).index)
        phases = " ".join(f"{PHASE_MARKS[p][0]}={p}" for p in phase_names)
        if phases and legend.cell_len + len(phases) + 1 <= options.max_width:  # else the letters speak for themselves
            legend.append(" " + phases, style="dim")
        yield legend

    def _bucket(self, width: int) -> tuple[list[list[int]], int]:
        """Per column, the category bytes of its highest point (empty columns carry the last level)."""
        memory = self.memory
        times = memory.times_ns
        first, span = int(times[0]), max(1, int(times[-1]) - int(times[0]))
        columns_of = np.minimum(width - 1, (times - first) * width // span)
        totals = memory.bytes.sum(axis=1)
        best = np.full(width, -1, dtype=np.int64)
        for point in np.argsort(totals, kind="stable").tolist():  # the highest point of a column last
            best[columns_of[point]] = point
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
