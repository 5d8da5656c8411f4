"""Drill-down facts about one operator row: where it runs, what it launches."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.operators import OperatorStats, input_shapes_key
from tuiprof.trace.schema import decode_member


@dataclass(frozen=True)
class OperatorDetail:
    modules: list[tuple[str, int]]  # module path, calls inside it (most first)
    input_shapes: list[tuple[str, int]]  # shapes text, calls
    input_types: str
    kernels: list[tuple[str, int, float]]  # kernel name, launches, device us (self: launched by the op itself)
    parents: list[tuple[str, int]]  # enclosing operator, calls
    share_of_parent_pct: float | None  # cpu total over the most common parent's total
    share_of_step_pct: float | None  # cpu total per step over the mean step time


def operator_detail(model: TraceModel, stats: OperatorStats, limit: int = 5) -> OperatorDetail:
    calls = model.calls
    rows = stats.rows
    modules: Counter[str] = Counter()
    shapes: Counter[str] = Counter()
    parents: Counter[str] = Counter()
    parent_rows: dict[str, set[int]] = {}
    kernel_time: Counter[str] = Counter()
    kernel_count: Counter[str] = Counter()
    types = ""
    shape_cache: dict[bytes, str] = {}
    for row in rows[:20000]:
        node = model.modules.by_frame.get(calls.module[row])
        modules[node.path if node else "(outside modules)"] += 1
        dims, input_types, _ = calls.input_texts(row)
        if dims:
            shapes[input_shapes_key(calls, row, shape_cache)] += 1
        if not types and input_types:
            types = ", ".join(str(t) for t in decode_member(input_types) or [] if t)
        parent = calls.parent[row]
        if parent >= 0:
            parents[calls.name(parent)] += 1
            parent_rows.setdefault(calls.name(parent), set()).add(parent)
        for index in model.activity.launched_by(row):
            name = model.activity.name(index)
            kernel_time[name] += int(model.activity.dur_ns[index]) / 1000
            kernel_count[name] += 1
    share_parent = None
    if parents:
        top_parent = parents.most_common(1)[0][0]
        parent_total = sum(map(calls.total_ns.__getitem__, parent_rows[top_parent])) / 1000
        if parent_total:
            share_parent = 100 * stats.cpu_total_us / parent_total
    share_step = None
    if model.steps:
        step_total = sum(s.duration_us for s in model.steps)
        share_step = 100 * stats.cpu_total_us / step_total if step_total else None
    return OperatorDetail(
        modules=modules.most_common(limit),
        input_shapes=shapes.most_common(limit),
        input_types=types,
        kernels=[(name, kernel_count[name], us) for name, us in kernel_time.most_common(limit)],
        parents=parents.most_common(3),
        share_of_parent_pct=share_parent,
        share_of_step_pct=share_step,
    )
