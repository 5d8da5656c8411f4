"""The Overview page as rich renderables: findings, step time, top modules,
operators and kernels, the memory curve.  The explorer shows it; what is "top"
comes from analysis/ranking.py."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranking import module_breakdown, module_time_us, operator_rank_key, top_operators
from tuiprof.report.compiled_summary import compiled_lines
from tuiprof.report.findings import Finding, findings
from tuiprof.report.memory_chart import MemoryCurve
from tuiprof.report.names import fit_names, short_kernel_names
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.summary import _wrapped  # the findings' one wrapping rule
from tuiprof.report.units import format_count, format_us, format_us_or_dash

OVERVIEW_STEPS = 8
OVERVIEW_TOP = 5


class FittedTable:
    """A table whose text columns give way and whose numbers are never cut: at render
    time the first column gets what the width leaves after every other column's
    widest cell (rich would shrink every column, numbers included)."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.headers: list[tuple[str, bool]] = []  # (header, numeric)
        self.rows: list[list[Text]] = []
        self.indents: list[str] = []  # before each row's first cell, never cut: a part under the row above

    def add_column(self, header: str, numeric: bool = True) -> None:
        self.headers.append((header, numeric))

    def add_row(self, *cells: str | Text, indent: str = "") -> None:
        self.rows.append([cell if isinstance(cell, Text) else Text(cell) for cell in cells])
        self.indents.append(indent)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        widths = [max([len(h)] + [row[i].cell_len for row in self.rows]) for i, (h, _) in enumerate(self.headers)]
        widths[0] = max(
            len(self.headers[0][0]), *(len(pad) + row[0].cell_len for pad, row in zip(self.indents, self.rows))
        )
        gap = 2  # rich's default padding: one space each side, none at the edges
        texts = [i for i, (_, numeric) in enumerate(self.headers) if not numeric]
        spare = options.max_width - sum(widths) - gap * (len(widths) - 1)
        for i in texts:  # the name yields first, then the other text columns
            if spare >= 0:
                break
            floor = MIN_NAME if i == texts[0] else MIN_OTHER_TEXT
            cut = min(max(0, widths[i] - floor), -spare)
            widths[i] -= cut
            spare += cut
        shown = list(range(len(self.headers)))
        numbers = [i for i in shown if self.headers[i][1]]
        while spare < 0 and len(numbers) > 1:  # still too wide: numeric columns go from the right, none is cut
            dropped = numbers.pop()
            shown.remove(dropped)
            spare += widths[dropped] + gap
        table = Table(title=self.title, title_justify="left", box=None, header_style="bold", pad_edge=False)
        for i in shown:
            header, numeric = self.headers[i]
            table.add_column(
                header, justify="right" if numeric else "left", no_wrap=True, overflow="ellipsis", width=widths[i]
            )
        fitted = {
            i: fit_names((row[i].plain for row in self.rows if row[i].cell_len > widths[i]), widths[i])
            for i in texts[1:]
        }
        first: dict[str, dict[str, str]] = {}  # the first column, by indent: cut in what the indent leaves
        for pad in set(self.indents):
            rows = [row for indent, row in zip(self.indents, self.rows) if indent == pad]
            first[pad] = fit_names(
                (row[0].plain for row in rows if len(pad) + row[0].cell_len > widths[0]), widths[0] - len(pad)
            )
        for pad, row in zip(
            self.indents, self.rows
        ):  # names cut by the one rule (report.names), never by rich at their end
            short = {0: first[pad], **fitted}
            cells = [
                Text(short[i].get(row[i].plain, row[i].plain), style=row[i].style) if i in short else row[i]
                for i in shown
            ]
            table.add_row(Text(pad) + cells[0], *cells[1:])
        yield table


MIN_NAME = 16  # the name column's floor before numbers would have to go
# Before each part of the top modules: they are inside the first row (its children's classes,
# or its instances), never peers of it whose shares would add up.
PART_INDENT = "└ "
MIN_OTHER_TEXT = 10


def _table(title: str) -> FittedTable:
    return FittedTable(title)


class Bullet:
    """`` • text`` wrapped at the width it is drawn in, under its first word, by the rule of
    the findings printed by ``summary`` (never between a number and its ``%``: ``(47`` / ``%)``)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        for index, line in enumerate(_wrapped(self.text, console, options.max_width - 3)):
            yield Text(" • " if index == 0 else "   ") + line


def overview(model: TraceModel, where: Callable[[str], str], run_findings: Sequence[Finding] = ()) -> Group:
    """The page; ``run_findings`` (the run's straggler, report/findings.py) go first; each
    finding points where ``where`` says (the explorer: a view and its key)."""
    blocks: list[RenderableType] = []
    found = [*run_findings, *findings(model)]
    if found:
        blocks.append(Text("Findings", style="bold underline"))
        blocks.extend(Bullet(plain(finding.pointed(where), 2 * DISPLAY_CHARS)) for finding in found)
        blocks.append(Text())
    if model.steps:
        blocks += [_steps_table(model), Text()]
    compiled = compiled_lines(model)
    if compiled:
        blocks.append(Text("Compiled", style="bold underline"))
        blocks.extend(Text(f" • {line}") for line in compiled)
        blocks.append(Text())
    if model.modules.roots:
        blocks += [_modules_table(model), Text()]
    blocks.append(_operators_table(model))
    if model.kernels:
        blocks += [Text(), _kernels_table(model)]
    peak = model.peak_memory
    if peak is not None:
        origin = model.calls.origin_ns
        blocks += [Text(), Text(f"{peak.device} memory", style="bold"), MemoryCurve(peak, origin, 3)]
    return Group(*blocks)


def _steps_table(model: TraceModel) -> FittedTable:
    table = _table("Step time")
    headers = ["step", "duration"]
    if model.has_device:  # the device columns are measured in the step's device window
        headers += ["dev window", "kernels", "device idle"]
    headers += ["data load"]
    if model.has_device:
        headers += ["memcpy", "comm"]
    for header in headers:
        table.add_column(header, numeric=header != "step")
    for step in model.steps[:OVERVIEW_STEPS]:
        cells = [step.name, format_us(step.duration_us)]
        if model.has_device:
            idle = f"{step.idle_pct:.0f}%" if step.device_window_us else "--"
            cells += [format_us_or_dash(step.device_window_us), format_us_or_dash(step.kernel_us), idle]
        cells.append(format_us_or_dash(step.data_loading_us))
        if model.has_device:
            cells += [format_us_or_dash(step.memcpy_us), format_us_or_dash(step.communication_us)]
        table.add_row(*cells)
    return table


def _modules_table(model: TraceModel) -> FittedTable:
    table = _table(
        "Top modules (forward + backward)" if any(r.backward_cpu_us for r in model.modules.roots) else "Top modules"
    )
    table.add_column("module", numeric=False)
    backward = any(root.backward_cpu_us for root in model.modules.roots)
    headers = ["share", "fwd", *(["bwd"] if backward else []), *(["device"] if model.has_device else []), "FLOPs"]
    for header in headers:
        table.add_column(header)
    breakdown = module_breakdown(model, OVERVIEW_TOP)
    for index, group in enumerate(breakdown):  # where the time concentrates, then its parts, indented under it
        node, top = group.nodes[0], breakdown[0].nodes
        inside = len(top) == 1 and node.path.startswith(top[0].path + "/")
        if len(group.nodes) > 1:
            name = group.label
        elif inside and not node.qualified_name:  # a part of the module above: named from there
            name = node.path[len(top[0].path) + 1 :]
        else:
            name = node.qualified_name or "/".join(node.path.split("/")[-2:])
        share = f"{100 * group.cost_us / module_time_us(model):.0f}%"  # of all module time, as the Modules view's bars
        cells: list[str | Text] = [
            Text(plain(name, DISPLAY_CHARS)),
            share,
            format_us(group.summed("cpu_total_us")),
            *([format_us(group.summed("backward_cpu_us"))] if backward else []),
        ]
        if model.has_device:
            cells.append(format_us(group.summed("device_total_us") + group.summed("backward_device_us")))
        work = group.summed("flops") + (
            group.summed("backward_flops") if backward else 0
        )  # as the times: forward + backward
        cells.append(format_count(work) if work else "--")
        table.add_row(*cells, indent=PART_INDENT if index else "")
    return table


def _operators_table(model: TraceModel) -> FittedTable:
    table = _table("Top operators")
    table.add_column("operator", numeric=False)
    key = operator_rank_key(model)
    for header in ("self device" if model.has_device else "self CPU", "calls", "FLOPs"):
        table.add_column(header)
    for stats in top_operators(model, OVERVIEW_TOP):
        table.add_row(
            Text(plain(stats.name, DISPLAY_CHARS)),
            format_us(getattr(stats, key)),
            f"{stats.calls:,}",
            format_count(stats.flops) if stats.flops else "--",
        )
    return table


def _kernels_table(model: TraceModel) -> FittedTable:
    table = _table("Top kernels")
    table.add_column("kernel", numeric=False)
    for header in ("total", "calls"):
        table.add_column(header)
    table.add_column("launched by", numeric=False)
    top = model.kernels[:OVERVIEW_TOP]
    short = short_kernel_names(
        plain(kernel.name, DISPLAY_CHARS) for kernel in top
    )  # instances that differ in numbers stay apart
    for kernel in top:
        table.add_row(
            Text(short[plain(kernel.name, DISPLAY_CHARS)]),
            format_us(kernel.device_total_us),
            f"{kernel.calls:,}",
            Text(plain(kernel.launcher, DISPLAY_CHARS)),
        )
    return table
