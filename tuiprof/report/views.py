"""The tables tuiprof shows: their columns, what each means, and their rows.

One definition serves ``summary`` (table, CSV, JSON, Markdown), the
explorer's tables, its export and its help screen, so a column means the
same everywhere.  Row values are raw numbers in the unit the key names
(``_us``, ``_bytes``); formatting happens only when text is drawn.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import data_value, format_bytes, format_count, format_pct, format_us_or_dash

if TYPE_CHECKING:
    from tuiprof.analysis.kernels import KernelStats
    from tuiprof.analysis.memory_peak import ModuleMemory, PeakAllocation, WhatIf
    from tuiprof.analysis.model import TraceModel
    from tuiprof.analysis.modules import ModuleNode
    from tuiprof.analysis.operators import OperatorStats
    from tuiprof.analysis.ranks import LoadDamage, RunSummary
    from tuiprof.analysis.steps import StepStats

# The registries' names are read by ``tuiprof summary --help`` (report/catalog.py), which loads
# no heavy module (tests/cli/test_capture_cli.py): numpy, msgspec, rich and the analysis layer are
# imported by the functions that use them.

Row = dict[str, object]  # column key -> raw value: what every format prints and the explorer's tables show
Item = TypeVar("Item")


class ItemRow(dict[str, object], Generic[Item]):
    """A row built from one object of the analysis, which it holds, typed, in ``item``: the
    explorer's detail pane, enter and ``T`` read it there (``isinstance(row, OperatorRow)``
    gives ``row.item`` as an OperatorStats).  Each table whose rows the explorer reads an
    object from has its subclass beside its builder; the others' rows are plain.  The object
    is no column: no format prints or exports it (public_row).

    A subclass names its item's class twice: in its base (``ItemRow["OperatorStats"]``: the
    constructor's type; a string, as the analysis classes load with the functions that build
    rows) and as ``item``'s annotation (which ruff reads, and no string in a base class)."""

    __slots__ = ("item",)

    def __init__(self, item: Item, values: dict[str, object]) -> None:
        dict.__init__(self, values)  # not super(): a third less per row, on tables of 100k rows
        self.item = item


@dataclass(frozen=True)
class ViewOptions:
    group_by_shape: bool = False
    top_level_only: bool = False
    module: ModuleNode | None = None


# When a column is worth its place: a test of what the table is built from (a TraceModel,
# or a RunSummary for the run views; None for the data formats) and of the view's options.
# Build one with ``recorded`` or ``toggled`` below, never from a view's name or a key's spelling.
ShownWhen = Callable[[Any, ViewOptions], bool]


def recorded(test: Callable[[Any], bool]) -> ShownWhen:
    """A rule on what the trace (or run) recorded.  The data formats pass no source and
    keep the column: their keys stay the same from trace to trace, for scripts."""
    return lambda source, options: source is None or test(source)


def toggled(test: Callable[[ViewOptions], bool]) -> ShownWhen:
    """A rule on the view's options (the i/t toggles): it holds in every format, as the
    rows only have the column's key when the option is on."""
    return lambda source, options: test(options)


def both(first: ShownWhen, second: ShownWhen) -> ShownWhen:
    return lambda source, options: first(source, options) and second(source, options)


# ------------------------------------------------------------------ the rules, one per fact

HAS_DEVICE_ACTIVITY = recorded(lambda model: model.has_device)  # kernels, memcpys or memsets
# Device memory: a device's allocator events (a CPU-only run records the CPU's only).
HAS_DEVICE_MEMORY = recorded(lambda model: model.has_device or any(not t.is_cpu for t in model.memory))
HAS_INDUCTOR_KERNELS = recorded(lambda model: model.has_inductor_kernels)  # a compiled model's
HAS_BACKWARD = recorded(lambda model: any(n.backward_cpu_us for n in model.modules.roots))  # training, not inference
IS_LIVE_CAPTURE = recorded(
    lambda model: any(n.qualified_name for n in model.modules.walk())
)  # names, parameters, shapes
HAS_MODULE_FRAMES = recorded(lambda model: bool(len(model.modules.by_frame)))  # with_stack=True
GROUPED_BY_SHAPE = toggled(lambda options: options.group_by_shape)
HAS_MEMORY_CATEGORIES = recorded(lambda model: bool(model.memory_categories))  # torch's, saved by a tuiprof capture
RUN_HAS_DEVICE = recorded(lambda run: any(rank.has_device for rank in run.ranks))
RUN_HAS_DAMAGE = recorded(
    lambda run: any(rank.damage is not None for rank in run.ranks)
)  # a truncated or repaired file
DATA_FORMATS_ONLY = recorded(lambda source: False)  # too long for a table: json, csv and detail panes


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    kind: str  # text | kernel (a kernel name, shown short) | us | bytes | count | int | pct | ratio | gbps
    help: str
    narrow: bool = True  # shown at 80 columns
    shown_when: ShownWhen | None = None  # None: always
    wide_when: ShownWhen | None = None  # when this holds, the column is left out at 80 columns (narrow=False)
    spoken: Callable[[str], str] | None = None  # a text value for people (tables), the value itself for data formats
    # Sorted by this column, a narrow table may show this other column in its place (the
    # diff's |Delta| by the signed Delta: the size of a change tells no faster from slower).
    stands_in: str = ""

    def format(self, value: object) -> str:
        if value is None or value == "":
            return "--" if self.kind not in ("text",) else ""
        if self.kind == "us":
            return format_us_or_dash(float(value))  # type: ignore[arg-type]
        if self.kind == "bytes":
            return format_bytes(int(value))  # type: ignore[call-overload]
        if self.kind == "count":
            return format_count(float(value)) if value else "--"  # type: ignore[arg-type]
        if self.kind == "pct":
            return format_pct(float(value))  # type: ignore[arg-type]
        if self.kind == "int":
            return f"{int(value):,}"  # type: ignore[call-overload]
        if self.kind == "kernel":
            from tuiprof.report.names import short_kernel_name

            return short_kernel_name(plain(str(value), DISPLAY_CHARS))
        if self.kind == "ratio":
            return f"{float(value):.2f}x"  # type: ignore[arg-type]
        if self.kind == "gbps":
            return f"{float(value):.2f} GB/s"  # type: ignore[arg-type]
        text = self.spoken(str(value)) if self.spoken is not None else str(value)
        return plain(text, DISPLAY_CHARS)  # text from a trace: control characters escaped, length capped

    @property
    def numeric(self) -> bool:
        return self.kind not in ("text", "kernel")


Source = TypeVar("Source")  # what a view's rows are built from: a TraceModel (TRACE_VIEWS) or a RunSummary (RUN_VIEWS)


@dataclass(frozen=True)
class View(Generic[Source]):
    name: str  # summary --view NAME, and the explorer's view of the same name (report/catalog.py)
    title: str
    columns: tuple[Column, ...]
    default_sort: str
    build: Callable[[Source, ViewOptions], list[Row]]
    device_sort: str = ""  # the default sort instead when the trace has device activity
    walks_calls: bool = False  # building the rows visits every call: off the UI thread on big traces

    def column(self, key: str) -> Column:
        for column in self.columns:
            if column.key == key:
                return column
        raise KeyError(key)

    def visible_columns(self, options: ViewOptions, source: Any = None) -> tuple[Column, ...]:
        """The columns worth showing for ``source`` (the model, or the run of a run view; None:
        a data format, which keeps every column its rows hold): each column's ``shown_when``."""
        shown = tuple(c for c in self.columns if c.shown_when is None or c.shown_when(source, options))
        return tuple(replace(c, narrow=False) if c.wide_when and c.wide_when(source, options) else c for c in shown)

    def default_sort_for(self, model: TraceModel) -> str:
        return self.device_sort if self.device_sort and model.has_device else self.default_sort


MEMORY_KEYS = frozenset({"cpu_mem_bytes", "self_cpu_mem_bytes", "device_mem_bytes", "self_device_mem_bytes"})


def unrecorded_memory(model: TraceModel, rows: list[Row]) -> list[Row]:
    """``rows`` with their memory columns None (``--``, JSON null, an empty CSV cell) when
    the trace recorded no memory (profiled without profile_memory=True): unknown, not 0 B."""
    if not model.info.profile_memory:
        for row in rows:
            for key in MEMORY_KEYS.intersection(row):
                row[key] = None
    return rows


FLOPS_KEYS = frozenset({"flops", "backward_flops", "executed_flops"})


def uncounted_flops(rows: list[Row]) -> list[Row]:
    """``rows`` with a FLOPs count of 0 made None (``--`` on screen, JSON null, an empty CSV
    cell): 0 means no formula covered the work (elementwise ops, an op torch has no formula
    for), an unknown count, as unrecorded memory is, not a measured zero."""
    for row in rows:
        for key in FLOPS_KEYS.intersection(row):
            if not row[key]:
                row[key] = None
    return rows


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

# What an Inductor kernel computes, decoded from its name (analysis/compiled.py); shown only
# in a table of a trace that holds such names (a compiled model's), beside the name.
COMPUTES = Column(
    "computes",
    "Computes",
    "text",
    "What an Inductor kernel computes, read from its name: kind and the aten ops fused in it "
    "(triton_poi_fused_mul_silu_2: pointwise: mul, silu). Empty for other names.",
    narrow=False,
    shown_when=HAS_INDUCTOR_KERNELS,
)

OPERATOR_COLUMNS = (
    Column("name", "Name", "text", "Operator or record_function name, as torch names it."),
    COMPUTES,
    Column("self_cpu_pct", "Self CPU %", "pct", "Self CPU time as a share of all self CPU time.", narrow=False),
    Column(
        "self_cpu_us", "Self CPU", "us", "CPU time in the operator itself, children (ops and Python frames) excluded."
    ),
    Column("cpu_total_pct", "CPU total %", "pct", "CPU total as a share of all self CPU time.", narrow=False),
    Column("cpu_total_us", "CPU total", "us", "Wall time from start to end of every call, children included."),
    Column("cpu_avg_us", "CPU avg", "us", "CPU total divided by calls.", narrow=False),
    Column(
        "self_device_us",
        "Self dev",
        "us",
        "Device time of the kernels, memcpys and memsets this operator launched itself.",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "device_total_us",
        "Dev total",
        "us",
        "Device time of everything launched inside the operator, children included.",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "device_avg_us", "Dev avg", "us", "Device total divided by calls.", narrow=False, shown_when=HAS_DEVICE_ACTIVITY
    ),
    Column("calls", "Calls", "int", "Number of calls (torch merges an only child that has its parent's name)."),
    Column(
        "cpu_mem_bytes",
        "CPU Mem",
        "bytes",
        "CPU bytes allocated minus freed during the calls, children included.",
        narrow=False,
    ),
    Column(
        "self_cpu_mem_bytes",
        "Self CPU Mem",
        "bytes",
        "CPU bytes allocated minus freed by the operator itself.",
        narrow=False,
    ),
    Column(
        "device_mem_bytes",
        "Dev Mem",
        "bytes",
        "Device bytes allocated minus freed during the calls, children included.",
        narrow=False,
        shown_when=HAS_DEVICE_MEMORY,
    ),
    Column(
        "self_device_mem_bytes",
        "Self Dev Mem",
        "bytes",
        "Device bytes allocated minus freed by the operator itself.",
        narrow=False,
        shown_when=HAS_DEVICE_MEMORY,
    ),
    Column(
        "flops",
        "FLOPs",
        "count",
        "Floating-point operations (torch's formulas: 2 per multiply-add) for conv2d, mm, addmm, bmm, baddbmm, mul, add.",
    ),
    Column(
        "flops_per_s",
        "FLOP/s",
        "count",
        "Achieved FLOP/s: FLOPs over device total (CPU total when no device time).",
        narrow=False,
    ),
    Column(
        "executed_flops",
        "FLOPs run",
        "count",
        "Training FLOPs done in these calls, forward and backward (FlopCounterMode's formulas: matmuls and "
        "convolutions, backward included). The outermost call with a formula counts its work (aten::conv2d, "
        "aten::mm, aten::convolution_backward); the calls below it on the path where its time goes (its child "
        "with the most CPU total, level by level while it holds half the time: aten::convolution, aten::mkldnn_convolution) show the same "
        "FLOPs, executed on its behalf. Rows overlap: do not add them up.",
        narrow=False,
    ),
    Column(
        "executed_flops_per_s",
        "Run FLOP/s",
        "count",
        "FLOPs run over device total (CPU total when no device time): the rate where the time is.",
        narrow=False,
    ),
    Column(
        "input_shapes",
        "Input shapes",
        "text",
        "Input Dims of the calls (when grouped by input shape).",
        shown_when=GROUPED_BY_SHAPE,
    ),
)


class OperatorRow(ItemRow["OperatorStats"]):
    """A row of the Operators table (and of the Modules and Memory views' operator tables)."""

    __slots__ = ()
    item: OperatorStats


def build_operator_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    from tuiprof.analysis.compiled import describe_kernel

    table = model.operators(
        group_by_shape=options.group_by_shape, top_level_only=options.top_level_only, module=options.module
    )
    total_self = model.total_self_cpu_us or 1.0
    rows: list[Row] = []
    for stats in table:
        busy_us = stats.device_total_us or stats.cpu_total_us
        row = OperatorRow(
            stats,
            {
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
                "executed_flops_per_s": stats.executed_flops / (busy_us / 1e6)
                if stats.executed_flops and busy_us
                else None,
                "computes": describe_kernel(stats.name),
            },
        )
        if options.group_by_shape:
            row["input_shapes"] = stats.input_shapes
        rows.append(row)
    return uncounted_flops(unrecorded_memory(model, rows))


# ------------------------------------------------------------------ modules

# A live capture's modules keep their qualified names at 80 columns (the explorer's tree names
# them so); the Class_k path stays first: the first column is what a row is, and compiled regions
# and other nodes without a qualified name have only it.
MODULE_COLUMNS = (
    Column(
        "path",
        "Module",
        "text",
        "Path from the root: Class_k per level (k counts instances of a class in call order). The last row, "
        "(outside modules), is the operators on the model's threads outside every module and outside autograd's "
        "backward (data loading, the optimizer, work between backward and step): their calls and time.",
    ),
    Column(
        "qualified_name",
        "Qualified name",
        "text",
        "Attribute path in the model (live capture only), e.g. layer1.0.conv1.",
        shown_when=IS_LIVE_CAPTURE,
    ),
    Column("calls", "Calls", "int", "Forward calls of this module instance."),
    Column("self_cpu_us", "Self CPU", "us", "Forward wall time minus the child modules' forward time."),
    Column("cpu_total_us", "CPU total", "us", "Forward wall time of all calls."),
    Column(
        "backward_cpu_us",
        "Bwd CPU",
        "us",
        "CPU time of the backward ops of this module's forward ops (via autograd sequence numbers).",
        shown_when=HAS_BACKWARD,
    ),
    Column(
        "device_total_us",
        "Dev total",
        "us",
        "Device time of everything the forward launched.",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "backward_device_us",
        "Bwd dev",
        "us",
        "Device time of the backward ops' kernels.",
        narrow=False,
        shown_when=both(HAS_BACKWARD, HAS_DEVICE_ACTIVITY),
    ),
    Column(
        "cpu_mem_bytes",
        "CPU Mem",
        "bytes",
        "Self CPU memory of the operators inside (allocated minus freed).",
        narrow=False,
    ),
    Column(
        "flops",
        "FLOPs",
        "count",
        "Forward FLOPs inside, submodules included (FlopCounterMode's formulas: matmuls and convolutions, 2 per multiply-add; no elementwise ops).",
    ),
    Column(
        "backward_flops",
        "Bwd FLOPs",
        "count",
        "FLOPs of the backward ops of this module's forward ops (convolution_backward: grad input and grad weight as asked, each as much as the forward; mm for linear layers).",
        narrow=False,
    ),
    Column(
        "flops_per_s",
        "FLOP/s",
        "count",
        "Forward plus backward FLOPs over forward plus backward time (device time when larger than CPU time).",
        narrow=False,
    ),
    Column(
        "parameters", "Params", "int", "Parameter count (live capture only).", narrow=False, shown_when=IS_LIVE_CAPTURE
    ),
    Column(
        "output_shape", "Output", "text", "Output shape (live capture only).", narrow=False, shown_when=IS_LIVE_CAPTURE
    ),
)


# What a row of the explorer's module tree shows (a legend for ?, not a table).
MODULE_TREE_LEGEND: View[TraceModel] = View(
    "module-tree",
    "Module tree rows",
    (
        Column(
            "share",
            "bar, %",
            "pct",
            "The module's cost as a share of all module time. Cost = forward + backward time, on the device where that is larger than on the CPU. Siblings are ordered by it. The last row, (outside modules), is no module: no share, its time beside the modules'.",
        ),
        Column(
            "cost",
            "time",
            "us",
            "That cost, all calls together (the detail pane splits it into forward, backward, device, self).",
        ),
        Column(
            "name",
            "name",
            "text",
            "Class_k (the k-th instance of the class in call order), or the qualified name and class from a live capture.",
        ),
        Column("calls", "×N", "int", "Calls of this module instance, when more than one."),
    ),
    "",
    lambda model, options: [],
)


def module_row(node: ModuleNode) -> Row:
    """A module's row: its attributes named as the columns (ModuleNode holds every one)."""
    return _attribute_values(node, MODULE_COLUMNS)


def build_module_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    """Every module, then ``(outside modules)`` (ModuleTree.outside) when there is work outside them."""
    nodes = options.module.walk() if options.module else model.modules.rows()
    return uncounted_flops(unrecorded_memory(model, [module_row(node) for node in nodes]))


# ------------------------------------------------------------------ kernels

KERNEL_COLUMNS = (
    Column(
        "name",
        "Kernel",
        "kernel",
        "Kernel (or Memcpy / Memset) name, shortened: no return type, namespaces or parameters, and of the template arguments only the functor or op that tells instances apart. The detail pane and exports have the full name.",
    ),
    replace(
        COMPUTES, narrow=True
    ),  # at 80 columns in the launcher's place (an Inductor kernel's launcher is named after it)
    Column("kind", "Kind", "text", "kernel, memcpy or memset.", narrow=False),
    Column("calls", "Calls", "int", "Launches."),
    Column("device_total_us", "Total", "us", "Sum of device durations.", shown_when=HAS_DEVICE_ACTIVITY),
    Column("avg_us", "Avg", "us", "Mean duration."),
    Column("min_us", "Min", "us", "Shortest launch.", narrow=False),
    Column("max_us", "Max", "us", "Longest launch.", narrow=False),
    Column("grid", "Grid", "text", "Most frequent grid dimensions.", narrow=False),
    Column("block", "Block", "text", "Most frequent block dimensions.", narrow=False),
    Column("occupancy_pct", "Occ %", "pct", "Mean estimated achieved occupancy.", narrow=False),
    Column(
        "launcher", "Launched by", "text", "The operator that launched it most often.", wide_when=HAS_INDUCTOR_KERNELS
    ),
)


def _attribute_values(item: object, columns: tuple[Column, ...]) -> dict[str, object]:
    """A row's values whose column keys are the item's attribute names."""
    return {c.key: getattr(item, c.key) for c in columns}


class KernelRow(ItemRow["KernelStats"]):
    """A row of the Kernels table."""

    __slots__ = ()
    item: KernelStats


def build_kernel_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    from tuiprof.analysis.compiled import describe_kernel

    columns = tuple(c for c in KERNEL_COLUMNS if c.key != "computes")
    return [
        KernelRow(kernel, {**_attribute_values(kernel, columns), "computes": describe_kernel(kernel.name)})
        for kernel in model.kernels
    ]


# ------------------------------------------------------------------ steps

# Dev idle and Idle % come before Kernels: at 60 columns whether the device waited is the answer
# a step table owes, and it stays (columns are left out from the right).
STEP_COLUMNS = (
    Column("name", "Step", "text", "The ProfilerStep#N span (present when a schedule was used)."),
    Column("duration_us", "Duration", "us", "CPU wall time of the step."),
    Column(
        "device_window_us",
        "Dev window",
        "us",
        "The step as the device saw it: its GPU annotation, else its CPU span, widened to cover all the device "
        "work the step launched (first start to last end). The device columns are measured in it, so they can "
        "exceed the CPU duration.",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "device_idle_us",
        "Dev idle",
        "us",
        "Device window minus the union of all device activity in it, any step's work included. The window is the "
        "step's GPU annotation, else its CPU span, widened to cover all the device work the step launched.",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "idle_pct",
        "Idle %",
        "pct",
        "Dev idle / Dev window: the device idle share, the same everywhere (Overview finding: all steps' idle "
        "over all their windows; Timeline: idle over the device windows in view, never over the time shown).",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "kernel_us",
        "Kernels",
        "us",
        "Device time in compute kernels inside the step's device window, whichever step launched them (union of intervals).",
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column("data_loading_us", "Data load", "us", "Time in enumerate(DataLoader) within the step."),
    Column(
        "memcpy_us",
        "Memcpy",
        "us",
        "Device time in memory copies inside the step's device window.",
        narrow=False,
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "memset_us",
        "Memset",
        "us",
        "Device time in memsets inside the step's device window.",
        narrow=False,
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
    Column(
        "communication_us",
        "Comm",
        "us",
        "Device time in communication kernels (NCCL/RCCL) inside the step's device window.",
        narrow=False,
        shown_when=HAS_DEVICE_ACTIVITY,
    ),
)


class StepRow(ItemRow["StepStats"]):
    """A row of the Steps table."""

    __slots__ = ()
    item: StepStats


def build_step_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    rows: list[Row] = []
    for step in model.steps:
        row = StepRow(step, _attribute_values(step, STEP_COLUMNS))
        if not step.device_window_us:  # a CPU-only step has no device window: its idle share is unknown, not 0 %
            row["idle_pct"] = None
        rows.append(row)
    return rows


# ------------------------------------------------------------------ memory

MEMORY_COLUMNS = (
    Column("device", "Device", "text", "Allocator device (CPU, CUDA:0, HIP:0...)."),
    Column(
        "peak_bytes",
        "Alloc peak",
        "bytes",
        "The allocator peak: the highest Total Allocated of the [memory] events (memory allocated before the trace counts on CUDA, not on CPU; memory-categories' peak counts every tensor torch sees).",
    ),
    Column("peak_at_us", "At", "us", "When the peak happened, from the trace start."),
    Column(
        "peak_operator", "Operator at peak", "text", "Innermost operator running on the allocating thread at the peak."
    ),
    Column(
        "peak_module",
        "Module at peak",
        "text",
        "Innermost module running then (with_stack traces).",
        narrow=False,
        shown_when=HAS_MODULE_FRAMES,
    ),
    Column("allocations", "Allocs", "int", "Allocation events."),
    Column("frees", "Frees", "int", "Free events.", narrow=False),
)


def build_memory_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    rows: list[Row] = []
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
            }
        )
    return rows


MEMORY_OPERATOR_KEYS = (
    "name",
    "self_cpu_mem_bytes",
    "cpu_mem_bytes",
    "self_device_mem_bytes",
    "device_mem_bytes",
    "calls",
)


def memory_operator_columns(options: ViewOptions, model: TraceModel) -> tuple[tuple[Column, ...], str]:
    """The Operators table as the Memory view shows it, and its sort: the memory columns only,
    none dropped at 80 columns (they are what the view is for), a device's self bytes first
    when a device allocated."""
    view = TRACE_VIEWS["operators"]
    shown = {c.key for c in view.visible_columns(options, model)}
    columns = tuple(replace(view.column(key), narrow=True) for key in MEMORY_OPERATOR_KEYS if key in shown)
    return columns, "self_device_mem_bytes" if any(not t.is_cpu for t in model.memory) else "self_cpu_mem_bytes"


# ------------------------------------------------------------------ what fills memory at the peak
# (analysis/memory_peak.py; torch's categories from a tuiprof capture, else the allocator's records)


def category_words(category: str) -> str:
    """A category as people read it (``optimizer state``); data formats keep torch's key (``optimizer_state``)."""
    return category.replace("_", " ")


MEMORY_CATEGORY_COLUMNS = (
    Column(
        "category",
        "Category",
        "text",
        "torch's category (torch.profiler._memory_profiler.Category) in lower case, optimizer_state in data formats and 'optimizer state' in tables; unknown: memory torch could not tie to a tensor.",
        spoken=category_words,
    ),
    Column(
        "bytes_at_peak",
        "At peak",
        "bytes",
        "Bytes of the category live at the peak of the categorised memory (torch's peak: the highest total of its export_memory_timeline).",
    ),
    Column("share", "Share", "pct", "Share of the peak."),
    # The same on every row: a table says them once, above it (report/memory_texts.memory_peak_lines).
    Column(
        "peak_at_us", "Peak at", "us", "When the peak happened, from the trace start.", shown_when=DATA_FORMATS_ONLY
    ),
    Column(
        "step",
        "Step",
        "text",
        "The profiler step and phase (forward, backward, optimizer) the peak falls in.",
        shown_when=DATA_FORMATS_ONLY,
    ),
    Column(
        "device",
        "Device",
        "text",
        "The device whose peak this is (a GPU's before the CPU's).",
        shown_when=DATA_FORMATS_ONLY,
    ),
)
MEMORY_MODULE_COLUMNS = (
    Column(
        "module",
        "Module",
        "text",
        "The module (qualified name from a live capture), indented by depth; its bytes include its submodules'.",
    ),
    Column("total_bytes", "At peak", "bytes", "Bytes live at the peak held by the module and its submodules."),
    *(
        Column(f"{name}_bytes", header, "bytes", help, narrow=narrow, shown_when=HAS_MEMORY_CATEGORIES)
        for name, header, help, narrow in (
            (
                "activation",
                "Activations",
                "Tensors its forward made and kept for backward (to the layer that made them).",
                True,
            ),
            ("parameter", "Params", "Its parameters (named_parameters(recurse=False) of it and its submodules).", True),
            ("gradient", "Grads", "Gradients of its parameters.", True),
            (
                "optimizer_state",
                "Opt state",
                "Optimizer state of its parameters (SGD's momentum, Adam's moments).",
                True,
            ),
            ("input", "Inputs", "Inputs allocated in its forward.", False),
            ("temporary", "Temps", "Temporaries allocated in its forward.", False),
            ("autograd_detail", "Autograd", "Autograd detail allocated in its forward.", False),
            ("unknown", "Unknown", "Memory torch could not tie to a tensor, allocated in its forward.", False),
        )
    ),
    Column(
        "path",
        "Path",
        "text",
        "The module's place in the tree, Class_k per level (in a ResNet: ResNet_0/Sequential_3/BasicBlock_1).",
        narrow=False,
    ),
)
MEMORY_ALLOCATION_COLUMNS = (
    Column("bytes", "Bytes", "bytes", "Bytes live at the peak."),
    Column(
        "category",
        "Category",
        "text",
        "torch's category (empty: the trace has no categories).",
        shown_when=HAS_MEMORY_CATEGORIES,
        spoken=category_words,
    ),
    Column(
        "operator",
        "Operator",
        "text",
        "The outermost :: operator running when it was allocated (aten::conv2d, a backward node).",
    ),
    Column(
        "module",
        "Module",
        "text",
        "Whose it is: a parameter's, gradient's or optimizer state's module; else the module whose forward allocated it.",
    ),
    Column(
        "code",
        "Code",
        "text",
        "The deepest frame of user code (not torch, the standard library or a built-in) in the Python stack it was allocated in (with_stack), as file(line): function without the file's folders (the stack has them).",
        shown_when=HAS_MODULE_FRAMES,
    ),
    Column(
        "count",
        "Allocs",
        "int",
        "Allocations in this row (files without categories: one row per operator, module and stack).",
    ),
    Column(
        "stack",
        "Stack",
        "text",
        "The Python stack it was allocated in, outermost frame first, frames joined by ' > ' (the detail pane has one per line).",
        shown_when=DATA_FORMATS_ONLY,
    ),
)
MEMORY_WHAT_IF_COLUMNS = (
    Column("remedy", "What if", "text", "A standard remedy for running out of memory."),
    Column("saves_bytes", "Saves", "bytes", "Bytes it would take off the peak (checkpointing: at most)."),
    Column("peak_after_bytes", "Peak after", "bytes", "The peak minus the saving."),
    # A sentence: the detail pane, the lines under a summary table, data formats.
    Column(
        "how", "Arithmetic", "text", "Where the saving comes from, and what it costs.", shown_when=DATA_FORMATS_ONLY
    ),
)


def build_memory_category_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    from tuiprof.report.memory_texts import peak_place

    breakdown = model.memory_breakdown
    if breakdown is None or breakdown.memory is None:
        return []
    origin = model.calls.start_ns[0] if len(model.calls) else 0
    peak = breakdown.peak_bytes
    step = peak_place(breakdown).removeprefix("in ")
    return [
        {
            "category": name,
            "bytes_at_peak": size,
            "share": 100 * size / peak if peak else 0.0,
            "peak_at_us": (breakdown.peak_ns - origin) / 1000,
            "step": step,
            "device": breakdown.device,
        }
        for name, size in breakdown.memory.peak_by_category.items()
    ]


class ModuleMemoryRow(ItemRow["ModuleMemory"]):
    """A row of the memory-modules table."""

    __slots__ = ()
    item: ModuleMemory


class AllocationRow(ItemRow["PeakAllocation"]):
    """A row of the memory-allocations table."""

    __slots__ = ()
    item: PeakAllocation


class WhatIfRow(ItemRow["WhatIf"]):
    """A row of the memory-what-ifs table."""

    __slots__ = ()
    item: WhatIf


def build_memory_module_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    from tuiprof.trace.live import CATEGORY_NAMES

    breakdown = model.memory_breakdown
    if breakdown is None:
        return []
    categorised = breakdown.memory is not None
    rows: list[Row] = []
    for module in breakdown.modules:
        row = ModuleMemoryRow(
            module, {"module": "  " * module.depth + module.label, "total_bytes": module.total, "path": module.path}
        )
        for name in CATEGORY_NAMES:
            row[f"{name}_bytes"] = module.bytes.get(name, 0) if categorised else None
        rows.append(row)
    return rows


def build_memory_allocation_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    from tuiprof.analysis.python_stack import user_frame
    from tuiprof.report.memory_texts import STACK_JOINER, short_frame

    breakdown = model.memory_breakdown
    if breakdown is None:
        return []
    return [
        AllocationRow(
            a,
            {
                "bytes": a.bytes,
                "category": a.category,
                "operator": a.operator,
                "module": a.module,
                "code": short_frame(user_frame(a.stack)),
                "count": a.count,
                "stack": STACK_JOINER.join(a.stack),
            },
        )
        for a in breakdown.allocations
    ]


def build_memory_what_if_rows(model: TraceModel, options: ViewOptions) -> list[Row]:
    from tuiprof.report.memory_texts import REMEDIES, what_if_text

    breakdown = model.memory_breakdown
    if breakdown is None:
        return []
    return [
        WhatIfRow(
            w,
            {
                "remedy": REMEDIES[w.remedy],
                "saves_bytes": w.saves_bytes,
                "peak_after_bytes": w.peak_after,
                "how": what_if_text(w),
            },
        )
        for w in breakdown.what_ifs
    ]


# The tables of one trace (summary --view NAME; report/catalog.py has every view name).
TRACE_VIEWS: dict[str, View[TraceModel]] = {
    "operators": View(
        "operators",
        "Operators",
        OPERATOR_COLUMNS,
        "self_cpu_us",
        build_operator_rows,
        device_sort="self_device_us",
        walks_calls=True,
    ),
    # Modules keep tree order (children by cost) unless a sort is asked for.
    "modules": View("modules", "Modules", MODULE_COLUMNS, "", build_module_rows),
    "kernels": View("kernels", "Kernels", KERNEL_COLUMNS, "device_total_us", build_kernel_rows),
    "steps": View("steps", "Steps", STEP_COLUMNS, "", build_step_rows),  # step order
    "memory": View("memory", "Memory", MEMORY_COLUMNS, "peak_bytes", build_memory_rows),
    "memory-categories": View(
        "memory-categories",
        "Memory at the peak by category",
        MEMORY_CATEGORY_COLUMNS,
        "bytes_at_peak",
        build_memory_category_rows,
    ),
    # Tree order (parents first) unless a sort is asked for, as the Modules view.
    "memory-modules": View(
        "memory-modules", "Memory at the peak by module", MEMORY_MODULE_COLUMNS, "", build_memory_module_rows
    ),
    "memory-allocations": View(
        "memory-allocations",
        "Allocations live at the peak",
        MEMORY_ALLOCATION_COLUMNS,
        "bytes",
        build_memory_allocation_rows,
    ),
    "memory-what-ifs": View(
        "memory-what-ifs", "What would lower the peak", MEMORY_WHAT_IF_COLUMNS, "saves_bytes", build_memory_what_if_rows
    ),
}


# ------------------------------------------------------------------ runs (every rank at once)
# Built from a RunSummary (analysis/ranks.py), not a TraceModel: `summary RUN_DIR --view ranks`.

_RANK_STEP_COLUMNS = (
    Column("step_us", "Step", "us", "Mean ProfilerStep time on the CPU (the whole trace when there are no steps)."),
    Column(
        "compute_us",
        "Compute",
        "us",
        "Compute kernels: device time in kernels other than communication (union).",
        shown_when=RUN_HAS_DEVICE,
    ),
    Column(
        "communication_us",
        "Comm",
        "us",
        "Communication: NCCL/RCCL kernels (union); gloo's collective spans on CPU-only runs.",
    ),
    Column(
        "exposed_communication_us",
        "Exposed comm",
        "us",
        "Communication time with no compute kernel running on any stream (the rank waits).",
    ),
    Column("memcpy_us", "Memcpy", "us", "Device time in memory copies.", narrow=False, shown_when=RUN_HAS_DEVICE),
    Column("memset_us", "Memset", "us", "Device time in memsets.", narrow=False, shown_when=RUN_HAS_DEVICE),
    Column(
        "device_idle_us", "Dev idle", "us", "Step window on the device with nothing running.", shown_when=RUN_HAS_DEVICE
    ),
    Column("data_loading_us", "Data load", "us", "Time in enumerate(DataLoader) spans."),
    Column(
        "cpu_bound_us",
        "CPU-bound",
        "us",
        "Device idle while no data loading ran: the device waited for the CPU.",
        narrow=False,
        shown_when=RUN_HAS_DEVICE,
    ),
)
RANK_COLUMNS = (
    Column("rank", "Rank", "int", "The rank (distributedInfo.rank)."),
    *_RANK_STEP_COLUMNS,
    Column(
        "peak_memory_bytes",
        "Peak mem",
        "bytes",
        "Highest allocated bytes on the rank's device (CPU if none).",
        narrow=False,
    ),
    Column("steps", "Steps", "int", "Profiler steps in the rank's trace.", narrow=False),
    Column("last_arrivals", "Last", "int", "Collectives at which this rank arrived last (it held the others up)."),
    Column(
        "straggler",
        "Straggler",
        "text",
        "When this rank holds the others up: the column its extra work per step went to.",
    ),
    Column(
        "straggler_reason",
        "Why",
        "text",
        "The whole reason (the detail pane; data formats only).",
        narrow=False,
        shown_when=DATA_FORMATS_ONLY,
    ),
    Column(
        "damaged",
        "Damaged",
        "text",
        "The rank's file is damaged (truncated, events lost or repaired): its numbers are partial. "
        "Shown when a rank is; the line on stderr (the detail pane) says what was wrong.",
        shown_when=RUN_HAS_DAMAGE,
    ),
    Column(
        "damage",
        "Damage",
        "text",
        "What the load could not read as written (data formats only).",
        narrow=False,
        shown_when=DATA_FORMATS_ONLY,
    ),
    Column("file", "File", "text", "The rank's trace file.", narrow=False, shown_when=DATA_FORMATS_ONLY),
)
RANK_STEP_COLUMNS = (
    Column("rank", "Rank", "int", "The rank."),
    Column("step", "Step", "text", "The ProfilerStep#N span."),
    *_RANK_STEP_COLUMNS,
)
SPREAD_COLUMNS = (
    Column("column", "Column", "text", "A column of the ranks view (per-rank mean per step)."),
    Column("min_us", "Min", "us", "Lowest rank."),
    Column("median_us", "Median", "us", "Median over ranks."),
    Column("max_us", "Max", "us", "Highest rank."),
    Column("max_over_median", "Max/median", "ratio", "How far the highest rank is from the median."),
    Column("max_rank", "Max rank", "int", "The rank with the highest value."),
)
COLLECTIVE_COLUMNS = (
    Column("step", "Step", "int", "Profiler step number (-1: outside every step)."),
    Column("group", "Group", "text", "Process group name (default when the trace records none).", narrow=False),
    Column("index", "#", "int", "Order of this collective in its group and step."),
    Column("kind", "Collective", "text", "all_reduce, all_gather, reduce_scatter, all_to_all, broadcast..."),
    Column("size_bytes", "Size", "bytes", "Message size (In/Out msg nelems x dtype; else the tensor's Input Dims)."),
    Column("ranks", "Ranks", "int", "Ranks that ran it.", narrow=False),
    Column("last_rank", "Last", "int", "The rank that arrived last."),
    Column("skew_us", "Skew", "us", "Arrival skew: last arrival minus first."),
    Column("transfer_us", "Transfer", "us", "Shortest duration across ranks (the last arriver does not wait)."),
    Column("max_wait_us", "Max wait", "us", "Longest wait for the last arrival (last arrival minus the rank's own)."),
    Column("max_wait_rank", "Waits most", "int", "The rank that waited longest.", narrow=False),
    Column("algbw_gbps", "Alg BW", "gbps", "Size / transfer time.", narrow=False),
    Column(
        "busbw_gbps",
        "Bus BW",
        "gbps",
        "Algorithm bandwidth x NCCL's factor: all-reduce 2(n-1)/n, all-gather, reduce-scatter, all-to-all (n-1)/n, broadcast 1.",
    ),
    Column(
        "waits_us",
        "Waits",
        "text",
        "Wait of each rank (data formats only).",
        narrow=False,
        shown_when=DATA_FORMATS_ONLY,
    ),
)
COLLECTIVE_TYPE_COLUMNS = (
    Column("kind", "Collective", "text", "Collective type."),
    Column("size_bytes", "Size", "bytes", "Message size."),
    Column("count", "Count", "int", "Matched collectives of this type and size."),
    Column("transfer_us", "Transfer", "us", "Total transfer time."),
    Column("avg_transfer_us", "Avg transfer", "us", "Mean transfer time.", narrow=False),
    Column("avg_skew_us", "Avg skew", "us", "Mean arrival skew."),
    Column("max_skew_us", "Max skew", "us", "Largest arrival skew.", narrow=False),
    Column("busbw_gbps", "Bus BW", "gbps", "Mean bus bandwidth."),
    Column("last_rank", "Often last", "text", "The rank most often last to arrive, and how often."),
)


def build_rank_rows(run: RunSummary, options: ViewOptions | None = None) -> list[Row]:
    from tuiprof.analysis.ranks import rank_means
    from tuiprof.report.stragglers import straggler_cause, straggler_sentence  # it reads RANK_COLUMNS' headers

    stragglers = run.stragglers()
    last = run.collectives.last_arrivals()
    rows: list[Row] = []
    for summary in run.ranks:
        rows.append(
            {
                "rank": summary.rank,
                **rank_means(summary),
                "peak_memory_bytes": summary.peak_memory_bytes,
                "steps": len(summary.steps),
                "last_arrivals": last.get(summary.rank, 0),
                "straggler": straggler_cause(stragglers[summary.rank]) if summary.rank in stragglers else "",
                "straggler_reason": straggler_sentence(stragglers[summary.rank]) if summary.rank in stragglers else "",
                "damaged": damage_label(summary.damage),
                "damage": "; ".join(summary.damage.problems) if summary.damage else "",
                "file": summary.file,
            }
        )
    return rows


def damage_label(damage: LoadDamage | None) -> str:
    """A damaged rank in a table cell: how its numbers are partial, in two words ("" when intact)."""
    if damage is None:
        return ""
    if damage.truncated:
        return "truncated"
    lost = damage.skipped + damage.left_out
    if lost:
        return f"{lost:,} event{'s' * (lost != 1)} lost"
    return f"{damage.repaired:,} repaired" if damage.repaired else "partial"


def build_rank_step_rows(run: RunSummary, options: ViewOptions | None = None) -> list[Row]:
    import msgspec

    return [
        {"rank": summary.rank, "step": step.name, **msgspec.structs.asdict(step)}
        for summary in run.ranks
        for step in summary.steps
    ]


def build_spread_rows(run: RunSummary, options: ViewOptions | None = None) -> list[Row]:
    from tuiprof.analysis.ranks import spread

    rows = []
    for column, stats in spread(run.ranks).items():
        top = max(run.ranks, key=lambda r: float("-inf") if (mean := r.mean(column)) is None else mean)
        rows.append(
            {
                "column": column,
                "min_us": stats.minimum,
                "median_us": stats.median,
                "max_us": stats.maximum,
                "max_over_median": stats.max_over_median,
                "max_rank": top.rank,
            }
        )
    return rows


def build_collective_rows(run: RunSummary, options: ViewOptions | None = None) -> list[Row]:
    rows = []
    for matched in run.collectives.collectives:
        waits = matched.waits_ns()
        waiter = max(waits, key=waits.__getitem__)
        rows.append(
            {
                "step": matched.step,
                "group": matched.group,
                "index": matched.index,
                "kind": matched.kind,
                "size_bytes": matched.size_bytes,
                "ranks": len(matched.ranks),
                "last_rank": matched.last_rank,
                "skew_us": matched.skew_ns / 1000,
                "transfer_us": matched.transfer_ns / 1000,
                "max_wait_us": waits[waiter] / 1000,
                "max_wait_rank": waiter,
                "algbw_gbps": matched.algbw_gbps,
                "busbw_gbps": matched.busbw_gbps,
                "waits_us": " ".join(f"{rank}:{wait / 1000:g}" for rank, wait in waits.items()),
            }
        )
    return rows


def build_collective_type_rows(run: RunSummary, options: ViewOptions | None = None) -> list[Row]:
    groups: dict[tuple[str, int | None], list] = {}
    for matched in run.collectives.collectives:
        groups.setdefault((matched.kind, matched.size_bytes), []).append(matched)
    rows = []
    for (kind, size), members in groups.items():
        busbw = [m.busbw_gbps for m in members if m.busbw_gbps is not None]
        last = Counter(m.last_rank for m in members if m.skew_ns > 0)
        leader = last.most_common(1)
        rows.append(
            {
                "kind": kind,
                "size_bytes": size,
                "count": len(members),
                "transfer_us": sum(m.transfer_ns for m in members) / 1000,
                "avg_transfer_us": sum(m.transfer_ns for m in members) / 1000 / len(members),
                "avg_skew_us": sum(m.skew_ns for m in members) / 1000 / len(members),
                "max_skew_us": max(m.skew_ns for m in members) / 1000,
                "busbw_gbps": sum(busbw) / len(busbw) if busbw else None,
                "last_rank": f"rank {leader[0][0]} ({leader[0][1]} of {len(members)})" if leader else "",
            }
        )
    return rows


RUN_VIEWS: dict[str, View[RunSummary]] = {
    "ranks": View("ranks", "Ranks", RANK_COLUMNS, "", build_rank_rows),  # rank order
    "rank-steps": View("rank-steps", "Ranks by step", RANK_STEP_COLUMNS, "", build_rank_step_rows),
    "spread": View("spread", "Spread over ranks", SPREAD_COLUMNS, "", build_spread_rows),
    "collectives": View("collectives", "Collectives", COLLECTIVE_COLUMNS, "", build_collective_rows),  # time order
    "collective-types": View(
        "collective-types",
        "Collectives by type and size",
        COLLECTIVE_TYPE_COLUMNS,
        "transfer_us",
        build_collective_type_rows,
    ),
}


def public_row(row: Row, columns: tuple[Column, ...]) -> Row:
    """The row as exported: the view's column keys only, raw values without float noise
    (units.data_value: microseconds to the nanosecond)."""
    return {c.key: data_value(c.kind, row.get(c.key)) for c in columns}


# ------------------------------------------------------------------ raw events (drill-down)

CALL_COLUMNS = (
    Column("start_us", "Start", "us", "When the call started, from the first operator of the trace."),
    Column("cpu_total_us", "CPU total", "us", "Start to end of this call."),
    Column("self_cpu_us", "Self CPU", "us", "This call minus its children."),
    Column("device_total_us", "Dev total", "us", "Device time of everything this call launched."),
    Column("cpu_mem_bytes", "CPU Mem", "bytes", "CPU bytes allocated minus freed during the call.", narrow=False),
    Column("flops", "FLOPs", "count", "FLOPs of this call.", narrow=False),
    Column("thread", "Thread", "text", "Thread id.", narrow=False),
    Column(
        "module",
        "Module",
        "text",
        "Innermost module running this call; for a backward call, the module of its forward op "
        "(matched by autograd sequence number, as the Modules view charges backward time), marked (backward).",
    ),
    Column("input_shapes", "Input shapes", "text", "Input Dims of this call.", narrow=False),
)


def build_call_rows(model: TraceModel, rows: Sequence[int]) -> list[Row]:
    """One row per call of an operator (its OperatorStats.rows)."""
    from tuiprof.analysis.operators import input_shapes_key

    calls = model.calls
    origin = calls.origin_ns
    shapes: dict[bytes, str] = {}
    _, nodes = model.modules.frame_index()
    owners, backward = model.modules.charged(rows)
    result = []
    for row, owner, through_autograd in zip(rows, owners.tolist(), backward.tolist()):
        module = nodes[owner].label if owner >= 0 else ""
        if through_autograd:
            module += " (backward)"
        result.append(
            {
                "start_us": (calls.start_ns[row] - origin) / 1000,
                "cpu_total_us": calls.total_ns[row] / 1000,
                "self_cpu_us": calls.self_ns[row] / 1000,
                "device_total_us": calls.device_total_ns[row] / 1000,
                "cpu_mem_bytes": calls.cpu_mem[row],
                "flops": calls.flops[row],
                "thread": str(calls.tid(row)),
                "module": module,
                "input_shapes": input_shapes_key(calls, row, shapes),
            }
        )
    return uncounted_flops(unrecorded_memory(model, result))


LAUNCH_COLUMNS = (
    Column("start_us", "Start", "us", "When the kernel started on the device, from the first operator of the trace."),
    Column("duration_us", "Duration", "us", "Device duration of this launch."),
    Column("stream", "Stream", "text", "Device stream."),
    Column("grid", "Grid", "text", "Grid dimensions.", narrow=False),
    Column("block", "Block", "text", "Block dimensions.", narrow=False),
    Column("launcher", "Launched by", "text", "The operator whose call launched it."),
)


def build_launch_rows(model: TraceModel, rows: Sequence[int]) -> list[Row]:
    """One row per launch of a kernel (its KernelStats.rows)."""
    activity = model.activity
    origin = model.calls.origin_ns
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
