"""Every CPU operator call with torch's own accounting: the base of all tables.

This reproduces what ``torch.autograd.profiler`` does before
``key_averages()`` (``_parse_kineto_results``, ``_populate_cpu_children``,
``_remove_dup_nodes``), so our numbers equal torch's for the same run:

- CPU events are operators (``cpu_op``, ``user_annotation``), runtime
  launches and python frames; the names torch filters (``aten::is_leaf``...)
  are dropped.  Python frames take part in nesting (they are parents of ops,
  which lowers the parents' self time) but are never reported as operators.
- Nesting is per thread by time containment, sorted by (start, -end); a
  partial overlap is no parent.
- A child with its parent's name that is the parent's only child is merged
  into the parent (its row disappears, its children and kernels move up).
- Memory of a call is the sum of all ``[memory]`` records whose time lies in
  [start, end] on any thread; self memory subtracts the children's.  Records
  inside no CPU event become ``[memory]`` rows.
- Device time: kernels, memcpys and memsets join the operator with the same
  ``External id``, or, where that id is missing or fake, the operator that
  encloses the runtime launch with the same ``correlation``
  (:func:`_attach_device_activity`); device total adds the children's.

Times are integer nanoseconds converted exactly from the decimal text of
``ts``/``dur`` (:func:`tuiprof.trace.columns.exact_ns`): floats at epoch
magnitudes cannot hold their nanosecond decimals.
"""

from __future__ import annotations

import heapq
from array import array
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from typing import NamedTuple
from weakref import WeakValueDictionary

import numpy as np

from tuiprof.analysis.arrays import gather, id_table, look_up, nearest_ancestor, slice_codes
from tuiprof.analysis.flops import COUNTED, FORMULAS, FlopsFn, operator_flops
from tuiprof.analysis.stages import analysis_threads, side_by_side
from tuiprof.trace.columns import (
    DEVICE_KINDS,
    NONE,
    OPERATOR_CATEGORY_CODES,
    CpuEvents,
    DeviceEvents,
    input_texts,
)
from tuiprof.trace.schema import decode_member
from tuiprof.trace.store import TraceEvents

# Names torch drops before building its tables (profiler_util._filter_name).
FILTERED_NAMES = frozenset(
    {
        "[memory]",
        "[OutOfMemory]",
        "profiler::_record_function_enter",
        "profiler::_record_function_enter_new",
        "profiler::_record_function_exit",
        "aten::is_leaf",
        "aten::output_nr",
        "aten::_version",
    }
)
STEP_PREFIX = "ProfilerStep#"
INT64_SAFE = float(2**62)  # float sums of int64 counts are held inside this before a cast back


def is_step_name(name: str) -> bool:
    """``ProfilerStep#N``: the spans a profiler schedule writes around each step."""
    return name.startswith(STEP_PREFIX)


@dataclass
class OperatorCalls:
    """One row per reported operator call (merged duplicates removed), in start order.

    Columns are parallel arrays indexed by call row.  ``module`` is the row
    in the store's frames of the innermost ``nn.Module`` call enclosing the
    call (-1 outside every module); ``parent`` is the enclosing call row
    (-1 at the top, python frames skipped).  ``cpu_row`` is the call's row in
    ``cpu`` (the store's columns), where its input lists are found.
    """

    names: list[str] = field(default_factory=list)  # the store's name table
    threads: list[int | str] = field(default_factory=list)  # the store's thread table
    cpu: CpuEvents = field(default_factory=CpuEvents.empty)
    inputs: bytes = b""
    cpu_row: array = field(default_factory=lambda: array("q"))
    name_id: array = field(default_factory=lambda: array("q"))
    thread: array = field(default_factory=lambda: array("q"))
    external_id: array = field(default_factory=lambda: array("q"))  # -1: none
    sequence_number: array = field(default_factory=lambda: array("q"))  # -1: none
    start_ns: array = field(default_factory=lambda: array("q"))
    end_ns: array = field(default_factory=lambda: array("q"))
    total_ns: array = field(
        default_factory=lambda: array("q")
    )  # end - start (summing epoch times overflows to bigints)
    self_ns: array = field(default_factory=lambda: array("q"))
    self_device_ns: array = field(default_factory=lambda: array("q"))
    device_total_ns: array = field(default_factory=lambda: array("q"))
    cpu_mem: array = field(default_factory=lambda: array("q"))
    self_cpu_mem: array = field(default_factory=lambda: array("q"))
    device_mem: array = field(default_factory=lambda: array("q"))
    self_device_mem: array = field(default_factory=lambda: array("q"))
    flops: array = field(default_factory=lambda: array("q"))  # torch profiler's formulas (key_averages)
    # FlopCounterMode's formulas on the outermost call that has one (forward and backward):
    # a sum over any calls counts each piece of work once.
    counted_flops: array = field(default_factory=lambda: array("q"))
    counted_flops_total: array = field(default_factory=lambda: array("q"))  # the call's and everything below it
    # counted_flops of the nearest counted call, on the path where its time goes (see counted_flops())
    executed_flops: array = field(default_factory=lambda: array("q"))
    flops_damaged: int = 0  # calls whose inputs broke a FLOPs formula (no FLOPs for them)
    parent: array = field(default_factory=lambda: array("q"))
    module: array = field(default_factory=lambda: array("q"))
    # (code per call, input-shapes keys): built on first use by operators.shape_codes
    shape_index: tuple[np.ndarray, list[str]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.name_id)

    def name(self, row: int) -> str:
        return self.names[self.name_id[row]]

    @property
    def origin_ns(self) -> int:
        """The trace's time origin: the first call's start (0 without calls). Times shown
        "from the trace start" (a call's Start, a memory peak's At) count from it."""
        return int(self.start_ns[0]) if len(self) else 0

    def tid(self, row: int) -> int | str:
        return self.threads[self.thread[row]]

    def input_texts(self, row: int) -> tuple[bytes, bytes, bytes]:
        """Undecoded ``Input Dims``, ``Input type`` and ``Concrete Inputs`` of a call."""
        return input_texts(self.cpu, self.inputs, self.cpu_row[row])

    def name_codes(self, wanted: Callable[[str], bool]) -> list[int]:
        """Codes of the names ``wanted`` accepts (to select calls by name with numpy)."""
        return [code for code, name in enumerate(self.names) if wanted(name)]

    def column(self, name: str) -> np.ndarray:
        """A column as a numpy view (no copy)."""
        return np.frombuffer(getattr(self, name), dtype=np.int64)

    def constant(self, name: str) -> int | None:
        """The one value of a column of one value shared by :func:`_constant` (a sum over
        calls is then value x count, with no gather), else None."""
        values = getattr(self, name)
        for value in (0, -1):
            if values is _CONSTANT_COLUMNS.get((len(values), value)):
                return value
        return None


@dataclass
class DeviceActivity:
    """Kernels, memcpys and memsets (the store's columns), with the call that launched each."""

    names: list[str] = field(default_factory=list)  # the store's name table
    events: DeviceEvents = field(default_factory=DeviceEvents.empty)
    launcher: array = field(default_factory=lambda: array("q"))  # call row, -1 unknown
    # The file's External ids were fake (equal to correlation ids): joined through launches.
    external_ids_ignored: bool = False

    def __len__(self) -> int:
        return len(self.events)

    def name(self, index: int) -> str:
        return self.names[self.events.name[index]]

    def kind(self, index: int) -> str:
        return DEVICE_KINDS[self.events.kind[index]]

    def text(self, column: str, index: int) -> str:
        """A text column (``stream``, ``grid``, ``block``) of one event; "" when absent."""
        code = getattr(self.events, column)[index]
        return self.names[code] if code >= 0 else ""

    @property
    def launchers(self) -> np.ndarray:
        """``launcher`` as an array: the call row that launched each event, -1 when unknown."""
        return np.frombuffer(self.launcher, dtype=np.int64)

    @property
    def start_ns(self) -> np.ndarray:
        return self.events.start_ns

    @property
    def dur_ns(self) -> np.ndarray:
        return self.events.dur_ns


@dataclass
class UnattributedMemory:
    """``[memory]`` records inside no CPU event: torch's ``[memory]`` rows."""

    calls: int = 0
    cpu_bytes: int = 0
    device_bytes: int = 0


# Columns of one value share one array: at 1 GB of an ns trace eight calls columns are
# zeros (no memory recorded, no FLOPs) and ``module`` is all -1 (no stacks): 195 MB of
# the parent's peak.  Columns are replaced, never written in place, so sharing is safe.
_CONSTANT_COLUMNS: WeakValueDictionary[tuple[int, int], array] = WeakValueDictionary()


def _column(values) -> array:
    """``values`` as an int64 array (rows read as Python ints); all 0 or all -1 as a shared column."""
    values = np.ascontiguousarray(values, dtype=np.int64)
    if _one_value(values):
        return _constant(len(values), int(values[0]))
    column = array("q")
    column.frombytes(memoryview(values).cast("B"))
    return column


def _one_value(values: np.ndarray) -> bool:
    """Whether ``values`` are all 0 or all -1 (a column :func:`_constant` shares)."""
    return bool(len(values) and values[0] in (0, -1) and (values == values[0]).all())


def column_buffer(rows: int) -> tuple[array, np.ndarray]:
    """A new int64 column of ``rows`` and a numpy view of it, for numpy to write a column's
    values straight into (``out=``): no second copy, as :func:`_column` makes, of a million rows."""
    column = array("q", [0]) * rows
    return column, np.frombuffer(column, dtype=np.int64)


def _gathered_column(values: np.ndarray, rows: np.ndarray) -> array:
    """``values[rows]`` as a column (:func:`_column`), gathered into the column itself."""
    column, view = column_buffer(len(rows))
    np.take(values, rows, out=view)
    return _shared_if_one_value(column, view)


def _durations_column(starts: np.ndarray, ends: np.ndarray, rows: np.ndarray) -> array:
    """``ends - starts`` of ``rows`` as a column (summing epoch times would overflow)."""
    column, view = column_buffer(len(rows))
    np.subtract(ends[rows], starts[rows], out=view)
    return _shared_if_one_value(column, view)


def _shared_if_one_value(column: array, view: np.ndarray) -> array:
    """``column`` (``view`` its values), or the shared column of its one value (:func:`_column`)."""
    return _constant(len(view), int(view[0])) if _one_value(view) else column


def _constant(length: int, value: int) -> array:
    column = _CONSTANT_COLUMNS.get((length, value))
    if column is None:
        column = array("q", [value]) * length
        _CONSTANT_COLUMNS[length, value] = column
    return column


def build_calls(store: TraceEvents) -> tuple[OperatorCalls, DeviceActivity, UnattributedMemory]:
    """Nest, merge and attribute every CPU event of ``store``.

    Every pass is numpy over int64 columns (nanoseconds, exact): nesting and
    the ancestor look-ups that torch does with a stack or a parent walk are
    pointer jumping (:func:`_nest`, ``arrays.nearest_ancestor``), which needs
    O(log depth) array passes instead of a Python step per node.
    """
    cpu, frames = store.cpu, store.frames
    filtered = np.array([i for i, name in enumerate(store.names) if name in FILTERED_NAMES], dtype=np.int64)
    op_index = np.flatnonzero(~np.isin(cpu.name, filtered))  # node -> cpu row
    n_ops = len(op_index)
    n_nodes = n_ops + len(frames)

    op_starts = cpu.start_ns[op_index]
    starts = np.concatenate((op_starts, frames.start_ns))
    ends = np.concatenate((op_starts + cpu.dur_ns[op_index], frames.end_ns))
    threads = np.concatenate((cpu.thread[op_index], frames.thread))
    names = np.concatenate((cpu.name[op_index], np.full(len(frames), -1, dtype=np.int64)))
    del op_starts  # node-long temporaries go as soon as they are used: the peak RSS of a big trace is here

    # Memory per node needs only the spans: it runs beside the nesting, itself in parts
    # nested at once (the sorts, gathers and searchsorted release the GIL).
    memory, (parent, nesting_order) = side_by_side(
        partial(_memory_per_node, store, starts, ends),
        partial(_nest_in_parts, starts, ends, threads, analysis_threads()),
    )
    cpu_mem, device_mem, unattributed = memory
    alive, parent = _merge_duplicates(parent, names, n_ops)
    del names

    # Innermost module and nearest operator ancestor (through living parents), and the
    # living operators in start order: three independent passes.
    is_module = np.zeros(n_nodes, dtype=bool)
    is_module[n_ops:] = frames.module >= 0
    is_op = np.zeros(n_nodes, dtype=bool)
    is_op[:n_ops] = True
    module_of, op_parent, op_rows = side_by_side(
        partial(nearest_ancestor, parent, is_module),
        partial(nearest_ancestor, parent, is_op),
        partial(_in_start_order, np.flatnonzero(alive[:n_ops]), starts),
    )
    module_of = np.where(module_of >= 0, module_of - n_ops, -1)
    del is_module, is_op

    row_of = np.full(n_ops + 1, -1, dtype=np.int64)  # index -1 (no parent) maps to -1
    row_of[op_rows] = np.arange(len(op_rows))
    cpu_rows = op_index[op_rows]

    calls = OperatorCalls(names=store.names, threads=store.threads, cpu=cpu, inputs=store.inputs)
    # The calls' columns: gathers (which release the GIL) and copies, side by side.
    (
        calls.cpu_row,
        calls.name_id,
        calls.thread,
        calls.external_id,
        calls.sequence_number,
        calls.start_ns,
        calls.end_ns,
        calls.total_ns,
        calls.parent,
        calls.module,
    ) = side_by_side(
        partial(_column, cpu_rows),
        partial(_gathered_column, cpu.name, cpu_rows),
        partial(_gathered_column, cpu.thread, cpu_rows),
        partial(_gathered_column, cpu.external_id, cpu_rows),
        partial(_gathered_column, cpu.sequence_number, cpu_rows),
        partial(_gathered_column, starts, op_rows),
        partial(_gathered_column, ends, op_rows),
        partial(_durations_column, starts, ends, op_rows),
        partial(_gathered_column, row_of, op_parent[op_rows]),
        partial(_gathered_column, module_of, op_rows),
    )
    del module_of, cpu_rows

    # FLOPs need only the call tree, self times the living links, device times the joins
    # and the nesting order: three stages side by side (numpy passes that release the GIL;
    # on one core in this order, each stage's temporaries gone before the next one's).
    (activity, self_device, device_total), (calls.self_ns, links), _ = side_by_side(
        partial(_device_times, store, op_index, alive, parent, op_parent, (starts, ends, threads), nesting_order),
        partial(_self_times, starts, ends, alive, parent, op_rows),
        partial(count_flops, calls),
    )
    del starts, ends, threads, op_parent, op_index
    calls.self_device_ns = _column(self_device[op_rows])
    calls.device_total_ns = _column(device_total[op_rows])
    calls.cpu_mem, calls.self_cpu_mem = _memory_columns(cpu_mem, links, op_rows)
    calls.device_mem, calls.self_device_mem = _memory_columns(device_mem, links, op_rows)
    del links
    launcher = activity.launchers
    if len(launcher):
        activity.launcher = _column(np.where(launcher >= 0, row_of[launcher], -1))
    return calls, activity, unattributed


def _in_start_order(rows: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """``rows`` sorted by their start, ties in row order."""
    return rows[np.argsort(starts[rows], kind="stable")]


def _self_times(
    starts: np.ndarray, ends: np.ndarray, alive: np.ndarray, parent: np.ndarray, op_rows: np.ndarray
) -> tuple[array, tuple[np.ndarray, np.ndarray]]:
    """The calls' self time (their duration less their living direct children's), and the
    living links (each linked node's parent, which nodes have one) for the memory columns."""
    durations = ends - starts
    linked = alive & (parent >= 0)
    up = parent[linked]
    child_time = np.bincount(up, weights=durations[linked], minlength=len(parent))
    # bincount sums in float64: exact below 2**53 ns (104 days) and bytes (8 PB).
    return _column(durations[op_rows] - np.rint(child_time[op_rows]).astype(np.int64)), (up, linked)


def _device_times(
    store: TraceEvents,
    op_index: np.ndarray,
    alive: np.ndarray,
    parent: np.ndarray,
    op_parent: np.ndarray,
    spans: tuple[np.ndarray, np.ndarray, np.ndarray],
    nesting_order: np.ndarray,
) -> tuple[DeviceActivity, np.ndarray, np.ndarray]:
    """The device events joined to their operators, and every node's self and total
    device time (over the whole subtree of living operators)."""
    self_device = np.zeros(len(parent), dtype=np.int64)
    activity = _attach_device_activity(store, op_index, alive, parent, op_parent, spans, self_device)
    device_total = _subtree_totals(self_device, parent, nesting_order) if len(activity) else self_device
    return activity, self_device, device_total


def _memory_columns(
    node_mem: np.ndarray, links: tuple[np.ndarray, np.ndarray], op_rows: np.ndarray
) -> tuple[array, array]:
    """Each call's inclusive and self bytes (self: minus its living children's, ``links``
    being (parent, which nodes have one)); zeros, with no node-long sums and no gathers,
    when no such memory was recorded (the gathers of zeros alone were 0.3 s at 1 GB ns)."""
    if not node_mem.any():
        return _constant(len(op_rows), 0), _constant(len(op_rows), 0)
    up, linked = links
    children = np.bincount(up, weights=node_mem[linked], minlength=len(node_mem))
    inclusive = node_mem[op_rows]
    # A damaged trace's byte counts can sum past int64 (a float then, cast with a warning on
    # stderr): held to its range, the self bytes of such a call are as wrong as its input.
    held = np.clip(np.rint(children[op_rows]), -INT64_SAFE, INT64_SAFE).astype(np.int64)
    return _column(inclusive), _column(inclusive - held)


def count_flops(calls: OperatorCalls) -> None:
    """Every FLOPs column of ``calls``.

    ``flops`` is the profiler's (per call, as ``key_averages`` has it).  The
    training FLOPs follow FlopCounterMode: each call with a formula in
    ``COUNTED`` and no such call above it counts its work once
    (``aten::conv2d``, not also its ``aten::convolution``).  That work is done
    further down, where the time is: ``executed_flops`` carries it from the
    counted call to its heaviest operator child (most CPU total), level by
    level while that child holds at least half of its parent's time, so
    ``aten::mkldnn_convolution`` under ``aten::conv2d`` shows the FLOPs it
    executed on the conv's behalf (and the ``aten::empty`` beside its work does not).
    """
    inputs = _coded_inputs(calls, FORMULAS.keys() | COUNTED.keys())
    flops, broken = _flops(calls, FORMULAS, inputs)
    calls.flops = _column(flops)
    counted, counted_broken = _flops(calls, COUNTED, inputs)
    parent = calls.column("parent")
    if counted.any() or counted_broken.any():  # else (no Input Dims recorded) there is no tree to walk
        has_formula = np.isin(calls.column("name_id"), calls.name_codes(COUNTED.__contains__))
        outermost = nearest_ancestor(parent, has_formula) < 0
        counted = np.where(outermost, counted, 0)
        counted_broken &= outermost
    calls.counted_flops = _column(counted)
    calls.counted_flops_total = _column(_subtree_sums(parent, counted) if counted.any() else counted)
    calls.executed_flops = _column(_down_the_time_path(calls, counted) if counted.any() else counted)
    calls.flops_damaged = int((broken | counted_broken).sum())


@dataclass(frozen=True)
class _CodedInputs:
    """The calls that have a FLOPs formula, with their ``Input Dims`` and ``Concrete Inputs``
    texts as codes (calls repeat their shapes: work per distinct text only)."""

    rows: np.ndarray
    dims: np.ndarray  # code into dims_texts, per row
    dims_texts: list[bytes]
    concrete: np.ndarray
    concrete_texts: list[bytes]
    texts: np.ndarray  # one code per distinct (dims, concrete) pair


def _coded_inputs(calls: OperatorCalls, names: Collection[str]) -> _CodedInputs:
    rows = np.flatnonzero(np.isin(calls.column("name_id"), calls.name_codes(names.__contains__)))
    cpu, cpu_rows = calls.cpu, calls.column("cpu_row")[rows]
    dims, dims_texts = slice_codes(calls.inputs, cpu.dims_at[cpu_rows], cpu.dims_len[cpu_rows])
    concrete, concrete_texts = slice_codes(calls.inputs, cpu.concrete_at[cpu_rows], cpu.concrete_len[cpu_rows])
    # Codes are below the row count, so the packed keys stay inside int64.
    texts = np.unique(dims * len(concrete_texts) + concrete, return_inverse=True)[1].ravel()
    return _CodedInputs(rows, dims, dims_texts, concrete, concrete_texts, texts)


def _flops(calls: OperatorCalls, formulas: dict[str, FlopsFn], inputs: _CodedInputs) -> tuple[np.ndarray, np.ndarray]:
    """FLOPs of every call ``formulas`` has a formula for, and which calls' inputs broke
    their formula (absurd sizes, stride 0...: no FLOPs).  Computed once per distinct
    (name, ``Input Dims``, ``Concrete Inputs``)."""
    flops = np.zeros(len(calls), dtype=np.int64)
    broken = np.zeros(len(calls), dtype=bool)
    name_ids = calls.column("name_id")
    mine = np.isin(name_ids[inputs.rows], calls.name_codes(formulas.__contains__))
    rows, dims, concrete, texts = inputs.rows[mine], inputs.dims[mine], inputs.concrete[mine], inputs.texts[mine]
    if not len(rows):
        return flops, broken
    keys = name_ids[rows] * (int(texts.max()) + 1) + texts
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    dims_texts, concrete_texts = inputs.dims_texts, inputs.concrete_texts
    values = [
        operator_flops(
            calls.names[name_ids[row]], decode_member(dims_texts[d]), decode_member(concrete_texts[c]), formulas
        )
        if dims_texts[d]
        else 0
        for row, d, c in zip(rows[first].tolist(), dims[first].tolist(), concrete[first].tolist())
    ]
    per_row = np.array([-1 if v is None else v for v in values], dtype=np.int64)[inverse.ravel()]
    broken[rows] = per_row < 0
    flops[rows] = np.maximum(per_row, 0)
    return flops, broken


def _subtree_sums(parent: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Each call's value plus its descendants' (one pass per nesting level; exact int64)."""
    totals = values.copy()
    rows = np.flatnonzero(values)
    weights = values[rows]
    rows = parent[rows]
    while len(rows):
        up = rows >= 0
        rows, weights = rows[up], weights[up]
        np.add.at(totals, rows, weights)
        rows = parent[rows]
    return totals


def _down_the_time_path(calls: OperatorCalls, counted: np.ndarray) -> np.ndarray:
    """``counted`` copied from each counted call to its heaviest operator child, and on down
    while the child holds at least half of its parent's CPU total."""
    heaviest = _heaviest_child(calls)
    executed = counted.copy()
    frontier = np.flatnonzero(counted > 0)
    while len(frontier):
        child = heaviest[frontier]
        has = child >= 0
        frontier, child = frontier[has], child[has]
        executed[child] = executed[frontier]
        frontier = child
    return executed


def _heaviest_child(calls: OperatorCalls) -> np.ndarray:
    """Each call's operator child with the most CPU total (the first started of equals), if that
    child holds at least half of the call's total (the work is inside it, not beside it); -1 else.

    Two scatters (``ufunc.at``) instead of sorting the children: 3-5x faster."""
    parent = calls.column("parent")
    total = calls.column("total_ns")
    is_operator = np.isin(calls.cpu.category[calls.column("cpu_row")], OPERATOR_CATEGORY_CODES)
    kids = np.flatnonzero((parent >= 0) & is_operator)
    up = parent[kids]
    most = np.full(len(calls), -1, dtype=np.int64)
    np.maximum.at(most, up, total[kids])
    tied = kids[total[kids] == most[up]]
    first = np.full(len(calls), len(calls), dtype=np.int64)
    np.minimum.at(first, parent[tied], tied)
    return np.where((first < len(calls)) & (2 * most >= total), first, -1)


class NestingParts(NamedTuple):
    """The nodes in parts that nest alone (:func:`_nesting_parts`)."""

    rows: list[np.ndarray]  # per part: the nodes it nests, its own first, then its guests
    owned: list[int]  # per part: how many of its rows are its own (their parents come from it)
    slice_of: np.ndarray | None  # per node: its time slice (numbered in time order), -1 in a whole thread


class _Slice(NamedTuple):
    """A time slice of one thread: the nodes that start in it, and the earlier nodes that span
    its start (guests: nested with it, as any of its nodes may be inside them)."""

    own: np.ndarray
    guests: np.ndarray


def _nesting_parts(starts: np.ndarray, ends: np.ndarray, threads: np.ndarray, count: int) -> NestingParts:
    """The nodes in at most ``count`` parts of about as many nodes that nest alone, so that
    :func:`_nest` runs on each at once (its sorts and gathers release the GIL): whole CPU
    threads (a training trace's forward and backward threads), and from ``SLICED_FROM``
    parts on, a thread that holds over 1.5 parts' share cut in time (:func:`_time_slices`:
    between two steps), the pieces packed largest first into the emptiest part.  Cutting
    costs 0.2-0.6 of a whole nesting's CPU (``docs/big-traces.md``): on 2 or 3 cores it
    only breaks even, so there only whole threads are split apart."""
    counts = np.bincount(threads)
    share = len(threads) / count
    pieces: list[tuple[int, int, _Slice | None]] = []  # (nodes, thread, the slice: None for the whole thread)
    too_big = counts > SLICED_OVER * share if count >= SLICED_FROM else np.zeros(len(counts), dtype=bool)
    for thread in np.flatnonzero(too_big).tolist():
        slices = _time_slices(starts, ends, threads, thread, SLICES_A_SHARE * int(np.ceil(counts[thread] / share)))
        pieces.extend((len(piece.own), thread, piece) for piece in slices)
    slice_of = None
    if pieces:  # so far only slices: their nodes numbered, in time order
        slice_of = np.full(len(threads), -1, dtype=np.int32)
        for number, (_, _, piece) in enumerate(pieces):  # in time order per thread
            slice_of[piece.own] = number  # type: ignore[union-attr]
    small = np.flatnonzero((counts > 0) & ~too_big)
    small = small[np.argsort(-counts[small], kind="stable")]
    pieces.extend((int(counts[thread]), thread, None) for thread in small[:PACKED_THREADS].tolist())
    pieces.sort(key=lambda piece: -piece[0])  # stable: equal pieces keep thread order
    loads = [(0, part) for part in range(count)]  # a heap: the emptiest part first
    part_of_thread = np.full(len(counts), -1, dtype=np.int16)
    sliced: list[list[_Slice]] = [[] for _ in range(count)]
    for nodes, thread, piece in pieces:
        load, part = heapq.heappop(loads)
        heapq.heappush(loads, (load + nodes, part))
        if piece is None:
            part_of_thread[thread] = part
        else:
            sliced[part].append(piece)
    # the smallest of very many threads (a damaged trace's): in turn, each smaller than any packed one
    part_of_thread[small[PACKED_THREADS:]] = np.arange(len(small) - min(len(small), PACKED_THREADS)) % count
    labels = part_of_thread[threads]  # -1 for the rows of threads cut in time
    by_part = np.argsort(labels, kind="stable")  # a radix sort of 16-bit labels
    bounds = np.cumsum(np.bincount(labels + 1, minlength=count + 1))
    rows, owned = [], []
    for part in range(count):
        own = np.concatenate([by_part[bounds[part] : bounds[part + 1]], *(piece.own for piece in sliced[part])])
        guests = np.unique(np.concatenate([piece.guests for piece in sliced[part]] or [by_part[:0]]))
        if len(guests):  # a guest of one slice may be another's own in this part
            assert slice_of is not None
            mine = [int(slice_of[piece.own[0]]) for piece in sliced[part]]
            guests = guests[~np.isin(slice_of[guests], mine)]
        if len(own):
            rows.append(np.concatenate((own, guests)))
            owned.append(len(own))
    return NestingParts(rows, owned, slice_of)


SLICED_FROM = 4  # parts from which a thread may be cut in time
SLICED_OVER = 1.5  # a thread is cut when it holds over this many parts' share
SLICES_A_SHARE = 4  # a thread cut in time is cut in slices of a quarter of a part's share or less: room to pack
PACKED_THREADS = 4096  # threads packed one by one into the emptiest part; more go in turn
CUT_CANDIDATES = 64  # per slice wanted, a thread's longest nodes whose starts and ends are tried as cuts
SPINE_NODES = 64  # at most this many nodes may span a cut (a with_stack trace's frames over the whole run)


def _time_slices(starts: np.ndarray, ends: np.ndarray, threads: np.ndarray, thread: int, pieces: int) -> list[_Slice]:
    """``thread``'s nodes in up to ``pieces`` slices of about as many nodes, in time order, cut
    at times at most ``SPINE_NODES`` of its nodes span; one slice when there is no such time.

    A node spanning a cut (the python frames of a with_stack trace's script, its training
    loop) is a guest of each later slice it reaches: nested with it, so that the slice's
    nodes find it as their parent.  Any parent of a node that starts in a slice either starts
    in it too or spans its start, so each slice with its guests nests alone.  The times tried
    are the starts and ends of long nodes (steps, forward and backward passes: one of them
    usually ends where the next begins), the longest of each run of nodes, so that they
    spread over the thread even when many steps are equally long."""
    mine = np.flatnonzero(threads == thread)
    mine_starts = starts[mine]
    need = np.maximum(ends[mine], mine_starts + 1)  # a node spans (start, need): see _nest
    tried = min(CUT_CANDIDATES * pieces, len(mine))
    width = -(-len(mine) // tried)  # the longest node of each run of ``width`` nodes: spread over the trace
    lengths = np.zeros(width * tried, dtype=np.int64)  # a node's length is >= 1: the padding never wins
    lengths[: len(mine)] = need - mine_starts
    longest = lengths.reshape(tried, width).argmax(axis=1) + np.arange(tried) * width
    longest = longest[longest < len(mine)]
    del lengths
    cuts = np.unique(np.concatenate((mine_starts[longest], need[longest])))
    after_start = np.searchsorted(cuts, mine_starts, side="right")  # the first cut past each start
    before_need = np.searchsorted(cuts, need, side="left")  # the first cut at or past each end
    del need
    spanning = after_start < before_need  # the node spans cuts after_start .. before_need - 1
    opened = np.bincount(after_start[spanning], minlength=len(cuts) + 1)
    opened -= np.bincount(before_need[spanning], minlength=len(cuts) + 1)
    before = np.cumsum(np.bincount(after_start, minlength=len(cuts) + 1))[: len(cuts)]  # nodes starting before each cut
    del spanning
    over = np.cumsum(opened)[: len(cuts)]  # nodes spanning each cut
    usable = np.flatnonzero((over <= SPINE_NODES) & (before > 0) & (before < len(mine)))
    if not len(usable):
        return [_Slice(mine, mine[:0])]
    # nearest to each wanted count of nodes before it, in slices; a node over the cut costs a 64th
    wanted = np.arange(1, pieces) * len(mine) / pieces
    distance = np.abs(before[usable][None, :] - wanted[:, None]) / (len(mine) / pieces)
    chosen = usable[np.unique((distance + over[usable] / SPINE_NODES).argmin(axis=1))]
    # chosen cut m is past a node's start when after_start <= chosen[m]: the node starts in a later slice
    first = np.searchsorted(chosen, after_start, side="left")  # the slice a node starts in
    last = np.searchsorted(chosen, before_need, side="left")  # the last slice it reaches
    del after_start, before_need
    spine = np.flatnonzero(last > first)
    order = np.argsort(first.astype(np.int16), kind="stable")  # a radix sort of 16-bit labels
    bounds = np.cumsum(np.bincount(first, minlength=len(chosen) + 1))[:-1]
    slices = []
    for number, own in enumerate(np.split(mine[order], bounds)):
        guests = spine[(first[spine] < number) & (last[spine] >= number)]
        if len(own):
            slices.append(_Slice(own, mine[guests]))
    return slices


def _nest_in_parts(starts: np.ndarray, ends: np.ndarray, threads: np.ndarray, count: int) -> Nesting:
    """:func:`_nest` of the :func:`_nesting_parts` side by side, joined: a node's parent from
    the part it is its own in; the order each part's own nodes, a time slice's run put back
    in time order, so that every subtree is one run of the joined order, as in :func:`_nest`'s."""
    parts = _nesting_parts(starts, ends, threads, count) if count > 1 and len(threads) else None
    if parts is None or len(parts.rows) < 2:
        return _nest(starts, ends, threads)
    nested = side_by_side(*(partial(_nest_rows, rows, starts, ends, threads) for rows in parts.rows))
    parent = np.empty(len(starts), dtype=np.int64)
    whole: list[np.ndarray] = []  # the nodes of whole threads, in order
    runs: list[tuple[int, np.ndarray]] = []  # (slice, its own nodes in order)
    for rows, owned, part in zip(parts.rows, parts.owned, nested):
        parent[rows[:owned]] = part.parent[:owned]
        ordered = rows[part.order[part.order < owned]]
        if parts.slice_of is None:
            whole.append(ordered)
            continue
        labels = parts.slice_of[ordered]
        whole.append(ordered[labels < 0])
        ordered, labels = ordered[labels >= 0], labels[labels >= 0]
        cuts = np.flatnonzero(labels[1:] != labels[:-1]) + 1
        runs.extend((int(labels[run[0]]), ordered[run]) for run in np.split(np.arange(len(ordered)), cuts) if len(run))
    runs.sort(key=lambda run: run[0])
    return Nesting(parent, np.concatenate(whole + [run for _, run in runs]))


def _nest_rows(rows: np.ndarray, starts: np.ndarray, ends: np.ndarray, threads: np.ndarray) -> Nesting:
    """:func:`_nest` of the nodes ``rows``: each one's parent as a row of the full arrays, and
    their order as positions in ``rows``."""
    local = _nest(starts[rows], ends[rows], threads[rows])
    return Nesting(np.where(local.parent >= 0, rows[local.parent], -1), local.order)


class Nesting(NamedTuple):
    """Each node's parent, and the nodes in nesting order: by (thread, start, -end), which
    puts every node's descendants right after it (its subtree is one run of that order)."""

    parent: np.ndarray
    order: np.ndarray


def _nest(starts: np.ndarray, ends: np.ndarray, threads: np.ndarray) -> Nesting:
    """torch's ``_populate_cpu_children``: a parent for every node, per thread.

    torch sorts by (thread, start, -end) and keeps a stack: a node's parent is
    the innermost open node that ends after it starts and not before it ends
    (a partial overlap is no parent).  That is the nearest earlier node of the
    thread whose end is >= max(end, start + 1): a node skipped on the way was
    either closed or overlapped, and so was everything it skipped.  Found by
    pointer jumping: each unresolved node jumps to its candidate's candidate.
    """
    order = _thread_time_order(starts, ends, threads)
    n = len(order)
    sorted_ends = ends[order]
    need = np.maximum(sorted_ends, starts[order] + 1)
    candidate = np.arange(-1, n - 1, dtype=np.int64)
    if n:
        sorted_threads = threads[order]
        candidate[1:][sorted_threads[1:] != sorted_threads[:-1]] = -1
        candidate[_without_enclosing(sorted_ends, need, sorted_threads)] = -1
    pending = np.flatnonzero(candidate >= 0)
    while len(pending):
        found = sorted_ends[candidate[pending]] >= need[pending]
        pending = pending[~found]
        candidate[pending] = candidate[candidate[pending]]
        pending = pending[candidate[pending] >= 0]
    parent = np.full(n, -1, dtype=np.int64)
    parent[order] = np.where(candidate >= 0, order[candidate], -1)
    return Nesting(parent, order)


def _without_enclosing(sorted_ends: np.ndarray, need: np.ndarray, sorted_threads: np.ndarray) -> np.ndarray:
    """Nodes no earlier node of their thread reaches (the thread's top level).

    Resolved up front: walking them to the top is what would take pointer
    jumping the most rounds (every earlier top-level node is on the way).
    One running maximum over thread-keyed ends serves every thread."""
    keyed = _thread_keyed(sorted_threads, sorted_ends, need)
    if keyed is None:
        return np.zeros(len(need), dtype=bool)  # cannot key: leave them all to pointer jumping
    keyed_ends, keyed_need = keyed
    reach = np.maximum.accumulate(keyed_ends)
    earlier = np.empty_like(reach)
    earlier[0] = -1
    earlier[1:] = reach[:-1]
    return earlier < keyed_need


def _thread_time_order(starts: np.ndarray, ends: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """Node order by (thread, start, -end), stable: two sort passes instead of lexsort's three
    when thread and start fit one key."""
    if not len(starts):
        return np.empty(0, dtype=np.int64)
    by_end = np.argsort(-ends, kind="stable")
    keyed = _thread_keyed(threads[by_end], starts[by_end])
    if keyed is None:
        return np.lexsort((-ends, starts, threads))
    return by_end[np.argsort(keyed[0], kind="stable")]


def _thread_keyed(threads: np.ndarray, *times: np.ndarray) -> list[np.ndarray] | None:
    """Each time column as one int64 key per row: thread code in the high bits, the
    time (relative to the smallest of all columns) in the low ones; None if they don't fit."""
    low = min(int(t.min()) for t in times)
    time_bits = max(int(t.max()) - low for t in times).bit_length()
    if time_bits + int(threads.max()).bit_length() > 62:
        return None
    shifted = threads << time_bits
    return [shifted | (t - low) for t in times]


def _merge_duplicates(parent: np.ndarray, names: np.ndarray, n_ops: int) -> tuple[np.ndarray, np.ndarray]:
    """torch's ``_remove_dup_nodes``: an only child named like its parent merges into it.

    torch repeats the merge until nothing changes; what that removes is every
    operator whose original parent is an operator of the same name with one
    child (a chain collapses into its top).  Returns which nodes live and
    every node's nearest living ancestor as its parent.
    """
    n = len(parent)
    has_parent = parent >= 0
    child_count = np.bincount(parent[has_parent], minlength=n)
    safe_parent = np.where(has_parent, parent, 0)
    dead = np.zeros(n, dtype=bool)
    dead[:n_ops] = (
        (parent[:n_ops] >= 0)
        & (parent[:n_ops] < n_ops)
        & (child_count[safe_parent[:n_ops]] == 1)
        & (names[:n_ops] == names[safe_parent[:n_ops]])
    )
    alive = ~dead
    if dead.any():
        parent = nearest_ancestor(parent, alive)
    return alive, parent


def _subtree_totals(values: np.ndarray, parent: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Each node's value plus its descendants' (device time of all an operator launched).

    In nesting order a subtree is one run (:class:`Nesting`; merged duplicates keep
    it so: their children join the run's owner), so its total is a difference of
    prefix sums once the run's last node is known: the node's last child's last
    child..., found by pointer jumping (log2(depth) passes: a hostile chain 100,000
    deep takes 17).  Exact in int64."""
    n = len(parent)
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n)
    last = position.copy()  # of the node's children, the last in order; itself if none
    linked = parent >= 0
    np.maximum.at(last, parent[linked], position[linked])
    last_below = order[last]
    del last, linked  # node-long, and this is where a big trace's analysis peaks
    while True:
        further = last_below[last_below]
        if np.array_equal(further, last_below):
            break
        last_below = further
    del further
    prefix = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(values[order], out=prefix[1:])
    return prefix[position[last_below] + 1] - prefix[position]


def _living(nodes: np.ndarray, alive: np.ndarray, parent: np.ndarray) -> np.ndarray:
    """Each node itself if alive, else its nearest living ancestor (-1 stays -1,
    also when there are no nodes at all: a trace of device events only)."""
    result = np.full(len(nodes), -1, dtype=np.int64)
    known = nodes >= 0
    found = nodes[known]
    result[known] = np.where(alive[found], found, parent[found])
    return result


def _attach_device_activity(
    store: TraceEvents,
    op_index: np.ndarray,
    alive: np.ndarray,
    parent: np.ndarray,
    op_parent: np.ndarray,
    spans: tuple[np.ndarray, np.ndarray, np.ndarray],
    self_device: np.ndarray,
) -> DeviceActivity:
    """Join kernels, memcpys and memsets to the operator that launched them.

    By ``External id`` (a device event carries its operator's), unless that
    id is not to be trusted; then through the runtime launch with the same
    ``correlation`` to the operator enclosing the launch on its thread.  Some
    writers set the External id of every launch and device event to its
    correlation while operators carry External ids in the same number range:
    the id then names an unrelated operator.  Such a file (every launch with
    both ids has them equal) is joined through launches only, and so is any
    device event whose named operator does not enclose its launch (on the
    launch's thread, in time).  Where ids repeat, the first node wins.
    """
    device = store.device
    activity = DeviceActivity(names=store.names, events=device)
    if not len(device):
        return activity
    cpu = store.cpu
    starts, ends, threads = spans
    launching = np.isin(cpu.category[op_index], OPERATOR_CATEGORY_CODES)
    external = cpu.external_id[op_index]
    correlation = cpu.correlation[op_index]
    launches = ~launching & (external != NONE) & (correlation != NONE)
    activity.external_ids_ignored = bool(launches.any()) and bool((external[launches] == correlation[launches]).all())
    by_correlation = id_table(np.where(launching, NONE, correlation), NONE)
    del launches, correlation  # node-long: they would add to the peak RSS of a big trace
    launch = look_up(by_correlation, device.correlation, NONE)
    via_launch = gather(op_parent, launch, -1)
    if activity.external_ids_ignored:
        node = via_launch
    else:
        by_external = id_table(np.where(launching, external, NONE), NONE, asked=device.external_id)
        del launching, external
        node = look_up(by_external, device.external_id, NONE)
        both = np.flatnonzero((node >= 0) & (launch >= 0))
        named, launched = node[both], launch[both]
        encloses = (
            (threads[named] == threads[launched])
            & (starts[named] <= starts[launched])
            & (ends[launched] <= ends[named])
        )
        node[both[~encloses]] = via_launch[both[~encloses]]
        node = np.where(node >= 0, node, via_launch)
    node = _living(node, alive, parent)
    joined = node >= 0
    self_device += np.rint(np.bincount(node[joined], weights=device.dur_ns[joined], minlength=len(self_device))).astype(
        np.int64
    )
    activity.launcher = _column(node)
    return activity


def _memory_per_node(
    store: TraceEvents, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, UnattributedMemory]:
    """Inclusive CPU and device bytes of every node (torch's ``in_interval``:
    every record with start <= time <= end, on any thread)."""
    n_nodes = len(starts)
    cpu_mem = np.zeros(n_nodes, dtype=np.int64)
    device_mem = np.zeros(n_nodes, dtype=np.int64)
    unattributed = UnattributedMemory()
    records = store.memory_records
    if not len(records):
        return cpu_mem, device_mem, unattributed
    times, sizes = records.start_ns, records.bytes
    is_cpu, is_device = records.is_cpu, records.is_device
    cpu_prefix = np.concatenate(([0], np.cumsum(np.where(is_cpu, sizes, 0))))
    device_prefix = np.concatenate(([0], np.cumsum(np.where(is_device, sizes, 0))))
    lo = np.searchsorted(times, starts, side="left")
    hi = np.searchsorted(times, ends, side="right")
    cpu_mem = cpu_prefix[hi] - cpu_prefix[lo]
    device_mem = device_prefix[hi] - device_prefix[lo]
    # A record inside no node's interval is one of torch's "[memory]" rows.
    spans = lo < hi
    coverage = np.bincount(lo[spans], minlength=len(times) + 1) - np.bincount(hi[spans], minlength=len(times) + 1)
    outside = np.cumsum(coverage[:-1]) == 0
    unattributed.calls = int(outside.sum())
    unattributed.cpu_bytes = int(sizes[outside & is_cpu].sum())
    unattributed.device_bytes = int(sizes[outside & is_device].sum())
    return cpu_mem, device_mem, unattributed
