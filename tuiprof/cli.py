"""Command line: parse, dispatch, and turn every failure into one line and an exit code.

``summary``, ``open``, ``diff`` and ``timeline`` hold no branch on what they are given: the
input kinds (tuiprof/kinds) say what each command does with them and which options it takes;
each command here finds the kind, refuses what it does not take, and calls it.  Heavy layers
are imported inside the command that needs them: ``summary`` and ``open`` never import torch
(a test proves it), ``summary`` never imports Textual.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from tuiprof import __version__, kinds
from tuiprof.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TraceError
from tuiprof.kinds import DIFF, EXPLORER, SUMMARY, TIMELINE, Option

SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "sample_traces"
DEFAULT_SAMPLE = "resnet18_train_cpu.pt.trace.json.gz"  # a capture with every view filled
WIDE_HELP = (
    "tables on a terminal keep every column, however wide (default: fit the terminal, leaving out "
    "the least useful columns and saying which; a pipe always gets every column)"
)


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C while starting, before _main's own handler (was a traceback)
        say("tuiprof: interrupted")
        return EXIT_INTERRUPTED


def _main(argv: list[str] | None) -> int:
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
        say(f"tuiprof: {exc}")  # on a terminal, wrapped between words
        return exc.exit_code
    except KeyboardInterrupt:
        say("tuiprof: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("TUIPROF_DEBUG"):
            raise
        say(
            f"tuiprof: internal error: {type(exc).__name__}: {plain(str(exc), 500)} (set TUIPROF_DEBUG=1 for a traceback)"
        )
        return EXIT_INTERNAL
    finally:
        if "tuiprof.trace.cache" in sys.modules:  # a cache folder refused only when an entry was written
            sys.modules["tuiprof.trace.cache"].wait_for_writes()
            say_cache_refusal()


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
    parser = argparse.ArgumentParser(
        prog="tuiprof",
        description="Explore PyTorch profiler traces in the terminal.",
        epilog="Sizes are binary everywhere: KiB, MiB, GiB (powers of 1024, as torch's memory_summary writes "
        "them); bandwidth is decimal GB/s (docs/columns.md).",
    )
    parser.add_argument("--version", action="version", version=f"tuiprof {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    summary = commands.add_parser("summary", help=f"print tables of {kinds.titles(SUMMARY)} (no UI)")
    _add_trace_arguments(summary, required=True)
    _add_table_arguments(summary)
    summary.set_defaults(handler=run_summary)

    open_ = commands.add_parser("open", help=f"explore {kinds.titles(EXPLORER)}")
    _add_trace_arguments(open_, required=False)
    _add_table_arguments(open_)
    open_.set_defaults(handler=run_open)

    _add_diff_parser(commands)
    timeline = commands.add_parser(
        "timeline", help="print a time window of every thread, GPU stream and step (text or JSON)"
    )
    _add_trace_arguments(timeline, required=True, command=TIMELINE)
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
    for name in ("summary", "open", "diff", "timeline"):  # what a kind may refuse: every option, read back
        commands.choices[name].set_defaults(offered=_options(commands.choices[name]))
    return parser


def _options(parser: argparse.ArgumentParser) -> tuple[Option, ...]:
    """The options of a command, with their defaults: one given (not at its default) that the
    input's kind does not take is refused (argparse keeps its actions in ``_actions``)."""
    return tuple(
        Option(action.dest, action.option_strings[-1], action.default, action.nargs == 0)
        for action in parser._actions
        if action.option_strings and action.dest != "help"
    )


def _add_trace_arguments(parser: argparse.ArgumentParser, required: bool, command: str = SUMMARY) -> None:
    parser.add_argument(
        "path",
        nargs=None if required else "?",
        help=kinds.path_help(command) + ("" if required else " (default: the shipped resnet18 sample)"),
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
        help="most the decoded-trace cache may take, e.g. 2G or 500M (GiB, MiB: sizes are binary everywhere); "
        "least recently used traces go first "
        "(default: 4G or a quarter of the free disk, the smaller; also TUIPROF_CACHE_SIZE)",
    )


def _cache_size(text: str) -> int:
    from tuiprof.trace.cache import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure_cache(args: argparse.Namespace) -> None:
    """--no-cache / --cache-size for this process and the workers it starts; a cache folder that
    cannot be trusted is said now, before anything is read or the explorer takes the terminal."""
    from tuiprof.trace.cache import set_cache, usable_directory

    if args.no_cache or args.cache_size is not None:
        set_cache(False if args.no_cache else None, args.cache_size)
    usable_directory(create=False)
    say_cache_refusal()


def say_cache_refusal() -> None:
    """Why the cache is off, once."""
    from tuiprof.trace.cache import refusal

    line = refusal()
    if line is not None:
        say(f"tuiprof: {line}")


def say(line: str) -> None:
    """One notice on stderr, through the plain-text filter (imported when there is one: rich
    would cost ``--help`` 40 ms)."""
    from tuiprof.report.render import print_notice

    print_notice(line)


def _add_table_arguments(parser: argparse.ArgumentParser) -> None:
    from tuiprof.report.catalog import FINDINGS, summary_view_names, view_name
    from tuiprof.report.formats import FORMATS

    parser.add_argument(
        "--view",
        type=view_name,
        choices=summary_view_names(),
        metavar="VIEW",  # the choices are listed by kind below (spelt out, one line of 217 characters)
        help=f"{FINDINGS}: the Overview's findings, one a line (--format json: id, severity, text); "
        "memory-*: what fills memory at its peak (torch's categories from a tuiprof capture). "
        f"Each kind of input prints its own views, the first by default: {kinds.views_help()}",
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
    from tuiprof.report.catalog import DIFF_VIEWS, view_name
    from tuiprof.report.formats import FORMATS

    diff = commands.add_parser(
        "diff",
        help="compare two traces: the step-time verdict, then operators, modules, kernels, steps, memory",
        description="Compare run A with run B. On a terminal it opens the explorer's diff mode, unless an option "
        "of the printed diff asks for text (--format, --view, --limit, --wide, a gate). A run directory gives "
        "its lowest rank (or --trace's) on both sides unless --ranks averages several. Two allocator snapshots "
        "compare their peaks. Exit codes: 0, 1 when a --fail-if gate fails, 2 on bad input.",
    )
    diff.add_argument("a", help=f"run A, the baseline: {kinds.path_help(DIFF)}")
    diff.add_argument("b", help="run B, the change: the same kind (a trace file and a run directory compare)")
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
        type=view_name,
        choices=tuple(DIFF_VIEWS),
        metavar="VIEW",
        help=f"{', '.join(DIFF_VIEWS)}: what to print (default all: the verdict and every table; shapes: operators by input shapes, "
        "launchers: kernels by launching operator)",
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
    configure_cache(args)
    return kinds.run_command(DIFF, args, args.offered, args.a, args.b)


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
    return kinds.run_command(SUMMARY, args, args.offered, resolve_path(args))


def run_open(args: argparse.Namespace) -> int:
    """The explorer on a terminal; off one (a pipe, a file), what summary prints."""
    path = resolve_path(args)
    return kinds.run_command(EXPLORER if sys.stdout.isatty() else SUMMARY, args, args.offered, path)


def run_timeline(args: argparse.Namespace) -> int:
    return kinds.run_command(TIMELINE, args, args.offered, resolve_path(args))


def run_live(args: argparse.Namespace) -> int:
    from tuiprof.capture.commands import run_live

    return run_live(args)


def run_script(args: argparse.Namespace) -> int:
    from tuiprof.capture.commands import run_script

    return run_script(args)


if __name__ == "__main__":
    sys.exit(main())
