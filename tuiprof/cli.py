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

from tuiprof import __version__
from tuiprof.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, TraceError

SAMPLE_TRACES = Path(__file__).resolve().parent.parent / "sample_traces"
DEFAULT_SAMPLE = "resnet18_cpu.pt.trace.json.gz"


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        args = parser.parse_args(["open", *(argv if argv is not None else sys.argv[1:])])
    try:
        return int(args.handler(args) or 0)
    except TraceError as exc:
        print(f"tuiprof: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tuiprof: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: still one line, the traceback on request
        if os.environ.get("TUIPROF_DEBUG"):
            raise
        print(f"tuiprof: internal error: {type(exc).__name__}: {exc} (set TUIPROF_DEBUG=1 for a traceback)", file=sys.stderr)
        return EXIT_INTERNAL


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tuiprof", description="Explore PyTorch profiler traces in the terminal."
    )
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

    live = commands.add_parser("live", help="profile a model's training steps, then explore")
    live.add_argument("model", help="torchvision model name (resnet18) or package.module:factory")
    live.set_defaults(handler=run_live)
    run = commands.add_parser("run", help="profile an unmodified training script, then explore")
    run.add_argument("script", help="the Python script to run")
    run.add_argument("script_args", nargs=argparse.REMAINDER, help="its arguments")
    run.add_argument(
        "--continue", dest="keep_running", action="store_true",
        help="let the script run to its end after the capture (default: stop it once the active steps are recorded)",
    )
    run.set_defaults(handler=run_script)
    for sub in (live, run):
        _add_capture_arguments(sub)
    return parser


def _add_trace_arguments(parser: argparse.ArgumentParser, required: bool) -> None:
    parser.add_argument(
        "path",
        nargs=None if required else "?",
        help="trace .json / .json.gz, or a run directory" + ("" if required else " (default: the shipped resnet18 sample)"),
    )
    parser.add_argument("--trace", metavar="RANK|NAME", help="in a run directory: which trace (rank number or part of the name)")


def _add_table_arguments(parser: argparse.ArgumentParser) -> None:
    from tuiprof.report.formats import FORMATS

    parser.add_argument("--view", choices=("ops", "modules", "kernels", "steps", "memory"), default="ops")
    parser.add_argument("--sort", metavar="COLUMN", help="column key to sort by, descending (see --format json keys)")
    parser.add_argument("--limit", type=int, default=None, metavar="N", help="at most N rows")
    parser.add_argument("--group-by-shape", action="store_true", help="ops: one row per name and input shapes")
    parser.add_argument("--top-level-only", action="store_true", help="ops: only calls with no enclosing operator")
    parser.add_argument("--format", choices=FORMATS, default="table")


def _add_capture_arguments(parser: argparse.ArgumentParser) -> None:
    from tuiprof.capture.options import add_capture_arguments

    add_capture_arguments(parser)


def resolve_path(args: argparse.Namespace) -> str:
    if args.path:
        return args.path
    sample = SAMPLE_TRACES / DEFAULT_SAMPLE
    if not sample.exists():
        raise TraceError(str(sample), "the shipped sample trace is missing", "run scripts/make_sample_traces.py or pass a trace")
    return str(sample)


def run_summary(args: argparse.Namespace) -> int:
    from tuiprof.analysis import load_model
    from tuiprof.report.summary import SummaryRequest, print_summary

    path = resolve_path(args)
    model = load_model(choose_trace(path, args.trace))
    request = SummaryRequest(args.view, args.sort, args.limit, args.group_by_shape, args.top_level_only, args.format)
    return print_summary(model, request)


def choose_trace(path: str, select: str | None) -> str:
    """The file to open: ``path`` itself, or the chosen trace of a run directory
    (saying which one is shown and how to pick another)."""
    if not Path(path).is_dir():
        return path
    from tuiprof.trace import resolve_trace

    chosen, traces = resolve_trace(path, select)
    if len(traces) > 1:
        rank = f"rank {chosen.rank}, " if chosen.rank is not None else ""
        print(
            f"tuiprof: {path} holds {len(traces)} traces; showing {rank}{chosen.name} (pick another with --trace RANK|NAME)",
            file=sys.stderr,
        )
    return str(chosen.path)


def run_open(args: argparse.Namespace) -> int:
    if not sys.stdout.isatty():
        return run_summary(args)
    from tuiprof.tui.app import run_explorer

    path = resolve_path(args)
    return run_explorer(choose_trace(path, args.trace))


def run_live(args: argparse.Namespace) -> int:
    from tuiprof.capture.commands import run_live

    return run_live(args)


def run_script(args: argparse.Namespace) -> int:
    from tuiprof.capture.commands import run_script

    return run_script(args)


if __name__ == "__main__":
    sys.exit(main())
