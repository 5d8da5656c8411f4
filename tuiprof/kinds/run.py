"""A run directory: the traces of one run, one per rank (``tensorboard_trace_handler``'s output,
``tuiprof run`` under torchrun).

The views of one trace show one rank (``--trace RANK|NAME``, else the lowest); the run views
(``--view ranks`` and the others of report/views.py ``RUN_VIEWS``) show every rank at once.
"""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path

from tuiprof.kinds import trace
from tuiprof.kinds.base import DIFF, EXPLORER, READING, SUMMARY, TIMELINE, Kind
from tuiprof.report.catalog import DIFF_VIEWS, is_run_view, trace_view_names
from tuiprof.report.views import RUN_VIEWS


def views() -> tuple[str, ...]:
    return (*trace_view_names(), *RUN_VIEWS)


def summary(path: str, args: Namespace) -> int:
    """A run view: every rank summarised (``--cluster``: on Dask); any other: the chosen trace's."""
    if not is_run_view(args.view):
        return trace.summary(path, args)
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.report.summary import print_run_summary
    from tuiprof.trace.run import open_run

    return print_run_summary(summarise_run(open_run(path), cluster=args.cluster), trace.request(args))


def _is_directory(path: str) -> bool:
    return path != "" and Path(path).is_dir()


KIND = Kind(
    name="run",
    title="a run directory",
    help="a run directory (a trace per rank)",
    detect=_is_directory,
    options={
        SUMMARY: (*READING, *trace.TABLE_OPTIONS, "trace", "cluster"),
        EXPLORER: (*READING, "trace"),
        DIFF: (*READING, *trace.DIFF_OPTIONS, "trace", "ranks"),
        TIMELINE: (*READING, *trace.TIMELINE_OPTIONS, "trace"),
    },
    summary=summary,
    explorer=trace.explorer,
    diff=trace.diff,  # the same function as a trace file's: a trace and a run directory compare
    timeline=trace.timeline,
    views=views,
    diff_views=lambda: tuple(DIFF_VIEWS),
    apps=trace.apps,  # a trace's: one of its traces, or the run views of every rank
    view_options={**trace.OPERATOR_OPTIONS, "trace": trace_view_names, "cluster": lambda: tuple(RUN_VIEWS)},
    hints={"window_from": trace.WINDOW_HINT, "window_to": trace.WINDOW_HINT},
)
