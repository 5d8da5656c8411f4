"""Texts and tables of a watch folder: ``summary DIR --view watch``, the step-time chart,
and a capture compared with the healthy one (the watch explorer draws these)."""

from __future__ import annotations

import shutil
import sys
import textwrap
from dataclasses import replace

from rich.text import Text

from tuiprof.analysis.watch import CaptureComparison, SlowRule, WatchSummary, step_chart
from tuiprof.report.catalog import WATCH
from tuiprof.report.diff import WORSE, headline, overview_text
from tuiprof.report.plain import plain
from tuiprof.report.render import print_rich_table, render_rows, stdout_is_terminal
from tuiprof.report.stragglers import straggler_sentence
from tuiprof.report.units import format_us
from tuiprof.report.views import Column, Row, View, ViewOptions
from tuiprof.trace.watch import History

TRACE_SUFFIX = ".pt.trace.json.gz"
WATCH_COLUMNS = (
    Column(
        "trigger", "Trigger", "text", "Why it was captured: healthy (once, after the warm-up), slow, demand, every."
    ),
    Column("first_step", "First", "int", "Its first step (ProfilerStep#N in the trace)."),
    Column("last_step", "Last", "int", "Its last step."),
    Column(
        "slow_from",
        "Slow from",
        "int",
        "A slow capture: the first slow step of the slowdown it was triggered by (its trigger came later: "
        "the rule waits until the slowdown holds).",
        narrow=False,
    ),
    Column(
        "median_step_us", "Median step", "us", "Median wall time of its steps (profiled) in the history.", narrow=False
    ),
    Column(
        "median_wait_us",
        "CPU wait",
        "us",
        "Median time per step its thread waited for a CPU (another process ran; Linux only).",
        narrow=False,
    ),
    Column(
        "vs_healthy",
        "x healthy",
        "ratio",
        "Its median step over the healthy capture's (profiled too: like with like), both without their CPU wait.",
    ),
    Column(
        "verdict",
        "Verdict",
        "text",
        "slower: over the slow rule's RATIO x the healthy capture's median; not slower: a slow one was noise "
        "that had passed (it started no cooldown).",
    ),
    Column("median_data_us", "Data load", "us", "Median time in DataLoader.__next__ per step.", narrow=False),
    Column(
        "path",
        "Path",
        "text",
        "The capture's trace file (tuiprof open PATH); tables show its name without .pt.trace.json.gz.",
    ),
    Column("dropped", "Dropped", "text", "Why it was deleted to stay within the limits (empty: kept).", narrow=False),
)
CHART_MARKS = {"H": "green", "S": WORSE, "D": "cyan", "E": "yellow"}
BARS = " ▁▂▃▄▅▆▇█"


def _us(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e6


def watch_rows(summary: WatchSummary, with_dropped: bool, full_paths: bool = True) -> list[Row]:
    """One row per capture, in the order they were written (dropped ones only when asked);
    ``full_paths=False``: the file's name without the trace suffix (what a table's cell fits)."""
    rows = []
    for item in summary.captures:
        capture = item.capture
        if capture.dropped is not None and not with_dropped:
            continue
        rows.append(
            {
                "trigger": capture.trigger,
                "first_step": capture.first_step,
                "last_step": capture.last_step,
                "slow_from": item.first_slow,
                "median_step_us": _us(item.median_step_s),
                "median_wait_us": _us(item.median_wait_s),
                "vs_healthy": item.ratio,
                "verdict": item.verdict or "",
                "median_data_us": _us(item.median_data_s),
                "path": str(summary.history.directory / capture.path) if full_paths else capture_label(capture.path),
                "dropped": capture.dropped or "",
            }
        )
    return rows


def status_words(history: History) -> str:
    return history.end_status or "running (or killed without a word)"


def header_lines(summary: WatchSummary) -> list[str]:
    """What the job is and how it went: the lines above the captures."""
    history = summary.history
    steps = len(history.steps)
    median = f"; median step {format_us(summary.median_step_s * 1e6)} unprofiled" if summary.median_step_s else ""
    if median and summary.median_wait_s:
        median += f", median wait for a CPU {format_us(summary.median_wait_s * 1e6)} (other processes' load)"
    lines = [f"{plain(history.what)}: {steps} step{'' if steps == 1 else 's'}, {status_words(history)}{median}"]
    if history.settings:  # checked numbers (trace/watch.py): nothing from the file reaches the terminal as is
        rule = SlowRule.of_settings(history.settings)
        words = (
            rule.describe()
            if history.version > 1
            else f"{rule.held} steps in a row over {rule.ratio:g}x the median of the last {rule.window}, "
            f"after {rule.warmup} warm-up steps"  # version 1's rule, in its words
        )
        lines.append(f"slow rule: {words}")
    lines += [f"failure at step {f.step}: {plain(f.what)}" for f in history.failures]
    noise = summary.not_slower
    if noise:
        spans = ", ".join(f"{c.capture.first_step}-{c.capture.last_step}" for c in noise)
        lines.append(
            f"{len(noise)} slow capture{'' if len(noise) == 1 else 's'} not slower than the healthy one "
            f"(steps {spans}): noise that passed the rule, no cooldown after {'it' if len(noise) == 1 else 'them'}"
        )
    dropped = sum(c.capture.dropped is not None for c in summary.captures)
    if dropped:
        lines.append(
            f"{dropped} capture{'' if dropped == 1 else 's'} deleted to stay within the limits or taken again "
            "(--format json lists them)"
        )
    if not summary.captures:
        lines.append("no capture yet")
    return lines


def print_watch_summary(summary: WatchSummary, fmt: str, limit: int | None, wide: bool = False) -> int:
    """``summary DIR --view watch``: the job's line, then one row per kept capture (json/csv: every
    capture).  On a terminal the table fits its width (render's rule: the medians go first, the
    path stays) unless ``wide``."""
    data_format = fmt in ("json", "csv")
    rows = watch_rows(summary, with_dropped=data_format, full_paths=fmt != "table")
    rows = rows if limit is None else rows[: max(0, limit)]
    if data_format:
        sys.stdout.write(render_rows(rows, WATCH_COLUMNS, fmt))
        return 0
    width = shutil.get_terminal_size().columns if stdout_is_terminal() else 1000
    for line in header_lines(summary):
        sys.stdout.write(textwrap.fill(line, max(20, width), subsequent_indent="  ", break_on_hyphens=False) + "\n")
    columns = tuple(c for c in WATCH_COLUMNS if c.key != "dropped")
    title = f"captures in {summary.history.directory}/ (NAME{TRACE_SUFFIX})" if fmt == "table" else ""
    if fmt == "table" and stdout_is_terminal():
        print_rich_table(rows, columns, plain(title), keep="path", wide=wide)
    else:
        sys.stdout.write(render_rows(rows, columns, fmt, title))
    return 0


def capture_label(path: str) -> str:
    """A capture's file name without the common trace suffix (what fits a list's cell)."""
    name = path.rsplit("/", 1)[-1]
    return name.removesuffix(TRACE_SUFFIX)


def _kept_rows(summary: WatchSummary, options: ViewOptions) -> list[Row]:
    return watch_rows(summary, with_dropped=False)


# The watch app's list: the kept captures, each path shown as its name (exported whole).
WATCH_LIST: View[WatchSummary] = View(
    WATCH,
    "Captures",
    tuple(replace(c, spoken=capture_label) if c.key == "path" else c for c in WATCH_COLUMNS if c.key != "dropped"),
    "",  # in the order they were taken
    _kept_rows,
)


# ------------------------------------------------------------------ the chart


def chart_text(history: History, width: int, height: int = 8) -> Text:
    """The step-time history as bars (the median of each column's unprofiled steps; its data
    loading in blue at the foot), trigger letters under their column, and the scale.
    A column whose steps were all profiled is a dot (its times are the profiler's)."""
    label_width = 10
    columns = step_chart(history, max(1, width - label_width))
    text = Text()
    if not columns:
        return Text("no steps yet")
    # The scale leaves out the warm-up (the first step holds imports and setup: seconds), whose
    # columns are drawn clipped at the top.
    warmup = history.settings.get("warmup_steps", 0)  # a whole number: the reader checked it
    judged = [c.wall_s for c in columns if c.wall_s is not None and c.first_step > warmup]
    top = max(judged or [c.wall_s for c in columns if c.wall_s is not None] or [0.0]) or 1e-9
    cells = height * 8
    for row in range(height, 0, -1):
        label = format_us(top * 1e6) if row == height else format_us(top * 1e6 / 2) if row == (height + 1) // 2 else ""
        text.append(f"{label:>{label_width - 1}} ")
        for column in columns:
            text.append(*_cell(column.wall_s, column.data_s, top, cells, row))
        text.append("\n")
    text.append(" " * label_width)
    for column in columns:
        mark = column.marks[:1]
        text.append(mark or " ", style=f"bold {CHART_MARKS.get(mark, '')}".strip())
    text.append("\n")
    first, last = f"step {columns[0].first_step}", f"step {columns[-1].last_step}"
    gap = max(1, len(columns) - len(first) - len(last))
    text.append(" " * label_width + first + " " * gap + last + "\n", style="dim")
    text.append("H healthy  S slow  D demand  E every", style="dim")
    return text


def _cell(wall_s: float | None, data_s: float | None, top: float, cells: int, row: int) -> tuple[str, str]:
    """The character of one chart cell (``row`` 1 is the foot) and its style."""
    if wall_s is None:
        return ("·", "dim") if row == 1 else (" ", "")
    filled = round(min(wall_s, top) / top * cells)
    data = round(min(data_s or 0.0, wall_s) / top * cells)
    below = (row - 1) * 8
    eighths = max(0, min(8, filled - below))
    style = "blue" if data > below else ""
    return BARS[eighths], style


# ------------------------------------------------------------------ a capture against the healthy one


def part_lines(comparison: CaptureComparison) -> list[str]:
    """Where the step time went, the part that grew most first (in the Steps view's terms)."""
    lines = []
    for part in comparison.parts:
        sign = "+" if part.delta_us >= 0 else ""
        lines.append(
            f"{part.part}: {sign}{format_us(part.delta_us)} per step "
            f"(median {format_us(part.healthy_us)} -> {format_us(part.other_us)})"
        )
    return lines


def comparison_text(comparison: CaptureComparison) -> Text:
    """The verdict first, then where the step time went, then the operator diff's overview."""
    text = Text()
    text.append_text(headline(comparison.diff))
    for straggler in comparison.stragglers.values():  # under torchrun: the rank the others wait for, first
        text.append(f"\nstraggler: {plain(straggler_sentence(straggler))}", style=f"bold {WORSE}")
    ranks = " (rank 0)" if comparison.of_rank_0 else ""
    text.append(f"\n\nwhere the step time went{ranks} (median per step, healthy -> this capture):\n", style="bold")
    for index, line in enumerate(part_lines(comparison)):
        first = index == 0 and comparison.parts[0].delta_us > 0 and not comparison.stragglers
        text.append(f"  {line}\n", style=f"bold {WORSE}" if first else "")
    text.append("\n")
    text.append_text(overview_text(comparison.diff))
    return text
