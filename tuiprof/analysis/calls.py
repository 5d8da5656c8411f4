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
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from itertools import accumulate

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

    The loops here run once per event of big traces: they work on plain
    lists (faster to index than arrays) and build the columns with
    comprehensions; arrays are made once at the end.
    """
    operator_events = [e for e in store.operators if e.name not in FILTERED_NAMES]
    operator_events += [e for e in store.runtime if e.name not in FILTERED_NAMES]
    n_ops = len(operator_events)
    py = store.python
    n_nodes = n_ops + len(py)

    starts = [round(e.ts * 1000) for e in operator_events]
    ends = [s + round(e.dur * 1000) for s, e in zip(starts, operator_events)]
    starts += py.start_ns
    ends += py.end_ns
    tids: list[int | str] = [e.tid for e in operator_events]
    tids += py.tid

    order, parent = _nest(starts, ends, tids)
    alive = _merge_duplicates(order, parent, operator_events, n_ops)

    # Innermost module and nearest operator ancestor, in parent-first order.
    modules = py.modules
    module_of = [-1] * n_nodes
    op_parent = [-1] * n_nodes
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
    cpu_mem, device_mem, unattributed = _memory_per_node(store, starts, ends)

    # Bottom-up sums over living children, in one pass (children come after parents in ``order``).
    durations = [e - s for s, e in zip(starts, ends)]
    child_time = [0] * n_nodes
    device_total = list(self_device)
    child_cpu_mem = [0] * n_nodes
    child_device_mem = [0] * n_nodes
    with_device, with_memory = bool(activity.events), bool(store.memory)
    for node in reversed(order):
        p = parent[node]
        if p < 0 or not alive[node]:
            continue
        child_time[p] += durations[node]
        if with_device:
            device_total[p] += device_total[node]
        if with_memory:
            child_cpu_mem[p] += cpu_mem[node]
            child_device_mem[p] += device_mem[node]

    op_rows = sorted((i for i in range(n_ops) if alive[i]), key=starts.__getitem__)
    row_of = [-1] * n_ops
    for row, node in enumerate(op_rows):
        row_of[node] = row
    calls = OperatorCalls()
    calls.events = [operator_events[n] for n in op_rows]
    calls.tid = [tids[n] for n in op_rows]
    calls.start_ns = array("q", [starts[n] for n in op_rows])
    calls.end_ns = array("q", [ends[n] for n in op_rows])
    calls.total_ns = array("q", [durations[n] for n in op_rows])
    calls.self_ns = array("q", [durations[n] - child_time[n] for n in op_rows])
    calls.self_device_ns = array("q", [self_device[n] for n in op_rows])
    calls.device_total_ns = array("q", [device_total[n] for n in op_rows])
    calls.cpu_mem = array("q", [cpu_mem[n] for n in op_rows])
    calls.device_mem = array("q", [device_mem[n] for n in op_rows])
    calls.self_cpu_mem = array("q", [cpu_mem[n] - child_cpu_mem[n] for n in op_rows])
    calls.self_device_mem = array("q", [device_mem[n] - child_device_mem[n] for n in op_rows])
    calls.flops = array("q", [_flops(e) if e.name in FORMULAS else 0 for e in calls.events])
    calls.parent = array("q", [row_of[op_parent[n]] if op_parent[n] >= 0 else -1 for n in op_rows])
    calls.module = array("q", [module_of[n] for n in op_rows])
    for index, node in enumerate(activity.launcher):
        if node >= 0:
            row = row_of[node]
            activity.launcher[index] = row
            calls.kernel_rows.setdefault(row, []).append(index)
    return calls, activity, unattributed


def _flops(event: RawEvent) -> int:
    args = event.args
    if args is None or not args.input_dims:
        return 0
    return operator_flops(event.name, decode_member(args.input_dims), decode_member(args.concrete_inputs))


def _nest(starts: list[int], ends: list[int], tids: list) -> tuple[list[int], list[int]]:
    """torch's ``_populate_cpu_children``: a parent for every node, per thread."""
    by_thread: dict[int | str, list[int]] = {}
    for node, tid in enumerate(tids):
        bucket = by_thread.get(tid)
        if bucket is None:
            by_thread[tid] = bucket = []
        bucket.append(node)
    parent = [-1] * len(tids)
    order: list[int] = []
    negative_ends = [-e for e in ends]
    for nodes in by_thread.values():
        # (start, -end) order as two stable sorts on ints: much faster than tuple keys.
        nodes.sort(key=negative_ends.__getitem__)
        nodes.sort(key=starts.__getitem__)
        stack: list[int] = []
        for node in nodes:
            start, end = starts[node], ends[node]
            while stack:
                top_end = ends[stack[-1]]
                if start >= top_end or end > top_end:
                    stack.pop()
                else:
                    parent[node] = stack[-1]
                    break
            stack.append(node)
        order.extend(nodes)
    return order, parent


def _merge_duplicates(order: list[int], parent: list[int], events: list[RawEvent], n_ops: int) -> bytearray:
    """torch's ``_remove_dup_nodes``: an only child named like its parent merges into it.

    Rewrites ``parent`` so every node points at a living ancestor; returns
    which nodes live.  Parent-first order makes chains collapse in one pass.
    """
    child_count = [0] * len(parent)
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


def _living(node: int, alive: bytearray, parent: list[int]) -> int:
    while node >= 0 and not alive[node]:
        node = parent[node]
    return node


def _attach_device_activity(
    store: TraceEvents,
    operator_events: list[RawEvent],
    alive: bytearray,
    parent: list[int],
    op_parent: list[int],
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
    store: TraceEvents, starts: list[int], ends: list[int]
) -> tuple[list[int], list[int], UnattributedMemory]:
    """Inclusive CPU and device bytes of every node (torch's ``in_interval``)."""
    n_nodes = len(starts)
    records = sorted(
        (to_ns(e.ts), e.args.alloc_bytes or 0, e.args.device_type) for e in store.memory if e.args is not None
    )
    cpu_mem = [0] * n_nodes
    device_mem = [0] * n_nodes
    unattributed = UnattributedMemory()
    if not records:
        return cpu_mem, device_mem, unattributed
    times = [r[0] for r in records]
    cpu_prefix = [0, *accumulate(r[1] if r[2] in CPU_MEMORY_TYPES else 0 for r in records)]
    device_prefix = [0, *accumulate(r[1] if r[2] in DEVICE_MEMORY_TYPES else 0 for r in records)]
    covered = [0] * (len(records) + 1)
    for node in range(n_nodes):
        lo = bisect_left(times, starts[node])
        hi = bisect_right(times, ends[node])
        if lo < hi:
            cpu_mem[node] = cpu_prefix[hi] - cpu_prefix[lo]
            device_mem[node] = device_prefix[hi] - device_prefix[lo]
            covered[lo] += 1
            covered[hi] -= 1
    depth = 0
    for index, record in enumerate(records):
        depth += covered[index]
        if depth == 0:
            unattributed.calls += 1
            if record[2] in CPU_MEMORY_TYPES:
                unattributed.cpu_bytes += record[1]
            elif record[2] in DEVICE_MEMORY_TYPES:
                unattributed.device_bytes += record[1]
    return cpu_mem, device_mem, unattributed
