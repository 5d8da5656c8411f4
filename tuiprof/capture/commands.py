"""``tuiprof live`` and ``tuiprof run``: check, capture with progress, show,
and say which steps the trace holds and where the kept trace is.

Exit code 130 (:data:`EXIT_INTERRUPTED`) means stopped before there was
anything to show: a capture that was shown (explorer or tables) or saved
exits 0, stopped early or not.

Scratch files (the trace when ``--save`` is not given, the profiler log)
live in a private temporary directory that is removed on the way out,
whatever happens.  Imports nothing heavy at module level: torch is loaded
once progress is on screen.
"""

from __future__ import annotations

import signal
import sys
import tempfile
import time
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from tuiprof.capture.config import ANALYSING, SAVING, CaptureConfig, CaptureProgress, describe_steps, parse_shape
from tuiprof.capture.distributed import finish_rank, rank_trace_path, run_directory, torchrun_launch
from tuiprof.capture.options import (
    check_folder,
    check_save_path,
    config_from_args,
    refuse_model_options,
    require_packages,
)
from tuiprof.errors import EXIT_BAD_INPUT, EXIT_INTERRUPTED, TraceError
from tuiprof.report.render import print_notice


def run_live(args: Namespace) -> int:
    started = time.perf_counter()
    config = config_from_args(args.model, args)
    parse_shape(config.input_shape)
    require_packages("live", ("torch",) if ":" in config.model else ("torch", "torchvision"))
    if args.save:
        check_save_path(args.save)
    if config.device not in ("auto", "cpu"):  # fail fast, before any screen: --device cuda without CUDA
        from tuiprof.capture.models import resolve_device

        resolve_device(config.device)
    from tuiprof.capture.live import LiveCapture

    with scratch_directory() as scratch:
        live = LiveCapture(config, scratch, Path(args.save) if args.save else None, started)
        if args.no_tui or not sys.stdout.isatty():
            code = _live_without_ui(live)
        else:
            code = _live_in_explorer(live, saved=bool(args.save))
    result = live.result
    if result is not None and result.trace_path is not None:
        for line in describe_steps(
            result.steps_done, result.trace_steps, result.dropped_step, live.capture_s, result.facts.compile_s
        ):
            print_notice(f"tuiprof: {line}")
    _say_where_the_trace_is(args.save, result is not None and result.trace_path is not None)
    return code


def _live_in_explorer(live, saved: bool) -> int:
    from tuiprof.capture.terminal import drawing_on_terminal
    from tuiprof.tui.app import ExplorerApp, run_app

    app = ExplorerApp(live)
    with drawing_on_terminal(app):
        code = run_app(app)
    kept = saved and live.result is not None and live.result.trace_path is not None
    nothing_shown = app.model is None and not kept  # quit while the capture ran
    return EXIT_INTERRUPTED if nothing_shown and code == 0 else code


def _live_without_ui(live) -> int:
    from tuiprof.capture.live import describe_progress

    last = [0.0]
    with _terminal() as terminal:

        def on_progress(progress: CaptureProgress) -> None:
            now = time.perf_counter()
            if now - last[0] >= 0.5 or progress.phase in ("setup", "done", "active", SAVING) or progress.step == 0:
                last[0] = now
                print_notice(f"tuiprof: {describe_progress(progress)}", terminal)

        with _stop_on_sigint(live.stop, terminal):
            result = live.capture(on_progress)
        if result.trace_path is not None:
            print_notice(f"tuiprof: {ANALYSING}…", terminal)
    model = live.build_model()  # NothingCaptured (exit 130) when no active step finished
    _print_tables(model)
    from tuiprof.report.compiled_summary import compiled_lines

    print_notice(f"tuiprof: profiler log: {len(result.facts.log_lines)} lines")
    for line in compiled_lines(model):
        print_notice(f"tuiprof: {line}")
    return 0


def run_script(args: Namespace) -> int:
    started = time.perf_counter()
    refuse_model_options(args)
    script = Path(args.script)
    if not script.is_file():
        raise TraceError(str(script), "no such script", "check the path")
    require_packages("run", ("torch",))
    if args.watch:
        from tuiprof.capture.watch_commands import run_watched

        return run_watched(args)
    if args.save:
        check_save_path(args.save)
    config = config_from_args(str(script), args)
    launch = torchrun_launch()
    with scratch_directory() as scratch:
        trace_path = Path(args.save) if args.save else scratch / f"{script.stem}.pt.trace.json.gz"
        if launch:  # one run directory every rank agrees on, kept; the rank in each file's name
            if not args.save:
                trace_path = run_directory(launch) / trace_path.name
                check_folder(trace_path.parent, f"tuiprof run under torchrun: {trace_path.parent}", "pass --save PATH")
            trace_path = rank_trace_path(trace_path, launch)
        code = _run_script_in(scratch, script, args, config, trace_path, started)
    return code


def _run_script_in(
    scratch: Path, script: Path, args: Namespace, config: CaptureConfig, trace_path: Path, started: float
) -> int:
    from tuiprof.capture.live import describe_progress

    log_path = scratch / "profiler.log"

    def read_log() -> list[str]:
        return log_path.read_text(errors="replace").splitlines() if log_path.exists() else []

    with _terminal() as terminal:

        def on_progress(progress: CaptureProgress) -> None:
            print_notice(f"tuiprof: {describe_progress(progress)}", terminal)

        on_progress(
            CaptureProgress(0, config.total_steps, "setup", time.perf_counter() - started, None, "importing torch")
        )
        from tuiprof.capture.script import profile_script
        from tuiprof.capture.session import native_stderr_to

        sys.path.insert(0, str(script.resolve().parent))
        with native_stderr_to(log_path):
            sys.stderr = terminal  # the script's own errors stay visible; Kineto's fd-2 lines go to the log
            try:
                result = profile_script(
                    script, args.script_args, config, trace_path, args.keep_running, on_progress, started, read_log
                )
            finally:
                sys.stderr = sys.__stderr__
    if result.exit_note:
        print_notice(f"tuiprof: {script} {result.exit_note}")
    if not result.written:
        print_notice(
            f"tuiprof: {script}: {result.steps} optimizer steps seen, {config.total_steps} needed "
            f"(wait {config.wait}, warmup {config.warmup}, active {config.active}); nothing was recorded"
        )
        return EXIT_INTERRUPTED if result.interrupted else EXIT_BAD_INPUT
    steps = describe_steps(
        result.steps, result.trace_steps, result.dropped_step, time.perf_counter() - started, result.facts.compile_s
    )
    launch = torchrun_launch()
    if launch:
        for line in steps:
            print_notice(f"tuiprof: rank {launch.rank}: {line}")
        return finish_rank(trace_path, launch, args.no_tui)
    from tuiprof.analysis import analyze
    from tuiprof.trace import load_trace

    result.facts.log_lines = read_log()
    print_notice(f"tuiprof: {ANALYSING}…")
    model = analyze(load_trace(trace_path), result.facts)
    if args.no_tui or not sys.stdout.isatty():
        _print_tables(model)
        code = 0
    else:
        from tuiprof.tui.app import ExplorerApp, run_app
        from tuiprof.tui.sources import PreparedSource

        code = run_app(ExplorerApp(PreparedSource(model, f"run {script.name}", result.facts.log_lines)))
    for line in steps:
        print_notice(f"tuiprof: {line}")
    _say_where_the_trace_is(args.save, True)
    return code


def _print_tables(model) -> None:
    from tuiprof.report.summary import SummaryRequest, print_summary

    for view in ("operators", "modules"):
        print_summary(model, SummaryRequest(view=view, limit=25))


def _say_where_the_trace_is(save: str | None, captured: bool) -> None:
    """After the explorer is gone (so scrollback keeps it): the kept trace, or how to keep one."""
    if not captured:
        return
    if save:
        print_notice(f"tuiprof: trace saved: {save} (reopen: tuiprof open {save})")
    else:
        print_notice("tuiprof: the trace was not kept (add --save PATH.json.gz to keep it)")


@contextmanager
def scratch_directory() -> Iterator[Path]:
    """A private (0700, unpredictable name) temporary directory, removed on exit, also on failure."""
    with tempfile.TemporaryDirectory(prefix="tuiprof-", ignore_cleanup_errors=True) as scratch:
        yield Path(scratch)


@contextmanager
def _terminal() -> Iterator[TextIO]:
    """Progress lines' stream: the terminal, even while fd 2 goes to the profiler log."""
    from tuiprof.capture.terminal import terminal_duplicate

    terminal = terminal_duplicate()
    try:
        yield terminal
    finally:
        terminal.close()


@contextmanager
def _stop_on_sigint(stop, terminal: TextIO):
    """First Ctrl-C: finish the current step, keep what was recorded. Second: abort.

    A KeyboardInterrupt raised inside torch.profiler's step transitions can
    leave Kineto stuck; a flag checked between steps cannot.
    """

    def handler(signum, frame) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        stop.set()
        print("tuiprof: stopping after this step (Ctrl-C again to abort)", file=terminal, flush=True)

    previous = signal.signal(signal.SIGINT, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
