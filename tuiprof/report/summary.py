"""``tuiprof summary``: one view of the model printed as a table or data."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranks import RunSummary
from tuiprof.errors import TraceError
from tuiprof.report.plain import plain
from tuiprof.report.render import print_rich_table, render_rows, stdout_is_terminal
from tuiprof.report.views import RUN_VIEWS, VIEWS, Row, View, ViewOptions, sort_rows


@dataclass(frozen=True)
class SummaryRequest:
    """Which table ``print_summary`` prints, and how (the ``summary`` options)."""

    view: str = "ops"
    sort: str | None = None  # a column key; None: the view's default
    limit: int | None = None
    group_by_shape: bool = False
    top_level_only: bool = False
    format: str = "table"
    wide: bool = False  # on a terminal: every column, however wide (else fitted to its width)


def print_summary(model: TraceModel, request: SummaryRequest) -> int:
    """Print the view the request asks for; diagnostics go to stderr."""
    view = VIEWS[request.view]
    options = ViewOptions(group_by_shape=request.group_by_shape, top_level_only=request.top_level_only)
    # Data formats keep every column (stable keys for scripts); text drops empty ones.
    data_format = request.format in ("json", "csv")
    columns = view.visible_columns(options, None if data_format else model)
    rows = _sorted_rows(view, view.build(model, options), request.sort or view.default_sort_for(model), request.limit)
    report_diagnostics(model)
    sort = request.sort or view.default_sort_for(model)
    _print_rows(view, rows, columns, request, f"{view.title} - {model.info.trace_name}", sort)
    return 0


def print_run_summary(run: RunSummary, request: SummaryRequest) -> int:
    """A view over every rank of a run (ranks, rank-steps, spread, collectives, collective-types)."""
    view = RUN_VIEWS[request.view]
    data_format = request.format in ("json", "csv")
    columns = tuple(c for c in view.columns if data_format or c.key not in ("waits_us", "file"))
    rows = _sorted_rows(view, view.build(run), request.sort or view.default_sort, request.limit)
    for problem in run.problems:
        print(f"tuiprof: {problem}", file=sys.stderr)
    title = f"{view.title} - {run.path} ({len(run.ranks)} of {run.world_size} ranks)"
    _print_rows(view, rows, columns, request, title, request.sort or view.default_sort)
    if view.name == "ranks" and not data_format:  # the spread and the verdict under the table
        spread = RUN_VIEWS["spread"]
        _print_rows(spread, spread.build(run), spread.columns, request, spread.title)
        stragglers = run.stragglers()
        sys.stdout.write("".join(f"straggler: {text}\n" for text in stragglers.values()) or "no straggler\n")
    return 0


def _sorted_rows(view: View, rows: list[Row], sort_key: str, limit: int | None) -> list[Row]:
    if sort_key and sort_key not in {c.key for c in view.columns}:
        keys = ", ".join(c.key for c in view.columns)
        raise TraceError(f"--sort {sort_key}", f"not a column of the {view.name} view", f"use one of: {keys}")
    if sort_key:
        rows = sort_rows(rows, sort_key, descending=view.column(sort_key).numeric)
    return rows if limit is None else rows[: max(0, limit)]


def _print_rows(view: View, rows: list[Row], columns, request: SummaryRequest, title: str, sort: str = "") -> None:
    """A terminal gets a table fitted to its width (the sorted column kept) unless ``--wide``;
    a pipe every column."""
    if request.format == "table" and stdout_is_terminal():
        print_rich_table(rows, columns, title, keep=sort, wide=request.wide)
    else:
        sys.stdout.write(render_rows(rows, columns, request.format, title))
    if not rows:
        print(f"tuiprof: the {view.name} view of this trace is empty", file=sys.stderr)


def report_diagnostics(model: TraceModel) -> None:
    report = model.report
    source = plain(model.info.source)
    if report.repaired or report.skipped:
        problems = "; ".join(report.problems)
        print(
            f"tuiprof: {source}: repaired {report.repaired} and skipped {report.skipped} malformed events ({problems})",
            file=sys.stderr,
        )
    elif report.problems:
        print(f"tuiprof: {source}: {'; '.join(report.problems)}", file=sys.stderr)
