"""Command line: parse, dispatch, and turn every failure into one line and an exit code.

Heavy layers are imported inside the command that needs them: ``summary``
and ``open`` never import torch (a test proves it), ``summary`` never
imports Textual.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from tuiprof import __version__
from tuiprof.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TraceError

if TYPE_CHECKING:
    from tuiprof.trace.source import TraceFile

SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "sample_traces"
DEFAULT_SAMPLE = "resnet18_cpu.pt.trace.json.gz"
WIDE_HELP = (
    "tables on a terminal keep every column, however wide (default: fit the terminal, leaving out "
    "the least useful columns and saying which; a pipe always gets every column)"
)


def main(argv: list[str] | None = None) -> int:
    from tuiprof.cleanup import install_signal_handlers
    from tuiprof.report.plain import plain

    install_signal_handlers()  # temporary files and decode workers go with us
    parser = build_parser()
    argv = _attach_negative_values(list(argv) if argv is not None else sys.argv[1:])
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["open", *(argv if argv is not None else sys.argv[1:])])
    if args.command not in ("live", "run"):  # a training process keeps its own allocator
        from tuiprof.allocator import return_freed_memory

        return_freed_memory()
    try:
        return int(args.handler(args) or 0)
    except TraceError as exc:
        from tuiprof.report.render import print_notice

        print_notice(f"tuiprof: {plain(str(exc))}")  # on a terminal, wrapped between words
        return exc.exit_code
    except KeyboardInterrupt:
        print("tuiprof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("TUIPROF_DEBUG"):
            raise
        print(
            f"tuiprof: internal error: {type(exc).__name__}: {plain(str(exc), 500)} (set TUIPROF_DEBUG=1 for a traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


# Options whose value may be written negative by mistake (-5%): argparse would read it as an
# option and print its usage (7 lines); attached, the value reaches the option's own check.
_NEGATIVE_PRONE = ("--fail-if-slower", "--fail-if-memory")


def _attach_negative_values(argv: list[str]) -> list[str]:
    """``--fail-if-slower -5%`` -> ``--fail-if-slower=-5%`` (then refused in one line)."""
    result: list[str] = []
    for word in argv:
        if result and result[-1] in _NEGATIVE_PRONE and word[:1] == "-" and word[1:2] in "0123456789.":
            result[-1] += "=" + word
        else:
            result.append(word)
    return result


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tuiprof", description="Explore PyTorch profiler traces in the terminal.")
    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    summary = commands.add_parser("summary", help="print tables of a trace (no UI)")
    _add_trace_arguments(summary, required=True)
    _add_table_arguments(summary)
    summary.set_defaults(handler=run_summary)

    open_ = commands.add_parser("open", help="explore a trace file or run directory")
    _add_trace_arguments(open_, required=False)
    _add_table_arguments(open_)
    open_.set_defaults(handler=run_open)

    _add_diff_parser(commands)
    timeline = commands.add_parser(
        "timeline", help="print a time window of every thread, GPU stream and step (text or JSON)"
    )
    _add_trace_arguments(timeline, required=True)
    _add_timeline_arguments(timeline)
    timeline.set_defaults(handler=run_timeline)

    live = commands.add_parser("live", help="profile a model's training steps, then explore")
    live.add_argument("model", help="torchvision model name (resnet18) or package.module:factory")
    live.set_defaults(handler=run_live)
    run = commands.add_parser("run", help="profile an unmodified training script, then explore")
    run.add_argument("script", help="the Python script to run")
    run.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    run.add_argument(
        "--continue",
        dest="keep_running",
        action="store_true",
        help="let the script run to its end after the capture (default: stop it once the active steps are recorded)",
    )
    run.set_defaults(handler=run_script)
    for name, sub in (("live", live), ("run", run)):
        _add_capture_arguments(sub, name)
    from tuiprof.capture.options import add_compile_arguments
    from tuiprof.capture.watch_commands import add_capture_command, add_watch_arguments

    add_compile_arguments(live)
    add_watch_arguments(run)
    add_capture_command(commands)
    return parser


def _add_trace_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "path",
        nargs=None if required else "?",
        help="trace .json / .json.gz, a run directory, or - to read the trace from stdin"
        + ("" if required else " (default: the shipped resnet18 sample)"),
    )
    parser.add_argument(
        "--trace",
        metavar="RANK|NAME",
        help="in a run directory: which trace (rank number or part of the name); "
        "with an allocator snapshot: a profiler trace of the same run, to place the peak in a step and an operator",
    )
    parser.add_argument(
        "--max-inflate-ratio",
        type=float,
        metavar="N",
        default=None,
        help="refuse a .json.gz that inflates to more than N times its size (default 100: a decompression bomb; 0: no limit)",
    )
    parser.add_argument(
        "--no-sidecars",
        action="store_true",
        help="in a run directory: neither read nor write the .tuiprof-summary caches (also TUIPROF_NO_SIDECARS=1)",
    )
    _add_cache_arguments(parser)


def _add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the decoded-trace cache in $XDG_CACHE_HOME/tuiprof (also TUIPROF_NO_CACHE=1)",
    )
    parser.add_argument(
        "--cache-size",
        metavar="SIZE",
        type=_cache_size,
        help="most the decoded-trace cache may take, e.g. 2G or 500M; least recently used traces go first "
        "(default: 4G or a quarter of the free disk, the smaller; also TUIPROF_CACHE_SIZE)",
    )


def _cache_size(text: str) -> int:
    from tuiprof.trace.cache import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure_cache(args: argparse.Namespace) -> None:
    """--no-cache / --cache-size for this process and the workers it starts."""
    if args.no_cache or args.cache_size is not None:
        from tuiprof.trace.cache import set_cache

        set_cache(False if args.no_cache else None, args.cache_size)


def _add_table_arguments(parser: argparse.ArgumentParser) -> None:
    from tuiprof.report.catalog import FINDINGS, SNAPSHOT, WATCH, summary_view_names, view_name
    from tuiprof.report.formats import FORMATS
    from tuiprof.report.views import RUN_VIEWS

    parser.add_argument(
        "--view",
        type=view_name,
        choices=summary_view_names(),
        default="operators",
        help=f"{FINDINGS}: the Overview's findings, one a line (--format json: id, severity, text); "
        "memory-*: what fills memory at its peak (torch's categories from a tuiprof capture); "
        f"{', '.join(RUN_VIEWS)}: every rank of a run directory at once; "
        f"{WATCH}: the captures of a watch folder (run --watch DIR); "
        f"{SNAPSHOT}: an allocator snapshot (torch.cuda.memory._dump_snapshot), told by its content whatever --view says",
    )
    parser.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="with a run view: summarise the ranks on a Dask scheduler (or local:N workers); pip install 'tuiprof[cluster]'",
    )
    parser.add_argument("--sort", metavar="COLUMN", help="column key to sort by, descending (see --format json keys)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="at most N rows")
    parser.add_argument("--group-by-shape", action="store_true", help="operators: one row per name and input shapes")
    parser.add_argument(
        "--top-level-only", action="store_true", help="operators: only calls with no enclosing operator"
    )
    parser.add_argument("--format", choices=FORMATS, default="table")
    parser.add_argument("--wide", action="store_true", help=WIDE_HELP)
    for flag, dest, end in (("--from", "window_from", "from"), ("--to", "window_to", "up to")):
        parser.add_argument(
            flag,
            dest=dest,
            type=float,
            metavar="US",
            help=f"allocator snapshots: look for the peak and OOMs {end} US microseconds after the first entry "
            "(entry numbers when it has no times); memory allocated earlier still counts",
        )


def _add_diff_parser(commands) -> None:
    from tuiprof.report.formats import FORMATS

    diff = commands.add_parser(
        "diff",
        help="compare two traces: the step-time verdict, then operators, modules, kernels, steps, memory",
        description="Compare run A with run B. On a terminal without --format or a gate it opens the explorer's "
        "diff mode, else it prints. A run directory gives its lowest rank (or --trace's) on both sides unless "
        "--ranks averages several. Exit codes: 0, 1 when a --fail-if gate fails, 2 on bad input.",
    )
    diff.add_argument("a", help="run A: trace .json / .json.gz, or a run directory (the baseline)")
    diff.add_argument("b", help="run B: the same kinds (the change)")
    diff.add_argument("--trace", metavar="RANK|NAME", help="in run directories: which trace, the same on both sides")
    diff.add_argument(
        "--ranks",
        nargs="?",
        const="all",
        metavar="all|R,R",
        help="in run directories: average these ranks (default all) instead of one trace; steps take the slowest rank",
    )
    diff.add_argument(
        "--view",
        choices=("all", "verdict", "ops", "shapes", "modules", "kernels", "launchers", "steps", "memory"),
        default="all",
        help="what to print (default: the verdict and every table; not used by the explorer)",
    )
    diff.add_argument(
        "--metric",
        choices=("auto", "cpu", "device"),
        default="auto",
        help="time operators and modules are compared by (auto: device when both sides have it)",
    )
    diff.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="rows per table (default: 10 in table/markdown, all in csv/json)",
    )
    diff.add_argument(
        "--format", choices=FORMATS, help="print in this format (default: the explorer on a terminal, else table)"
    )
    diff.add_argument("--wide", action="store_true", help=WIDE_HELP)
    _add_cache_arguments(diff)
    diff.add_argument(
        "--fail-if-slower",
        metavar="PCT",
        help="exit 1 when B's median step (per sample when the batches differ) is more than PCT slower, "
        "beyond noise (e.g. 5%%); exit 2 when A and B look like different programs",
    )
    diff.add_argument(
        "--fail-if-memory",
        metavar="PCT",
        help="exit 1 when B's memory peak is more than PCT above A's (e.g. 10%%); "
        "exit 2 when A and B look like different programs",
    )
    diff.set_defaults(handler=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from tuiprof.report.diff import print_diff, wants_explorer

    configure_cache(args)
    if _is_snapshot(args.a, "") or _is_snapshot(args.b, ""):
        return run_snapshot_diff(args)
    if not wants_explorer(args):
        return print_diff(args)
    from tuiprof.tui.diff_app import DiffSource, run_diff_explorer

    return run_diff_explorer(DiffSource(args.a, args.b, args.trace, args.ranks, args.metric))


def _add_timeline_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--step", type=int, metavar="N", help="show the window of ProfilerStep#N")
    parser.add_argument(
        "--from",
        dest="from_us",
        type=float,
        metavar="US",
        help="window start: microseconds from the trace's first event",
    )
    parser.add_argument(
        "--to", dest="to_us", type=float, metavar="US", help="window end: microseconds from the trace's first event"
    )
    parser.add_argument(
        "--width",
        type=int,
        metavar="COLS",
        help="time columns (default: the terminal's width minus the labels; 100 when not a terminal)",
    )
    parser.add_argument(
        "--lanes", metavar="GROUPS", help="comma list of step,cpu,python,gpu,memory,idle (default: all)"
    )
    parser.add_argument(
        "--depth", type=int, default=3, metavar="N", help="nesting sub-lanes shown per thread (default 3)"
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")


def _add_capture_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    from tuiprof.capture.options import add_capture_arguments

    add_capture_arguments(parser, command)


def resolve_path(args: argparse.Namespace) -> str:
    if args.max_inflate_ratio is not None:
        from tuiprof.trace.source import set_max_inflate_ratio

        set_max_inflate_ratio(max(0.0, args.max_inflate_ratio))
    if args.no_sidecars:
        from tuiprof.trace.run import set_sidecars

        set_sidecars(False)
    configure_cache(args)
    if args.path is not None:  # "" is an error, not the sample
        return args.path
    sample = SAMPLE_TRACES / DEFAULT_SAMPLE
    if not sample.exists():
        raise TraceError(
            str(sample), "the shipped sample trace is missing", "run scripts/make_sample_traces.py or pass a trace"
        )
    return str(sample)


def run_summary(args: argparse.Namespace) -> int:
    from tuiprof.analysis import analyze
    from tuiprof.report.catalog import FINDINGS, WATCH, is_run_view
    from tuiprof.report.summary import SummaryRequest, print_summary
    from tuiprof.report.views import RUN_VIEWS
    from tuiprof.trace import load_trace
    from tuiprof.trace.cache import save_in_background

    if args.cluster is not None and not is_run_view(args.view):  # never ignored in silence
        first, *others = RUN_VIEWS
        raise TraceError(
            f"--cluster {args.cluster or repr(args.cluster)}",
            f"is for the run views, not --view {args.view}",
            f"add --view {first} (or {', '.join(others)})",
        )
    path = resolve_path(args)
    if _is_snapshot(path, args.view):
        return run_snapshot_summary(path, args)
    _refuse_window(args)
    if args.view == WATCH:
        if args.sort:  # never ignored in silence
            raise TraceError(
                f"--sort {args.sort}", "the watch view lists the captures in the order they were taken", "drop --sort"
            )
        return run_watch_summary(path, args.format, args.limit, args.wide)
    request = SummaryRequest(
        args.view, args.sort, args.limit, args.group_by_shape, args.top_level_only, args.format, args.wide
    )
    if is_run_view(args.view):
        return run_run_summary(path, request, args.cluster)
    trace = choose_trace(path, args.trace)
    store = load_trace(path if trace.stream else trace.path)
    model = analyze(store)
    status = print_summary(model, request, run_findings(model) if args.view == FINDINGS else ())
    save_in_background(store)  # after the output: the first open is no slower
    return status


def _is_snapshot(path: str, view: str) -> bool:
    """An allocator snapshot, told by its first bytes (a pickle), not its name; ``--view snapshot``
    on anything else is one line."""
    from tuiprof.report.catalog import SNAPSHOT
    from tuiprof.trace.snapshot import is_snapshot

    if is_snapshot(path):
        return True
    if view == SNAPSHOT:
        raise TraceError(
            path, "not an allocator snapshot (not a pickle)", "pass a file written by torch.cuda.memory._dump_snapshot"
        )
    return False


def run_snapshot_summary(path: str, args: argparse.Namespace) -> int:
    from tuiprof.analysis.snapshot import analyze_snapshot
    from tuiprof.report.snapshot import print_snapshot_summary

    if args.format not in ("table", "json"):
        raise TraceError(
            f"--format {args.format}", "is not offered for allocator snapshots", "use --format table or json"
        )
    model = analyze_snapshot(_read_snapshot_showing_progress(path), _window(args))
    return print_snapshot_summary(model, args.format, args.limit, _place_peak(model, args.trace))


def _place_peak(model, trace: str | None):
    """``--trace`` with a snapshot: where its peak fell in that profiler trace (None without one)."""
    if trace is None:
        return None
    from tuiprof.analysis.snapshot_trace import place_peak
    from tuiprof.trace import load_trace

    return place_peak(model, load_trace(trace))


def run_snapshot_diff(args: argparse.Namespace) -> int:
    """Two allocator snapshots: their peaks by stack (text or JSON; no explorer yet)."""
    from tuiprof.analysis.snapshot import analyze_snapshot, diff_snapshots
    from tuiprof.report.snapshot import print_snapshot_diff
    from tuiprof.trace.snapshot import is_snapshot, read_snapshot

    for path in (args.a, args.b):
        if not is_snapshot(path):
            raise TraceError(
                path, "is not an allocator snapshot, and the other file is", "compare two snapshots or two traces"
            )
    if args.format not in (None, "table", "json"):
        raise TraceError(
            f"--format {args.format}", "is not offered for allocator snapshots", "use --format table or json"
        )
    if args.fail_if_slower or args.fail_if_memory:
        raise TraceError(
            "--fail-if-slower/--fail-if-memory",
            "are not offered for allocator snapshots",
            "compare the peaks in --format json",
        )
    models = [analyze_snapshot(read_snapshot(path)) for path in (args.a, args.b)]
    for path, model in zip((args.a, args.b), models):
        if not model.peaks:  # no trace entry and no segment: no device, no peak to compare
            raise TraceError(
                path,
                "has no device: no trace entries and no segments to compare",
                "compare snapshots taken after torch.cuda.memory._record_memory_history()",
            )
    return print_snapshot_diff(diff_snapshots(*models), args.format, args.limit)


def _window(args: argparse.Namespace):
    import math

    from tuiprof.analysis.snapshot import Window

    start, end = args.window_from, args.window_to
    if any(value is not None and not math.isfinite(value) for value in (start, end)):
        raise TraceError(f"--from {start} --to {end}", "must be numbers of microseconds", "e.g. --from 0 --to 2e6")
    if start is not None and end is not None and start > end:
        raise TraceError(f"--from {start:g} --to {end:g}", "ends before it starts", "swap them")
    return Window(start, end)


def _refuse_window(args: argparse.Namespace) -> None:
    """--from/--to are for snapshots here (timeline has its own): never ignored in silence."""
    if args.window_from is not None or args.window_to is not None:
        raise TraceError(
            "--from/--to",
            "are for allocator snapshots in summary and open",
            "use tuiprof timeline TRACE --from US --to US",
        )


def _read_snapshot_showing_progress(path: str):
    """read_snapshot, with whole percents on one line of stderr when it is a terminal (cleared after)."""
    from tuiprof.trace.snapshot import read_snapshot

    if not sys.stderr.isatty():
        return read_snapshot(path)
    shown = [-1]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // total if total else 0
        if percent != shown[0]:
            shown[0] = percent
            print(
                f"\rtuiprof: reading the allocator snapshot: {percent}% of {total / 1e6:,.0f} MB",
                end="",
                file=sys.stderr,
                flush=True,
            )

    try:
        return read_snapshot(path, progress)
    finally:
        if shown[0] >= 0:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)


def _explore_snapshot(path: str, window, trace: str | None) -> int:
    """The snapshot app; it reads and analyses in its load worker, with progress (a bad
    snapshot ends it with one line on stderr, once the terminal is restored)."""
    from tuiprof.analysis.snapshot import analyze_snapshot
    from tuiprof.trace.snapshot import read_snapshot
    from tuiprof.tui.snapshot_app import run_snapshot_explorer

    def load(report):
        reading = f"reading the allocator snapshot {path}"
        snapshot = read_snapshot(path, lambda done, total: report(reading, done / total if total else None))
        report("finding the peak, the stacks that hold it and the OOMs", None)
        model = analyze_snapshot(snapshot, window)
        if trace is not None:
            report(f"placing the peak in {trace}", None)
        return model, _place_peak(model, trace)

    return run_snapshot_explorer(load, path)


def run_findings(model) -> tuple:
    """The straggler of the run ``model`` is a rank of (every rank summarised), as the
    Overview names it first; () for a single-process trace or a run that cannot be read."""
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.report.findings import straggler
    from tuiprof.trace.run import open_run

    if (model.info.world_size or 0) < 2:
        return ()
    try:
        found = straggler(summarise_run(open_run(Path(model.info.source).parent)))
    except TraceError:  # the run views say what is wrong with the run
        return ()
    return (found,) if found is not None else ()


def run_run_summary(path: str, request, cluster: str | None) -> int:
    """Every rank of the run at ``path`` at once (``--view ranks`` and the other run views)."""
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.report.summary import print_run_summary
    from tuiprof.trace.run import open_run

    return print_run_summary(summarise_run(open_run(path), cluster=cluster), request)


def run_watch_summary(path: str, fmt: str, limit: int | None, wide: bool = False) -> int:
    """The captures of the watch folder at ``path`` (``--view watch``, and ``open DIR`` off a terminal)."""
    from tuiprof.analysis.watch import summarise_watch
    from tuiprof.report.watch import print_watch_summary
    from tuiprof.trace.watch import read_history

    return print_watch_summary(summarise_watch(read_history(path)), fmt, limit, wide)


def run_timeline(args: argparse.Namespace) -> int:
    from tuiprof.analysis import analyze
    from tuiprof.report.timeline import print_timeline
    from tuiprof.trace import load_trace
    from tuiprof.trace.cache import save_in_background

    path = resolve_path(args)
    trace = choose_trace(path, args.trace)
    store = load_trace(path if trace.stream else trace.path)
    status = print_timeline(analyze(store), store, args)
    save_in_background(store)
    return status


def choose_trace(path: str, select: str | None) -> TraceFile:
    """The trace to open: ``path`` itself, or the chosen trace of a run directory
    (saying which one is shown and how to pick another).  Bad paths fail here."""
    from tuiprof.report.plain import plain
    from tuiprof.report.render import print_notice
    from tuiprof.trace import resolve_trace

    chosen, traces = resolve_trace(path, select)
    if len(traces) > 1:
        rank = f"rank {chosen.rank}, " if chosen.rank is not None else ""
        print_notice(
            f"tuiprof: {plain(path)} holds {len(traces)} traces; showing {rank}{plain(chosen.name)}"
            " (pick another with --trace RANK|NAME)"
        )
    return chosen


def run_open(args: argparse.Namespace) -> int:
    from tuiprof.trace.watch import is_watch_directory

    if args.path and is_watch_directory(args.path):  # the step-time history and its captures
        if not sys.stdout.isatty():
            return run_watch_summary(args.path, args.format, args.limit, args.wide)
        from tuiprof.tui.watch_app import run_watch_explorer

        return run_watch_explorer(args.path)
    if not sys.stdout.isatty():
        return run_summary(args)
    if args.cluster is not None:  # the explorer's Ranks view summarises locally: never ignored in silence
        raise TraceError(
            f"--cluster {args.cluster or repr(args.cluster)}",
            "is for summary's run views, not the explorer",
            "use tuiprof summary RUN_DIR --view ranks --cluster ADDRESS",
        )
    path = resolve_path(args)
    if _is_snapshot(path, args.view):
        return _explore_snapshot(path, _window(args), args.trace)
    _refuse_window(args)
    trace = choose_trace(path, args.trace)
    if not trace.stream:
        from tuiprof.trace.source import check_trace_start

        check_trace_start(trace)  # not a trace at all: one line here, not an error page
        from tuiprof.trace.cache import usable_directory

        usable_directory(create=False)  # a read-only cache is said here, before the explorer owns the terminal
        from tuiprof.tui.app import run_explorer

        return run_explorer(str(trace.path))
    return _explore_stream(trace)


def _explore_stream(trace: TraceFile) -> int:
    """``tuiprof open -`` (or a pipe): read the trace first, then give the explorer the terminal.

    The explorer reads keys from stdin, which is the pipe: once the trace is
    copied, stdin becomes the controlling terminal (``/dev/tty``).
    """
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


def run_live(args: argparse.Namespace) -> int:
    from tuiprof.capture.commands import run_live

    return run_live(args)


def run_script(args: argparse.Namespace) -> int:
    from tuiprof.capture.commands import run_script

    return run_script(args)


if __name__ == "__main__":
    sys.exit(main())
