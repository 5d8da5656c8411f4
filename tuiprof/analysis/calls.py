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
  ``External id`` (through the runtime launch's ``correlation`` for kernels
  that lack one); device total adds the children's.

Times are integer nanoseconds (``round(ts * 1000)``): trace timestamps carry
nanosecond decimals that floats at epoch magnitudes cannot compare exactly.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from tuiprof.analysis.flops import FORMULAS, operator_flops
from tuiprof.trace.schema import RawEvent, decode_member
from tuiprof.trace.store import TraceEvents, external_id

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
# c10::DeviceType values torch counts as CPU or as device memory.
CPU_MEMORY_TYPES = frozenset({0, 2, 5})  # CPU, MKLDNN, IDEEP
DEVICE_MEMORY_TYPES = frozenset({1, 6, 12, 20})  # CUDA, HIP, XPU, PrivateUse1
STEP_PREFIX = "ProfilerStep#"
BACKWARD_ROOT_PREFIX = "autograd::engine::evaluate_function: "


def to_ns(value: float | int) -> int:
    return round(value * 1000)


@dataclass
class OperatorCalls:
    """One row per reported operator call (merged duplicates removed).

    Columns are parallel lists/arrays indexed by call row.  ``module`` is the
    row in ``PythonFrames`` of the innermost ``nn.Module`` call enclosing the
    call (-1 outside every module); ``parent`` is the enclosing call row
    (-1 at the top, python frames skipped).
    """

    events: list[RawEvent] = field(default_factory=list)
    tid: list[int | str] = field(default_factory=list)
    start_ns: array = field(default_factory=lambda: array("q"))
    end_ns: array = field(default_factory=lambda: array("q"))
    total_ns: array = field(default_factory=lambda: array("q"))  # end - start (summing epoch times overflows to bigints)
    self_ns: array = field(default_factory=lambda: array("q"))
    self_device_ns: array = field(default_factory=lambda: array("q"))
    device_total_ns: array = field(default_factory=lambda: array("q"))
    cpu_mem: array = field(default_factory=lambda: array("q"))
    self_cpu_mem: array = field(default_factory=lambda: array("q"))
    device_mem: array = field(default_factory=lambda: array("q"))
    self_device_mem: array = field(default_factory=lambda: array("q"))
    flops: array = field(default_factory=lambda: array("q"))
    parent: array = field(default_factory=lambda: array("q"))
    module: array = field(default_factory=lambda: array("q"))
    kernel_rows: dict[int, list[int]] = field(default_factory=dict)  # call row -> device event rows

    def __len__(self) -> int:
        return len(self.events)

    def name(self, row: int) -> str:
        return self.events[row].name


@dataclass
class DeviceActivity:
    """Kernels, memcpys and memsets in one list, with the call that launched each."""

    events: list[RawEvent] = field(default_factory=list)
    kind: list[str] = field(default_factory=list)  # "kernel" | "memcpy" | "memset"
    launcher: array = field(default_factory=lambda: array("q"))  # call row, -1 unknown


@dataclass
class UnattributedMemory:
    """``[memory]`` records inside no CPU event: torch's ``[memory]`` rows."""

    calls: int = 0
    cpu_bytes: int = 0
    device_bytes: int = 0


def build_calls(store: TraceEvents) -> tuple[OperatorCalls, DeviceActivity, UnattributedMemory]:
    """Nest, merge and attribute every CPU event of ``store``.

    Sorting, interval look-ups, child sums and column gathering are numpy
    (int64 nanoseconds, exact); what depends on a parent computed just
    before (the stack pass, merging, module inheritance) stays a Python loop
    over plain lists.
    """
    operator_events = [e for e in store.operators if e.name not in FILTERED_NAMES]
    operator_events += [e for e in store.runtime if e.name not in FILTERED_NAMES]
    n_ops = len(operator_events)
    py = store.python
    n_nodes = n_ops + len(py)

    starts_np = np.empty(n_nodes, dtype=np.int64)
    ends_np = np.empty(n_nodes, dtype=np.int64)
    starts_np[:n_ops] = [round(e.ts * 1000) for e in operator_events]
    ends_np[:n_ops] = starts_np[:n_ops] + np.array([round(e.dur * 1000) for e in operator_events], dtype=np.int64)
    starts_np[n_ops:] = np.frombuffer(py.start_ns, dtype=np.int64) if len(py) else []
    ends_np[n_ops:] = np.frombuffer(py.end_ns, dtype=np.int64) if len(py) else []
    tids: list[int | str] = [e.tid for e in operator_events]
    tids += py.tid

    order, parent = _nest(starts_np, ends_np, tids)
    alive = _merge_duplicates(order, parent, operator_events, n_ops)

    # Innermost module and nearest operator ancestor, in parent-first order.
    modules = py.modules
    module_of = array("q", [-1]) * n_nodes
    op_parent = array("q", [-1]) * n_nodes
    for node in order:
        p = parent[node]
        if p < 0:
            continue
        if p >= n_ops:
            frame = p - n_ops
            module_of[node] = frame if frame in modules else module_of[p]
            op_parent[node] = op_parent[p]
        else:
            module_of[node] = module_of[p]
            op_parent[node] = p

    self_device = [0] * n_nodes
    activity = _attach_device_activity(store, operator_events, alive, parent, op_parent, self_device)
    cpu_mem, device_mem, unattributed = _memory_per_node(store, starts_np, ends_np)

    # Sums over living direct children (self time, self memory)...
    parent_np = np.frombuffer(parent, dtype=np.int64)
    alive_np = np.frombuffer(alive, dtype=np.uint8).astype(bool)
    linked = alive_np & (parent_np >= 0)
    durations = ends_np - starts_np
    child_time = np.bincount(parent_np[linked], weights=durations[linked], minlength=n_nodes)
    child_cpu_mem = np.bincount(parent_np[linked], weights=cpu_mem[linked], minlength=n_nodes)
    child_device_mem = np.bincount(parent_np[linked], weights=device_mem[linked], minlength=n_nodes)
    # ...and device time over whole subtrees (children come after parents in ``order``).
    device_total = list(self_device)
    if activity.events:
        for node in reversed(order):
            p = parent[node]
            if p >= 0 and alive[node]:
                device_total[p] += device_total[node]

    op_rows_np = np.flatnonzero(alive_np[:n_ops])
    op_rows_np = op_rows_np[np.argsort(starts_np[op_rows_np], kind="stable")]
    op_rows = op_rows_np.tolist()
    row_of = np.full(n_ops + 1, -1, dtype=np.int64)  # index -1 (no parent) maps to -1
    row_of[op_rows_np] = np.arange(len(op_rows_np))
    op_parent_np = np.frombuffer(op_parent, dtype=np.int64)[op_rows_np]

    def column(values) -> array:
        return array("q", np.asarray(values, dtype=np.int64).tobytes())

    calls = OperatorCalls()
    calls.events = [operator_events[n] for n in op_rows]
    calls.tid = [tids[n] for n in op_rows]
    calls.start_ns = column(starts_np[op_rows_np])
    calls.end_ns = column(ends_np[op_rows_np])
    calls.total_ns = column(durations[op_rows_np])
    # bincount sums in float64: exact below 2**53 ns (104 days) and bytes (8 PB).
    calls.self_ns = column(durations[op_rows_np] - np.rint(child_time[op_rows_np]).astype(np.int64))
    calls.self_device_ns = column([self_device[n] for n in op_rows])
    calls.device_total_ns = column([device_total[n] for n in op_rows])
    calls.cpu_mem = column(cpu_mem[op_rows_np])
    calls.device_mem = column(device_mem[op_rows_np])
    calls.self_cpu_mem = column(cpu_mem[op_rows_np] - np.rint(child_cpu_mem[op_rows_np]).astype(np.int64))
    calls.self_device_mem = column(device_mem[op_rows_np] - np.rint(child_device_mem[op_rows_np]).astype(np.int64))
    calls.flops = column([_flops(e) if e.name in FORMULAS else 0 for e in calls.events])
    calls.parent = column(row_of[op_parent_np])
    calls.module = column(np.frombuffer(module_of, dtype=np.int64)[op_rows_np])
    row_list = row_of.tolist()
    for index, node in enumerate(activity.launcher):
        if node >= 0:
            row = row_list[node]
            activity.launcher[index] = row
            calls.kernel_rows.setdefault(row, []).append(index)
    return calls, activity, unattributed


def _flops(event: RawEvent) -> int:
    args = event.args
    if args is None or not args.input_dims:
        return 0
    return operator_flops(event.name, decode_member(args.input_dims), decode_member(args.concrete_inputs))


def _nest(starts: np.ndarray, ends: np.ndarray, tids: list) -> tuple[array, array]:
    """torch's ``_populate_cpu_children``: a parent for every node, per thread.

    Nodes are ordered by (thread, start, -end); a stack per thread then finds
    each node's innermost enclosing node (a partial overlap is no parent).
    """
    thread_codes: dict[int | str, int] = {}
    codes = np.fromiter((thread_codes.setdefault(t, len(thread_codes)) for t in tids), dtype=np.int64, count=len(tids))
    # array('q') rather than lists: the same speed to index, 8 bytes a node instead of ~36.
    order_np = np.lexsort((-ends, starts, codes))
    order = array("q", order_np.astype(np.int64).tobytes())
    code_list = array("q", codes.tobytes())
    end_list = array("q", ends.tobytes())
    start_list = array("q", starts.tobytes())
    parent = array("q", [-1]) * len(tids)
    stack: list[int] = []
    current_thread = -1
    for node in order:
        if code_list[node] != current_thread:
            current_thread = code_list[node]
            stack = []
        start, end = start_list[node], end_list[node]
        while stack:
            top_end = end_list[stack[-1]]
            if start >= top_end or end > top_end:
                stack.pop()
            else:
                parent[node] = stack[-1]
                break
        stack.append(node)
    return order, parent


def _merge_duplicates(order: array, parent: array, events: list[RawEvent], n_ops: int) -> bytearray:
    """torch's ``_remove_dup_nodes``: an only child named like its parent merges into it.

    Rewrites ``parent`` so every node points at a living ancestor; returns
    which nodes live.  Parent-first order makes chains collapse in one pass.
    """
    child_count = array("q", bytes(8 * len(parent)))
    for node in order:
        if parent[node] >= 0:
            child_count[parent[node]] += 1
    alive = bytearray([1]) * len(parent)
    for node in order:
        p = parent[node]
        while p >= 0 and not alive[p]:
            p = parent[p]
        parent[node] = p
        if (
            node < n_ops
            and 0 <= p < n_ops
            and child_count[p] == 1
            and events[p].name == events[node].name
        ):
            alive[node] = 0
            child_count[p] = child_count[node]
    return alive


def _living(node: int, alive: bytearray, parent: array) -> int:
    while node >= 0 and not alive[node]:
        node = parent[node]
    return node


def _attach_device_activity(
    store: TraceEvents,
    operator_events: list[RawEvent],
    alive: bytearray,
    parent: array,
    op_parent: array,
    self_device: list[int],
) -> DeviceActivity:
    """Join kernels, memcpys and memsets to the operator that launched them.

    First by ``External id`` (a device event carries its operator's); where
    that names no operator (some writers put the correlation there), through
    the runtime launch with the same ``correlation`` to the operator that
    encloses the launch on its thread.
    """
    launching = ("cpu_op", "user_annotation", "Operator")
    by_external: dict[int, int] = {}
    launch_by_correlation: dict[int, int] = {}
    for node in range(len(operator_events) - 1, -1, -1):  # backwards: the first op with an id wins
        event = operator_events[node]
        args = event.args
        if event.cat in launching:
            ext = external_id(args)
            if ext is not None:
                by_external[ext] = node
        elif args is not None and args.correlation is not None:
            launch_by_correlation[args.correlation] = node
    activity = DeviceActivity()
    for kind, events in (("kernel", store.kernels), ("memcpy", store.memcpys), ("memset", store.memsets)):
        launchers = []
        for event in events:
            args = event.args
            ext = external_id(args)
            node = by_external.get(ext, -1) if ext is not None else -1
            if node < 0 and args is not None and args.correlation is not None:
                launch = launch_by_correlation.get(args.correlation, -1)
                node = op_parent[launch] if launch >= 0 else -1
            if node >= 0:
                node = _living(node, alive, parent)
                self_device[node] += round(event.dur * 1000)
            launchers.append(node)
        activity.events += events
        activity.kind += [kind] * len(events)
        activity.launcher.extend(launchers)
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
    records = [e.args for e in store.memory if e.args is not None]
    if not records:
        return cpu_mem, device_mem, unattributed
    times = np.array([round(e.ts * 1000) for e in store.memory if e.args is not None], dtype=np.int64)
    sizes = np.array([a.alloc_bytes or 0 for a in records], dtype=np.int64)
    kinds = np.array([-1 if a.device_type is None else a.device_type for a in records], dtype=np.int64)
    by_time = np.argsort(times, kind="stable")
    times, sizes, kinds = times[by_time], sizes[by_time], kinds[by_time]
    is_cpu = np.isin(kinds, list(CPU_MEMORY_TYPES))
    is_device = np.isin(kinds, list(DEVICE_MEMORY_TYPES))
    cpu_prefix = np.concatenate(([0], np.cumsum(np.where(is_cpu, sizes, 0))))
    device_prefix = np.concatenate(([0], np.cumsum(np.where(is_device, sizes, 0))))
    lo = np.searchsorted(times, starts, side="left")
    hi = np.searchsorted(times, ends, side="right")
    cpu_mem = cpu_prefix[hi] - cpu_prefix[lo]
    device_mem = device_prefix[hi] - device_prefix[lo]
    # A record inside no node's interval is one of torch's "[memory]" rows.
    spans = lo < hi
    coverage = np.zeros(len(times) + 1, dtype=np.int64)
    np.add.at(coverage, lo[spans], 1)
    np.add.at(coverage, hi[spans], -1)
    outside = np.cumsum(coverage[:-1]) == 0
    unattributed.calls = int(outside.sum())
    unattributed.cpu_bytes = int(sizes[outside & is_cpu].sum())
    unattributed.device_bytes = int(sizes[outside & is_device].sum())
    return cpu_mem, device_mem, unattributed
