"""What an allocator snapshot says: memory over time, the peak and what holds it, fragmentation, OOMs.

Decisions (the issue leaves them open):

- An allocation is live from its ``alloc`` entry to its ``free_completed``
  (memory awaiting a free on another stream is still held: the allocator
  cannot reuse it).  ``free_requested`` changes nothing.
- Memory held before the trace began is counted from the start: a
  ``free_completed`` whose address has no earlier ``alloc`` (the trace's ring
  buffer dropped it; stack unknown: stack 0), and blocks still active when the
  snapshot was taken that the trace never allocated (their own stack).
  Segments likewise (``segment_alloc``/``segment_free``, ``segment_map``/``segment_unmap``).
- "Allocated after entry k" counts the entries of that entry's device up to
  and including k.  The peak is the first entry where it is highest.
- Allocations at the peak are grouped by their full stack; a group is named
  by the innermost frame of the user's own code (:func:`is_own_code`).
- A stack's modules (:func:`module_path`): a frame named ``forward`` whose caller (the next
  frame out) is ``_call_impl`` or ``_wrapped_call_impl`` of ``torch/nn/modules/module.py`` is an
  ``nn.Module`` forward; an FX frame's ``fx_original_trace`` lines ``in forward`` are the eager
  forwards the compiled node came from.  Frames carry no class or attribute name, so a module
  is named by its forward's file, and its instance by the line its parent's forward runs (the
  call ``self.fc(x)``): the path ``model.py:15 > linear.py`` (the innermost module's own line is
  where it allocated, not which module it is, and is left out).
- Two snapshots are compared at their highest peaks (whatever the device),
  stacks matched by their frames (file, line, function), not by id.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np

from tuiprof.trace.snapshot import ACTION_CODE, BLOCK_STATE_CODE, Snapshot, TraceEntries

_ALLOC, _FREE = ACTION_CODE["alloc"], ACTION_CODE["free_completed"]
_SEGMENT_ADDS = (ACTION_CODE["segment_alloc"], ACTION_CODE["segment_map"])
_SEGMENT_REMOVES = (ACTION_CODE["segment_free"], ACTION_CODE["segment_unmap"])
_ACTIVE_STATES = (BLOCK_STATE_CODE["active_allocated"], BLOCK_STATE_CODE["active_pending_free"])
_LIBRARY_MARKERS = ("/site-packages/", "/dist-packages/", "/lib/python3")
# Each OOM explained costs a pass over the live allocations: a file of 100,000 OOMs would take hours.
# A run that fails rarely retries more than a few times; later ones are counted.
OOMS_EXPLAINED = 100


@dataclass
class Lifetimes:
    """Intervals in entry rows: live after entry ``start`` (-1: before the trace) up to, not
    including, entry ``end`` (``len(entries)``: still live when the snapshot was taken)."""

    device: np.ndarray
    address: np.ndarray
    size: np.ndarray
    stack: np.ndarray
    start: np.ndarray
    end: np.ndarray

    def live_at(self, device: int, row: int) -> np.ndarray:
        """Indices of the intervals of ``device`` live after entry ``row``."""
        return np.flatnonzero((self.device == device) & (self.start <= row) & (self.end > row))


@dataclass
class StackGroup:
    stack: int
    bytes: int
    count: int
    largest: int


@dataclass
class ModuleGroup:
    """Allocations live at the peak whose innermost module is ``path`` (() : outside any module)."""

    path: tuple[str, ...]
    bytes: int
    count: int


@dataclass
class DeviceTimeline:
    """One device's memory after each of its entries."""

    device: int
    rows: np.ndarray  # entry rows of this device, in order
    time_us: np.ndarray
    allocated: np.ndarray
    reserved: np.ndarray

    @property
    def peak_index(self) -> int:
        return int(np.argmax(self.allocated)) if len(self.allocated) else -1


@dataclass
class SegmentUse:
    """A segment when the snapshot was taken (the figures of torch's ``segsum``)."""

    device: int
    address: int
    reserved: int
    allocated: int  # requested bytes of active_allocated blocks
    free: int  # reserved - allocated: between blocks and rounding inside them
    largest_free_block: int  # the biggest inactive block: the largest request it can serve without a new segment
    stream: int
    segment_type: str


@dataclass
class OutOfMemory:
    """An ``oom`` entry and the state of its device then."""

    row: int
    index: int  # in device_traces[device]
    device: int
    time_us: int
    requested: int
    device_free: int  # what CUDA still reported free on the device
    allocated: int
    reserved: int
    largest_free_block: int  # in the allocator's segments then
    held_by: list[StackGroup]
    stack: int  # where the failed request was made

    @property
    def fragmented(self) -> bool:
        """Enough was free in all (cached in segments plus free on the GPU), but no free block was
        as large as the request: the memory was there, in pieces."""
        cached = self.reserved - self.allocated
        return cached + max(self.device_free, 0) >= self.requested > self.largest_free_block


@dataclass
class DevicePeak:
    device: int
    row: int  # -1: no trace entries, the state when the snapshot was taken
    index: int  # in device_traces[device]; -1 as row
    time_us: int
    allocated: int
    reserved: int
    groups: list[StackGroup]
    modules: list[ModuleGroup] = field(default_factory=list)


@dataclass
class SnapshotModel:
    snapshot: Snapshot
    allocations: Lifetimes
    segments: Lifetimes
    timelines: list[DeviceTimeline]
    peaks: list[DevicePeak]
    segment_use: list[SegmentUse]
    ooms: list[OutOfMemory]  # the first OOMS_EXPLAINED of each device
    oom_count: int  # all of them


def is_own_code(filename: str) -> bool:
    """A frame of the user's code: Python outside installed packages and the standard library."""
    return (
        filename.endswith(".py") and not filename.startswith("<") and not any(m in filename for m in _LIBRARY_MARKERS)
    )


_TORCH_DIR = re.compile(r"(^|[/\\])torch[/\\]")  # a file of torch's package: .../torch/nn/modules/conv.py


def is_torch_frame(filename: str) -> bool:
    """A frame of torch: a file of its Python package, or native code (C++: the caching
    allocator, the interpreter; recorded with ``context="all"``), which no user edits.  The
    stack pane hides these on a key, so that the user's frames and their libraries' remain."""
    native = not filename.endswith(".py") and not filename.startswith("<")
    return native or _TORCH_DIR.search(filename) is not None


def own_frame(snapshot: Snapshot, stack: int) -> int:
    """The innermost frame of own code in ``stack``, else its innermost Python frame, else its first; -1 if empty."""
    ids = snapshot.stacks.frame_ids(stack)
    names = snapshot.frames.filename
    for test in (is_own_code, lambda name: name.endswith(".py")):
        for frame in ids:
            if test(names[frame]):
                return int(frame)
    return int(ids[0]) if len(ids) else -1


def frame_text(snapshot: Snapshot, frame: int) -> str:
    """``file.py:12 name`` (FX frames add ``[fx node]``): plain text, for Text() or JSON."""
    if frame < 0:
        return "(no stack: allocated before the trace began, or recorded without stacks)"
    frames = snapshot.frames
    text = f"{frames.filename[frame]}:{frames.line[frame]} {frames.name[frame]}"
    node = frames.fx["fx_node_name"][frame]
    return f"{text} [fx {frames.fx['fx_node_op'][frame]} {node}]" if node else text


def frame_lines(snapshot: Snapshot, frame: int) -> list[str]:
    """A frame's line, then (an FX frame) its original trace's, indented."""
    original = snapshot.frames.fx["fx_original_trace"][frame]
    return [frame_text(snapshot, frame)] + ["    " + part for part in original.splitlines() if part.strip()]


def stack_lines(snapshot: Snapshot, stack: int) -> list[str]:
    """The full stack, innermost frame first, one frame a line; FX frames add their original trace."""
    return [line for frame in snapshot.stacks.frame_ids(stack).tolist() for line in frame_lines(snapshot, frame)]


_MODULE_CALLERS = ("_call_impl", "_wrapped_call_impl")
_MODULE_PY = "torch/nn/modules/module.py"
_TRACEBACK_LINE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+), in (?P<name>\S+)')


def _forward_frames(snapshot: Snapshot, stack: int) -> list[tuple[str, int]]:
    """(filename, line) of each ``nn.Module`` forward in ``stack``, outermost first (rule above)."""
    frames = snapshot.frames
    ids = snapshot.stacks.frame_ids(stack).tolist()
    found: list[tuple[str, int]] = []
    for position, frame in enumerate(ids):  # innermost first
        original = frames.fx["fx_original_trace"][frame]
        if original:  # a traceback, outermost first: its innermost forward comes first here
            found.extend(
                reversed(
                    [(m["file"], int(m["line"])) for m in _TRACEBACK_LINE.finditer(original) if m["name"] == "forward"]
                )
            )
            continue
        caller = ids[position + 1] if position + 1 < len(ids) else -1
        if (
            frames.name[frame] == "forward"
            and caller >= 0
            and frames.name[caller] in _MODULE_CALLERS
            and frames.filename[caller].replace("\\", "/").endswith(_MODULE_PY)
        ):
            found.append((frames.filename[frame], int(frames.line[frame])))
    return found[::-1]


def module_path(snapshot: Snapshot, stack: int) -> tuple[str, ...]:
    """The stack's modules, outermost first: ``("model.py:15", "linear.py")`` (see the module
    docstring); () when no frame is a module's forward."""
    forwards = _forward_frames(snapshot, stack)
    return tuple(f"{os.path.basename(name)}:{line}" for name, line in forwards[:-1]) + tuple(
        os.path.basename(name) for name, _ in forwards[-1:]
    )


def module_text(path: tuple[str, ...]) -> str:
    return " > ".join(path) if path else "(outside any module)"


def group_by_module(snapshot: Snapshot, groups: list[StackGroup]) -> list[ModuleGroup]:
    """The peak's stack groups by their module path, most bytes first (ties: the path)."""
    found: dict[tuple[str, ...], ModuleGroup] = {}
    for group in groups:
        path = module_path(snapshot, group.stack)
        row = found.setdefault(path, ModuleGroup(path, 0, 0))
        row.bytes += group.bytes
        row.count += group.count
    return sorted(found.values(), key=lambda g: (-g.bytes, g.path))


def lifetimes(snapshot: Snapshot, adds: tuple[int, ...], removes: tuple[int, ...]) -> Lifetimes:
    """Pair each add entry with the next entry (add or remove) of the same device and address;
    a remove with no add before it was held from the trace's start."""
    entries = snapshot.entries
    count = len(entries)
    is_add, is_remove = np.isin(entries.action, adds), np.isin(entries.action, removes)
    rows = np.flatnonzero(is_add | is_remove)
    rows = rows[np.lexsort((rows, entries.address[rows], entries.device[rows]))]
    same_next = np.zeros(len(rows), dtype=bool)
    same_next[:-1] = (entries.device[rows[1:]] == entries.device[rows[:-1]]) & (
        entries.address[rows[1:]] == entries.address[rows[:-1]]
    )
    same_previous = np.zeros(len(rows), dtype=bool)
    same_previous[1:] = same_next[:-1]
    added = is_add[rows]
    next_row = np.full(len(rows), count, dtype=np.int64)
    next_row[:-1] = rows[1:]
    traced_start = rows[added]
    traced_end = np.where(same_next[added], next_row[added], count)
    before = rows[~added & ~same_previous]  # removed, never added in the trace: held from its start
    start = np.concatenate([traced_start, np.full(len(before), -1)])
    end = np.concatenate([traced_end, before])
    stack = np.concatenate([entries.stack[traced_start], np.zeros(len(before), dtype=np.int32)])
    source = np.concatenate([traced_start, before])
    device, address, size = entries.device[source], entries.address[source], entries.size[source]
    return Lifetimes(device, address, size, stack, start, end)


def _with_held(
    found: Lifetimes, count: int, device: np.ndarray, address: np.ndarray, size: np.ndarray, stack: np.ndarray
) -> Lifetimes:
    """Add the end-state items (device, address) not live at the trace's end: held through all of it."""
    live = found.end == count
    live_keys = set(zip(found.device[live].tolist(), found.address[live].tolist()))
    missing = np.asarray(
        [(d, a) not in live_keys for d, a in zip(device.tolist(), address.tolist())], dtype=bool
    ).reshape(-1)
    extra = int(missing.sum())
    return Lifetimes(
        np.concatenate([found.device, device[missing]]).astype(np.int32),
        np.concatenate([found.address, address[missing]]),
        np.concatenate([found.size, size[missing]]),
        np.concatenate([found.stack, stack[missing]]).astype(np.int32),
        np.concatenate([found.start, np.full(extra, -1)]),
        np.concatenate([found.end, np.full(extra, count)]),
    )


def _curve(spans: Lifetimes, rows: np.ndarray, device: int, count: int) -> np.ndarray:
    """Bytes live after each entry in ``rows`` (the device's rows, in order)."""
    mine = spans.device == device
    delta = np.zeros(count + 1, dtype=np.int64)
    start, end, size = spans.start[mine], spans.end[mine], spans.size[mine]
    baseline = int(size[start < 0].sum())
    np.add.at(delta, start[start >= 0], size[start >= 0])
    np.add.at(delta, end, -size)
    return baseline + np.cumsum(delta[:count])[rows] if len(rows) else np.zeros(0, dtype=np.int64)


def group_by_stack(spans: Lifetimes, chosen: np.ndarray) -> list[StackGroup]:
    """The chosen intervals by stack, most bytes first (ties: the lower stack id)."""
    if not len(chosen):
        return []
    stacks, inverse = np.unique(spans.stack[chosen], return_inverse=True)
    sizes = spans.size[chosen]
    totals = np.bincount(inverse, weights=sizes).astype(np.int64)
    counts = np.bincount(inverse)
    largest = np.zeros(len(stacks), dtype=np.int64)
    np.maximum.at(largest, inverse, sizes)
    order = np.lexsort((stacks, -totals))
    return [StackGroup(int(stacks[i]), int(totals[i]), int(counts[i]), int(largest[i])) for i in order]


def largest_free_gap(allocations: Lifetimes, segments: Lifetimes, device: int, row: int) -> int:
    """The largest address range inside the device's segments live after ``row`` that no live
    allocation covers.  Vectorised over all segments at once (segments do not overlap, so the
    running highest end of the sorted allocations, floored at each segment's start, is what
    covers memory up to the next allocation)."""
    live_segments = segments.live_at(device, row)
    if not len(live_segments):
        return 0
    order = np.argsort(segments.address[live_segments], kind="stable")
    lows = segments.address[live_segments][order]
    highs = lows + segments.size[live_segments][order]
    live_allocations = allocations.live_at(device, row)
    by_address = np.argsort(allocations.address[live_allocations], kind="stable")
    starts = allocations.address[live_allocations][by_address]
    ends = starts + allocations.size[live_allocations][by_address]
    owner = np.searchsorted(lows, starts, side="right") - 1
    inside = (owner >= 0) & (starts < highs[np.maximum(owner, 0)])
    starts, ends, owner = starts[inside], ends[inside], owner[inside]
    best = 0
    covered = np.maximum.accumulate(ends) if len(ends) else ends
    if len(starts):
        before = np.concatenate([[np.iinfo(np.int64).min], covered[:-1]])
        best = int((starts - np.maximum(lows[owner], before)).max())
    first, last = np.searchsorted(starts, lows), np.searchsorted(starts, highs) - 1
    has = last >= first  # segments with an allocation: free after the highest end in them
    tail_cover = lows.copy()
    tail_cover[has] = np.maximum(lows[has], covered[last[has]])
    return max(best, int((highs - tail_cover).max()), 0)


def segment_use(snapshot: Snapshot) -> list[SegmentUse]:
    segments = snapshot.segments
    active = segments.block_state == BLOCK_STATE_CODE["active_allocated"]
    inactive = segments.block_state == BLOCK_STATE_CODE["inactive"]
    count = len(segments)
    allocated = np.bincount(segments.block_segment[active], weights=segments.block_requested[active], minlength=count)
    largest = np.zeros(count, dtype=np.int64)
    np.maximum.at(largest, segments.block_segment[inactive], segments.block_size[inactive])
    return [
        SegmentUse(
            int(segments.device[i]),
            int(segments.address[i]),
            int(segments.total_size[i]),
            int(allocated[i]),
            int(segments.total_size[i]) - int(allocated[i]),
            int(largest[i]),
            int(segments.stream[i]),
            segments.segment_type[i],
        )
        for i in range(count)
    ]


@dataclass(frozen=True)
class Window:
    """``--from``/``--to``: microseconds from the first trace entry (entry indices when the
    snapshot has no times), both ends included; None: open.  Only where the peak and OOMs are
    looked for: memory allocated before the window still counts in it."""

    start: float | None = None
    end: float | None = None

    @staticmethod
    def relative(entries: TraceEntries) -> np.ndarray:
        return entries.time_us - (int(entries.time_us.min()) if len(entries) and entries.has_times else 0)

    def mask(self, entries: TraceEntries) -> np.ndarray:
        times = self.relative(entries)
        inside = np.ones(len(entries), dtype=bool)
        if self.start is not None:
            inside &= times >= self.start
        if self.end is not None:
            inside &= times <= self.end
        return inside

    def before(self, entries: TraceEntries) -> np.ndarray:
        return self.relative(entries) < self.start if self.start is not None else np.zeros(len(entries), dtype=bool)


def _state_at(allocations: Lifetimes, segments: Lifetimes, device: int, row: int) -> tuple[int, int, np.ndarray]:
    """(allocated, reserved, live allocations) after entry ``row`` (-1: before the trace)."""
    live = allocations.live_at(device, row)
    return int(allocations.size[live].sum()), int(segments.size[segments.live_at(device, row)].sum()), live


def analyze_snapshot(snapshot: Snapshot, window: Window = Window()) -> SnapshotModel:
    entries, blocks = snapshot.entries, snapshot.segments
    count = len(entries)
    held = np.isin(blocks.block_state, _ACTIVE_STATES)
    traced = lifetimes(snapshot, (_ALLOC,), (_FREE,))
    allocations = _with_held(
        traced,
        count,
        blocks.device[blocks.block_segment[held]],
        blocks.block_address[held],
        blocks.block_size[held],
        blocks.block_stack[held],
    )
    traced_segments = lifetimes(snapshot, _SEGMENT_ADDS, _SEGMENT_REMOVES)
    segments = _with_held(
        traced_segments, count, blocks.device, blocks.address, blocks.total_size, np.zeros(len(blocks), dtype=np.int32)
    )
    inside = window.mask(entries)
    timelines, peaks = [], []
    for device in range(snapshot.device_count):
        everything = np.flatnonzero(entries.device == device)
        rows = everything[inside[everything]]
        timeline = DeviceTimeline(
            device,
            rows,
            entries.time_us[rows],
            _curve(allocations, rows, device, count),
            _curve(segments, rows, device, count),
        )
        timelines.append(timeline)
        at = timeline.peak_index
        if at >= 0:
            row = int(rows[at])
            live = allocations.live_at(device, row)
            groups = group_by_stack(allocations, live)
            peaks.append(
                DevicePeak(
                    device,
                    row,
                    int(np.searchsorted(everything, row)),
                    int(timeline.time_us[at]),
                    int(timeline.allocated[at]),
                    int(timeline.reserved[at]),
                    groups,
                    group_by_module(snapshot, groups),
                )
            )
        else:  # no entry in the window (or none at all): the state then
            earlier = everything[window.before(entries)[everything]] if window.start is not None else everything
            row = (
                int(earlier[-1]) if len(earlier) else (-1 if len(everything) else count - 1)
            )  # count - 1: after the last entry
            allocated, reserved, live = _state_at(allocations, segments, device, row)
            groups = group_by_stack(allocations, live)
            peaks.append(DevicePeak(device, -1, -1, -1, allocated, reserved, groups, group_by_module(snapshot, groups)))
    ooms = []
    oom_rows = np.flatnonzero((entries.action == ACTION_CODE["oom"]) & inside)
    explained = np.concatenate(
        [oom_rows[entries.device[oom_rows] == d][:OOMS_EXPLAINED] for d in range(snapshot.device_count)] or [oom_rows]
    )
    for row in np.sort(explained).tolist():
        device = int(entries.device[row])
        timeline = timelines[device]
        at = int(np.searchsorted(timeline.rows, row))
        ooms.append(
            OutOfMemory(
                row,
                int(np.searchsorted(np.flatnonzero(entries.device == device), row)),
                device,
                int(entries.time_us[row]),
                int(entries.size[row]),
                int(entries.device_free[row]),
                int(timeline.allocated[at]),
                int(timeline.reserved[at]),
                largest_free_gap(allocations, segments, device, row),
                group_by_stack(allocations, allocations.live_at(device, row)),
                int(entries.stack[row]),
            )
        )
    return SnapshotModel(snapshot, allocations, segments, timelines, peaks, segment_use(snapshot), ooms, len(oom_rows))


@dataclass
class ModuleChange:
    """One module path's bytes at A's peak and at B's: paths are forward files and call lines,
    so they match between two runs of the same code."""

    path: tuple[str, ...]
    a: int
    b: int

    @property
    def change(self) -> int:
        return self.b - self.a


@dataclass
class StackChange:
    """One stack's bytes at A's peak and at B's (0 where the stack holds nothing there)."""

    frames: tuple[tuple[str, int, str], ...]  # (filename, line, name), innermost first
    a: int
    b: int
    a_stack: int  # the stack's id in A's snapshot (-1: not at A's peak)
    b_stack: int

    @property
    def change(self) -> int:
        return self.b - self.a


@dataclass
class SnapshotDiff:
    a: SnapshotModel
    b: SnapshotModel
    a_peak: DevicePeak
    b_peak: DevicePeak
    changes: list[StackChange]  # largest change first (by size, either sign)
    modules: list[ModuleChange]  # the same by nn.Module path; [] when neither peak ran inside a forward


def highest_peak(model: SnapshotModel) -> DevicePeak:
    return max(model.peaks, key=lambda p: (p.allocated, -p.device))


def stack_frames(snapshot: Snapshot, stack: int) -> tuple[tuple[str, int, str], ...]:
    """A stack as comparable content: stack ids differ between two files, frames do not."""
    frames = snapshot.frames
    return tuple(
        (frames.filename[i], frames.line[i], frames.name[i]) for i in snapshot.stacks.frame_ids(stack).tolist()
    )


def diff_snapshots(a: SnapshotModel, b: SnapshotModel) -> SnapshotDiff:
    """The two highest peaks compared by stack (matched by their frames)."""
    a_peak, b_peak = highest_peak(a), highest_peak(b)
    rows: dict[tuple, StackChange] = {}
    for side, model, peak in (("a", a, a_peak), ("b", b, b_peak)):
        for group in peak.groups:
            key = stack_frames(model.snapshot, group.stack)
            row = rows.setdefault(key, StackChange(key, 0, 0, -1, -1))
            setattr(row, side, getattr(row, side) + group.bytes)
            setattr(row, f"{side}_stack", group.stack)
    changes = sorted(rows.values(), key=lambda r: (-abs(r.change), -max(r.a, r.b), r.frames))
    modules: dict[tuple[str, ...], ModuleChange] = {}
    for side, peak in (("a", a_peak), ("b", b_peak)):
        for module in peak.modules:
            found = modules.setdefault(module.path, ModuleChange(module.path, 0, 0))
            setattr(found, side, getattr(found, side) + module.bytes)
    by_module = sorted(modules.values(), key=lambda r: (-abs(r.change), -max(r.a, r.b), r.path))
    if not any(r.path for r in by_module):
        by_module = []
    return SnapshotDiff(a, b, a_peak, b_peak, changes, by_module)
