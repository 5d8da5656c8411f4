"""``tuiprof.load(path)``: the read API for scripts and agents.

It answers with what ``tuiprof summary --format json`` prints, as Python
values: ``load(path).table("operators")`` is that command's list of rows, the same
keys and numbers, built by the same code (:func:`tuiprof.report.summary.summary_table`).
The analysis model is there too (``.model``) for what no table holds.

Loads neither torch nor Textual (tests/project/test_layers.py checks).  A trace that
cannot be read raises :class:`tuiprof.errors.TraceError` whose message is the
line ``tuiprof summary`` prints after ``tuiprof:``, raised from here so its
traceback is one frame, not the decoder's.  Any other exception is a bug.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tuiprof.analysis import load_model
from tuiprof.analysis.model import TraceInfo, TraceModel
from tuiprof.errors import TraceError
from tuiprof.report.catalog import view_name
from tuiprof.report.summary import SummaryRequest, summary_table
from tuiprof.report.views import TRACE_VIEWS, Row, public_row


@dataclass(frozen=True)
class LoadedTrace:
    """One analysed trace: its tables as rows, and the model they are built from."""

    model: TraceModel

    @property
    def info(self) -> TraceInfo:
        """What the explorer's header says: source, devices, rank, what was recorded."""
        return self.model.info

    @property
    def views(self) -> tuple[str, ...]:
        """The names :meth:`table` accepts (``summary --view`` of one trace)."""
        return tuple(TRACE_VIEWS)

    def table(
        self,
        view: str = "operators",
        *,
        sort: str | None = None,
        limit: int | None = None,
        group_by_shape: bool = False,
        top_level_only: bool = False,
    ) -> list[Row]:
        """The rows of one view, as ``summary --view VIEW --format json`` prints them.

        Every row is a dict of the view's column keys (every column, raw numbers in
        the unit the key names: ``_us``, ``_bytes``, ``_pct``).  ``sort``: a column key,
        descending (default: the view's order); ``limit``: at most that many rows;
        ``group_by_shape`` / ``top_level_only``: as the ``operators`` options of the same names
        (``ops`` is accepted for ``operators``, as on the command line: report/catalog.py).
        An unknown view or sort key raises :class:`~tuiprof.errors.TraceError`."""
        view = view_name(view)
        if view not in TRACE_VIEWS:
            raise TraceError(f"view {view!r}", "not a view of one trace", f"use one of: {', '.join(TRACE_VIEWS)}")
        request = SummaryRequest(view, sort, limit, group_by_shape, top_level_only, format="json")
        try:
            _, columns, rows = summary_table(self.model, request)
        except TraceError as error:
            raise error.with_traceback(None) from None
        return [public_row(row, columns) for row in rows]


def load(path: str | os.PathLike[str], trace: str | int | None = None) -> LoadedTrace:
    """Read and analyse a profiler trace (``.json``, ``.json.gz``, or a run directory).

    ``trace``: in a run directory, the rank (``1``) or file name to read, as
    ``--trace`` (default: rank 0, or the only trace).  Raises
    :class:`~tuiprof.errors.TraceError` for a path or file tuiprof cannot use, with
    the one-line message the command line prints."""
    try:
        model = load_model(path, None if trace is None else str(trace))
    except TraceError as error:  # the decoder's frames say nothing to a caller
        raise error.with_traceback(None) from None
    return LoadedTrace(model)
