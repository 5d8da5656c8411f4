"""Kernel table: every device kernel name with its launches and launchers."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import RowView, counts_first_seen, gather, group_rows
from tuiprof.analysis.calls import DeviceActivity, OperatorCalls


@dataclass(frozen=True, slots=True)
class KernelStats:
    name: str
    kind: str  # "kernel" | "memcpy" | "memset"
    calls: int
    device_total_us: float
    avg_us: float
    min_us: float
    max_us: float
    grid: str  # most frequent launch shape
    block: str
    occupancy_pct: float | None  # mean est. achieved occupancy
    launcher: str  # operator that launched it most often
    rows: RowView  # rows in DeviceActivity


def aggregate_kernels(activity: DeviceActivity, calls: OperatorCalls) -> list[KernelStats]:
    """Group device events by name, with numpy over the activity's columns."""
    events = activity.events
    if not len(events):
        return []
    codes, grids, blocks, occupancies = events.name, events.grid, events.block, events.occupancy
    launcher = activity.launchers
    launcher_name = gather(calls.column("name_id"), launcher, -1)
    durations = events.dur_ns
    names = activity.names

    result = []
    for code, rows in zip(*group_rows(codes)):
        spans = durations[rows]
        total = int(spans.sum()) / 1000
        grid, block, who = _most_common(grids[rows]), _most_common(blocks[rows]), _most_common(launcher_name[rows])
        occupied = occupancies[rows]
        occupied = occupied[~np.isnan(occupied)]
        result.append(
            KernelStats(
                name=names[code],
                kind=activity.kind(rows[0]),
                calls=len(rows),
                device_total_us=total,
                avg_us=total / len(rows),
                min_us=int(spans.min()) / 1000,
                max_us=int(spans.max()) / 1000,
                grid=names[grid] if grid >= 0 else "",
                block=names[block] if block >= 0 else "",
                occupancy_pct=float(occupied.mean()) if len(occupied) else None,
                launcher=calls.names[who] if who >= 0 else "",
                rows=RowView(rows),
            )
        )
    result.sort(key=lambda k: k.device_total_us, reverse=True)
    return result


def _most_common(codes: np.ndarray) -> int:
    """The most frequent code >= 0 (the first seen on a tie, as Counter gives); -1 if none."""
    pairs = counts_first_seen(codes[codes >= 0])
    return max(pairs, key=lambda pair: pair[1])[0] if pairs else -1  # max keeps the first of equals
