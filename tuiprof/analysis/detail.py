"""Drill-down facts about one operator row: where it runs, what it launches."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import counts_first_seen
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.operators import OperatorStats, input_shapes_key
from tuiprof.trace.schema import decode_member


@dataclass(frozen=True)
class OperatorDetail:
    # module path, calls charged to it, whether they are backward calls (charged to the module of their
    # forward op, as the Modules view charges them); the operator's costliest modules first
    modules: list[tuple[str, int, bool]]
    input_shapes: list[tuple[str, int]]  # shapes text, calls
    input_types: str
    kernels: list[tuple[str, int, float]]  # kernel name, launches, device us (self: launched by the op itself)
    parents: list[tuple[str, int]]  # enclosing operator, calls
    share_of_parent_pct: float | None  # cpu total of the calls under the most common parent, over those parents' total
    share_of_step_pct: float | None  # cpu total per step over the mean step time
    module_count: int = 0  # modules the calls ran in (``modules`` holds the first few)


def operator_detail(model: TraceModel, stats: OperatorStats, limit: int = 5) -> OperatorDetail:
    """Facts over every call of ``stats`` (numpy counts: instant for 1e6 calls)."""
    calls = model.calls
    rows = np.array(stats.rows, dtype=np.int64)
    tree = model.modules
    _, nodes = tree.frame_index()
    modules: Counter[tuple[str, bool]] = Counter()
    module_ns: Counter[tuple[str, bool]] = Counter()  # the operator's time in each module: the costliest first
    owners, backward = tree.charged(rows)
    keys = 2 * owners + backward  # one code per (module, direction); -2: outside modules
    totals = calls.column("total_ns")[rows]
    for key, count in counts_first_seen(keys):
        owner, is_backward = divmod(int(key), 2)
        where = (nodes[owner].path if owner >= 0 else "(outside modules)", bool(is_backward))
        modules[where] += count
        module_ns[where] += int(totals[keys == key].sum())

    shapes: Counter[str] = Counter()
    with_dims = rows[calls.cpu.dims_len[calls.column("cpu_row")[rows]] > 0]
    if calls.shape_index is not None:  # prepared: the codes of every call
        codes, shape_keys = calls.shape_index
        for code, count in counts_first_seen(codes[with_dims]):
            shapes[shape_keys[code]] += count
    else:
        cache: dict[bytes, str] = {}
        for row in with_dims[:20000].tolist():
            shapes[input_shapes_key(calls, row, cache)] += 1
    types = ""
    typed = np.flatnonzero(calls.cpu.types_len[calls.column("cpu_row")[rows]] > 0)
    if len(typed):
        types = ", ".join(str(t) for t in decode_member(calls.input_texts(int(rows[typed[0]]))[1]) or [] if t)

    parent_of = calls.column("parent")[rows]
    under = parent_of >= 0
    parent_rows = parent_of[under]
    parent_names = calls.column("name_id")[parent_rows]
    parents = Counter({calls.names[code]: count for code, count in counts_first_seen(parent_names)})
    share_parent = None
    if parents:
        # Only the calls under the most common parent, over those parents' total
        # (all calls over one parent's total gave shares over 100 %).
        top_code = calls.names.index(parents.most_common(1)[0][0])
        below = parent_names == top_code
        chosen = np.zeros(len(calls), dtype=bool)
        chosen[parent_rows[below]] = True  # each parent call once
        parent_total = int(calls.column("total_ns")[chosen].sum())
        if parent_total:
            inside = int(calls.column("total_ns")[rows[under][below]].sum())
            share_parent = 100 * inside / parent_total

    activity = model.activity
    mine = np.zeros(len(calls) + 1, dtype=bool)  # index -1 (no launcher) lands on the extra slot
    mine[rows] = True
    launched = np.flatnonzero(mine[activity.launchers])
    kernel_names = activity.events.name[launched]
    kernel_ns: Counter[str] = Counter()
    kernel_count: dict[str, int] = {}
    for code, count in counts_first_seen(kernel_names):
        name = activity.names[code]
        kernel_count[name] = count
        kernel_ns[name] = int(activity.dur_ns[launched[kernel_names == code]].sum())
    share_step = None
    if model.steps:
        step_total = sum(s.duration_us for s in model.steps)
        share_step = 100 * stats.cpu_total_us / step_total if step_total else None
    return OperatorDetail(
        modules=[
            (path, modules[path, is_backward], is_backward) for (path, is_backward), _ in module_ns.most_common(limit)
        ],
        module_count=len(modules),
        input_shapes=shapes.most_common(limit),
        input_types=types,
        kernels=[(name, kernel_count[name], ns / 1000) for name, ns in kernel_ns.most_common(limit)],
        parents=parents.most_common(3),
        share_of_parent_pct=share_parent,
        share_of_step_pct=share_step,
    )
