"""Operator table: ``key_averages()`` rebuilt from operator calls."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.calls import STEP_PREFIX, OperatorCalls, UnattributedMemory
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
    flops: int
    rows: tuple[int, ...]  # call rows in OperatorCalls, for drill-down

    @property
    def cpu_avg_us(self) -> float:
        return self.cpu_total_us / self.calls if self.calls else 0.0

    @property
    def device_avg_us(self) -> float:
        return self.device_total_us / self.calls if self.calls else 0.0


def is_top_level(calls: OperatorCalls, row: int) -> bool:
    """No enclosing operator, ``ProfilerStep#N`` spans aside (they enclose everything)."""
    parent = calls.parent[row]
    while parent >= 0 and calls.name(parent).startswith(STEP_PREFIX):
        parent = calls.parent[parent]
    return parent < 0 and not calls.name(row).startswith(STEP_PREFIX)


def input_shapes_key(calls: OperatorCalls, row: int, cache: dict[bytes, str] | None = None) -> str:
    """torch's ``str(event.input_shapes)``: ``[[4, 3, 32, 32], [64, 3, 7, 7], []]``.

    ``cache`` maps the undecoded JSON to the key: shapes repeat a lot."""
    raw = calls.input_texts(row)[0]
    if cache is not None and raw in cache:
        return cache[raw]
    dims = decode_member(raw) if raw else None
    key = str(dims if dims is not None else [])
    if cache is not None:
        cache[raw] = key
    return key


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
    """
    if rows is None and not group_by_shape and not top_level_only:
        result = _stats_by_name(calls)
    else:
        groups = _groups(calls, range(len(calls)) if rows is None else rows, group_by_shape, top_level_only)
        result = [_stats(calls, name, shapes, members) for (name, shapes), members in groups.items()]
    if unattributed is not None and unattributed.calls and not top_level_only:
        result.append(
            OperatorStats(
                "[memory]", "[]" if group_by_shape else None, unattributed.calls,
                0.0, 0.0, 0.0, 0.0,
                unattributed.cpu_bytes, unattributed.cpu_bytes,
                unattributed.device_bytes, unattributed.device_bytes,
                0, (),
            )
        )
    result.sort(key=lambda s: s.self_cpu_us + s.self_device_us, reverse=True)
    return result


_SUMMED = ("self_ns", "total_ns", "self_device_ns", "device_total_ns", "self_cpu_mem", "cpu_mem",
           "self_device_mem", "device_mem", "flops")


def _stats_by_name(calls: OperatorCalls) -> list[OperatorStats]:
    """Every call grouped by name with numpy (the table every trace opens with):
    one gather and one segmented sum per column."""
    names = calls.names
    step_code = len(names)  # every ProfilerStep#N shares one group
    remap = np.array([step_code if n.startswith(STEP_PREFIX) else i for i, n in enumerate(names)] + [step_code])
    codes = remap[calls.column("name_id")]
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    cuts = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
    if not len(order):
        return []
    firsts = np.concatenate(([0], cuts))
    sums = [np.add.reduceat(calls.column(column)[order], firsts).tolist() for column in _SUMMED]
    result = []
    for group, (code, members) in enumerate(zip(sorted_codes[firsts].tolist(), np.split(order, cuts))):
        self_ns, total_ns, self_dev, dev_total, self_mem, mem, self_dev_mem, dev_mem, flops = (s[group] for s in sums)
        result.append(
            OperatorStats(
                name=STEP_WILDCARD if code == step_code else names[code],
                input_shapes=None,
                calls=len(members),
                self_cpu_us=self_ns / 1000,
                cpu_total_us=total_ns / 1000,
                self_device_us=self_dev / 1000,
                device_total_us=dev_total / 1000,
                self_cpu_mem_bytes=self_mem,
                cpu_mem_bytes=mem,
                self_device_mem_bytes=self_dev_mem,
                device_mem_bytes=dev_mem,
                flops=flops,
                rows=tuple(members.tolist()),
            )
        )
    result.sort(key=lambda stats: stats.rows[0])  # first-call order, as a walk over the rows gives
    return result


def _groups(
    calls: OperatorCalls, selected: Iterable[int], group_by_shape: bool, top_level_only: bool
) -> dict[tuple[str, str | None], list[int]]:
    groups: dict[tuple[str, str | None], list[int]] = {}
    shapes_cache: dict[bytes, str] = {}
    for row in selected:
        if top_level_only and not is_top_level(calls, row):
            continue
        name = calls.name(row)
        if name.startswith(STEP_PREFIX):
            name = STEP_WILDCARD  # key_averages() groups every step under one row
        key = (name, input_shapes_key(calls, row, shapes_cache) if group_by_shape else None)
        bucket = groups.get(key)
        if bucket is None:
            groups[key] = bucket = []
        bucket.append(row)
    return groups


def _stats(calls: OperatorCalls, name: str, shapes: str | None, members: list[int] | np.ndarray) -> OperatorStats:
    if len(members) < 64:
        members = members.tolist() if isinstance(members, np.ndarray) else members
        rows = tuple(members)

        def total(column) -> int:
            return sum(map(column.__getitem__, rows))

    else:  # big traces: 1e5+ calls of one operator; gather with numpy (a view of the array, no copy)
        index = np.asarray(members, dtype=np.intp)
        rows = tuple(index.tolist())

        def total(column) -> int:
            return int(np.frombuffer(column, dtype=np.int64)[index].sum())

    return OperatorStats(
        name=name,
        input_shapes=shapes,
        calls=len(members),
        self_cpu_us=total(calls.self_ns) / 1000,
        cpu_total_us=total(calls.total_ns) / 1000,
        self_device_us=total(calls.self_device_ns) / 1000,
        device_total_us=total(calls.device_total_ns) / 1000,
        self_cpu_mem_bytes=total(calls.self_cpu_mem),
        cpu_mem_bytes=total(calls.cpu_mem),
        self_device_mem_bytes=total(calls.self_device_mem),
        device_mem_bytes=total(calls.device_mem),
        flops=total(calls.flops),
        rows=rows,
    )
