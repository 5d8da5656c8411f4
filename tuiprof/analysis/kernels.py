"""Kernel table: every device kernel name with its launches and launchers."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tuiprof.analysis.calls import DeviceActivity, OperatorCalls, to_ns


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
    rows: tuple[int, ...]  # rows in DeviceActivity


def aggregate_kernels(activity: DeviceActivity, calls: OperatorCalls) -> list[KernelStats]:
    groups: dict[str, list[int]] = {}
    for index, event in enumerate(activity.events):
        groups.setdefault(event.name, []).append(index)
    result = []
    for name, rows in groups.items():
        durations = [to_ns(activity.events[r].dur) / 1000 for r in rows]
        grids: Counter[str] = Counter()
        blocks: Counter[str] = Counter()
        launchers: Counter[str] = Counter()
        occupancy = []
        for r in rows:
            args = activity.events[r].args
            if args is not None:
                if args.grid:
                    grids[tuple(args.grid)] += 1
                if args.block:
                    blocks[tuple(args.block)] += 1
                if isinstance(args.occupancy_pct, (int, float)):
                    occupancy.append(float(args.occupancy_pct))
            launcher = activity.launcher[r]
            if launcher >= 0:
                launchers[calls.name(launcher)] += 1
        total = sum(durations)
        result.append(
            KernelStats(
                name=name,
                kind=activity.kind[rows[0]],
                calls=len(rows),
                device_total_us=total,
                avg_us=total / len(rows),
                min_us=min(durations),
                max_us=max(durations),
                grid=_shape(grids.most_common(1)[0][0]) if grids else "",
                block=_shape(blocks.most_common(1)[0][0]) if blocks else "",
                occupancy_pct=sum(occupancy) / len(occupancy) if occupancy else None,
                launcher=launchers.most_common(1)[0][0] if launchers else "",
                rows=tuple(rows),
            )
        )
    result.sort(key=lambda k: k.device_total_us, reverse=True)
    return result


def _shape(values: tuple) -> str:
    return "x".join(str(v) for v in values)
