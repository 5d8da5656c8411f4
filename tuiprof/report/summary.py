"""``tuiprof summary``: one view of the model printed as a table or data."""

from __future__ import annotations

import sys
from dataclasses import dataclass

from tuiprof.analysis.model import TraceModel
from tuiprof.errors import TraceError
from tuiprof.report.render import print_rich_table, render_rows, stdout_is_terminal
from tuiprof.report.views import VIEWS, ViewOptions, sort_rows


@dataclass(frozen=True)
class SummaryRequest:
    """Which table ``print_summary`` prints, and how (the ``summary`` options)."""

    view: str = "ops"
    sort: str | None = None  # a column key; None: the view's default
    limit: int | None = None
    group_by_shape: bool = False
    top_level_only: bool = False
    format: str = "table"


def print_summary(model: TraceModel, request: SummaryRequest) -> int:
    """Print the view the request asks for; diagnostics go to stderr."""
    view = VIEWS[request.view]
    options = ViewOptions(group_by_shape=request.group_by_shape, top_level_only=request.top_level_only)
    # Data formats keep every column (stable keys for scripts); text drops empty ones.
    data_format = request.format in ("json", "csv")
    columns = view.visible_columns(options, None if data_format else model)
    sort_key = request.sort or view.default_sort_for(model)
    if sort_key and sort_key not in {c.key for c in view.columns}:
        keys = ", ".join(c.key for c in view.columns)
        raise TraceError(f"--sort {sort_key}", f"not a column of the {view.name} view", f"use one of: {keys}")
    rows = view.build(model, options)
    if sort_key:
        rows = sort_rows(rows, sort_key, descending=view.column(sort_key).numeric)
    if request.limit is not None:
        rows = rows[: max(0, request.limit)]
    report_diagnostics(model)
    title = f"{view.title} - {model.info.trace_name}"
    if request.format == "table" and stdout_is_terminal():
        print_rich_table(rows, columns, title)
    else:
        sys.stdout.write(render_rows(rows, columns, request.format, title))
    if not rows:
        print(f"tuiprof: the {view.name} view of this trace is empty", file=sys.stderr)
    return 0


def report_diagnostics(model: TraceModel) -> None:
    report = model.report
    if report.repaired or report.skipped:
        problems = "; ".join(report.problems)
        print(
            f"tuiprof: {model.info.source}: repaired {report.repaired} and skipped {report.skipped} malformed events ({problems})",
            file=sys.stderr,
        )
    elif report.problems:
        print(f"tuiprof: {model.info.source}: {'; '.join(report.problems)}", file=sys.stderr)
