"""``tuiprof live`` and ``tuiprof run``: capture, then show."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import time
from argparse import Namespace
from contextlib import contextmanager
from pathlib import Path

from tuiprof.capture.config import CaptureConfig, CaptureProgress

EXIT_INTERRUPTED = 130


def config_from_args(model: str, args: Namespace) -> CaptureConfig:
    return CaptureConfig(
        model=model,
        device=args.device,
        batch_size=args.batch_size,
        input_shape=args.input_shape,
        num_classes=args.num_classes,
        mode=args.mode,
        wait=args.wait,
        warmup=args.warmup,
        active=args.active,
        repeat=args.repeat,
        record_shapes=not args.no_shapes,
        profile_memory=not args.no_memory,
        with_stack=not args.no_stack,
        with_flops=not args.no_flops,
        data=args.data,
        data_root=args.data_root,
    )


def run_capture_command(kind: str, args: Namespace) -> int:
    if kind == "run":
        from tuiprof.capture.script import run_script_command

        return run_script_command(args)
    return run_live(args)


def run_live(args: Namespace) -> int:
    from tuiprof.capture.config import parse_shape
    from tuiprof.capture.live import LiveCapture

    config = config_from_args(args.model, args)
    parse_shape(config.input_shape)
    if config.device not in ("auto", "cpu"):  # fail fast, before any screen: --device cuda without CUDA
        from tuiprof.capture.models import resolve_device

        resolve_device(config.device)
    if args.save:
        _check_save_path(args.save)
    live = LiveCapture(config)
    if args.no_tui or not sys.stdout.isatty():
        return _live_without_ui(live, args)
    from tuiprof.tui.app import ExplorerApp, run_app

    app = ExplorerApp(live)
    code = run_app(app)
    _save(live, args.save)
    interrupted = live.result is not None and live.result.interrupted
    return EXIT_INTERRUPTED if interrupted and code == 0 else code


def _live_without_ui(live, args: Namespace) -> int:
    from tuiprof.report.summary import print_summary

    from tuiprof.capture.live import describe_progress

    started = time.perf_counter()
    last = [0.0]
    # fd 2 goes to the profiler log during capture; progress keeps the real stderr.
    terminal = os.fdopen(os.dup(2), "w", buffering=1)

    def on_progress(progress: CaptureProgress) -> None:
        now = time.perf_counter()
        if now - last[0] >= 0.5 or progress.phase in ("done", "active") or progress.step == 0:
            last[0] = now
            print(f"tuiprof: {describe_progress(progress)}", file=terminal, flush=True)

    try:
        with _stop_on_sigint(live.stop, terminal):
            result = live.capture(on_progress)
    finally:
        terminal.close()
    _save(live, args.save)
    if result.trace_path is None:
        print(f"tuiprof: {args.model}: stopped before any step was recorded; nothing to show", file=sys.stderr)
        return EXIT_INTERRUPTED
    model = live.build_model()
    for view in ("ops", "modules"):
        print_summary(model, Namespace(view=view, sort=None, limit=25, group_by_shape=False, top_level_only=False, format="table"))
    where = args.save or result.trace_path
    print(
        f"tuiprof: {result.steps_done} steps in {time.perf_counter() - started:.1f} s; trace: {where}; "
        f"profiler log ({len(result.facts.log_lines)} lines): {live.log_path}",
        file=sys.stderr,
    )
    return EXIT_INTERRUPTED if result.interrupted else 0


@contextmanager
def _stop_on_sigint(stop, terminal):
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


def _check_save_path(path: str) -> None:
    from tuiprof.errors import TraceError

    if not path.endswith((".json", ".json.gz")):
        raise TraceError(f"--save {path}", "the file name must end in .json or .json.gz", "pick such a name")
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise TraceError(f"--save {path}", "its folder does not exist", "create it first")


def _save(live, path: str | None) -> None:
    """Copy the captured trace to ``--save`` (gzipped or not, as the name says)."""
    if not path or live.result is None or live.result.trace_path is None:
        return
    import gzip

    source = live.result.trace_path
    with gzip.open(source, "rb") as data, (gzip.open(path, "wb") if path.endswith(".gz") else open(path, "wb")) as out:
        shutil.copyfileobj(data, out)
