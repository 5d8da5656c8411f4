"""What the analysis derived, kept in the trace's cache entry, so a reopen does not derive it again.

A reopen reads the decoded columns back from the cache (trace/cache.py) in ~0.1 s a GB; the
analysis of them then cost ~1.3 CPU s a GB on every open, 85-90 % of it in
:func:`~tuiprof.analysis.calls.build_calls` (nesting, duplicate merging, device joins, memory,
FLOPs) and :func:`~tuiprof.analysis.modules.build_module_tree` (a Python pass over the module
frames).  Their results are kept beside the columns as arrays (``store.derived``, written
by the cache as ``.npy``, never pickles) and integer facts (``store.derived_facts``):

- the calls: each call's row in ``cpu`` and its parent, module frame, self and device
  times, memory and FLOPs columns (a column of one value is kept as that value); the
  columns that are ``cpu`` gathered by that row (name, thread, ids, start, end) are gathered
  again, so they are as sound as the store's checked columns; each device event's launcher;
- the module tree as ``build_module_tree`` returns it (before compiled regions and a live
  capture's names change it): the nodes in the order calls name them (``frame_index``), each
  with its parent's position, name code and totals; each module frame's node; each call's
  owner, backward owner and charged node; the backward roots; the calls of the
  ``(outside modules)`` node (its totals are summed from them again).  Not kept when building it
  noted a repair (looping parent ids, a tree cut at MAX_MODULE_DEPTH): the reopen builds it
  again and notes the repair again;
- the step rows (:func:`~tuiprof.analysis.steps.build_steps`: ufunc scatters over every call
  and launch, 0.7 s at 1 GB), each field one array;
- the Python stacks of the allocations live at each memory peak (``python_stacks`` sorts
  every frame: 0.55 s at 1 GB), as frame-name codes and depths.

The kernels, the memory timelines and the operator tables are built from these as on a first
open (they cost less, and each is its own shape of objects).  Call sites are kept small, so
the analysis's own functions stay as they are: ``analysis/build.py: analyze`` and
``analysis/memory.py: build_memory_timelines`` ask ``reused_*`` first and hand a fresh result
to ``keep_*``.

What is read back is input like any other (trace/cache.py checks its bytes: CRC-32, dtypes,
lengths), and is checked here against what ``build_calls`` and ``build_module_tree``
guarantee before anything is built from it: rows and codes inside their tables; calls in
start order; every parent starting before its child and ending after it, strictly earlier
in (start, -end, row) order (so parent links cannot loop and walks up them end); module
frames that are module frames; tree nodes after their parents, no deeper than
MAX_MODULE_DEPTH, named as their frames; one step row per ``ProfilerStep#`` call, in row
order; stacks of names within the table; times, bytes and FLOPs within +-2**62, totals
finite, every array of its dtype.  Anything off (or the calls absent): :func:`cache.forget`
drops the entry, that part of the analysis runs in full, and the entry is written again
with what it derived.  Versioned with the engine:
the cache key hashes the analysis package's source (``cache.engine_version``).
"""

from __future__ import annotations

from array import array
from dataclasses import fields
from functools import partial

import numpy as np

from tuiprof.analysis.arrays import group_rows
from tuiprof.analysis.calls import (
    DeviceActivity,
    OperatorCalls,
    UnattributedMemory,
    _column,
    _constant,
    _gathered_column,
    column_buffer,
    is_step_name,
)
from tuiprof.analysis.modules import MAX_MODULE_DEPTH, ModuleNode, ModuleTree, outside_node
from tuiprof.analysis.stages import side_by_side
from tuiprof.analysis.steps import StepStats
from tuiprof.trace.cache import forget
from tuiprof.trace.columns import ABSURD_NS, CpuEvents
from tuiprof.trace.store import TraceEvents

# The calls' own columns (the rest are ``cpu`` gathered by ``cpu_row``).
CALL_COLUMNS = (
    "cpu_row",
    "parent",
    "module",
    "self_ns",
    "self_device_ns",
    "device_total_ns",
    "cpu_mem",
    "self_cpu_mem",
    "device_mem",
    "self_device_mem",
    "flops",
    "counted_flops",
    "counted_flops_total",
    "executed_flops",
)
# The calls' columns that are ``cpu``'s gathered by ``cpu_row``: (calls' name, cpu's name).
_GATHERED = (("name_id", "name"), ("thread", "thread"), ("external_id", "external_id"), ("sequence_number",) * 2)
_NODE_FLOATS = (
    "cpu_total_us",
    "self_cpu_us",
    "self_device_us",
    "device_total_us",
    "backward_cpu_us",
    "backward_device_us",
)
_NODE_INTS = ("calls", "self_cpu_mem_bytes", "cpu_mem_bytes", "flops", "backward_flops")
_STEP_FIELDS = [field for field in fields(StepStats) if field.name != "name"]  # name: a code into names
_FACTS = ("calls.flops_damaged", "activity.external_ids_ignored", "unattributed.calls")
_BYTE_FACTS = ("unattributed.cpu_bytes", "unattributed.device_bytes")


# ------------------------------------------------------------------ keeping


def keep_calls(store: TraceEvents, calls: OperatorCalls, activity: DeviceActivity, memory: UnattributedMemory) -> None:
    """Hand what :func:`build_calls` derived to the cache writer (a store it will write only)."""
    if store.cache_key is None:
        return
    derived, facts = store.derived, store.derived_facts
    for name in CALL_COLUMNS:
        values = calls.column(name)
        if len(values) and values[0] in (0, -1) and (values == values[0]).all():
            facts[f"calls.constant.{name}"] = int(values[0])  # no file for a column of zeros
        else:
            derived[f"calls.{name}"] = values
    derived["activity.launcher"] = activity.launchers
    facts.update(
        {
            "calls.rows": len(calls),
            "calls.flops_damaged": calls.flops_damaged,
            "activity.external_ids_ignored": int(activity.external_ids_ignored),
            "unattributed.calls": memory.calls,
            "unattributed.cpu_bytes": memory.cpu_bytes,
            "unattributed.device_bytes": memory.device_bytes,
        }
    )


def keep_module_tree(store: TraceEvents, tree: ModuleTree, repairs_before: tuple[int, int]) -> None:
    """Hand the module tree :func:`build_module_tree` returned to the cache writer, unless
    building it noted a repair (``repairs_before``: the report's repaired count and notes before)."""
    if store.cache_key is None or not tree.roots:
        return
    if (store.report.repaired, len(store.report.problems)) != repairs_before:
        return
    index, nodes = tree.frame_index()
    position = {id(node): i for i, node in enumerate(nodes)}
    frame_node = np.full(len(store.frames), -1, dtype=np.int64)
    frame_node[: len(index)] = index
    modules = np.flatnonzero(frame_node >= 0)
    name = np.full(len(nodes), -1, dtype=np.int64)
    name[frame_node[modules]] = store.frames.module[modules]
    derived = store.derived
    derived["modules.parent"] = np.array(
        [position[id(node.parent)] if node.parent is not None else -1 for node in nodes], dtype=np.int64
    )
    derived["modules.name"] = name
    for field in _NODE_INTS:
        derived[f"modules.{field}"] = np.array([getattr(node, field) for node in nodes], dtype=np.int64)
    for field in _NODE_FLOATS:
        derived[f"modules.{field}"] = np.array([getattr(node, field) for node in nodes], dtype=np.float64)
    derived["modules.frame_node"] = frame_node
    derived["modules.call_owner"] = np.asarray(tree.call_owner, dtype=np.int64)
    derived["modules.backward_owner"] = np.asarray(tree.backward_owner, dtype=np.int64)
    derived["modules.charged_node"] = np.asarray(tree.charged_node, dtype=np.int64)
    roots = [(row, i) for i, node in enumerate(nodes) for row in node.backward_rows]
    derived["modules.backward_row"] = np.array([row for row, _ in roots], dtype=np.int64)
    derived["modules.backward_node"] = np.array([i for _, i in roots], dtype=np.int64)
    derived["modules.outside_row"] = np.array(tree.outside.operator_rows if tree.outside else [], dtype=np.int64)


def keep_steps(store: TraceEvents, steps: list[StepStats]) -> None:
    """Hand the step rows :func:`build_steps` made to the cache writer (each field one array)."""
    if store.cache_key is None:
        return
    code = {name: i for i, name in enumerate(store.names)}
    store.derived["steps.name"] = np.array([code[step.name] for step in steps], dtype=np.int64)
    for field in _STEP_FIELDS:
        dtype = np.float64 if field.type == "float" else np.int64
        store.derived[f"steps.{field.name}"] = np.array([getattr(step, field.name) for step in steps], dtype=dtype)


def keep_stacks(store: TraceEvents, stacks: list[tuple[str, ...]]) -> None:
    """Hand the Python stacks of the allocations live at the memory peaks (``python_stacks``,
    analysis/memory.py) to the cache writer: every frame name's code, and each stack's depth."""
    if store.cache_key is None:
        return
    code = {name: i for i, name in enumerate(store.names)}
    store.derived["memory.stack_depth"] = np.array([len(stack) for stack in stacks], dtype=np.int64)
    store.derived["memory.stack_frame"] = np.array([code[frame] for stack in stacks for frame in stack], dtype=np.int64)


# ------------------------------------------------------------------ reusing


def reused_calls(store: TraceEvents) -> tuple[OperatorCalls, DeviceActivity, UnattributedMemory] | None:
    """What :func:`build_calls` would return, from the cache entry the store was read from;
    None (and the entry dropped, to be written again) when it holds none or it fails a check."""
    if store.cache_entry is None:
        return None
    reused = _calls(store)
    if reused is None:
        store.derived.clear()
        store.derived_facts.clear()
        forget(store)
    return reused


def reused_module_tree(store: TraceEvents, calls: OperatorCalls) -> ModuleTree | None:
    """The module tree :func:`build_module_tree` would return, from the cache entry; None
    when it holds none (the entry is then dropped only if the tree failed a check)."""
    if store.cache_entry is None or "modules.parent" not in store.derived:
        return None
    tree = _module_tree(store, calls)
    if tree is None:
        for name in [name for name in store.derived if name.startswith("modules.")]:
            del store.derived[name]
        forget(store)
    return tree


def reused_steps(store: TraceEvents, calls: OperatorCalls) -> list[StepStats] | None:
    """The step rows :func:`build_steps` would make, from the cache entry; None when it holds
    none (the entry is then dropped only if they failed a check)."""
    if store.cache_entry is None or "steps.name" not in store.derived:
        return None
    steps = _steps(store, calls)
    if steps is None:
        for name in [name for name in store.derived if name.startswith("steps.")]:
            del store.derived[name]
        forget(store)
    return steps


def reused_stacks(store: TraceEvents, count: int) -> list[tuple[str, ...]] | None:
    """The ``count`` stacks ``python_stacks`` would find, from the cache entry; None when it
    holds none (the entry is then dropped only if they failed a check)."""
    derived = store.derived
    if store.cache_entry is None or "memory.stack_depth" not in derived:
        return None
    depth, frame = np.asarray(derived["memory.stack_depth"]), np.asarray(derived.get("memory.stack_frame", []))
    if (
        len(depth) == count
        and depth.dtype == np.int64
        and frame.dtype == np.int64
        and _within(depth, 0, MAX_MODULE_DEPTH + 1)
        and int(depth.sum()) == len(frame)
        and _within(frame, 0, len(store.names))
    ):
        names = [store.names[code] for code in frame.tolist()]
        ends = np.cumsum(depth).tolist()
        return [tuple(names[end - size : end]) for size, end in zip(depth.tolist(), ends)]
    for name in ("memory.stack_depth", "memory.stack_frame"):
        derived.pop(name, None)
    forget(store)
    return None


def _steps(store: TraceEvents, calls: OperatorCalls) -> list[StepStats] | None:
    """The kept step rows, if there is one per ``ProfilerStep#N`` call, in row order (as
    ``build_steps`` makes them) and every field is a finite number of its type."""
    names = np.asarray(store.derived["steps.name"])
    columns = {}
    for field in _STEP_FIELDS:
        values = store.derived.get(f"steps.{field.name}")
        dtype = np.float64 if field.type == "float" else np.int64
        if values is None or len(values) != len(names) or values.dtype != dtype:
            return None
        if dtype == np.float64 and not np.isfinite(values).all():
            return None
        if dtype == np.int64 and not _within(values, 1 - ABSURD_NS, ABSURD_NS):
            return None
        columns[field.name] = values.tolist()
    name_id = calls.column("name_id")
    step_calls = name_id[np.isin(name_id, calls.name_codes(is_step_name))]
    if names.dtype != np.int64 or not np.array_equal(names, step_calls):
        return None
    return [
        StepStats(store.names[code], **{name: values[i] for name, values in columns.items()})
        for i, code in enumerate(names.tolist())
    ]


def _calls(store: TraceEvents) -> tuple[OperatorCalls, DeviceActivity, UnattributedMemory] | None:
    derived, facts = store.derived, store.derived_facts
    rows = facts.get("calls.rows", -1)
    if rows < 0 or not all(key in facts for key in _FACTS + _BYTE_FACTS):
        return None
    columns = {}
    for name in CALL_COLUMNS:
        if f"calls.{name}" in derived:
            columns[name] = np.asarray(derived[f"calls.{name}"])
        elif facts.get(f"calls.constant.{name}") in (0, -1):  # the shared column build_calls gives
            columns[name] = np.frombuffer(_constant(rows, facts[f"calls.constant.{name}"]), dtype=np.int64)
        else:
            return None
    launcher = derived.get("activity.launcher")
    if launcher is None or len(launcher) != len(store.device) or any(len(c) != rows for c in columns.values()):
        return None
    if not all(column.dtype == np.int64 for column in [launcher, *columns.values()]):
        return None
    cpu = store.cpu
    cpu_row = columns["cpu_row"]
    if not _within(cpu_row, 0, len(cpu)):
        return None
    # Gathered into the model's own columns (column_buffer): no copy after the checks.
    (start_column, start), (end_column, end), (total_column, total) = (column_buffer(rows) for _ in range(3))
    np.take(cpu.start_ns, cpu_row, out=start)
    np.take(cpu.dur_ns, cpu_row, out=total)
    np.add(start, total, out=end)
    # The checks and the gathers of the other columns side by side (numpy leaves the GIL to
    # both); nothing gathered is used unless the checks pass.
    sound, gathered = side_by_side(
        partial(_sound_calls, store, columns, launcher, start, end),
        partial(_gathered_columns, cpu, cpu_row),
    )
    if not sound:
        return None
    calls = OperatorCalls(names=store.names, threads=store.threads, cpu=cpu, inputs=store.inputs)
    for name in CALL_COLUMNS:
        setattr(calls, name, _owned(columns[name]))
    for name, column in gathered.items():
        setattr(calls, name, column)
    calls.start_ns, calls.end_ns, calls.total_ns = start_column, end_column, total_column
    calls.flops_damaged = facts["calls.flops_damaged"]
    activity = DeviceActivity(
        names=store.names,
        events=store.device,
        launcher=_owned(launcher),
        external_ids_ignored=bool(facts["activity.external_ids_ignored"]),
    )
    memory = UnattributedMemory(
        facts["unattributed.calls"], facts["unattributed.cpu_bytes"], facts["unattributed.device_bytes"]
    )
    return calls, activity, memory


def _gathered_columns(cpu: CpuEvents, cpu_row: np.ndarray) -> dict[str, array]:
    """The calls' columns that are ``cpu``'s gathered by each call's row (_GATHERED)."""
    return {name: _gathered_column(getattr(cpu, cpu_name), cpu_row) for name, cpu_name in _GATHERED}


def _sound_calls(
    store: TraceEvents, columns: dict[str, np.ndarray], launcher: np.ndarray, start: np.ndarray, end: np.ndarray
) -> bool:
    """Whether the calls read back hold what ``build_calls`` guarantees (the module's docstring)."""
    rows, facts = len(start), store.derived_facts
    parent, module = columns["parent"], columns["module"]
    return bool(
        not (np.diff(start) < 0).any()  # calls in start order
        and _within(parent, -1, rows)
        and _parents_before_children(parent, start, end)
        and _within(module, -1, len(store.frames))
        and (store.frames.module[module[module >= 0]] >= 0).all()
        and _within(launcher, -1, rows)
        and all(_within(columns[name], 1 - ABSURD_NS, ABSURD_NS) for name in CALL_COLUMNS[3:])
        and 0 <= facts["calls.flops_damaged"] <= rows
        and facts["activity.external_ids_ignored"] in (0, 1)
        and 0 <= facts["unattributed.calls"] <= len(store.memory)
        and all(abs(facts[key]) < ABSURD_NS for key in _BYTE_FACTS)
    )


def _module_tree(store: TraceEvents, calls: OperatorCalls) -> ModuleTree | None:
    derived = store.derived
    wanted = ["parent", "name", *_NODE_INTS, *_NODE_FLOATS]
    wanted += ["frame_node", "call_owner", "backward_owner", "charged_node", "backward_row", "backward_node"]
    wanted += ["outside_row"]
    if not all(f"modules.{name}" in derived for name in wanted):
        return None
    array = {name: np.asarray(derived[f"modules.{name}"]) for name in wanted}
    parent, name, frame_node = array["parent"], array["name"], array["frame_node"]
    n, n_calls, frames = len(parent), len(calls), store.frames
    module_frames = np.flatnonzero(frames.module >= 0)
    if not (
        all(array[field].dtype == (np.float64 if field in _NODE_FLOATS else np.int64) for field in wanted)
        and all(len(array[field]) == n for field in ["name", *_NODE_INTS, *_NODE_FLOATS])
        and all(len(array[field]) == n_calls for field in ("call_owner", "backward_owner", "charged_node"))
        and len(frame_node) == len(frames)
        and len(array["backward_row"]) == len(array["backward_node"])
        and n > 0
        and (parent < np.arange(n)).all()  # a parent before its children: no loop
        and (parent >= -1).all()
        and _within(frame_node, -1, n)
        and np.array_equal(np.flatnonzero(frame_node >= 0), module_frames)
        and np.array_equal(name[frame_node[module_frames]], frames.module[module_frames])
        and _within(name, 0, len(store.names))
        and all(_within(array[field], -1, n) for field in ("call_owner", "charged_node", "backward_node"))
        and _within(array["backward_owner"], -1, n_calls)
        and _within(array["backward_row"], 0, n_calls)
        and _within(array["outside_row"], 0, n_calls)
        and not (np.diff(array["outside_row"]) <= 0).any()  # rows once each, in row order
        and _within(array["calls"], 1, ABSURD_NS)
        and all(_within(array[field], 1 - ABSURD_NS, ABSURD_NS) for field in _NODE_INTS)
        and all(np.isfinite(array[field]).all() for field in _NODE_FLOATS)
    ):
        return None
    names = store.names
    nodes: list[ModuleNode] = []
    roots: list[ModuleNode] = []
    values = {field: array[field].tolist() for field in (*_NODE_INTS, *_NODE_FLOATS)}
    for i, (up, code) in enumerate(zip(parent.tolist(), name.tolist())):
        above = nodes[up] if up >= 0 else None
        node = ModuleNode(names[code], above.depth + 1 if above else 0, parent=above)
        if node.depth >= MAX_MODULE_DEPTH:
            return None
        for field, column in values.items():
            setattr(node, field, column[i])
        (above.children if above else roots).append(node)
        nodes.append(node)
    for node in nodes:  # as fill_totals left them
        node.children.sort(key=lambda child: child.cost_us, reverse=True)
    roots.sort(key=lambda root: root.cost_us, reverse=True)
    owner = array["call_owner"]
    inside = np.flatnonzero(owner >= 0)
    for position, where in zip(*group_rows(owner[inside])):
        nodes[position].operator_rows = inside[where].tolist()  # in start order
    for row, position in zip(array["backward_row"].tolist(), array["backward_node"].tolist()):
        nodes[position].backward_rows.append(row)
    by_frame = dict(zip(module_frames.tolist(), map(nodes.__getitem__, frame_node[module_frames].tolist())))
    tree = ModuleTree(roots, by_frame)
    tree._frame_index = (np.array(frame_node), nodes)  # the order call_owner and charged_node count in
    tree.call_owner, tree.charged_node = np.array(owner), np.array(array["charged_node"])
    tree.backward_owner = np.array(array["backward_owner"])
    tree.outside = outside_node(calls, np.array(array["outside_row"]))
    return tree


def _owned(values: np.ndarray) -> array:
    """``values`` as the int64 ``array.array`` the model's columns are: the one it views when
    it views a whole one (the cache reads derived arrays into such), else a copy (``_column``)."""
    base = values.base
    if isinstance(base, memoryview) and isinstance(base.obj, array) and base.obj.typecode == "q":
        if len(base.obj) == len(values):
            return base.obj
    return _column(values)


def _within(values: np.ndarray, low: int, high: int) -> bool:
    """Every value in [low, high) (true when there are none)."""
    return not len(values) or (int(values.min()) >= low and int(values.max()) < high)


def _parents_before_children(parent: np.ndarray, start: np.ndarray, end: np.ndarray) -> bool:
    """Whether every parent starts at or before its child and ends at or after it, and comes
    strictly earlier in (start, -end, row) order: then following parents always goes to an
    earlier key, so no chain of them loops (a planted cycle would hang every walk up).

    ``start`` is in row order (checked before), so a parent in an earlier row starts no later;
    one in a later row (or the same) must start as the child and end strictly later."""
    linked = parent >= 0
    child = np.flatnonzero(linked)
    up = parent[linked]
    up_end = end[up]
    if (up_end < end[linked]).any():
        return False
    later = np.flatnonzero(up >= child)
    return bool(((start[up[later]] == start[child[later]]) & (up_end[later] > end[child[later]])).all())
