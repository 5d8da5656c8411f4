"""``tuiprof summary``: one view of the model printed as a table or data."""

from __future__ import annotations

import shutil
import sys
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, replace

from rich.console import Console
from rich.text import Text

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranks import RunSummary
from tuiprof.errors import TraceError
from tuiprof.report.findings import FINDINGS_VIEW, Finding, build_finding_rows
from tuiprof.report.memory_texts import NEEDS_CAPTURE, memory_peak_lines
from tuiprof.report.plain import plain
from tuiprof.report.render import print_notice, print_rich_table, render_rows, stdout_is_terminal
from tuiprof.report.stragglers import straggler_sentence
from tuiprof.report.views import RUN_VIEWS, TRACE_VIEWS, Column, Row, View, ViewOptions, sort_rows


@dataclass(frozen=True)
class SummaryRequest:
    """Which table ``print_summary`` prints, and how (the ``summary`` options)."""

    view: str = "operators"  # a name of report/catalog.py
    sort: str | None = None  # a column key; None: the view's default
    limit: int | None = None
    group_by_shape: bool = False
    top_level_only: bool = False
    format: str = "table"
    wide: bool = False  # on a terminal: every column, however wide (else fitted to its width)


def print_summary(model: TraceModel, request: SummaryRequest, run_findings: Sequence[Finding] = ()) -> int:
    """Print the view the request asks for; diagnostics go to stderr.  ``run_findings``
    (the straggler of the run the trace is a rank of) lead ``--view findings``, as in the Overview."""
    if request.view == FINDINGS_VIEW.name:
        return print_findings(model, request, run_findings)
    if request.view.startswith("memory-") and not model.memory_categories:
        if request.view == "memory-categories":  # what the JSON supports instead: allocations by operator and module
            request = replace(request, view="memory-allocations")
        if request.view in ("memory-allocations", "memory-modules"):
            print_notice(f"tuiprof: {model.memory_categories_problem or NEEDS_CAPTURE}")
    view, columns, rows = summary_table(model, request)
    report_diagnostics(model)
    sort = request.sort or view.default_sort_for(model)
    if view.name.startswith("memory") and request.format not in ("json", "csv"):  # the peak once, above its table
        width = shutil.get_terminal_size().columns if stdout_is_terminal() else 0
        sys.stdout.write(
            "".join(
                f"{wrap_sentence(line, width) if width else line}\n" for line in memory_peak_lines(model, view.name)
            )
        )
    _print_rows(view, rows, columns, request, f"{view.title} - {model.info.trace_name}", sort)
    if view.name == "memory-what-ifs" and request.format not in ("json", "csv"):  # the arithmetic, a sentence a line
        width = shutil.get_terminal_size().columns if stdout_is_terminal() else 0
        sys.stdout.write("".join(f"{wrap_sentence(str(row['how']), width) if width else row['how']}\n" for row in rows))
    return 0


def summary_table(
    model: TraceModel, request: SummaryRequest, run_findings: Sequence[Finding] = ()
) -> tuple[View, tuple[Column, ...], list[Row]]:
    """The view, columns and sorted rows ``summary`` prints for ``request`` (and
    ``tuiprof.load(...).table`` returns, as the JSON format's rows)."""
    if request.view == FINDINGS_VIEW.name:
        view = FINDINGS_VIEW
        rows = _sorted_rows(
            view, build_finding_rows(model, run_findings=run_findings), request.sort or view.default_sort, request.limit
        )
        return view, view.columns, rows
    view = TRACE_VIEWS[request.view]
    options = ViewOptions(group_by_shape=request.group_by_shape, top_level_only=request.top_level_only)
    # Data formats keep every column (stable keys for scripts); text drops empty ones.
    data_format = request.format in ("json", "csv")
    columns = view.visible_columns(options, None if data_format else model)
    rows = _sorted_rows(view, view.build(model, options), request.sort or view.default_sort_for(model), request.limit)
    return view, columns, rows


def print_findings(model: TraceModel, request: SummaryRequest, run_findings: Sequence[Finding] = ()) -> int:
    """``--view findings``: the Overview's findings.  As text, one finding a line,
    ``severity: text``; on a terminal a finding longer than its width wraps under
    its own text (every line fits), on a pipe it stays on one line for grep.
    The data formats (json, csv, markdown) carry id, severity and text."""
    view, _, rows = summary_table(model, request, run_findings)
    report_diagnostics(model)
    if request.format != "table":
        sys.stdout.write(render_rows(rows, view.columns, request.format, f"{view.title} - {model.info.trace_name}"))
    elif stdout_is_terminal():
        console = Console(highlight=False)
        for row in rows:
            prefix = f"{row['severity']}: "
            line = Text(prefix, style="bold yellow" if row["severity"] == "warning" else "dim")
            line.append_text(
                Text("\n" + " " * len(prefix)).join(_wrapped(str(row["text"]), console, console.width - len(prefix)))
            )
            console.print(line, soft_wrap=True)  # wrapped here already, under the text
    else:
        sys.stdout.write("".join(f"{row['severity']}: {plain(str(row['text']))}\n" for row in rows))
    if not rows:
        print_notice("tuiprof: nothing to report for this trace")
    return 0


def _wrapped(text: str, console: Console, width: int) -> list[Text]:
    """``text`` (from a trace: made plain) in lines of at most ``width`` cells, broken
    between words but never inside ``37 %``; a word longer than a line is folded."""
    lines = Text(plain(text).replace(" %", f"{_GLUE}%")).wrap(console, max(width, 10), overflow="fold")
    return [Text(line.plain.rstrip().replace(_GLUE, " ")) for line in lines]


# Stands for the space in "37 %" while wrapping: one cell wide and not whitespace to rich's
# wrapping (a no-break space is).  A private-use character: one in a trace name would print
# as a space, nothing worse.
_GLUE = "\ue000"


def print_run_summary(run: RunSummary, request: SummaryRequest) -> int:
    """A view over every rank of a run (ranks, rank-steps, spread, collectives, collective-types)."""
    view = RUN_VIEWS[request.view]
    data_format = request.format in ("json", "csv")
    columns = view.visible_columns(ViewOptions(), None if data_format else run)
    rows = _sorted_rows(view, view.build(run, ViewOptions()), request.sort or view.default_sort, request.limit)
    for problem in run.problems:  # file names and decoder notes: from the run directory, escaped
        print_notice(f"tuiprof: {plain(problem)}")
    title = f"{view.title} - {run.path} ({len(run.ranks)} of {run.world_size} ranks)"
    _print_rows(view, rows, columns, request, title, request.sort or view.default_sort)
    if view.name == "ranks" and not data_format:  # the spread and the verdict under the table
        spread = RUN_VIEWS["spread"]
        _print_rows(spread, spread.build(run, ViewOptions()), spread.columns, request, spread.title)
        lines = [f"straggler: {straggler_sentence(s)}" for s in run.stragglers().values()] or ["no straggler"]
        if stdout_is_terminal():  # a sentence, wrapped at the terminal's width
            width = shutil.get_terminal_size().columns
            lines = [wrap_sentence(line, width) for line in lines]
        sys.stdout.write("".join(f"{line}\n" for line in lines))
    return 0


def wrap_sentence(line: str, width: int) -> str:
    """``line`` wrapped at ``width``, a number never apart from its unit (``13.6 ms``)."""
    glued = line.replace(" ms", "\0ms")
    return textwrap.fill(glued, width, subsequent_indent="  ", break_on_hyphens=False).replace("\0", " ")


def _sorted_rows(view: View, rows: list[Row], sort_key: str, limit: int | None) -> list[Row]:
    if sort_key and sort_key not in {c.key for c in view.columns}:
        keys = ", ".join(c.key for c in view.columns)
        raise TraceError(f"--sort {sort_key}", f"not a column of the {view.name} view", f"use one of: {keys}")
    if sort_key:
        rows = sort_rows(rows, sort_key, descending=view.column(sort_key).numeric)
    return rows if limit is None else rows[: max(0, limit)]


def _print_rows(view: View, rows: list[Row], columns, request: SummaryRequest, title: str, sort: str = "") -> None:
    """A terminal gets a table fitted to its width (the sorted column kept, the title's trace
    name cut to fit) unless ``--wide``; a pipe every column.  A table with no rows is one
    line on stderr, not an empty header (the data formats keep theirs: scripts read it)."""
    if not rows and request.format == "table":
        print_notice(f"tuiprof: the {view.name} view of this trace is empty")
        return
    if request.format == "table" and stdout_is_terminal():
        print_rich_table(rows, columns, title, keep=sort, wide=request.wide)
    else:
        sys.stdout.write(render_rows(rows, columns, request.format, title))
    if not rows:
        print_notice(f"tuiprof: the {view.name} view of this trace is empty")


def report_diagnostics(model: TraceModel) -> None:
    report = model.report
    source = plain(model.info.source)
    if report.repaired or report.skipped:
        problems = "; ".join(report.problems)
        print_notice(
            f"tuiprof: {source}: repaired {report.repaired} and skipped {report.skipped} malformed events ({problems})"
        )
    elif report.problems:
        print_notice(f"tuiprof: {source}: {'; '.join(report.problems)}")
