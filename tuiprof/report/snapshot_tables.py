"""The allocator snapshot's tables: the pages of ``tuiprof open SNAP``, what ``e``/``E`` export
and what ``?`` explains.

Each table is a tuple of :class:`~tuiprof.report.views.Column` and rows (dicts) built from
analysis/snapshot.py's model, like the trace views' tables, so the snapshot app uses the same
table widget, filter, sort and export as the explorer.  Each row holds the model's object it
shows (``item``, typed by its class: :class:`StackRow`...) for the detail pane; it is never
shown or exported.  The chart is text too:
the TUI only asks for it at its width.
"""

from __future__ import annotations

from tuiprof.analysis.snapshot import (
    ModuleGroup,
    OutOfMemory,
    SegmentUse,
    SnapshotModel,
    StackGroup,
    group_by_module,
    module_text,
)
from tuiprof.report.plain import plain
from tuiprof.report.snapshot import (
    module_where,
    oom_cause,
    oom_lines,
    short_where,
)
from tuiprof.report.units import format_bytes, plural
from tuiprof.report.views import Column, ItemRow, Row, View

STACK_COLUMNS: tuple[Column, ...] = (
    Column("bytes", "Bytes", "bytes", "bytes the stack's live allocations held then"),
    Column("share", "Share", "pct", "share of the device's allocated bytes then"),
    Column("count", "Allocs", "count", "live allocations made from this stack"),
    Column("largest", "Largest", "bytes", "the largest of them", narrow=False),
    Column("where", "Where", "text", "the innermost frame of your own code (file:line function)"),
    Column("module", "Module", "text", "the nn.Module forwards around the allocation, outermost first", narrow=False),
)
MODULE_COLUMNS: tuple[Column, ...] = (
    Column("bytes", "Bytes", "bytes", "bytes allocated inside this module's forward and live then"),
    Column("share", "Share", "pct", "share of the device's allocated bytes then"),
    Column("count", "Allocs", "count", "live allocations made inside it"),
    Column("module", "Module", "text", "forward files outermost first, told apart by the line of the parent's call"),
)
SEGMENT_COLUMNS: tuple[Column, ...] = (
    Column("address", "Segment", "text", "the segment's address (cudaMalloc'd block)"),
    Column("reserved", "Reserved", "bytes", "the segment's size"),
    Column("allocated", "Allocated", "bytes", "requested bytes of its active blocks (as torch's segsum counts)"),
    Column("free", "Free", "bytes", "reserved - allocated: between blocks and rounding inside them"),
    Column("free_pct", "Free %", "pct", "free as a share of the segment"),
    Column("largest_free", "Largest free", "bytes", "the biggest inactive block: the largest request it can serve"),
    Column("stream", "Stream", "int", "the stream the segment belongs to", narrow=False),
    Column("pool", "Pool", "text", "small (<= 1 MiB blocks) or large pool", narrow=False),
)
OOM_COLUMNS: tuple[Column, ...] = (
    Column("order", "#", "int", "the order they happened in, on every GPU"),
    Column("device", "Device", "text", "the GPU"),
    Column("when", "When", "us", "time from the first trace entry (-- in a snapshot without times)"),
    Column("entry", "Entry", "int", "its place in the GPU's trace entries", narrow=False),
    Column("requested", "Requested", "bytes", "the allocation that failed"),
    Column("gpu_free", "GPU free", "bytes", "what CUDA still reported free on the device"),
    Column("cached", "Cached", "bytes", "free inside the allocator's segments (reserved - allocated)"),
    Column("largest_free", "Largest free", "bytes", "the largest free block in the segments then", narrow=False),
    Column("cause", "Cause", "text", "fragmented (enough free, no piece large enough) or full"),
    Column("where", "Where", "text", "the innermost frame of your own code that asked", narrow=False),
)


def _pct(part: int, whole: int) -> float | None:
    return 100 * part / whole if whole else None


def _help_view(name: str, title: str, columns: tuple[Column, ...], sort: str) -> View:
    return View(name, title, columns, sort, lambda model, options: [])


# What ? explains on each page.
HELP_VIEWS: dict[str, View] = {
    "stacks": _help_view("snapshot-stacks", "Stacks holding memory", STACK_COLUMNS, "bytes"),
    "modules": _help_view("snapshot-modules", "Memory by nn.Module", MODULE_COLUMNS, "bytes"),
    "segments": _help_view("snapshot-segments", "Segments (fragmentation)", SEGMENT_COLUMNS, "free"),
    "ooms": _help_view("snapshot-ooms", "Out-of-memory errors", OOM_COLUMNS, "order"),
}


class StackRow(ItemRow[StackGroup]):
    """A row of the Peak page: a stack holding memory."""

    __slots__ = ()


class ModuleGroupRow(ItemRow[ModuleGroup]):
    """A row of the Modules page."""

    __slots__ = ()


class SegmentRow(ItemRow[SegmentUse]):
    """A row of the Segments page."""

    __slots__ = ()


class OomRow(ItemRow[OutOfMemory]):
    """A row of the OOMs page."""

    __slots__ = ()


def stack_rows(model: SnapshotModel, groups: list[StackGroup], whole: int) -> list[Row]:
    """One row per stack holding memory (at the peak, or at an OOM)."""
    return [
        StackRow(
            g,
            {
                "bytes": g.bytes,
                "share": _pct(g.bytes, whole),
                "count": g.count,
                "largest": g.largest,
                "where": short_where(model, g.stack),
                "module": module_where(model, g.stack),
            },
        )
        for g in groups
    ]


def module_rows(modules: list[ModuleGroup], whole: int) -> list[Row]:
    return [
        ModuleGroupRow(
            m,
            {"bytes": m.bytes, "share": _pct(m.bytes, whole), "count": m.count, "module": plain(module_text(m.path))},
        )
        for m in modules
    ]


def held_modules(model: SnapshotModel, groups: list[StackGroup]) -> list[ModuleGroup]:
    """What ``groups`` hold by module (the peak's are in the model; an OOM's are grouped here)."""
    return group_by_module(model.snapshot, groups)


def segment_rows(model: SnapshotModel, device: int) -> list[Row]:
    """The device's segments when the snapshot was taken."""
    return [
        SegmentRow(
            use,
            {
                "address": f"0x{use.address:x}",
                "reserved": use.reserved,
                "allocated": use.allocated,
                "free": use.free,
                "free_pct": _pct(use.free, use.reserved),
                "largest_free": use.largest_free_block,
                "stream": use.stream,
                "pool": plain(use.segment_type),
            },
        )
        for use in model.segment_use
        if use.device == device
    ]


def oom_rows(model: SnapshotModel) -> list[Row]:
    """Every explained OOM, of every device, in the order they happened."""
    entries = model.snapshot.entries
    start = int(entries.time_us.min()) if entries.has_times and len(entries) else None
    return [
        OomRow(
            oom,
            {
                "order": order,
                "device": f"cuda:{oom.device}",
                "when": oom.time_us - start if start is not None else None,
                "entry": oom.index,
                "requested": oom.requested,
                "gpu_free": oom.device_free,
                "cached": oom.reserved - oom.allocated,
                "largest_free": oom.largest_free_block,
                "cause": "fragmented" if oom.fragmented else "full",
                "where": short_where(model, oom.stack),
            },
        )
        for order, oom in enumerate(model.ooms, 1)
    ]


def module_detail(module: ModuleGroup, whole: int) -> str:
    share = f" ({100 * module.bytes / whole:.1f}%)" if whole else ""
    path = [plain(part) for part in module.path] or ["(outside any module's forward)"]
    return "\n".join(
        [f"{format_bytes(module.bytes)}{share} in {plural(module.count, 'allocation')}", "module, outermost first:"]
        + [f"  {'  ' * depth}{part}" for depth, part in enumerate(path)]
    )


def segment_detail(use: SegmentUse) -> str:
    return "\n".join(
        [
            f"segment 0x{use.address:x} on cuda:{use.device}, stream {use.stream}, {plain(use.segment_type)} pool",
            f"  {format_bytes(use.reserved)} reserved, {format_bytes(use.allocated)} allocated, "
            f"{format_bytes(use.free)} free",
            f"  the largest free block: {format_bytes(use.largest_free_block)} "
            "(a larger request needs a new segment, or fails when the GPU has no room)",
        ]
    )


def oom_detail(model: SnapshotModel, oom: OutOfMemory) -> str:
    """The OOM in full: the request, what was free, the cause, and the stacks that held memory."""
    return "\n".join(oom_lines(model, oom, 10))


def oom_heading(model: SnapshotModel, oom: OutOfMemory) -> str:
    """What the Peak page's table shows at an OOM: the request, the cause, then what held memory."""
    return f"{oom_lines(model, oom, 0)[0]}\n{oom_cause(oom)}; held then by:"


CHART_FULL = "█"
CHART_RESERVED = "░"
_EIGHTHS = " ▁▂▃▄▅▆▇"


def memory_chart(model: SnapshotModel, device: int, width: int, height: int) -> list[str]:
    """Allocated (solid) under reserved (shaded) memory of ``device`` over its entries, ``width``
    columns of ``height`` rows on one scale (the highest reserved), each column the highest of
    its span, so no peak is averaged away; then a legend line."""
    timeline = model.timelines[device]
    allocated, reserved = timeline.allocated, timeline.reserved
    width, height = max(1, width), max(1, height)
    if not len(allocated):
        return [f"cuda:{device}: no trace entries (the state when the snapshot was taken)"]
    columns = min(width, len(allocated))
    edges = [len(allocated) * i // columns for i in range(columns + 1)]
    high_alloc = [int(allocated[edges[i] : edges[i + 1]].max()) for i in range(columns)]
    high_reserved = [int(reserved[edges[i] : edges[i + 1]].max()) for i in range(columns)]
    top = max(max(high_reserved), max(high_alloc), 1)
    rows = []
    for level in range(height - 1, -1, -1):  # top row first
        cells = []
        for a, r in zip(high_alloc, high_reserved):
            filled = a * height * 8 // top - level * 8  # eighths of this cell under the allocated curve
            if filled >= 8:
                cells.append(CHART_FULL)
            elif filled > 0:
                cells.append(_EIGHTHS[filled])
            elif r * height // top > level or (level == 0 and r > a):
                cells.append(CHART_RESERVED)
            else:
                cells.append(" ")
        rows.append("".join(cells))
    legend = f"{CHART_FULL} allocated {CHART_RESERVED} reserved; top {format_bytes(top)}"
    return rows + [legend[:width]]
