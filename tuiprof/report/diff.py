"""A :class:`TraceDiff` as text: the verdict in words, then the matched tables
as a plain or rich table, CSV, JSON or Markdown (``tuiprof diff``)."""

from __future__ import annotations

import csv
import io
import math
import sys
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.text import Text

from tuiprof.analysis.diff import (
    ALIGN_ARROW,
    TABLES,
    DiffRow,
    DiffTable,
    TraceDiff,
    Verdict,
    diff_traces,
    load_side,
    side_label,
)
from tuiprof.errors import TraceError
from tuiprof.report.catalog import DIFF_ALL, DIFF_VERDICT, DIFF_VIEWS
from tuiprof.report.names import short_kernel_name
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.render import (
    CELL_CHARS,
    build_rich_table,
    csv_cell,
    json_text,
    layout_table,
    print_layout,
    print_notice,
    render_rows,
    stdout_is_terminal,
)
from tuiprof.report.summary import report_diagnostics
from tuiprof.report.units import data_value, format_bytes, format_us
from tuiprof.report.views import Column, Row
from tuiprof.trace import resolve_trace

# Text formats show this many rows per table unless --limit says otherwise.
TEXT_ROWS = 10
BETTER, WORSE = "green", "red"


@dataclass(frozen=True)
class SignedColumn(Column):
    """A delta: ``+`` on growth, so a reader never has to guess the direction."""

    def format(self, value: object) -> str:
        text = super().format(value)
        return "+" + text if isinstance(value, (int, float)) and value > 0 else text

    def cell_style(self, value: object) -> str | None:
        """Less time or memory is better: green below zero, red above."""
        if not isinstance(value, (int, float)) or value == 0:
            return None
        return BETTER if value < 0 else WORSE


@dataclass(frozen=True)
class KernelNamesColumn(Column):
    """Kernel names shown short, each one of an aligned row's ``a + b → c`` too."""

    def format(self, value: object) -> str:
        if not isinstance(value, str) or ALIGN_ARROW not in value:
            return super().format(value)
        return ALIGN_ARROW.join(
            " + ".join(map(short_kernel_name, side.split(" + "))) for side in value.split(ALIGN_ARROW)
        )


def diff_columns(table: DiffTable) -> tuple[Column, ...]:
    unit = table.unit
    detail = {"shapes": "Input shapes", "launchers": "Launched by", "kernels": "Kind", "steps": "Steps A / B"}
    kernels = table.name in ("kernels", "launchers")
    name_help = "Operator, module path, kernel, step position or device; 'x → y' when aligned."
    return (
        KernelNamesColumn(
            "name", "Kernel", "kernel", name_help + " Kernel names are shortened; exports have them whole."
        )
        if kernels
        else Column("name", "Name", "text", name_help),
        Column(
            "detail",
            detail.get(table.name, "Detail"),
            "text",
            "Input shapes, launching operator, step names, or where an aligned row was aligned.",
        ),
        Column(
            "status",
            "Status",
            "text",
            "same, changed, added (only in B), removed (only in A), aligned (renamed under a common ancestor).",
            narrow=False,
        ),
        Column("a", "A", unit, f"A's {table.metric}."),
        Column("b", "B", unit, f"B's {table.metric}."),
        SignedColumn("delta", "Delta", unit, "B minus A."),
        SignedColumn("delta_pct", "Delta %", "pct", "Delta over A."),
        Column(
            "share_pct",
            "Share",
            "pct",
            "Share of the table's total delta (rows that moved the other way make others exceed 100 %).",
        ),
        Column("calls_a", "Calls A", "count", "Calls (launches, allocations) in A.", narrow=False),
        Column("calls_b", "Calls B", "count", "Calls (launches, allocations) in B.", narrow=False),
        Column(
            "abs_delta",
            "|Delta|",
            unit,
            "Size of the change either way (the default order; on a narrow screen shown by Delta, marked |▼|).",
            narrow=False,
            stands_in="delta",
        ),
    )


def shown_columns(table: DiffTable, rows: list[Row], hidden: tuple[str, ...] = ("abs_delta",)) -> tuple[Column, ...]:
    """The columns to draw: no Detail column when no row has one; text output
    also leaves out |Delta| (its order is the table's order)."""
    hidden = (*hidden, *(() if any(r["detail"] for r in rows) else ("detail",)))
    return tuple(c for c in diff_columns(table) if c.key not in hidden)


# What each number of a diff row is, for data_value: CSV and JSON without float noise.
_ROW_KINDS = {"delta_pct": "pct", "share_pct": "pct", "abs_delta": "us"}


def diff_data_row(row: DiffRow, unit: str) -> Row:
    """``diff_row`` as CSV and JSON write it: times exact to the nanosecond, percentages to
    three decimals (``units.data_value``, the rule of every other export); bytes as they are."""
    value_kind = "us" if unit == "us" else "count"
    return {key: data_value(_ROW_KINDS.get(key, value_kind), value) for key, value in diff_row(row).items()}


def diff_row(row: DiffRow) -> Row:
    return {
        "name": row.name,
        "detail": row.detail,
        "status": row.status,
        "a": row.a,
        "b": row.b,
        "delta": row.delta,
        "delta_pct": row.delta_pct,
        "share_pct": row.share_pct,
        "calls_a": row.calls_a,
        "calls_b": row.calls_b,
        "abs_delta": abs(row.delta),
    }


# ------------------------------------------------------------------ words


# The verdict fits an 80-column line after "verdict: ".
VERDICT_WIDTH = 80 - len("verdict: ")


def verdict_text(verdict: Verdict, width: int = VERDICT_WIDTH) -> str:
    """ "B is 1.23x faster per step (-18.7 %, 3.0 % noise)", led by the batches
    when they differ or are unknown ("batch 16 -> 32: ... per sample",
    "batch unknown: ..."); the step line under it has the times.  Within
    :data:`VERDICT_WIDTH`: the noise figure goes first when it would not fit
    (the step line has each side's spread)."""
    lead = batch_words(verdict)
    lead = f"{lead}: " if lead else ""
    per = _per(verdict)
    if verdict.delta_us == 0:
        return f"{lead}no change: A and B take {format_us(verdict.compared_a_us)} {per}"
    known = verdict.spread_a_pct is not None or verdict.spread_b_pct is not None
    noise = f"{_figure(verdict.noise_pct)} % noise" if known else "noise unknown"
    pct = f"{'+' if verdict.delta_pct > 0 else '-'}{_figure(abs(verdict.delta_pct))} %"
    if verdict.outcome == "no change":
        text, short = (
            f"{lead}no change {per}: B {pct}, within the {noise}",
            f"{lead}no change {per}: B {pct}, within noise",
        )
    else:
        direction = "faster" if verdict.delta_us < 0 else "slower"
        head = f"{lead}B is {_figure(verdict.ratio, 2)}x {direction} {per}"
        text, short = f"{head} ({pct}, {noise})", f"{head} ({pct})"
    return text if len(text) <= width else short


def _figure(value: float, decimals: int = 1) -> str:
    """A figure as short as its size allows: 1.08, 12.3, 123 (decimals below 10 only)."""
    return f"{value:.{decimals}f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def batch_words(verdict: Verdict) -> str:
    """ "batch 16 -> 32" when the batches differ, "batch unknown" (or "batch ? -> 32")
    when a side's cannot be read, "" when both are known and equal."""
    a, b = verdict.batch_a.size, verdict.batch_b.size
    if a is None and b is None:
        return "batch unknown"
    if a == b:
        return ""
    return f"batch {a or '?'} -> {b or '?'}"


def _per(verdict: Verdict) -> str:
    if verdict.basis != "steps":
        return "per window"
    return "per sample" if verdict.per_sample else "per step"


def step_line(verdict: Verdict) -> str:
    if verdict.basis != "steps":
        return (
            f"trace window (a side has no ProfilerStep spans): A {format_us(verdict.median_a_us)}, "
            f"B {format_us(verdict.median_b_us)}"
        )

    def side(median: float, count: int, spread: float | None) -> str:
        spread_text = f", spread {spread:.1f} %" if spread is not None else ""
        return f"{format_us(median)} ({count} step{'s' if count != 1 else ''}{spread_text})"

    return (
        f"median step: A {side(verdict.median_a_us, verdict.steps_a, verdict.spread_a_pct)}, "
        f"B {side(verdict.median_b_us, verdict.steps_b, verdict.spread_b_pct)}"
    )


def sample_line(verdict: Verdict) -> str | None:
    """Per sample, when the verdict compares per sample."""
    if not verdict.per_sample:
        return None
    return (
        f"per sample: A {format_us(verdict.compared_a_us)} (batch {verdict.batch_a.size}), "
        f"B {format_us(verdict.compared_b_us)} (batch {verdict.batch_b.size}), "
        f"{_signed_us(verdict.delta_us)}"
    )


def overlap_line(diff: TraceDiff) -> str | None:
    """The warning that leads the verdict when the two traces share little work."""
    overlap = diff.overlap
    if not overlap.different_programs:
        return None
    return (
        f"these look like different programs: shared operators take {overlap.shared_a_pct:.0f} % of A, "
        f"{overlap.shared_b_pct:.0f} % of B"
    )


def contributor_lines(diff: TraceDiff) -> list[str]:
    ops = diff.table("ops")
    lines = []
    for row in diff.verdict.contributors:
        share = f" ({row.share_pct:.1f} % of the delta)" if row.share_pct is not None else ""
        name = plain(row.name, CELL_CHARS)  # the tables' rule: a 5 MB name is cut at 500 characters
        label = f"{name} [{row.status}]" if row.status != "changed" else name
        where = f", {plain(row.detail, CELL_CHARS)}" if row.status == "aligned" else ""
        lines.append(f"{label}: {_signed_us(row.delta)}{share}{where}")
    return lines if lines else [f"no operator's {ops.metric} changed"]


def coverage_line(diff: TraceDiff) -> str:
    coverage = diff.coverage
    if coverage.covered is None:
        return f"operator deltas not checked against the step delta: {coverage.reason}"
    text = (
        f"operator deltas sum to {_signed_us(coverage.operator_delta_us)}, "
        f"the steps' to {_signed_us(coverage.step_delta_us)}"
    )
    if coverage.covered:
        return text + ": operators cover the steps"
    return text + ": operators do not cover the steps (Python frames, other threads, time outside operators or steps)"


def memory_line(diff: TraceDiff) -> str:
    a, b = diff.peak_a_bytes, diff.peak_b_bytes
    if a is None or b is None:
        return "memory peak: not compared (a side has no memory records)"
    pct = f", {100 * (b - a) / a:+.1f} %" if a else ""
    return f"memory peak: A {format_bytes(a)}, B {format_bytes(b)} ({'+' if b > a else ''}{format_bytes(b - a)}{pct})"


def _signed_us(value: float) -> str:
    return ("+" if value > 0 else "") + format_us(value)


def summary_lines(diff: TraceDiff) -> list[str]:
    """The verdict block every text output starts with (a warning first when
    the traces look like different programs)."""
    warning = overlap_line(diff)
    lines = [warning] if warning else []
    lines += [f"A: {diff.label_a}", f"B: {diff.label_b}", f"verdict: {verdict_text(diff.verdict)}"]
    lines += [line for line in _measure_lines(diff) if line]
    lines.append(contributors_title(diff))
    lines.extend(f"  {line}" for line in contributor_lines(diff))
    if diff.notes:
        lines.append("notes:")
        lines.extend(f"  {note}" for note in diff.notes)
    return [plain(line) for line in lines]  # file names, run directories and notes come from files


def _measure_lines(diff: TraceDiff) -> list[str | None]:
    """The lines under the verdict: steps, per sample, memory, coverage."""
    return [step_line(diff.verdict), sample_line(diff.verdict), memory_line(diff), coverage_line(diff)]


def contributors_title(diff: TraceDiff) -> str:
    return f"biggest contributors (by operator, {diff.table('ops').metric}):"


def gate_refusal(diff: TraceDiff, slower_pct: float | None, memory_pct: float | None) -> str | None:
    """Why a gate cannot judge B at all (the traces look like different programs), or None."""
    gates = [
        name for name, pct in (("--fail-if-slower", slower_pct), ("--fail-if-memory", memory_pct)) if pct is not None
    ]
    if not gates or not diff.overlap.different_programs:
        return None
    return (
        f"{diff.label_b}: {' and '.join(gates)} refused: A and B look like different programs "
        f"(shared operators take {diff.overlap.shared_a_pct:.0f} % of A, {diff.overlap.shared_b_pct:.0f} % of B); "
        "compare two runs of one program"
    )


def gate_failures(diff: TraceDiff, slower_pct: float | None, memory_pct: float | None) -> list[str]:
    """One line per CI gate B fails (empty: B passes)."""
    failures = []
    verdict = diff.verdict
    if slower_pct is not None and diff.slower_than(slower_pct):
        worst = ", ".join(f"{r.name} {_signed_us(r.delta)}" for r in diff.regressions())
        failures.append(
            f"B is {verdict.delta_pct:.1f} % slower {_per(verdict)} than A (over the {slower_pct:g} % gate, "
            f"beyond the {verdict.noise_pct:.1f} % noise); top regressions: {worst or 'none by operator'}"
        )
    if memory_pct is not None and diff.memory_grew_over(memory_pct):
        a, b = diff.peak_a_bytes or 0, diff.peak_b_bytes or 0
        at = diff.table("memory").rows[0] if diff.table("memory").rows else None
        failures.append(
            f"B's memory peak is {100 * (b - a) / a:.1f} % above A's ({format_bytes(a)} -> {format_bytes(b)}, "
            f"over the {memory_pct:g} % gate{f'; most on {at.name}' if at else ''})"
        )
    return failures


def headline(diff: TraceDiff, width: int | None = None) -> Text:
    """The explorer's one-line header: the verdict, after the different-programs
    warning when there is one (a warning that comes second is not read), in ``width``
    cells: the noise figure goes first, then the warning's first words, then whole
    words from the end (``… (-79.2 %, 7…`` cut a number in half at 60 columns)."""
    warnings = (
        ("these look like different programs; ", "different programs; ") if diff.overlap.different_programs else ("",)
    )
    for warning in warnings:
        verdict = verdict_text(diff.verdict, width - len(warning) if width else VERDICT_WIDTH)
        if width is None or len(warning) + len(verdict) <= width:
            break
    else:  # the loop ran with a width: only a break ends it without one
        verdict = cut_words(verdict, (width or VERDICT_WIDTH) - len(warning))
    text = Text()
    text.append(warning, style=f"bold {WORSE}")
    text.append(verdict, style=verdict_style(diff.verdict))
    return text


def cut_words(text: str, width: int) -> str:
    """``text`` in ``width`` cells, cut after a whole word (never inside a number) with ``…``."""
    if len(text) <= width:
        return text
    kept = text[: max(0, width - 1)]
    if " " in kept and not text[len(kept)].isspace():
        kept = kept[: kept.rindex(" ")]
    return kept.rstrip(" ,(:;") + "…"


def verdict_style(verdict: Verdict) -> str:
    return {"faster": f"bold {BETTER}", "slower": f"bold {WORSE}"}.get(verdict.outcome, "bold")


def overview_text(diff: TraceDiff) -> Text:
    """The explorer's Diff overview: the verdict block, coloured by direction."""
    text = Text()
    warning = overlap_line(diff)
    if warning:
        text.append(plain(warning) + "\n", style=f"bold {WORSE}")
    text.append(f"A: {plain(diff.label_a)}\nB: {plain(diff.label_b)}\n\n")
    text.append("verdict: ", style="bold")
    text.append(verdict_text(diff.verdict) + "\n", style=verdict_style(diff.verdict))
    for line in _measure_lines(diff):
        if line:
            text.append(line + "\n")
    text.append(f"\n{contributors_title(diff)}\n", style="bold")
    contributors = diff.verdict.contributors
    for index, line in enumerate(contributor_lines(diff)):
        delta = contributors[index].delta if index < len(contributors) else 0
        text.append(f"  {line}\n", style=WORSE if delta > 0 else BETTER if delta < 0 else "")
    if diff.notes:
        text.append("\nnotes:\n", style="bold")
        for note in diff.notes:
            text.append(f"  {plain(note)}\n")
    return text


def row_detail(table: DiffTable, row: Row) -> Text:
    """The detail pane under a diff table: the row in words."""

    def amount(value: float) -> str:  # bytes are whole: format_bytes takes an int
        return format_bytes(int(value)) if table.unit == "bytes" else format_us(value)

    text = Text()
    text.append(plain(str(row["name"]), DISPLAY_CHARS), style="bold")
    if row["detail"]:
        text.append(f"  {plain(str(row['detail']), DISPLAY_CHARS)}")
    text.append("\n")

    def side(value: object) -> str:
        return amount(value) if isinstance(value, (int, float)) else "absent"

    text.append(f"{table.metric}: A {side(row['a'])}, B {side(row['b'])}, ")
    delta = float(row["delta"])  # type: ignore[arg-type]
    text.append(
        f"delta {'+' if delta > 0 else ''}{amount(delta)}", style=WORSE if delta > 0 else BETTER if delta < 0 else ""
    )
    if row["share_pct"] is not None:
        text.append(f" ({row['share_pct']:.1f} % of the table's delta)")
    text.append(f"\nstatus: {row['status']}; calls A {row['calls_a']:g}, B {row['calls_b']:g}")
    return text


# ------------------------------------------------------------------ formats


def render_diff(
    diff: TraceDiff, fmt: str, views: tuple[str, ...] = TABLES, limit: int | None = None, verdict: bool = True
) -> str:
    """The diff in ``fmt`` (table, markdown, csv, json): the verdict (unless
    ``verdict`` is False) and the ``views`` tables, ``limit`` rows each."""
    tables = [diff.table(name) for name in views]
    if fmt == "json":
        return _json(diff, tables, limit, verdict)
    if fmt == "csv":
        return _csv(tables, limit)
    parts = []
    if verdict:
        lines = summary_lines(diff)
        if fmt == "markdown":  # nested points for the indented lines
            lines = ["## tuiprof diff", ""] + [
                f"  - {line.strip()}" if line.startswith("  ") else f"- {line}" for line in lines
            ]
        parts.append("\n".join(lines) + "\n")
    for table in tables:
        rows = [diff_row(r) for r in table.rows[:limit]]
        title = _title(table, len(rows))
        if fmt == "markdown":
            body = render_rows(rows, shown_columns(table, rows), fmt) if rows else ""
            parts.append(f"### {title}\n\n{body}" if rows else f"### {table.title}\n\n{table.note}\n")
        else:
            parts.append(render_rows(rows, shown_columns(table, rows), fmt, title) if rows else f"{title}\n")
    return "\n".join(parts)


def _title(table: DiffTable, shown: int) -> str:
    more = f", top {shown} of {len(table.rows)}" if shown < len(table.rows) else ""
    note = f" - {table.note}" if table.note else ""
    return f"{table.title}: {table.metric}, by absolute delta{more}{note}"


def print_rich_tables(console: Console, diff: TraceDiff, views: tuple[str, ...], limit: int | None, wide: bool) -> None:
    """Rich tables on a terminal (one per view; a line for a table not compared), each
    fitted to its width unless ``wide`` (report.render.layout_table: the name stays, then Delta)."""
    for name in views:
        table = diff.table(name)
        rows = [diff_row(r) for r in table.rows[:limit]]
        title = _title(table, len(rows))
        if not rows:
            console.print(Text(title))
            continue
        layout = layout_table(rows, shown_columns(table, rows), None if wide else console.width, keep="delta")
        print_layout(console, build_rich_table(rows, layout, title, ascii_rules=False), layout)


def _json(diff: TraceDiff, tables: list[DiffTable], limit: int | None, verdict: bool) -> str:
    document: dict[str, object] = {"a": diff.label_a, "b": diff.label_b}
    if verdict:
        v = diff.verdict
        document["verdict"] = {
            "outcome": v.outcome,
            "text": verdict_text(v),
            "basis": v.basis,
            "median_a_us": data_value("us", v.median_a_us),
            "median_b_us": data_value("us", v.median_b_us),
            "batch_a": v.batch_a.size,
            "batch_b": v.batch_b.size,
            "batch_a_source": v.batch_a.source,
            "batch_b_source": v.batch_b.source,
            "per_sample": v.per_sample,
            "compared_a_us": data_value("us", v.compared_a_us),
            "compared_b_us": data_value("us", v.compared_b_us),
            "delta_us": data_value("us", v.delta_us),
            "delta_pct": data_value("pct", v.delta_pct),
            "ratio": data_value("ratio", v.ratio),
            "steps_a": v.steps_a,
            "steps_b": v.steps_b,
            "spread_a_pct": data_value("pct", v.spread_a_pct),
            "spread_b_pct": data_value("pct", v.spread_b_pct),
            "noise_pct": data_value("pct", v.noise_pct),
            "contributors": [diff_data_row(r, "us") for r in v.contributors],
        }
        document["peak_a_bytes"] = diff.peak_a_bytes
        document["peak_b_bytes"] = diff.peak_b_bytes
        document["coverage"] = {
            "operator_delta_us": data_value("us", diff.coverage.operator_delta_us),
            "step_delta_us": data_value("us", diff.coverage.step_delta_us),
            "covered": diff.coverage.covered,
            "reason": diff.coverage.reason,
        }
        document["overlap"] = {
            "shared_a_pct": data_value("pct", diff.overlap.shared_a_pct),
            "shared_b_pct": data_value("pct", diff.overlap.shared_b_pct),
            "different_programs": diff.overlap.different_programs,
            "text": overlap_line(diff),
        }
        document["notes"] = list(diff.notes)
    document["tables"] = {
        t.name: {
            "title": t.title,
            "metric": t.metric,
            "unit": t.unit,
            "total_a": data_value("us" if t.unit == "us" else "count", t.total_a),
            "total_b": data_value("us" if t.unit == "us" else "count", t.total_b),
            "note": t.note,
            "rows": [diff_data_row(r, t.unit) for r in t.rows[:limit]],
        }
        for t in tables
    }
    return json_text(document)


CSV_KEYS = (
    "table",
    "unit",
    "name",
    "detail",
    "status",
    "a",
    "b",
    "delta",
    "delta_pct",
    "share_pct",
    "calls_a",
    "calls_b",
)


def _csv(tables: list[DiffTable], limit: int | None) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_KEYS)
    for table in tables:
        for row in table.rows[:limit]:
            values = {"table": table.name, "unit": table.unit, **diff_data_row(row, table.unit)}
            writer.writerow([csv_cell(values[k]) for k in CSV_KEYS])  # as every CSV export: no formula, no raw control
    return buffer.getvalue()


# ------------------------------------------------------------------ the command


def say_which_trace(path: str, select: str | None) -> None:
    """For a run directory of several traces: which one is compared, and how to pick others."""
    if not Path(path).is_dir():
        return
    chosen, traces = resolve_trace(path, select)
    if len(traces) > 1:
        rank = f"rank {chosen.rank}, " if chosen.rank is not None else ""
        print_notice(
            f"tuiprof: {plain(path)} holds {len(traces)} traces; comparing {rank}{plain(chosen.name)} "
            "(--trace RANK|NAME for another, --ranks to average them)"
        )


def parse_percent(option: str, text: str | None) -> float | None:
    """``5%`` or ``5`` -> 5.0; anything else (negative, ``inf``, ``1e999%``, NaN) is one line and exit 2."""
    if text is None:
        return None
    try:
        value = float(text.strip().removesuffix("%"))
    except ValueError:
        value = -1.0
    if not 0 <= value < math.inf:
        raise TraceError(f"{option} {text}", "not a percentage", "write it like 5%")
    return value


def print_diff(args: Namespace) -> int:
    """``tuiprof diff A B`` as text on stdout; exit 1 when a gate fails."""
    slower = parse_percent("--fail-if-slower", args.fail_if_slower)
    memory = parse_percent("--fail-if-memory", args.fail_if_memory)
    fmt = args.format or "table"
    if args.ranks is None:
        for path in (args.a, args.b):
            say_which_trace(path, args.trace)
    side_a = load_side(args.a, args.trace, args.ranks)
    side_b = load_side(args.b, args.trace, args.ranks)
    for model in (*side_a, *side_b):
        report_diagnostics(model)
    diff = diff_traces(side_a, side_b, metric=args.metric, label_a=side_label(side_a), label_b=side_label(side_b))
    views = DIFF_VIEWS[args.view]
    show_verdict = args.view in (DIFF_ALL, DIFF_VERDICT)
    limit = args.limit if args.limit is not None else TEXT_ROWS if fmt in ("table", "markdown") else None
    if fmt == "table" and stdout_is_terminal():
        console = Console()
        if show_verdict:
            for line in summary_lines(diff):
                console.print(Text(line))
        print_rich_tables(console, diff, views, limit, args.wide)
    else:
        sys.stdout.write(render_diff(diff, fmt, views, limit, show_verdict))
    refusal = gate_refusal(diff, slower, memory)
    if refusal:
        print_notice(f"tuiprof: {refusal}")
        return 2
    failures = gate_failures(diff, slower, memory)
    for failure in failures:
        print_notice(f"tuiprof: {failure}")
    return 1 if failures else 0
