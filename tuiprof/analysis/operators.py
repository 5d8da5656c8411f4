"""Operator table: ``key_averages()`` rebuilt from operator calls."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import NO_ROWS, RowView, group_rows, nearest_ancestor, slice_codes
from tuiprof.analysis.calls import OperatorCalls, UnattributedMemory, is_step_name
from tuiprof.trace.schema import decode_member

STEP_WILDCARD = "ProfilerStep*"


@dataclass(frozen=True, slots=True)
class OperatorStats:
    """One row of the operator table (one name, or one name + input shapes)."""

    name: str
    input_shapes: str | None
    calls: int
    self_cpu_us: float
    cpu_total_us: float
    self_device_us: float
    device_total_us: float
    self_cpu_mem_bytes: int
    cpu_mem_bytes: int
    self_device_mem_bytes: int
    device_mem_bytes: int
    flops: int  # torch profiler's formulas, as key_averages()
    rows: RowView  # call rows in OperatorCalls, for drill-down
    executed_flops: int = 0  # training FLOPs these calls counted or executed for a counted caller (calls.count_flops)

    @property
    def cpu_avg_us(self) -> float:
        return self.cpu_total_us / self.calls if self.calls else 0.0

    @property
    def device_avg_us(self) -> float:
        return self.device_total_us / self.calls if self.calls else 0.0


def top_level_rows(calls: OperatorCalls, selected: np.ndarray | None = None) -> np.ndarray:
    """Whether each call has no enclosing operator, ``ProfilerStep#N`` spans aside
    (they enclose everything, and are not top-level operators themselves).

    With ``selected`` (a module's calls), "enclosing" means among the selected
    calls: the module's outermost operators are its top level."""
    is_step = np.isin(calls.column("name_id"), calls.name_codes(is_step_name))
    above = nearest_ancestor(calls.column("parent"), ~is_step)
    if selected is None:
        return (above < 0) & ~is_step
    inside = np.zeros(len(calls) + 1, dtype=bool)  # index -1 (no ancestor) lands on the extra slot
    inside[selected] = True
    return ~inside[above] & ~is_step


def input_shapes_key(calls: OperatorCalls, row: int, cache: dict[bytes, str] | None = None) -> str:
    """torch's ``str(event.input_shapes)``: ``[[4, 3, 32, 32], [64, 3, 7, 7], []]``.

    ``cache`` maps the undecoded JSON to the key: shapes repeat a lot."""
    raw = calls.input_texts(row)[0]
    if cache is not None and raw in cache:
        return cache[raw]
    key = _shapes_text(raw)
    if cache is not None:
        cache[raw] = key
    return key


def _shapes_text(raw: bytes) -> str:
    dims = decode_member(raw) if raw else None
    return str(dims if dims is not None else [])


def shape_codes(calls: OperatorCalls) -> tuple[np.ndarray, list[str]]:
    """Each call's input-shapes key as a code into a list of keys (computed once per
    trace: one bytes slice and dict look-up per call, one decode per distinct text)."""
    if calls.shape_index is None:
        rows = calls.column("cpu_row")
        codes, texts = slice_codes(calls.inputs, calls.cpu.dims_at[rows], calls.cpu.dims_len[rows])
        keys: dict[str, int] = {}
        by_text = np.array([keys.setdefault(_shapes_text(raw), len(keys)) for raw in texts], dtype=np.int64)
        calls.shape_index = (by_text[codes] if len(codes) else codes, list(keys))
    return calls.shape_index


# OperatorStats field -> (the OperatorCalls column summed over a group's calls, unit factor).
# A new summed column is one line here plus its field.
SUMMED_FIELDS: dict[str, tuple[str, float]] = {
    "self_cpu_us": ("self_ns", 1e-3),
    "cpu_total_us": ("total_ns", 1e-3),
    "self_device_us": ("self_device_ns", 1e-3),
    "device_total_us": ("device_total_ns", 1e-3),
    "self_cpu_mem_bytes": ("self_cpu_mem", 1),
    "cpu_mem_bytes": ("cpu_mem", 1),
    "self_device_mem_bytes": ("self_device_mem", 1),
    "device_mem_bytes": ("device_mem", 1),
    "flops": ("flops", 1),
    "executed_flops": ("executed_flops", 1),
}


def aggregate_operators(
    calls: OperatorCalls,
    rows: Iterable[int] | None = None,
    *,
    group_by_shape: bool = False,
    top_level_only: bool = False,
    unattributed: UnattributedMemory | None = None,
) -> list[OperatorStats]:
    """Group calls by name (and input shapes), like ``key_averages()``.

    ``rows`` restricts the table to some calls (a module's, a step's).
    ``unattributed`` adds torch's ``[memory]`` row for records inside no op.
    Grouping is one stable sort of group keys, then one gather and one
    segmented sum per column; groups come in first-call order (the order a
    walk over ``rows`` meets them), then by self time.
    """
    selected = np.arange(len(calls)) if rows is None else np.fromiter(rows, dtype=np.int64)
    if top_level_only:
        selected = selected[top_level_rows(calls, None if rows is None else selected)[selected]]
    names = calls.names
    step_code = len(names)  # every ProfilerStep#N shares one group (key_averages' ProfilerStep*)
    remap = np.arange(len(names) + 1)
    remap[calls.name_codes(is_step_name)] = step_code
    keys = remap[calls.column("name_id")[selected]]
    shapes: list[str] = []
    if group_by_shape:
        codes, shapes = shape_codes(calls)
        keys = keys * max(1, len(shapes)) + codes[selected]
    result = _stats_by_key(calls, selected, keys, names, step_code, shapes)
    if unattributed is not None and unattributed.calls and not top_level_only:
        result.append(
            OperatorStats(
                name="[memory]",
                input_shapes="[]" if group_by_shape else None,
                calls=unattributed.calls,
                rows=NO_ROWS,
                **{
                    **dict.fromkeys(SUMMED_FIELDS, 0),
                    "self_cpu_mem_bytes": unattributed.cpu_bytes,
                    "cpu_mem_bytes": unattributed.cpu_bytes,
                    "self_device_mem_bytes": unattributed.device_bytes,
                    "device_mem_bytes": unattributed.device_bytes,
                },
            )
        )
    result.sort(key=lambda s: s.self_cpu_us + s.self_device_us, reverse=True)
    return result


def _stats_by_key(
    calls: OperatorCalls, selected: np.ndarray, keys: np.ndarray, names: list[str], step_code: int, shapes: list[str]
) -> list[OperatorStats]:
    group_keys, positions = group_rows(keys)
    if not group_keys:
        return []
    members_sorted = selected[np.concatenate(positions)]
    firsts = np.cumsum([0] + [len(p) for p in positions[:-1]])
    sizes = np.array([len(p) for p in positions], dtype=np.int64)
    sums = {
        field: _group_sums(calls, column, members_sorted, firsts, sizes) for field, (column, _) in SUMMED_FIELDS.items()
    }
    for field, (_, factor) in SUMMED_FIELDS.items():
        if factor != 1:
            sums[field] = [value * factor for value in sums[field]]
    width = max(1, len(shapes))
    found = []
    for group, (key, where, first) in enumerate(zip(group_keys, positions, firsts.tolist())):
        code, shape = divmod(key, width) if shapes else (key, -1)
        stats = OperatorStats(
            name=STEP_WILDCARD if code == step_code else names[code],
            input_shapes=shapes[shape] if shapes else None,
            calls=len(where),
            rows=RowView(members_sorted[first : first + len(where)]),  # selected[where], without a copy
            **{field: values[group] for field, values in sums.items()},
        )
        found.append((int(where[0]), stats))
    found.sort(key=lambda item: item[0])
    return [stats for _, stats in found]


def _group_sums(calls: OperatorCalls, column: str, members: np.ndarray, firsts: np.ndarray, sizes: np.ndarray) -> list:
    """Each group's sum of ``column`` (int64, exact): a column of one value is that value
    times the group's size, with no gather of a million rows (an ns trace's memory and FLOPs)."""
    value = calls.constant(column)
    if value is not None:
        return (sizes * value).tolist()
    return np.add.reduceat(calls.column(column)[members], firsts).tolist()
