"""The detail pane's text for one row of a view: operator, kernel, step, module.

Plain rich Text built from the model (the explorer shows it as is); names from
the trace are appended as text, never parsed as markup.
"""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from tuiprof.analysis.compiled import describe_kernel, is_region_node
from tuiprof.analysis.detail import operator_detail
from tuiprof.analysis.kernels import KernelStats
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import OUTSIDE_MODULES, ModuleNode
from tuiprof.analysis.operators import OperatorStats
from tuiprof.analysis.ranking import module_share
from tuiprof.analysis.steps import StepStats
from tuiprof.report.compiled_summary import region_lines
from tuiprof.report.names import short_kernel_name
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import format_bytes, format_count, format_us, format_us_or_dash, format_us_short, plural

DETAIL_MODULES = 3  # modules listed on the "in:" line, where the operator spent most time first
DETAIL_KERNELS = 3


UNRECORDED = "--"  # memory of a trace profiled without profile_memory=True: unknown, not 0 B


def _glued(value: str) -> str:
    """``125.70MB`` for ``125.70 MB``: the pane wraps at spaces, and a number must not be
    split from its unit (times are written that way already: ``35.116ms``)."""
    return value.replace(" ", "")


def operator_text(model: TraceModel, stats: OperatorStats) -> Text:
    detail = operator_detail(model, stats)
    text = Text()
    text.append(plain(stats.name, DISPLAY_CHARS), style="bold")
    text.append(f"  {plural(stats.calls, 'call')}")
    if detail.share_of_step_pct is not None:
        # its CPU total per step over the mean step: not the Overview's share of self CPU time
        text.append(f" · CPU total {detail.share_of_step_pct:.1f}% of the mean step")
    if detail.share_of_parent_pct is not None and detail.parents:
        text.append(f" · {detail.share_of_parent_pct:.0f}% of ")
        text.append(plain(detail.parents[0][0], DISPLAY_CHARS))
    text.append("\n")
    _append_computes(text, stats.name)
    text.append(
        f"CPU self {format_us(stats.self_cpu_us)} total {format_us(stats.cpu_total_us)} avg {format_us(stats.cpu_avg_us)}"
    )
    if model.has_device:
        text.append(f" · device self {format_us(stats.self_device_us)} total {format_us(stats.device_total_us)}")
    if not model.info.profile_memory:
        text.append(f" · mem {UNRECORDED}")
    else:
        text.append(f" · mem CPU {_glued(format_bytes(stats.cpu_mem_bytes))}")
        if stats.device_mem_bytes or model.has_device:
            text.append(f" dev {_glued(format_bytes(stats.device_mem_bytes))}")
    if stats.flops:
        text.append(f" · {_glued(format_count(stats.flops))}FLOP")
    text.append("\n")
    if detail.modules:
        text.append("in: ", style="dim")
        text.append(
            ", ".join(
                f"{plain(path, DISPLAY_CHARS)} ({n}{' bwd' if backward else ''})"
                for path, n, backward in detail.modules[:DETAIL_MODULES]
            )
        )
        if detail.module_count > DETAIL_MODULES:
            text.append(f" +{detail.module_count - DETAIL_MODULES} more", style="dim")
        text.append("\n")
    if detail.input_shapes and detail.input_shapes[0][0] not in ("[]", "None"):
        text.append("shapes: ", style="dim")
        text.append(plain(detail.input_shapes[0][0], DISPLAY_CHARS))
        if len(detail.input_shapes) > 1:
            text.append(f" +{len(detail.input_shapes) - 1} more")
        if detail.input_types:
            text.append(f"  ({plain(detail.input_types, DISPLAY_CHARS)})", style="dim")
        text.append("\n")
    for name, launches, us in detail.kernels[:DETAIL_KERNELS]:
        text.append("kernel: ", style="dim")
        text.append(f"{format_us(us)} x{launches} ")
        text.append(short_kernel_name(plain(name, DISPLAY_CHARS)))
        text.append("\n")
    return text


class CappedHead:
    """A detail whose first line (a kernel's demangled signature, hundreds of characters) takes
    at most ``lines`` lines at the width it is drawn in, the last cut with ``…``: at 60x20 the
    name took 4 of the pane's lines and pushed the launches and times out."""

    def __init__(self, text: Text, lines: int = 2) -> None:
        self.text = text
        self.lines = lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        head, *rest = self.text.split("\n", include_separator=False)
        width = options.max_width
        wrapped = [
            head[i : i + width] for i in range(0, max(1, len(head)), width)
        ]  # a name is no prose: folded, not word-wrapped
        if len(wrapped) > self.lines:
            wrapped = wrapped[: self.lines]
            last = wrapped[-1]
            last.truncate(width - 1)
            last.append("…")
        yield from wrapped
        yield from rest


def kernel_text(kernel: KernelStats) -> Text:
    text = Text(plain(kernel.name, 4 * DISPLAY_CHARS), style="bold")
    text.append("\n")
    _append_computes(text, kernel.name)
    text.append(
        f"{kernel.kind} · {plural(kernel.calls, 'launch', 'launches')} · total {format_us(kernel.device_total_us)} · "
        f"avg {format_us(kernel.avg_us)} min {format_us(kernel.min_us)} max {format_us(kernel.max_us)}\n"
    )
    occupancy = f"{kernel.occupancy_pct:.0f}%" if kernel.occupancy_pct is not None else "--"
    text.append(f"grid {kernel.grid or '--'} block {kernel.block or '--'} · occupancy {occupancy} · launched by ")
    text.append(plain(kernel.launcher, DISPLAY_CHARS) if kernel.launcher else "--")
    return text


def _append_computes(text: Text, name: str) -> None:
    """``computes: pointwise: _unsafe_view, mul, silu`` for an Inductor kernel (analysis/compiled.py)."""
    computes = describe_kernel(name)
    if computes:
        text.append("computes: ", style="dim")
        text.append(plain(computes, DISPLAY_CHARS))  # the ops are read out of the kernel's name
        text.append("\n")


def step_text(step: StepStats) -> Text:
    text = Text(f"{plain(step.name, DISPLAY_CHARS)}: {format_us(step.duration_us)}", style="bold")
    text.append(f"  data loading {format_us_or_dash(step.data_loading_us)}\n")
    if step.device_window_us:
        dash = format_us_or_dash
        text.append(
            f"device window {format_us(step.device_window_us)}: kernels {dash(step.kernel_us)} · memcpy {dash(step.memcpy_us)} · memset {dash(step.memset_us)}"
            f" · comm {dash(step.communication_us)} · idle {dash(step.device_idle_us)} ({step.idle_pct:.0f}%)"
        )
    else:
        text.append("CPU-only step: no device activity recorded.")
    return text


def module_text(model: TraceModel, module: ModuleNode) -> Text:
    if module is model.modules.outside:
        return outside_text(model)
    text = Text()
    text.append(plain(module.path, DISPLAY_CHARS), style="bold")
    if module.qualified_name:
        text.append(f"  {plain(module.qualified_name, DISPLAY_CHARS)}", style="cyan")
    text.append(f"  {100 * module_share(model, module):.1f}% of module time\n")
    if is_region_node(module):
        text.append("compiled region: the calls in its spans and the kernels they launched\n", style="dim")
        for line in region_lines(model.compiled_run, module.name) if model.compiled_run else ():
            text.append(f"{plain(line, 2 * DISPLAY_CHARS)}\n")
    text.append(
        f"{plural(module.calls, 'call')} · fwd {format_us_short(module.cpu_total_us)} (self {format_us_short(module.self_cpu_us)})"
    )
    if module.backward_cpu_us:
        text.append(f" · bwd {format_us_short(module.backward_cpu_us)}")
    if model.has_device:
        text.append(f" · device fwd {format_us_short(module.device_total_us)}")
        if module.backward_device_us:
            text.append(f" bwd {format_us_short(module.backward_device_us)}")
    text.append("\nFLOPs ")
    if module.flops or module.backward_flops:
        text.append(f"fwd {_glued(format_count(module.flops))} bwd {_glued(format_count(module.backward_flops))}")
        if module.flops_per_s:
            # over the module's own fwd + bwd time, not the step's (the Overview's rate): it reads higher
            text.append(f" ({_glued(format_count(module.flops_per_s))}FLOP/s over fwd+bwd)")
    else:
        text.append("--")
    text.append(f" · mem {_glued(format_bytes(module.cpu_mem_bytes)) if model.info.profile_memory else UNRECORDED}")
    if module.parameters is not None:
        text.append(f" · params {module.parameters:,} · output {plain(module.output_shape or '--', DISPLAY_CHARS)}")
    for kernel, fused, holders in module.fused_kernels[:FUSED_SHOWN]:
        text.append(f"\nfused kernel {plain(kernel, DISPLAY_CHARS)}: {plain(_listed(fused), 2 * DISPLAY_CHARS)}")
        text.append(f" -> time in {plain(_listed(holders), DISPLAY_CHARS)}")
    if len(module.fused_kernels) > FUSED_SHOWN:
        text.append(f"\n(+{len(module.fused_kernels) - FUSED_SHOWN} more fused kernels)")
    return text


OUTSIDE_OPERATORS = 5  # top calls listed in the (outside modules) row's detail


def outside_text(model: TraceModel) -> Text:
    """The ``(outside modules)`` row: what it holds, its time (per step when there are steps)
    and its costliest top-level calls by name (analysis/outside.py)."""
    outside = model.outside_modules
    text = Text()
    text.append(OUTSIDE_MODULES, style="bold")
    text.append("  no module: calls on the model's threads outside every module and the backward\n")
    calls = model.modules.outside.calls if model.modules.outside else 0
    text.append(f"{plural(calls, 'top-level call')} · CPU {format_us_short(outside.cpu_us)}")
    if model.has_device:
        text.append(f" · device {format_us_short(outside.device_us)}")
    per_step = outside.per_step_cpu_us
    if per_step is not None:
        text.append(f" · per step {format_us_short(per_step)}")
        if model.step_time_us:
            text.append(f" ({100 * per_step / model.step_time_us:.0f}% of the mean step)")
    for op in outside.operators[:OUTSIDE_OPERATORS]:
        text.append("\n")
        text.append(plain(op.name, DISPLAY_CHARS))
        text.append(f" {format_us_short(op.cpu_us)} ({plural(op.calls, 'call')})")
    if len(outside.operators) > OUTSIDE_OPERATORS:
        text.append(f"\n(+{len(outside.operators) - OUTSIDE_OPERATORS} more)")
    return text


FUSED_SHOWN = 4  # kernels fused across modules listed in a module's detail (compiled runs)
NAMES_SHOWN = 5  # modules named per fused kernel


def _listed(names: tuple[str, ...]) -> str:
    """``a, b, c, d, e +15 more``: a fused kernel's modules (one may fuse a whole model's batch norms)."""
    more = len(names) - NAMES_SHOWN
    return ", ".join(names[:NAMES_SHOWN]) + (f" +{more} more" if more > 0 else "")


def rank_text(row: dict, problems: tuple[str, ...]) -> Text:
    """A rank of a run: its verdict, what it spends per step, and the run's problems."""
    text = Text()
    text.append(f"rank {row['rank']}", style="bold")
    text.append(f"  {plain(row['file'], DISPLAY_CHARS)}\n")  # a file name from the run directory (or a sidecar)
    text.append(
        plain(row["straggler_reason"] or "not a straggler"), style="bold red" if row["straggler_reason"] else ""
    )
    if row.get("damaged"):
        text.append(f"\ndamaged file ({plain(row['damaged'])}): this rank's numbers are partial", style="bold yellow")
    text.append(f"\nper step: {format_us_short(row['step_us'])}")
    for key, word in (
        ("compute_us", "compute"),
        ("exposed_communication_us", "exposed comm"),
        ("data_loading_us", "data loading"),
        ("cpu_bound_us", "CPU-bound"),
    ):
        if row.get(key) is not None:
            text.append(f" · {word} {format_us_short(row[key])}")
    for problem in problems:
        text.append(f"\n{plain(problem)}", style="yellow")
    return text


def collective_text(row: dict) -> Text:
    """A collective matched across ranks: who arrived last and how long each rank waited."""
    text = Text()
    text.append(plain(str(row["kind"]), DISPLAY_CHARS), style="bold")
    text.append(f"  group {plain(str(row['group']), DISPLAY_CHARS)}, step {row['step']}, #{row['index']}")
    if row["size_bytes"] is not None:
        text.append(f" · {_glued(format_bytes(row['size_bytes']))}")
    text.append(
        f"\nrank {row['last_rank']} arrived last, {format_us_short(row['skew_us'])} after the first; transfer {format_us_short(row['transfer_us'])}"
    )
    text.append(
        "\nwaits: "
        + "  ".join(
            f"r{rank} {format_us_short(float(wait))}" for rank, wait in (p.split(":") for p in row["waits_us"].split())
        )
    )
    return text
