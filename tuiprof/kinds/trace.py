"""A profiler trace: a ``.json`` / ``.json.gz`` file, ``-`` (stdin) or a named pipe.

Last in ``KINDS``: what no other kind claims is read as a trace, and the trace reader says in
one line what is wrong with anything else.  A run directory (run.py) shares these functions:
``choose_trace`` picks one of its traces.
"""

from __future__ import annotations

import os
import sys
from argparse import Namespace
from pathlib import Path
from typing import TYPE_CHECKING

from tuiprof.kinds.base import DIFF, EXPLORER, READING, SUMMARY, TIMELINE, Kind
from tuiprof.report.catalog import DIFF_VIEWS, FINDINGS, trace_view_names

if TYPE_CHECKING:
    from tuiprof.analysis.model import TraceModel
    from tuiprof.report.findings import Finding
    from tuiprof.report.summary import SummaryRequest
    from tuiprof.trace.source import TraceFile
    from tuiprof.tui.table_app import TableApp

# What summary takes for the tables of a trace; the operators view alone groups and filters calls.
TABLE_OPTIONS = ("sort", "limit", "group_by_shape", "top_level_only", "format", "wide")
OPERATOR_OPTIONS = {"group_by_shape": lambda: ("operators",), "top_level_only": lambda: ("operators",)}
DIFF_OPTIONS = ("metric", "limit", "format", "wide", "fail_if_slower", "fail_if_memory")
DIFF_EXPLORER = (*READING, "trace", "ranks", "metric")  # what the diff explorer takes: the others print
TIMELINE_OPTIONS = ("step", "from_us", "to_us", "width", "lanes", "depth", "format")
# summary's --from/--to window an allocator snapshot; a trace's window is the timeline's
WINDOW_HINT = "tuiprof timeline {path} --from US --to US shows a window of a trace"


def request(args: Namespace) -> SummaryRequest:
    from tuiprof.report.summary import SummaryRequest

    return SummaryRequest(
        args.view, args.sort, args.limit, args.group_by_shape, args.top_level_only, args.format, args.wide
    )


def summary(path: str, args: Namespace) -> int:
    """The ``--view`` table of the trace (of a run directory: of its chosen trace)."""
    from tuiprof.analysis import analyze
    from tuiprof.report.summary import print_summary
    from tuiprof.trace.cache import save_in_background

    store = _load_chosen(path, args.trace)
    model = analyze(store)
    status = print_summary(model, request(args), run_findings(model) if args.view == FINDINGS else ())
    save_in_background(store)  # after the output: the first open is no slower
    return status


def run_findings(model: TraceModel) -> tuple[Finding, ...]:
    """The straggler of the run ``model`` is a rank of (every rank summarised), as the
    Overview names it first; () for a single-process trace or a run that cannot be read."""
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.errors import TraceError
    from tuiprof.report.findings import straggler
    from tuiprof.trace.run import open_run

    if (model.info.world_size or 0) < 2:
        return ()
    try:
        found = straggler(summarise_run(open_run(Path(model.info.source).parent)))
    except TraceError:  # the run views say what is wrong with the run
        return ()
    return (found,) if found is not None else ()


def choose_trace(path: str, select: str | None) -> TraceFile:
    """The trace to open: ``path`` itself, or the chosen trace of a run directory
    (saying which one is shown and how to pick another).  Bad paths fail here."""
    from tuiprof.report.render import print_notice

    chosen, notice = which_trace(path, select)
    if notice:
        print_notice(notice)
    return chosen


def which_trace(path: str, select: str | None) -> tuple[TraceFile, str]:
    """The trace to open and, for a run directory, the line that says which one (printed once
    it has loaded: a rank that fails to load is then one line, its own error)."""
    from tuiprof.report.plain import plain
    from tuiprof.trace import resolve_trace

    chosen, traces = resolve_trace(path, select)
    if len(traces) < 2:
        return chosen, ""
    rank = f"rank {chosen.rank}, " if chosen.rank is not None else ""
    return chosen, (
        f"tuiprof: {plain(path)} holds {len(traces)} traces; showing {rank}{plain(chosen.name)}"
        " (pick another with --trace RANK|NAME)"
    )


def _load_chosen(path: str, select: str | None):
    """The chosen trace loaded, then the line saying which it is."""
    from tuiprof.report.render import print_notice
    from tuiprof.trace import load_trace

    trace, notice = which_trace(path, select)
    store = load_trace(path if trace.stream else trace.path)
    if notice:
        print_notice(notice)
    return store


def explorer(path: str, args: Namespace) -> int:
    trace = choose_trace(path, args.trace)
    if trace.stream:
        return _explore_stream(trace)
    from tuiprof.trace.source import check_trace_start

    check_trace_start(trace)  # not a trace at all: one line here, not an error page
    from tuiprof.tui.app import run_explorer

    return run_explorer(str(trace.path))


def _explore_stream(trace: TraceFile) -> int:
    """``tuiprof open -`` (or a pipe): read the trace first, then give the explorer the terminal.

    The explorer reads keys from stdin, which is the pipe: once the trace is
    copied, stdin becomes the controlling terminal (``/dev/tty``).
    """
    from tuiprof.errors import TraceError
    from tuiprof.trace.load import spooled

    print("tuiprof: reading the trace from the pipe...", file=sys.stderr)
    with spooled(trace) as copy:
        try:
            terminal = os.open("/dev/tty", os.O_RDWR)
        except OSError:
            raise TraceError("stdin", "no terminal to run the explorer in", "use tuiprof summary -") from None
        os.dup2(terminal, 0)
        os.close(terminal)
        from tuiprof.tui.app import run_explorer

        return run_explorer(str(copy.path))


def diff(a: str, b: str, args: Namespace) -> int:
    """The explorer's diff mode on a terminal, unless an option only the printed diff takes was
    given (--format, --view, --limit, --wide, a gate): then, or off a terminal, text."""
    from tuiprof.report.diff import print_diff
    from tuiprof.report.render import stdout_is_terminal

    if not stdout_is_terminal() or not args.given_options <= set(DIFF_EXPLORER):
        return print_diff(args)
    from tuiprof.tui.diff_app import DiffSource, run_diff_explorer

    return run_diff_explorer(DiffSource(a, b, args.trace, args.ranks, args.metric))


def timeline(path: str, args: Namespace) -> int:
    from tuiprof.analysis import analyze
    from tuiprof.report.timeline import print_timeline
    from tuiprof.trace.cache import save_in_background

    store = _load_chosen(path, args.trace)
    status = print_timeline(analyze(store), store, args)
    save_in_background(store)
    return status


def apps() -> tuple[type[TableApp], ...]:
    """The explorer (``open``) and diff mode (``diff`` on a terminal)."""
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.diff_app import DiffApp

    return (ExplorerApp, DiffApp)


def _any_path(path: str) -> bool:
    return True


KIND = Kind(
    name="trace",
    title="a trace file",
    help="a trace .json / .json.gz (- or a pipe: read from stdin)",
    detect=_any_path,
    options={
        SUMMARY: (*READING, *TABLE_OPTIONS),
        EXPLORER: READING,
        DIFF: (*READING, *DIFF_OPTIONS),
        TIMELINE: (*READING, *TIMELINE_OPTIONS),
    },
    summary=summary,
    explorer=explorer,
    diff=diff,
    timeline=timeline,
    views=trace_view_names,
    diff_views=lambda: tuple(DIFF_VIEWS),
    apps=apps,
    view_options=OPERATOR_OPTIONS,
    hints={"window_from": WINDOW_HINT, "window_to": WINDOW_HINT},
)
