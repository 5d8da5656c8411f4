"""The tables tuiprof shows: their columns, what each means, and their rows.

One definition serves ``summary`` (table, CSV, JSON, Markdown), the
explorer's tables, its export and its help screen, so a column means the
same everywhere.  Row values are raw numbers in the unit the key names
(``_us``, ``_bytes``); formatting happens only when text is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.report.names import short_kernel_name
from tuiprof.report.units import format_bytes, format_count, format_pct, format_us_or_dash

Row = dict[str, object]


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    kind: str  # text | kernel (a kernel name, shown short) | us | bytes | count | int | pct
    help: str
    narrow: bool = True  # shown at 80 columns

    def format(self, value: object) -> str:
        if value is None or value == "":
            return "--" if self.kind not in ("text",) else ""
        if self.kind == "us":
            return format_us_or_dash(float(value))  # type: ignore[arg-type]
        if self.kind == "bytes":
            return format_bytes(int(value))  # type: ignore[arg-type]
        if self.kind == "count":
            return format_count(float(value)) if value else "--"  # type: ignore[arg-type]
        if self.kind == "pct":
            return format_pct(float(value))  # type: ignore[arg-type]
        if self.kind == "int":
            return f"{int(value):,}"  # type: ignore[arg-type]
        if self.kind == "kernel":
            return short_kernel_name(str(value))
        return str(value)

    @property
    def numeric(self) -> bool:
        return self.kind not in ("text", "kernel")


@dataclass(frozen=True)
class ViewOptions:
    group_by_shape: bool = False
    top_level_only: bool = False
    module: ModuleNode | None = None


@dataclass(frozen=True)
class View:
    name: str
    title: str
    columns: tuple[Column, ...]
    default_sort: str
    build: Callable[[TraceModel, ViewOptions], list[Row]]

    def column(self, key: str) -> Column:
        for column in self.columns:
            if column.key == key:
                return column
        raise KeyError(key)

    def visible_columns(self, options: ViewOptions, model: TraceModel | None = None) -> tuple[Column, ...]:
        """Columns worth showing: no input shapes unless grouped, no live-only
        module columns for files, no device columns for CPU-only traces."""
        hidden: set[str] = set()
        if self.name == "ops" and not options.group_by_shape:
            hidden.add("input_shapes")
        if model is not None:
            if self.name == "modules" and not any(n.qualified_name for n in model.modules.walk()):
                hidden |= {"qualified_name", "parameters", "output_shape"}
            if self.name == "modules" and not any(n.backward_cpu_us for n in model.modules.roots):
                hidden |= {"backward_cpu_us", "backward_device_us"}  # inference: there is no backward
            if self.name == "memory" and not len(model.modules.by_frame):
                hidden.add("peak_module")
            if not model.has_device:
                hidden |= {c.key for c in self.columns if "device" in c.key and "mem" not in c.key}
            if not model.has_device and all(t.is_cpu for t in model.memory):
                hidden |= {c.key for c in self.columns if "device_mem" in c.key}
        return tuple(c for c in self.columns if c.key not in hidden)

    def default_sort_for(self, model: TraceModel) -> str:
        if self.name == "ops" and model.has_device:
            return "self_device_us"
        return self.default_sort


def sort_rows(rows: list[Row], key: str, descending: bool = True) -> list[Row]:
    """Sort by one column; text sorts ascending-first like a file list."""

    def sort_key(row: Row):
        value = row.get(key)
        if value is None:
            return (1, 0)
        return (0, value)

    ordered = sorted(rows, key=sort_key, reverse=descending)
    if descending:  # keep missing values last either way
        ordered.sort(key=lambda r: r.get(key) is None)
    return ordered


# ------------------------------------------------------------------ operators

OPERATOR_COLUMNS = (
    Column("name", "Name", "text", "Operator or record_function name, as torch names it."),
    Column("self_cpu_pct", "Self CPU %", "pct", "Self CPU time as a share of all self CPU time.", narrow=False),
    Column("self_cpu_us", "Self CPU", "us", "CPU time in the operator itself, children (ops and Python frames) excluded."),
    Column("cpu_total_pct", "CPU total %", "pct", "CPU total as a share of all self CPU time.", narrow=False),
    Column("cpu_total_us", "CPU total", "us", "Wall time from start to end of every call, children included."),
    Column("cpu_avg_us", "CPU avg", "us", "CPU total divided by calls.", narrow=False),
    Column("self_device_us", "Self dev", "us", "Device time of the kernels, memcpys and memsets this operator launched itself."),
    Column("device_total_us", "Dev total", "us", "Device time of everything launched inside the operator, children included."),
    Column("device_avg_us", "Dev avg", "us", "Device total divided by calls.", narrow=False),
    Column("calls", "Calls", "int", "Number of calls (torch merges an only child that has its parent's name)."),
    Column("cpu_mem_bytes", "CPU Mem", "bytes", "CPU bytes allocated minus freed during the calls, children included.", narrow=False),
    Column("self_cpu_mem_bytes", "Self CPU Mem", "bytes", "CPU bytes allocated minus freed by the operator itself.", narrow=False),
    Column("device_mem_bytes", "Dev Mem", "bytes", "Device bytes allocated minus freed during the calls, children included.", narrow=False),
    Column("self_device_mem_bytes", "Self Dev Mem", "bytes", "Device bytes allocated minus freed by the operator itself.", narrow=False),
    Column("flops", "FLOPs", "count", "Floating-point operations (torch's formulas: 2 per multiply-add) for conv2d, mm, addmm, bmm, baddbmm, mul, add."),
    Column("flops_per_s", "FLOP/s", "count", "Achieved FLOP/s: FLOPs over device total (CPU total when no device time).", narrow=False),
    Column(
        "executed_flops", "FLOPs run", "count",
        "Training FLOPs done in these calls, forward and backward (FlopCounterMode's formulas: matmuls and "
        "convolutions, backward included). The outermost call with a formula counts its work (aten::conv2d, "
        "aten::mm, aten::convolution_backward); the calls below it on the path where its time goes (its child "
        "with the most CPU total, level by level while it holds half the time: aten::convolution, aten::mkldnn_convolution) show the same "
        "FLOPs, executed on its behalf. Rows overlap: do not add them up.",
        narrow=False,
    ),
    Column("executed_flops_per_s", "Run FLOP/s", "count", "FLOPs run over device total (CPU total when no device time): the rate where the time is.", narrow=False),
    Column("input_shapes", "Input shapes", "text", "Input Dims of the calls (when grouped by input shape)."),
)


def build_operator_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    table = model.operators(
        group_by_shape=options.group_by_shape, top_level_only=options.top_level_only, module=options.module
    )
    total_self = model.total_self_cpu_us or 1.0
    rows = []
    for stats in table:
        busy_us = stats.device_total_us or stats.cpu_total_us
        row: Row = {
            "name": stats.name,
            "self_cpu_pct": 100 * stats.self_cpu_us / total_self,
            "self_cpu_us": stats.self_cpu_us,
            "cpu_total_pct": 100 * stats.cpu_total_us / total_self,
            "cpu_total_us": stats.cpu_total_us,
            "cpu_avg_us": stats.cpu_avg_us,
            "self_device_us": stats.self_device_us,
            "device_total_us": stats.device_total_us,
            "device_avg_us": stats.device_avg_us,
            "calls": stats.calls,
            "cpu_mem_bytes": stats.cpu_mem_bytes,
            "self_cpu_mem_bytes": stats.self_cpu_mem_bytes,
            "device_mem_bytes": stats.device_mem_bytes,
            "self_device_mem_bytes": stats.self_device_mem_bytes,
            "flops": stats.flops,
            "flops_per_s": stats.flops / (busy_us / 1e6) if stats.flops and busy_us else None,
            "executed_flops": stats.executed_flops,
            "executed_flops_per_s": stats.executed_flops / (busy_us / 1e6) if stats.executed_flops and busy_us else None,
        }
        if options.group_by_shape:
            row["input_shapes"] = stats.input_shapes
        row["_stats"] = stats
        rows.append(row)
    return rows


# ------------------------------------------------------------------ modules

MODULE_COLUMNS = (
    Column("path", "Module", "text", "Path from the root: Class_k per level (k counts instances of a class in call order)."),
    Column("qualified_name", "Qualified name", "text", "Attribute path in the model (live capture only), e.g. layer1.0.conv1.", narrow=False),
    Column("calls", "Calls", "int", "Forward calls of this module instance."),
    Column("self_cpu_us", "Self CPU", "us", "Forward wall time minus the child modules' forward time."),
    Column("cpu_total_us", "CPU total", "us", "Forward wall time of all calls."),
    Column("backward_cpu_us", "Bwd CPU", "us", "CPU time of the backward ops of this module's forward ops (via autograd sequence numbers)."),
    Column("device_total_us", "Dev total", "us", "Device time of everything the forward launched."),
    Column("backward_device_us", "Bwd dev", "us", "Device time of the backward ops' kernels.", narrow=False),
    Column("cpu_mem_bytes", "CPU Mem", "bytes", "Self CPU memory of the operators inside (allocated minus freed).", narrow=False),
    Column("flops", "FLOPs", "count", "Forward FLOPs inside, submodules included (FlopCounterMode's formulas: matmuls and convolutions, 2 per multiply-add; no elementwise ops)."),
    Column("backward_flops", "Bwd FLOPs", "count", "FLOPs of the backward ops of this module's forward ops (convolution_backward: grad input and grad weight as asked, each as much as the forward; mm for linear layers).", narrow=False),
    Column("flops_per_s", "FLOP/s", "count", "Forward plus backward FLOPs over forward plus backward time (device time when larger than CPU time).", narrow=False),
    Column("parameters", "Params", "int", "Parameter count (live capture only).", narrow=False),
    Column("output_shape", "Output", "text", "Output shape (live capture only).", narrow=False),
)


# What a row of the explorer's module tree shows (a legend for ?, not a table).
MODULE_TREE_LEGEND = View(
    "module-tree",
    "Module tree rows",
    (
        Column("share", "bar, %", "pct", "The module's cost as a share of all module time. Cost = forward + backward time, on the device where that is larger than on the CPU. Siblings are ordered by it."),
        Column("cost", "time", "us", "That cost, all calls together (the detail pane splits it into forward, backward, device, self)."),
        Column("name", "name", "text", "Class_k (the k-th instance of the class in call order), or the qualified name and class from a live capture."),
        Column("calls", "×N", "int", "Calls of this module instance, when more than one."),
    ),
    "",
    lambda model, options: [],
)


def module_row(node: ModuleNode) -> Row:
    return {
        "path": node.path,
        "qualified_name": node.qualified_name,
        "calls": node.calls,
        "self_cpu_us": node.self_cpu_us,
        "cpu_total_us": node.cpu_total_us,
        "backward_cpu_us": node.backward_cpu_us,
        "device_total_us": node.device_total_us,
        "backward_device_us": node.backward_device_us,
        "cpu_mem_bytes": node.cpu_mem_bytes,
        "flops": node.flops,
        "backward_flops": node.backward_flops,
        "flops_per_s": node.flops_per_s,
        "parameters": node.parameters,
        "output_shape": node.output_shape,
        "_node": node,
    }


def build_module_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    nodes = options.module.walk() if options.module else model.modules.walk()
    return [module_row(node) for node in nodes]


# ------------------------------------------------------------------ kernels

KERNEL_COLUMNS = (
    Column("name", "Kernel", "kernel", "Kernel (or Memcpy / Memset) name, shortened: no return type, namespaces or parameters, and of the template arguments only the functor or op that tells instances apart. The detail pane and exports have the full name."),
    Column("kind", "Kind", "text", "kernel, memcpy or memset.", narrow=False),
    Column("calls", "Calls", "int", "Launches."),
    Column("device_total_us", "Total", "us", "Sum of device durations."),
    Column("avg_us", "Avg", "us", "Mean duration."),
    Column("min_us", "Min", "us", "Shortest launch.", narrow=False),
    Column("max_us", "Max", "us", "Longest launch.", narrow=False),
    Column("grid", "Grid", "text", "Most frequent grid dimensions.", narrow=False),
    Column("block", "Block", "text", "Most frequent block dimensions.", narrow=False),
    Column("occupancy_pct", "Occ %", "pct", "Mean estimated achieved occupancy.", narrow=False),
    Column("launcher", "Launched by", "text", "The operator that launched it most often."),
)


def _attribute_rows(items, columns: tuple[Column, ...]) -> list[Row]:
    """Rows whose column keys are the items' attribute names."""
    return [{**{c.key: getattr(item, c.key) for c in columns}, "_stats": item} for item in items]


def build_kernel_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    return _attribute_rows(model.kernels, KERNEL_COLUMNS)


# ------------------------------------------------------------------ steps

STEP_COLUMNS = (
    Column("name", "Step", "text", "The ProfilerStep#N span (present when a schedule was used)."),
    Column("duration_us", "Duration", "us", "CPU wall time of the step."),
    Column("data_loading_us", "Data load", "us", "Time in enumerate(DataLoader) within the step."),
    Column("kernel_us", "Kernels", "us", "Device time in compute kernels inside the step's device window, whichever step launched them (union of intervals)."),
    Column("memcpy_us", "Memcpy", "us", "Device time in memory copies inside the step's device window.", narrow=False),
    Column("memset_us", "Memset", "us", "Device time in memsets inside the step's device window.", narrow=False),
    Column("communication_us", "Comm", "us", "Device time in communication kernels (NCCL/RCCL) inside the step's device window.", narrow=False),
    Column(
        "device_idle_us", "Dev idle", "us",
        "Device window minus the union of all device activity in it, any step's work included. The window is the "
        "step's GPU annotation, else its CPU span stretched to the end of the device work it launched.",
    ),
    Column("idle_pct", "Idle %", "pct", "Device idle share of the step window."),
)


def build_step_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    return _attribute_rows(model.steps, STEP_COLUMNS)


# ------------------------------------------------------------------ memory

MEMORY_COLUMNS = (
    Column("device", "Device", "text", "Allocator device (CPU, CUDA:0, HIP:0...)."),
    Column("peak_bytes", "Peak", "bytes", "Highest allocated bytes seen."),
    Column("peak_at_us", "At", "us", "When the peak happened, from the trace start."),
    Column("peak_operator", "Operator at peak", "text", "Innermost operator running on the allocating thread at the peak."),
    Column("peak_module", "Module at peak", "text", "Innermost module running then (with_stack traces).", narrow=False),
    Column("allocations", "Allocs", "int", "Allocation events."),
    Column("frees", "Frees", "int", "Free events.", narrow=False),
)


def build_memory_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    rows = []
    origin = model.calls.start_ns[0] if len(model.calls) else 0
    for timeline in model.memory:
        op_row = timeline.peak_operator_row
        module = model.modules.by_frame.get(model.calls.module[op_row]) if op_row >= 0 else None
        rows.append(
            {
                "device": timeline.device,
                "peak_bytes": timeline.peak_bytes,
                "peak_at_us": (timeline.peak_ns - origin) / 1000,
                "peak_operator": model.calls.name(op_row) if op_row >= 0 else "",
                "peak_module": module.path if module else "",
                "allocations": timeline.allocations,
                "frees": timeline.frees,
                "_stats": timeline,
            }
        )
    return rows


VIEWS: dict[str, View] = {
    "ops": View("ops", "Operators", OPERATOR_COLUMNS, "self_cpu_us", build_operator_rows),
    # Modules keep tree order (children by cost) unless a sort is asked for.
    "modules": View("modules", "Modules", MODULE_COLUMNS, "", build_module_rows),
    "kernels": View("kernels", "Kernels", KERNEL_COLUMNS, "device_total_us", build_kernel_rows),
    "steps": View("steps", "Steps", STEP_COLUMNS, "", build_step_rows),  # step order
    "memory": View("memory", "Memory", MEMORY_COLUMNS, "peak_bytes", build_memory_rows),
}


def public_row(row: Row, columns: tuple[Column, ...]) -> Row:
    """The row as exported: the view's column keys only, raw values."""
    return {c.key: row.get(c.key) for c in columns}


# ------------------------------------------------------------------ raw events (drill-down)

CALL_COLUMNS = (
    Column("start_us", "Start", "us", "When the call started, from the first operator of the trace."),
    Column("cpu_total_us", "CPU total", "us", "Start to end of this call."),
    Column("self_cpu_us", "Self CPU", "us", "This call minus its children."),
    Column("device_total_us", "Dev total", "us", "Device time of everything this call launched."),
    Column("cpu_mem_bytes", "CPU Mem", "bytes", "CPU bytes allocated minus freed during the call.", narrow=False),
    Column("flops", "FLOPs", "count", "FLOPs of this call.", narrow=False),
    Column("thread", "Thread", "text", "Thread id.", narrow=False),
    Column("module", "Module", "text", "Innermost module running this call."),
    Column("input_shapes", "Input shapes", "text", "Input Dims of this call.", narrow=False),
)


def build_call_rows(model: TraceModel, rows: tuple[int, ...]) -> list[Row]:
    """One row per call of an operator (its OperatorStats.rows)."""
    from tuiprof.analysis.operators import input_shapes_key

    calls = model.calls
    origin = calls.start_ns[0] if len(calls) else 0
    shapes: dict[bytes, str] = {}
    result = []
    for row in rows:
        node = model.modules.by_frame.get(calls.module[row])
        result.append(
            {
                "start_us": (calls.start_ns[row] - origin) / 1000,
                "cpu_total_us": calls.total_ns[row] / 1000,
                "self_cpu_us": calls.self_ns[row] / 1000,
                "device_total_us": calls.device_total_ns[row] / 1000,
                "cpu_mem_bytes": calls.cpu_mem[row],
                "flops": calls.flops[row],
                "thread": str(calls.tid(row)),
                "module": node.label if node else "",
                "input_shapes": input_shapes_key(calls, row, shapes),
            }
        )
    return result


LAUNCH_COLUMNS = (
    Column("start_us", "Start", "us", "When the kernel started on the device, from the first operator of the trace."),
    Column("duration_us", "Duration", "us", "Device duration of this launch."),
    Column("stream", "Stream", "text", "Device stream."),
    Column("grid", "Grid", "text", "Grid dimensions.", narrow=False),
    Column("block", "Block", "text", "Block dimensions.", narrow=False),
    Column("launcher", "Launched by", "text", "The operator whose call launched it."),
)


def build_launch_rows(model: TraceModel, rows: tuple[int, ...]) -> list[Row]:
    """One row per launch of a kernel (its KernelStats.rows)."""
    activity = model.activity
    origin = model.calls.start_ns[0] if len(model.calls) else 0
    result = []
    for index in rows:
        launcher = activity.launcher[index]
        result.append(
            {
                "start_us": (int(activity.start_ns[index]) - origin) / 1000,
                "duration_us": int(activity.dur_ns[index]) / 1000,
                "stream": activity.text("stream", index),
                "grid": activity.text("grid", index),
                "block": activity.text("block", index),
                "launcher": model.calls.name(launcher) if launcher >= 0 else "",
            }
        )
    return result
