"""An allocator snapshot's summary: the peak and what holds it, segments, OOMs (text and JSON).

The first line names the peak and the stack holding most of it, so the reader
knows where to look.  Frames and file names are data: every one goes through
:func:`tuiprof.report.plain.plain`, and the text is written as is, never as
markup.  Times are shown from the first trace entry (``time_us`` is wall-clock).
"""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from dataclasses import dataclass

import orjson

from tuiprof.analysis.snapshot import (
    DevicePeak,
    ModuleGroup,
    OutOfMemory,
    SnapshotDiff,
    SnapshotModel,
    StackChange,
    StackGroup,
    frame_lines,
    frame_text,
    is_own_code,
    is_torch_frame,
    module_path,
    module_text,
    own_frame,
    stack_lines,
)
from tuiprof.analysis.snapshot_trace import PeakPlace
from tuiprof.report.plain import ELLIPSIS, plain
from tuiprof.report.render import stdout_is_terminal
from tuiprof.report.units import SIZE_CHARS, format_bytes, format_pct, format_us, plural

DEFAULT_STACKS = 10
DETAIL_LINES = 300  # of a stack in the detail pane: a hostile file's million-frame stack stays responsive


def short_where(model: SnapshotModel, stack: int) -> str:
    """``model.py:15 layer5_forward``: the stack's own frame with the file's base name."""
    frame = own_frame(model.snapshot, stack)
    if frame < 0:
        return "(no stack)"
    frames = model.snapshot.frames
    text = f"{os.path.basename(frames.filename[frame])}:{frames.line[frame]} {frames.name[frame]}"
    node = frames.fx["fx_node_name"][frame]
    return plain(f"{text} [fx {node}]" if node else text)


def where_and_rest(model: SnapshotModel, stack: int) -> str:
    """The summary's where: the stack's first frame of the user's code and how many frames are
    left out (the full stack: ``--format json``, or the app's stack pane)."""
    rest = len(model.snapshot.stacks.frame_ids(stack)) - 1 if stack >= 0 else 0
    return short_where(model, stack) + (f" (+{plural(rest, 'frame')})" if rest > 0 else "")


def since_start(model: SnapshotModel, time_us: int) -> str:
    times = model.snapshot.entries.time_us
    if not model.snapshot.entries.has_times:
        return f"entry {time_us:,}"
    return f"{format_us(time_us - int(times.min()))} into the trace" if len(times) else "-"


def _share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def headline(model: SnapshotModel) -> str:
    """One line: the highest peak and what holds most of it."""
    if not model.peaks:
        return f"{plain(model.snapshot.source)}: an allocator snapshot with no devices"
    peak = max(model.peaks, key=lambda p: p.allocated)
    if len(model.snapshot.entries) == 0:  # segments only: a state, not a peak, and how to get the history
        line = (
            f"{format_bytes(peak.allocated)} allocated on cuda:{peak.device} when the snapshot was taken; no allocation "
            "history (torch.cuda.memory._record_memory_history() before the run records it)"
        )
    else:
        line = (
            f"peak {format_bytes(peak.allocated)} allocated on cuda:{peak.device}, {since_start(model, peak.time_us)}"
        )
    if peak.groups:
        top = peak.groups[0]
        line += f"; {_share(top.bytes, peak.allocated)} of it from {short_where(model, top.stack)}"
    if model.oom_count:
        line += f"; {plural(model.oom_count, 'out-of-memory error')}"
    return line


def _distance(us: float) -> str:
    """A gap between the two files' clocks: days, hours and minutes read better than 3600.000s."""
    if us >= 2 * 86400e6:
        return f"{us / 86400e6:,.1f} days"
    if us >= 3600e6:
        return f"{us / 3600e6:.1f} h"
    if us >= 60e6:
        return f"{us / 60e6:.1f} min"
    return format_us(us)


def placement_line(place: PeakPlace) -> str:
    """Where the highest peak fell in the ``--trace`` file, in one line (names are plain text)."""
    trace = plain(place.trace)
    if place.peak_ns is None:
        return f"the peak is not placed in {trace}: the snapshot has no times"
    if not place.inside:
        if place.trace_end_ns < place.trace_start_ns:
            return f"the peak is not in the trace {trace}: it has no operators"
        before = place.peak_ns < place.trace_start_ns
        gap = (place.trace_start_ns - place.peak_ns) if before else (place.peak_ns - place.trace_end_ns)
        return (
            f"the peak is not in the trace {trace}: it falls {_distance(gap / 1000)} {'before' if before else 'after'} "
            "the trace (another run or time range; both files must come from one host's clock)"
        )
    where = f"peak at step {place.step.rsplit('#', 1)[-1]}" if place.step else "peak outside every ProfilerStep"
    if place.operator is None:
        return f"{where}, between operators ({trace})"
    module = f" (module {plain(place.module)})" if place.module else ""
    return f"{where}, during {plain(place.operator)}{module}"


def placement_document(place: PeakPlace) -> dict:
    return {
        "file": place.trace,
        "inside": place.inside,
        "peak_time_us": None if place.peak_ns is None else place.peak_ns / 1000,
        "trace_start_us": place.trace_start_ns / 1000,
        "trace_end_us": place.trace_end_ns / 1000,
        "step": place.step,
        "operator": place.operator,
        "module": place.module,
        "thread": place.thread if place.thread is None or isinstance(place.thread, int) else str(place.thread),
    }


class TableRow(str):
    """A line of a table: cut at the terminal's width (prose is wrapped)."""


def _stack_rows(model: SnapshotModel, groups: list[StackGroup], whole: int, limit: int) -> list[str]:
    lines: list[str] = [
        TableRow(
            f"  {'bytes':>{SIZE_CHARS}}  {'share':>6}  {'allocs':>6}  where (your innermost frame, +frames left out)"
        )
    ]
    for group in groups[:limit]:
        lines.append(
            TableRow(
                f"  {format_bytes(group.bytes):>{SIZE_CHARS}}  {_share(group.bytes, whole):>6}  {group.count:>6,}  "
                f"{where_and_rest(model, group.stack)}"
            )
        )
    if len(groups) > limit:
        rest = sum(g.bytes for g in groups[limit:])
        lines.append(
            f"  {format_bytes(rest):>{SIZE_CHARS}}  {_share(rest, whole):>6}  in {plural(len(groups) - limit, 'more stack')} (--limit N)"
        )
    return lines


def module_where(model: SnapshotModel, stack: int) -> str:
    """The stack's module path as plain text (``model.py:15 > linear.py``)."""
    return plain(module_text(module_path(model.snapshot, stack)))


def _module_rows(modules: list[ModuleGroup], whole: int, limit: int) -> list[str]:
    """The peak by module: only when some allocation ran inside a module's forward."""
    if not any(m.path for m in modules):
        return []
    lines: list[str] = [
        TableRow(f"  {'bytes':>{SIZE_CHARS}}  {'share':>6}  {'allocs':>6}  module (its forward's file)")
    ]
    for group in modules[:limit]:
        lines.append(
            TableRow(
                f"  {format_bytes(group.bytes):>{SIZE_CHARS}}  {_share(group.bytes, whole):>6}  {group.count:>6,}  {plain(module_text(group.path))}"
            )
        )
    if len(modules) > limit:
        rest = sum(m.bytes for m in modules[limit:])
        lines.append(
            f"  {format_bytes(rest):>{SIZE_CHARS}}  {_share(rest, whole):>6}  in {plural(len(modules) - limit, 'more module')} (--limit N)"
        )
    return lines


def _peak_lines(model: SnapshotModel, peak: DevicePeak, limit: int) -> list[str]:
    when = (
        "no trace entry to look at (the state when the snapshot was taken, or at --from)"
        if peak.row < 0
        else f"{since_start(model, peak.time_us)} (entry {peak.index:,})"
    )
    lines = [
        f"cuda:{peak.device}: peak {format_bytes(peak.allocated)} allocated, {format_bytes(peak.reserved)} reserved, {when}"
    ]
    if peak.groups:
        largest = max(peak.groups, key=lambda g: (g.largest, -g.stack))
        lines += _stack_rows(model, peak.groups, peak.allocated, limit)
        lines.append(
            f"  largest single allocation: {format_bytes(largest.largest)} from {short_where(model, largest.stack)}"
        )
        by_module = _module_rows(peak.modules, peak.allocated, limit)
        if by_module:
            lines += [f"cuda:{peak.device}: the peak by nn.Module", *by_module]
    return lines


def _segment_lines(model: SnapshotModel) -> list[str]:
    uses = model.segment_use
    if not uses:
        return ["segments: none when the snapshot was taken"]
    reserved = sum(s.reserved for s in uses)
    allocated = sum(s.allocated for s in uses)
    lines = [
        f"segments when the snapshot was taken: {len(uses):,}, {format_bytes(reserved)} reserved, "
        f"{format_bytes(allocated)} allocated, {format_bytes(reserved - allocated)} free"
    ]
    for device in sorted({s.device for s in uses}):
        mine = [s for s in uses if s.device == device]
        free = sum(s.free for s in mine)
        biggest = max(s.largest_free_block for s in mine)
        lines.append(
            f"  cuda:{device}: {plural(len(mine), 'segment')}, {format_bytes(free)} free in them, "
            f"the largest free block {format_bytes(biggest)}"
        )
    return lines


def oom_cause(oom: OutOfMemory) -> str:
    """What the numbers say to do: fragmentation and a full GPU have different remedies."""
    free = oom.reserved - oom.allocated + max(oom.device_free, 0)
    if oom.fragmented:
        return (
            f"fragmentation: {format_bytes(free)} free in all, no piece of {format_bytes(oom.requested)}; "
            "try PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True"
        )
    return (
        f"the GPU was full: {format_bytes(free)} free in all for {format_bytes(oom.requested)}; "
        "hold less (the stacks below) or use a smaller batch"
    )


def oom_lines(model: SnapshotModel, oom: OutOfMemory, limit: int) -> list[str]:
    cached = oom.reserved - oom.allocated
    lines = [
        f"out of memory on cuda:{oom.device}, {since_start(model, oom.time_us)} (entry {oom.index:,}): "
        f"{format_bytes(oom.requested)} requested from {short_where(model, oom.stack)}",
        f"  free then: {format_bytes(oom.device_free)} on the GPU, {format_bytes(cached)} cached in the allocator's "
        f"segments, the largest free block {format_bytes(oom.largest_free_block)}",
        f"  {oom_cause(oom)}",
        f"  held then: {format_bytes(oom.allocated)} allocated of {format_bytes(oom.reserved)} reserved, by:",
    ]
    return lines + _stack_rows(model, oom.held_by, oom.allocated, min(limit, 5))[1:]


def summary_lines(model: SnapshotModel, limit: int = DEFAULT_STACKS, place: PeakPlace | None = None) -> list[str]:
    entries = model.snapshot.entries
    lines = [
        headline(model),
        *([placement_line(place)] if place else []),
        f"{plain(model.snapshot.source)}: allocator snapshot, {plural(model.snapshot.device_count, 'device')}, "
        f"{plural(len(entries), 'trace entry', 'trace entries')}",
    ]
    for peak in model.peaks:
        lines.append("")
        lines += _peak_lines(model, peak, limit)
    lines.append("")
    lines += _segment_lines(model)
    if model.ooms:  # the first: what failed before the program reacted (later ones follow from it)
        lines.append("")
        lines += oom_lines(model, model.ooms[0], limit)
        if model.oom_count > 1:
            listed = "each" if model.oom_count == len(model.ooms) else f"the first {len(model.ooms)}"
            lines.append(
                f"  and {plural(model.oom_count - 1, 'later out-of-memory error')} (--format json lists {listed})"
            )
    return lines


def _group_json(model: SnapshotModel, group: StackGroup) -> dict:
    frame = own_frame(model.snapshot, group.stack)
    return {
        "bytes": group.bytes,
        "count": group.count,
        "largest_bytes": group.largest,
        "where": frame_text(model.snapshot, frame) if frame >= 0 else None,
        "module": list(module_path(model.snapshot, group.stack)),
        "frames": stack_lines(model.snapshot, group.stack),
    }


def summary_document(model: SnapshotModel, limit: int = DEFAULT_STACKS, place: PeakPlace | None = None) -> dict:
    """What ``--format json`` prints: stable keys, bytes as integers, times in the file's microseconds."""
    return (
        ({"trace": placement_document(place)} if place else {})
        | {
            "file": model.snapshot.source,
            "devices": model.snapshot.device_count,
            "trace_entries": len(model.snapshot.entries),
            "times_recorded": model.snapshot.entries.has_times,
            "oom_count": model.oom_count,
            "peaks": [
                {
                    "device": p.device,
                    "entry": p.index,
                    "time_us": p.time_us,
                    "allocated_bytes": p.allocated,
                    "reserved_bytes": p.reserved,
                    "stacks_total": len(p.groups),
                    "stacks_shown": len(p.groups[:limit]),  # the most bytes first; --limit N shows more
                    "stacks": [_group_json(model, g) for g in p.groups[:limit]],
                    "modules": [
                        {"module": list(m.path), "bytes": m.bytes, "count": m.count} for m in p.modules[:limit]
                    ],
                }
                for p in model.peaks
            ],
            "segments": [
                {
                    "device": s.device,
                    "address": s.address,
                    "reserved_bytes": s.reserved,
                    "allocated_bytes": s.allocated,
                    "free_bytes": s.free,
                    "largest_free_block_bytes": s.largest_free_block,
                    "stream": s.stream,
                    "segment_type": s.segment_type,
                }
                for s in model.segment_use
            ],
            "ooms": [
                {
                    "device": o.device,
                    "entry": o.index,
                    "time_us": o.time_us,
                    "requested_bytes": o.requested,
                    "device_free_bytes": o.device_free,
                    "allocated_bytes": o.allocated,
                    "reserved_bytes": o.reserved,
                    "largest_free_block_bytes": o.largest_free_block,
                    "fragmented": o.fragmented,
                    "requested_from": stack_lines(model.snapshot, o.stack),
                    "held_by_total": len(o.held_by),
                    "held_by_shown": len(o.held_by[:limit]),
                    "held_by": [_group_json(model, g) for g in o.held_by[:limit]],
                }
                for o in model.ooms
            ],
        }
    )


def fit(line: str, width: int) -> str:
    """A table row cut to ``width``; prose wrapped, its continuation indented."""
    if len(line) <= width:
        return line
    if isinstance(line, TableRow):
        return line[: width - 1] + ELLIPSIS
    indent = " " * (len(line) - len(line.lstrip()) + 4)
    return "\n".join(textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False))


def print_snapshot_summary(model: SnapshotModel, fmt: str, limit: int | None, place: PeakPlace | None = None) -> int:
    """``tuiprof summary SNAP --view snapshot``: text (cut to the terminal's width) or JSON;
    ``place``: where the peak fell in a ``--trace`` file."""
    limit = DEFAULT_STACKS if limit is None else max(0, limit)
    if fmt == "json":
        sys.stdout.write(
            orjson.dumps(summary_document(model, limit, place), option=orjson.OPT_INDENT_2).decode() + "\n"
        )
        return 0
    width = shutil.get_terminal_size().columns if stdout_is_terminal() else 0
    sys.stdout.write(
        "".join((fit(line, width) if width else line) + "\n" for line in summary_lines(model, limit, place))
    )
    return 0


@dataclass(frozen=True)
class DetailLine:
    """A line of the stack pane; ``own``: a frame of the user's code, which the app marks."""

    text: str
    own: bool = False


OWN_MARK = "› "  # before a frame of the user's code (also without colour); two spaces before the others


def stack_detail(model: SnapshotModel, group: StackGroup, whole: int, hide_torch: bool = False) -> list[DetailLine]:
    """The stack pane's lines for a group: its figures, the user's innermost frame (visible
    without scrolling), then the full stack, innermost frame first, the user's frames marked;
    ``hide_torch``: without torch's frames (:func:`is_torch_frame`), their count said instead."""
    snapshot = model.snapshot
    head = (
        f"{format_bytes(group.bytes)} ({_share(group.bytes, whole)}) in {plural(group.count, 'allocation')}, "
        f"the largest {format_bytes(group.largest)}"
    )
    ids = snapshot.stacks.frame_ids(group.stack).tolist() if group.stack >= 0 else []
    names = snapshot.frames.filename
    own = [position for position, frame in enumerate(ids) if is_own_code(names[frame])]
    if own:
        yours = f"your frame: {short_where(model, group.stack)} (frame {own[0] + 1} of {len(ids)})"
    else:
        yours = f"your frame: none of the {plural(len(ids), 'frame')} is your code (outside torch and libraries)"
    hidden = sum(1 for frame in ids if is_torch_frame(names[frame])) if hide_torch else 0
    lines = [  # the user's frame second: a long module path wraps, and it must show without scrolling
        DetailLine(head),
        DetailLine(yours),
        DetailLine(f"module: {module_where(model, group.stack)}"),
        DetailLine(
            "stack, innermost frame first"
            + (f" ({OWN_MARK.strip()} your code)" if own else "")
            + (f"; {plural(hidden, 'frame')} of torch hidden" if hidden else "")
            + ":"
        ),
    ]
    frames: list[DetailLine] = []
    for frame in ids:
        if hide_torch and is_torch_frame(names[frame]):
            continue
        mine = is_own_code(names[frame])
        first, *original = frame_lines(snapshot, frame)
        frames.append(DetailLine((OWN_MARK if mine else "  ") + plain(first), mine))
        frames.extend(DetailLine("  " + plain(line)) for line in original)
    if not ids:
        frames.append(DetailLine("  (no stack: allocated before the trace began, or recorded without stacks)"))
    shown = frames[:DETAIL_LINES]
    if len(frames) > DETAIL_LINES:
        shown.append(
            DetailLine(f"  ... {plural(len(frames) - DETAIL_LINES, 'more line')} (--format json has them all)")
        )
    return lines + shown


def peak_heading(model: SnapshotModel, device: int) -> str:
    """What the Peak page's table shows: the peak of ``device`` (figures and when)."""
    return _peak_lines(model, model.peaks[device], 0)[0]


def _signed(value: int) -> str:
    return ("+" if value > 0 else "") + format_bytes(value)


def _change_where(diff: SnapshotDiff, row: StackChange) -> str:
    return short_where(diff.b, row.b_stack) if row.b_stack >= 0 else short_where(diff.a, row.a_stack)


def diff_lines(diff: SnapshotDiff, limit: int = DEFAULT_STACKS) -> list[str]:
    """A's peak against B's, then the stacks whose bytes at the peak changed most."""
    a, b = diff.a_peak.allocated, diff.b_peak.allocated
    change = b - a
    line = (
        f"peak {format_bytes(a)} (A, cuda:{diff.a_peak.device}) -> {format_bytes(b)} (B, cuda:{diff.b_peak.device}): "
        f"{_signed(change)}" + (f" ({'+' if change > 0 else ''}{format_pct(100 * change / a)})" if a else "")
    )
    moved = [row for row in diff.changes if row.change * (1 if change >= 0 else -1) > 0]  # the way the peak went
    if moved:
        word = "growth" if change >= 0 else "drop"
        line += f"; the largest {word}: {_change_where(diff, moved[0])} {_signed(moved[0].change)}"
    lines = [
        line,
        f"A: {plain(diff.a.snapshot.source)}",
        f"B: {plain(diff.b.snapshot.source)}",
        "",
        TableRow(
            f"  {'A':>{SIZE_CHARS}}  {'B':>{SIZE_CHARS}}  {'B - A':>{SIZE_CHARS + 1}}  where (innermost own frame)"
        ),
    ]
    for row in diff.changes[:limit]:
        lines.append(
            TableRow(
                f"  {format_bytes(row.a):>{SIZE_CHARS}}  {format_bytes(row.b):>{SIZE_CHARS}}  {_signed(row.change):>{SIZE_CHARS + 1}}  {_change_where(diff, row)}"
            )
        )
    if len(diff.changes) > limit:
        rest = sum(r.change for r in diff.changes[limit:])
        lines.append(
            TableRow(
                f"  {'':>{SIZE_CHARS}}  {'':>{SIZE_CHARS}}  {_signed(rest):>{SIZE_CHARS + 1}}  in {plural(len(diff.changes) - limit, 'more stack')} (--limit N)"
            )
        )
    if diff.modules:
        lines += [
            "",
            TableRow(
                f"  {'A':>{SIZE_CHARS}}  {'B':>{SIZE_CHARS}}  {'B - A':>{SIZE_CHARS + 1}}  module (its forward's file)"
            ),
        ]
        for module in diff.modules[:limit]:
            lines.append(
                TableRow(
                    f"  {format_bytes(module.a):>{SIZE_CHARS}}  {format_bytes(module.b):>{SIZE_CHARS}}  {_signed(module.change):>{SIZE_CHARS + 1}}  "
                    f"{plain(module_text(module.path))}"
                )
            )
        if len(diff.modules) > limit:
            rest = sum(m.change for m in diff.modules[limit:])
            more = plural(len(diff.modules) - limit, "more module")
            lines.append(
                TableRow(
                    f"  {'':>{SIZE_CHARS}}  {'':>{SIZE_CHARS}}  {_signed(rest):>{SIZE_CHARS + 1}}  in {more} (--limit N)"
                )
            )
    return lines


def diff_document(diff: SnapshotDiff, limit: int | None) -> dict:
    rows = diff.changes if limit is None else diff.changes[:limit]
    return {
        "a": {
            "file": diff.a.snapshot.source,
            "device": diff.a_peak.device,
            "peak_bytes": diff.a_peak.allocated,
            "time_us": diff.a_peak.time_us,
        },
        "b": {
            "file": diff.b.snapshot.source,
            "device": diff.b_peak.device,
            "peak_bytes": diff.b_peak.allocated,
            "time_us": diff.b_peak.time_us,
        },
        "stacks": [
            {
                "a_bytes": r.a,
                "b_bytes": r.b,
                "change_bytes": r.change,
                "frames": [f"{f}:{line} {name}" for f, line, name in r.frames],
            }
            for r in rows
        ],
        "modules": [
            {"module": list(m.path), "a_bytes": m.a, "b_bytes": m.b, "change_bytes": m.change}
            for m in (diff.modules if limit is None else diff.modules[:limit])
        ],
    }


def print_snapshot_diff(diff: SnapshotDiff, fmt: str | None, limit: int | None) -> int:
    """``tuiprof diff A.pickle B.pickle``: text (fitted to a terminal) or JSON."""
    if fmt == "json":
        sys.stdout.write(orjson.dumps(diff_document(diff, limit), option=orjson.OPT_INDENT_2).decode() + "\n")
        return 0
    width = shutil.get_terminal_size().columns if stdout_is_terminal() else 0
    lines = diff_lines(diff, DEFAULT_STACKS if limit is None else max(0, limit))
    sys.stdout.write("".join((fit(line, width) if width else line) + "\n" for line in lines))
    return 0
