"""The Overview page as rich renderables: findings, step time, top modules,
operators and kernels, the memory curve.  The explorer shows it; what is "top"
comes from analysis/ranking.py."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranking import operator_rank_key, top_modules, top_operators
from tuiprof.report.findings import findings
from tuiprof.report.memory_chart import MemoryCurve
from tuiprof.report.names import short_kernel_name
from tuiprof.report.units import format_count, format_us, format_us_or_dash

OVERVIEW_STEPS = 8
OVERVIEW_TOP = 5


def _table(title: str) -> Table:
    return Table(title=title, title_justify="left", box=None, header_style="bold", pad_edge=False)


def overview(model: TraceModel) -> Group:
    blocks: list[RenderableType] = []
    found = findings(model)
    if found:
        blocks.append(Text("Findings", style="bold underline"))
        blocks.extend(Text(f" • {finding.text}") for finding in found)
        blocks.append(Text())
    if model.steps:
        blocks += [_steps_table(model), Text()]
    if model.modules.roots:
        blocks += [_modules_table(model), Text()]
    blocks.append(_operators_table(model))
    if model.kernels:
        blocks += [Text(), _kernels_table(model)]
    peak = model.peak_memory
    if peak is not None:
        origin = model.calls.start_ns[0] if len(model.calls) else 0
        blocks += [Text(), Text(f"{peak.device} memory", style="bold"), MemoryCurve(peak, origin, 3)]
    return Group(*blocks)


def _steps_table(model: TraceModel) -> Table:
    table = _table("Step time")
    headers = ["step", "duration", "data load"]
    if model.has_device:
        headers += ["kernels", "memcpy", "comm", "device idle"]
    for header in headers:
        table.add_column(header, justify="left" if header == "step" else "right")
    for step in model.steps[:OVERVIEW_STEPS]:
        cells = [step.name, format_us(step.duration_us), format_us_or_dash(step.data_loading_us)]
        if model.has_device:
            idle = f"{step.idle_pct:.0f}%" if step.device_window_us else "--"
            cells += [format_us_or_dash(step.kernel_us), format_us_or_dash(step.memcpy_us), format_us_or_dash(step.communication_us), idle]
        table.add_row(*cells)
    return table


def _modules_table(model: TraceModel) -> Table:
    table = _table("Top modules (forward + backward)" if any(r.backward_cpu_us for r in model.modules.roots) else "Top modules")
    table.add_column("module", no_wrap=True, overflow="ellipsis")
    backward = any(root.backward_cpu_us for root in model.modules.roots)
    headers = ["fwd", *(["bwd"] if backward else []), *(["device"] if model.has_device else []), "FLOPs"]
    for header in headers:
        table.add_column(header, justify="right", no_wrap=True)
    for node in top_modules(model, OVERVIEW_TOP):
        name = node.qualified_name or "/".join(node.path.split("/")[-2:])
        cells = [Text(name), format_us(node.cpu_total_us), *([format_us(node.backward_cpu_us)] if backward else [])]
        if model.has_device:
            cells.append(format_us(node.device_total_us + node.backward_device_us))
        cells.append(format_count(node.flops) if node.flops else "--")
        table.add_row(*cells)
    return table


def _operators_table(model: TraceModel) -> Table:
    table = _table("Top operators")
    table.add_column("operator", no_wrap=True, overflow="ellipsis")
    key = operator_rank_key(model)
    for header in ("self device" if model.has_device else "self CPU", "calls", "FLOPs"):
        table.add_column(header, justify="right", no_wrap=True)
    for stats in top_operators(model, OVERVIEW_TOP):
        table.add_row(Text(stats.name), format_us(getattr(stats, key)), f"{stats.calls:,}", format_count(stats.flops) if stats.flops else "--")
    return table


def _kernels_table(model: TraceModel) -> Table:
    table = _table("Top kernels")
    table.add_column("kernel", no_wrap=True, overflow="ellipsis", ratio=1)
    for header in ("total", "calls"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("launched by", no_wrap=True, overflow="ellipsis", max_width=28)
    for kernel in model.kernels[:OVERVIEW_TOP]:
        table.add_row(Text(short_kernel_name(kernel.name)), format_us(kernel.device_total_us), f"{kernel.calls:,}", Text(kernel.launcher))
    return table
