"""Timeline frames -> text lines (for a terminal, an issue, a CI log) and JSON.

A lane's line has one character per column: a block element whose height is
the column's busy fraction (``▁`` is any activity at all, ``█`` a full cell),
or, when an event covers at least :data:`MIN_BOX` whole columns, its name in
a box (``[aten::conv2d──]``).  A ruler on top gives times from the trace's
first event, in the unit of its tick step.  Trace names are plain text:
control characters are written as ``\\xNN`` escapes.
"""

from __future__ import annotations

import argparse
import math
import shutil
import sys
from dataclasses import dataclass

import numpy as np
from rich.text import Text

from tuiprof.analysis.gap_activity import GapActivity
from tuiprof.analysis.intervals import NO_EVENT
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.steps import DeviceIdle
from tuiprof.analysis.timeline import LANE_GROUPS, Lane, LaneFrame, RangeStats, SliceDetail, Timeline, build_timeline
from tuiprof.errors import TraceError
from tuiprof.report.names import cut_end, fit_name, short_kernel_name
from tuiprof.report.render import json_text
from tuiprof.report.units import format_bytes_short, format_pct, format_us, format_us_short
from tuiprof.trace.store import TraceEvents

BLOCKS = "▁▂▃▄▅▆▇█"
MIN_BOX = 4  # whole columns an event needs before its name is written inside it
LABEL_WIDTH = 16
_UNITS = (("s", 10**9), ("ms", 10**6), ("us", 10**3), ("ns", 1))
_MIN_TICK_GAP = 12  # columns between ruler labels


@dataclass(frozen=True)
class LaneLine:
    """One lane drawn: ``cells`` has one character per column; ``kinds`` the kind
    code of the event filling each column (-1: none), for colour; ``boxed``
    marks columns that hold a name."""

    lane: Lane
    label: str
    cells: str
    kinds: list[int]
    boxed: list[bool]


def plain(text: str) -> str:
    """A trace's text as one printable line: control characters escaped."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in text)


def block(fraction: float) -> str:
    """The block element for a busy fraction: blank only when nothing at all ran."""
    if fraction <= 0:
        return " "
    return BLOCKS[min(len(BLOCKS) - 1, max(0, math.ceil(fraction * len(BLOCKS)) - 1))]


def fit(text: str, width: int) -> str:
    """``text`` cut by the one rule for names (report.names.fit_name), padded to exactly ``width``."""
    return fit_name(text, width).ljust(width)


def lane_labels(timeline: Timeline, lanes: list[Lane]) -> dict[str, str]:
    """Labels; a thread's last shown depth says how many deeper sub-lanes are hidden (``+2``),
    and a depth shown without its thread's first lane (scrolled off the top of the explorer's
    canvas) names the thread: ``thread 5617 d1``, not an orphan ``depth 1``."""
    shown_depth: dict[tuple[str, str], int] = {}
    first_depth: dict[tuple[str, str], int] = {}
    for lane in lanes:
        if lane.group in ("cpu", "python"):
            key = (lane.group, lane.thread)
            shown_depth[key] = max(shown_depth.get(key, 0), lane.depth)
            first_depth.setdefault(key, lane.depth)
    heads = {
        (lane.group, lane.thread): lane.label
        for lane in timeline.lanes
        if lane.group in ("cpu", "python") and lane.depth == 0
    }
    labels = {}
    for lane in lanes:
        label = plain(lane.label)
        key = (lane.group, lane.thread)
        if lane.depth > 0 and first_depth.get(key) == lane.depth and key in heads:
            label = f"{plain(heads[key])} d{lane.depth}"
        if lane.group in ("cpu", "python") and shown_depth[(lane.group, lane.thread)] == lane.depth:
            hidden = timeline.deeper(lane)
            if hidden:
                label += f" +{hidden}"
        labels[lane.key] = label
    return labels


def draw_lane(timeline: Timeline, frame: LaneFrame, edges: np.ndarray, label: str) -> LaneLine:
    """Blocks for the busy fractions, then names written into events wide enough."""
    cells = [block(f) for f in frame.busy.tolist()]
    columns = len(cells)
    dominant = frame.dominant
    index = frame.lane.intervals
    kinds = [-1] * columns
    boxed = [False] * columns
    if index is not None and len(index):
        present = dominant >= 0
        kinds = np.where(present, index.kinds[np.maximum(dominant, 0)], -1).tolist()
        for row in np.unique(dominant[present]).tolist():  # only events that fill some column
            first = int(np.searchsorted(edges, index.starts[row], side="left"))  # first column starting inside
            last = int(np.searchsorted(edges, index.ends[row], side="right")) - 1  # columns ending inside
            if last - first < MIN_BOX:
                continue
            name = plain(timeline.names[index.names[row]])
            text = _box(short_kernel_name(name) if frame.lane.group == "gpu" else name, last - first)
            cells[first:last] = list(text)
            boxed[first:last] = [True] * (last - first)
    return LaneLine(frame.lane, label, "".join(cells), kinds, boxed)


def _box(name: str, width: int) -> str:
    """``[name───]`` in ``width`` cells (a kernel's name comes short: its template argument outlasts its namespaces)."""
    inner = width - 2
    name = fit_name(name, inner)
    return "[" + name + "─" * (inner - len(name)) + "]"


def tick_step(start_ns: int, end_ns: int, columns: int) -> int:
    """The smallest 1-2-5 step (ns) whose ticks lie at least _MIN_TICK_GAP columns apart
    (half the width on narrow frames, so that two ticks show)."""
    gap = min(_MIN_TICK_GAP, max(5, columns // 2))
    wanted = (end_ns - start_ns) * gap / max(1, columns)
    power = 1
    while True:  # no ceiling: a fixed list ran out at 5e12 ns, and a window of 1e18 us then had 1e11 ticks
        for multiple in (1, 2, 5):
            if multiple * power >= wanted:
                return multiple * power
        power *= 10


def window_unit(timeline: Timeline, start_ns: int, end_ns: int) -> tuple[str, int]:
    """(unit, ns per unit) of every time of one window (the ruler's labels, the status line's
    window and cursor): the unit of its latest time, so that the status line's ``1.909s to
    2.863s`` stands over ``2.0s 2.2s``, not over ``2000ms 2200ms``."""
    latest = max(abs(start_ns - timeline.begin_ns), abs(end_ns - timeline.begin_ns))
    return next(((u, s) for u, s in _UNITS if latest >= s), _UNITS[-1])


def format_offset(ns: int, step: int, unit: tuple[str, int] | None = None) -> str:
    """A ruler time in ``unit`` (default: the tick step's), with the decimals the step needs:
    ``1.5ms``, ``250us``, ``2.2s``."""
    name, size = unit or next((u, s) for u, s in _UNITS if step >= s)
    decimals = 0 if step % size == 0 or ns == 0 else max(0, -math.floor(math.log10(step / size)))  # the origin: 0ms
    return f"{ns / size:.{decimals}f}{name}"


def ruler(timeline: Timeline, start_ns: int, end_ns: int, columns: int) -> tuple[str, str]:
    """Two lines: tick labels (times from the trace's first event, in the window's unit), and tick marks."""
    step = tick_step(start_ns, end_ns, columns)
    unit = window_unit(timeline, start_ns, end_ns)
    origin = timeline.begin_ns
    first = -(-(start_ns - origin) // step) * step + origin  # first tick at or after start
    labels = [" "] * columns
    marks = ["─"] * columns
    free = 0
    for tick in range(first, end_ns, step):
        column = (tick - start_ns) * columns // (end_ns - start_ns)
        if column >= columns:
            break
        marks[column] = "┬"
        text = format_offset(tick - origin, step, unit)
        if column >= free and column + len(text) <= columns:
            labels[column : column + len(text)] = list(text)
            free = column + len(text) + 1
    return "".join(labels), "".join(marks)


def draw(timeline: Timeline, start_ns: int, end_ns: int, columns: int, lanes: list[Lane]) -> list[LaneLine]:
    """Every lane of one frame, drawn."""
    edges = timeline.edges(start_ns, end_ns, columns)
    labels = lane_labels(timeline, lanes)
    return [
        draw_lane(timeline, frame, edges, labels[frame.lane.key])
        for frame in timeline.frame(start_ns, end_ns, columns, lanes)
    ]


def render_text(
    timeline: Timeline,
    start_ns: int,
    end_ns: int,
    columns: int,
    lanes: list[Lane],
    title: str = "",
    step: str | None = None,
) -> str:
    """The frame as plain text: a header, the ruler, one line per lane, a legend (the idle
    share of ``step``'s device window when the frame shows one step)."""
    origin = timeline.begin_ns
    cell = (end_ns - start_ns) / columns
    unit = window_unit(timeline, start_ns, end_ns)  # the ruler's
    header = (
        (f"{plain(title)}  " if title else "")
        + f"{_in_unit(start_ns - origin, unit)} to {_in_unit(end_ns - origin, unit)}, {columns} columns of {_duration(cell)}"
    )
    pad = " " * (LABEL_WIDTH + 1)
    labels, marks = ruler(timeline, start_ns, end_ns, columns)
    lines = [header, pad + labels.rstrip(), pad + marks]
    legend = []
    for line in draw(timeline, start_ns, end_ns, columns, lanes):
        lines.append(fit(line.label, LABEL_WIDTH) + " " + line.cells.rstrip())
        if line.lane.counter is not None:
            legend.append(f"{plain(line.lane.label)}: full height = peak {format_bytes_short(line.lane.counter.peak)}")
    if timeline.idle is not None and timeline.idle in lanes:
        legend.append(idle_text(timeline, timeline.device_idle(start_ns, end_ns, step), step))
        gap = timeline.longest_idle_gap(start_ns, end_ns)
        if gap is not None:
            width = LABEL_WIDTH + 1 + columns
            where = f"longest idle gap {_duration(gap.duration_ns)} at {format_us((gap.start_ns - origin) / 1000)}, CPU in it:"
            legend += [cut_end(where, width), *gap_cpu_lines(timeline.detail(gap).cpu, width)]
    return "\n".join(lines + legend) + "\n"


def idle_text(timeline: Timeline, idle: DeviceIdle, step: str | None = None) -> str:
    """The device idle share and what it is a share of (the Steps view's Idle %)."""
    share = idle.share
    if share is None:
        return "device idle: no device window here"
    if step is not None:
        return f"device idle {format_pct(100 * share)} of {plain(step)}'s device window"
    whose = "the steps' device windows here" if timeline.model.steps else "the device's span here (no steps)"
    return f"device idle {format_pct(100 * share)} of {whose}"


def _duration(ns: float) -> str:
    for unit, size in _UNITS:
        if ns >= size:
            return f"{ns / size:.3g}{unit}"
    return f"{ns:.3g}ns"


def render_json(timeline: Timeline, start_ns: int, end_ns: int, columns: int, lanes: list[Lane]) -> dict:
    """Per lane the busy fraction per column and the event filling each column most."""
    origin = timeline.begin_ns
    result_lanes = []
    for frame in timeline.frame(start_ns, end_ns, columns, lanes):
        lane = frame.lane
        entry: dict = {
            "key": lane.key,
            "group": lane.group,
            "label": lane.label,
            "busy": [round(b, 6) for b in frame.busy.tolist()],
        }
        if lane.counter is not None:
            entry["max_bytes"] = frame.values.tolist() if frame.values is not None else []
            entry["peak_bytes"] = lane.counter.peak
        else:
            index = lane.intervals
            assert index is not None
            entry["events"] = [
                timeline.names[index.names[row]] if row != NO_EVENT else None for row in frame.dominant.tolist()
            ]
        result_lanes.append(entry)
    return {
        "origin_ns": origin,
        "from_us": (start_ns - origin) / 1000,
        "to_us": (end_ns - origin) / 1000,
        "columns": columns,
        "cell_us": (end_ns - start_ns) / columns / 1000,
        "lanes": result_lanes,
    }


DEFAULT_COLUMNS = 100  # when stdout is not a terminal
# Output bounds (a frame holds a row of cells per lane): a wider line is no longer read as
# a line, and past a few hundred lanes a text timeline is a wall (40,000 threads took
# minutes; `--format json --width 100000` over them wanted 24 GB).  A frame holds at most
# MAX_LANES x MAX_COLUMNS cells (~2.5 M: ~25 MB of JSON).
MAX_COLUMNS = 10_000
MAX_LANES = 256  # lanes drawn: the busiest threads and GPU streams in the window first


def print_timeline(model: TraceModel, store: TraceEvents, args: argparse.Namespace) -> int:
    """``tuiprof timeline``: one window of the trace on stdout; bad options raise TraceError."""
    timeline = build_timeline(model, store)
    source = model.info.source
    groups = _groups(source, args.lanes)
    if args.depth < 1:
        raise TraceError(source, f"--depth {args.depth} shows no operators", "pass --depth 1 or more")
    start, end = _window(timeline, source, args)
    columns = args.width if args.width is not None else _terminal_columns()
    if not 1 <= columns <= MAX_COLUMNS:
        raise TraceError(
            source,
            f"--width {columns} is not a column count up to {MAX_COLUMNS}",
            f"pass --width between 1 and {MAX_COLUMNS}",
        )
    if end - start < columns:
        raise _too_short(timeline, source, args, end - start, columns)
    lanes, left_out = timeline.busiest(timeline.select(groups, args.depth), start, end, MAX_LANES)
    if args.format == "json":
        frame = render_json(timeline, start, end, columns, lanes)
        frame["threads_left_out"] = left_out
        sys.stdout.write(json_text(frame))
    else:
        step = next((s.name for s in timeline.steps if s.number == args.step), None) if args.step is not None else None
        text = render_text(timeline, start, end, columns, lanes, title=model.info.trace_name, step=step)
        if left_out:
            note = f"+{left_out:,} quieter threads/streams not drawn (max {MAX_LANES} lanes)"
            text += fit(note, LABEL_WIDTH + 1 + columns).rstrip() + "\n"
        sys.stdout.write(text)
    return 0


def _groups(source: str, text: str | None) -> tuple[str, ...] | None:
    if text is None:
        return None
    groups = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [g for g in groups if g not in LANE_GROUPS]
    if unknown or not groups:
        raise TraceError(
            source,
            f"--lanes {text!r} names no lane group {unknown or ''}".rstrip(),
            f"use a comma list of {','.join(LANE_GROUPS)}",
        )
    return groups


def _too_short(timeline: Timeline, source: str, args: argparse.Namespace, window_ns: int, columns: int) -> TraceError:
    """The error for a window under one ns per column, in the terms of what the user chose."""
    if args.from_us is not None or args.to_us is not None:
        return TraceError(
            source,
            f"the window is {window_ns} ns, shorter than one ns per column",
            "widen --from/--to or lower --width",
        )
    if args.step is not None:
        return TraceError(
            source,
            f"step {args.step} lasts {window_ns} ns, shorter than one ns per column",
            f"pass --width {window_ns} or less",
        )
    if timeline.end_ns - timeline.begin_ns <= 1:  # _extent makes a trace at least 1 ns long
        return TraceError(
            source,
            "the trace's events span no time (instants, or all at one moment)",
            "nothing to draw: list them with tuiprof summary",
        )
    return TraceError(
        source, f"the trace lasts {window_ns} ns, shorter than one ns per column", f"pass --width {window_ns} or less"
    )


def _window(timeline: Timeline, source: str, args: argparse.Namespace) -> tuple[int, int]:
    """[start, end) in ns: the step's window, the whole trace, then --from/--to over either.

    --from/--to may reach past the trace by at most its own length on either side
    (a window a little wider than the trace is handy); further out is refused,
    as the window's times must stay far inside int64 nanoseconds and its ruler
    short (``--to 1e18`` ran forever, ``--from 1e16`` overflowed)."""
    start, end = timeline.begin_ns, timeline.end_ns
    span = end - start
    if args.step is not None:
        chosen = [s for s in timeline.steps if s.number == args.step]
        if not chosen:
            numbers = ", ".join(str(s.number) for s in timeline.steps) or "none"
            raise TraceError(
                source,
                f"no ProfilerStep#{args.step} (steps: {numbers})",
                "pass one of those to --step, or use --from/--to",
            )
        start, end = chosen[0].start_ns, chosen[0].end_ns
    for value, name in ((args.from_us, "--from"), (args.to_us, "--to")):
        if value is not None and not math.isfinite(value):
            raise TraceError(source, f"{name} {value} is not a time", "pass microseconds from the trace's first event")
        if value is not None and not -span <= value * 1000 <= 2 * span:
            raise TraceError(
                source,
                f"{name} {value:g} is far outside the trace, which lasts {format_us(span / 1000)}",
                f"pass --from/--to between {-span / 1000:.0f} and {2 * span / 1000:.0f} (microseconds from its first event)",
            )
    if args.from_us is not None:
        start = timeline.begin_ns + round(args.from_us * 1000)
    if args.to_us is not None:
        end = timeline.begin_ns + round(args.to_us * 1000)
    if end <= start:
        raise TraceError(
            source,
            f"the window ends before it starts ({format_us((start - timeline.begin_ns) / 1000)} to {format_us((end - timeline.begin_ns) / 1000)})",
            f"pass --from below --to (the trace lasts {format_us((timeline.end_ns - timeline.begin_ns) / 1000)})",
        )
    return start, end


def _terminal_columns() -> int:
    if not sys.stdout.isatty():
        return DEFAULT_COLUMNS
    return max(10, shutil.get_terminal_size().columns - LABEL_WIDTH - 1)


RANGE_TOP = 3  # operators and kernels listed for a selected range


MIN_STATUS_LABEL = 8  # cells of the lane's name kept before the cursor's time is dropped


def window_text(
    timeline: Timeline,
    start_ns: int,
    end_ns: int,
    columns: int,
    cursor_ns: int,
    lane: Lane | None,
    width: int | None = None,
) -> Text:
    """The status line above the ruler: window, cell size, cursor, lane, in ``width`` cells.

    Too wide, it gives up the cell size first, then cuts the lane's name (its row is
    marked below), then the cursor's time; a number is dropped whole, never cut.
    The window is always there.  A wrapped line pushed the last lane (device idle,
    where ``g`` puts the cursor) below the canvas at 60 columns."""
    origin = timeline.begin_ns
    unit = window_unit(timeline, start_ns, end_ns)  # the ruler's
    window = f"{_in_unit(start_ns - origin, unit)} to {_in_unit(end_ns - origin, unit)}"
    cell = f" · cell {_duration((end_ns - start_ns) / max(1, columns))}"
    cursor = f" · cursor {_in_unit(cursor_ns - origin, unit)}"
    label = plain(lane.label.strip()) if lane is not None else ""
    separator = " · " if label else ""
    room = len(label)
    # (the numbers kept, the least of the name they leave room for): the first that fits
    for numbers, least in ((cell + cursor, len(label)), (cursor, len(label)), (cursor, MIN_STATUS_LABEL), ("", 0)):
        if width is not None:
            room = width - len(window) - len(numbers) - len(separator)
        if room >= min(least, len(label)):
            break
    name = label if room >= len(label) else fit(label, room).rstrip() if room >= 2 else ""
    text = Text(window)
    text.append(numbers, style="dim")
    if name:
        text.append(separator, style="dim")
        text.append(name)
    return text


def _in_unit(ns: int, unit: tuple[str, int]) -> str:
    """A time of the status line in the window's unit, to the nanosecond the unit allows (3 decimals at most)."""
    name, size = unit
    decimals = min(3, len(str(size)) - 1)
    return f"{round(ns / size, decimals) + 0.0:.{decimals}f}{name}"  # + 0.0: no "-0.000s" a hair before the start


def slice_text(timeline: Timeline, detail: SliceDetail) -> Text:
    """The detail pane for a slice: name, when, how long, facts, linked slices."""
    item = detail.slice
    text = Text()
    text.append(plain(item.name), style="bold")
    text.append(
        f"  start {format_us((item.start_ns - timeline.begin_ns) / 1000)} · duration {format_us(item.duration_ns / 1000)}\n"
    )
    for label, value in detail.facts:
        text.append(f"{label}: ", style="dim")
        text.append(plain(value))
        text.append("\n")
    if item.lane.group == "idle":
        text.append("CPU: ", style="dim")
        text.append(gap_cpu_text(detail.cpu) + "\n")
    if detail.links:
        names = sorted({plain(link.name) for link in detail.links})
        text.append("linked: ", style="dim")
        text.append(", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else ""))
    return text


GAP_TOP = 3  # CPU activities named for an idle gap
NO_CPU = "no CPU event recorded in the gap"


def gap_cpu_rows(activities: list[GapActivity]) -> list[tuple[str, str, str]]:
    """(time, cause, name) of the largest CPU activities in an idle gap, as plain text."""
    return [(format_us_short(a.overlap_ns / 1000), a.cause, plain(a.label)) for a in activities[:GAP_TOP]]


def gap_cpu_text(activities: list[GapActivity]) -> str:
    """One line for the detail pane: ``aten::item 1.2ms (sync) · ...``."""
    if not activities:
        return NO_CPU
    parts = [f"{name} {time}" + (f" ({cause})" if cause else "") for time, cause, name in gap_cpu_rows(activities)]
    more = len(activities) - GAP_TOP
    return " · ".join(parts) + (f" · +{more} more" if more > 0 else "")


def gap_cpu_lines(activities: list[GapActivity], width: int) -> list[str]:
    """One line per activity for the text output, time and cause first: a long name is
    what gets cut to ``width``."""
    if not activities:
        return [cut_end("  " + NO_CPU, width)]
    causes = max(len(cause) for _, cause, _ in gap_cpu_rows(activities))
    lines = []
    for time, cause, name in gap_cpu_rows(activities):
        head = f"  {time:>7} {cause:<{causes}} "
        lines.append((head + fit_name(name, max(0, width - len(head)))).rstrip())
    return lines


def range_text(timeline: Timeline, stats: RangeStats) -> Text:
    """The detail pane for a selected range: busy share per lane, top operators and kernels."""
    origin = timeline.begin_ns
    text = Text()
    text.append(
        f"range {format_us((stats.start_ns - origin) / 1000)} to {format_us((stats.end_ns - origin) / 1000)}"
        f" ({format_us((stats.end_ns - stats.start_ns) / 1000)})\n",
        style="bold",
    )
    shares = [
        f"{plain(lane.label.strip())} {format_pct(100 * share)}"
        for lane, share in stats.busy
        if lane.counter is None and lane is not timeline.idle
    ]
    text.append("busy: ", style="dim")
    text.append(" · ".join(shares) + "\n")
    if timeline.idle is not None:
        text.append(idle_text(timeline, stats.idle) + "\n")
    ops = sorted(stats.operators, key=lambda s: s.self_cpu_us, reverse=True)[:RANGE_TOP]
    if ops:
        text.append("operators: ", style="dim")
        text.append(" · ".join(f"{plain(s.name)} {format_us(s.self_cpu_us)} x{s.calls}" for s in ops) + "\n")
    if stats.kernels:
        text.append("kernels: ", style="dim")
        text.append(
            " · ".join(f"{plain(k.name)} {format_us(k.device_total_us)} x{k.calls}" for k in stats.kernels[:RANGE_TOP])
        )
    return text
