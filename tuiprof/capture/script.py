"""``tuiprof run script.py``: profile an unmodified training script.

The script runs in this process (``runpy``, ``__name__ == "__main__"``,
its own ``sys.argv``) under ``torch.profiler``.  A global optimizer hook
advances the schedule on every ``optimizer.step()``.  Once the schedule's
steps are recorded the trace is written and, by default, the script is
stopped there (a training run may last hours; ``--continue`` lets it run to
its end unprofiled).  Then the explorer opens on the trace.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
from argparse import Namespace
from pathlib import Path

from tuiprof.capture.config import CaptureConfig
from tuiprof.errors import TraceError

EXIT_INTERRUPTED = 130


class _CaptureDone(BaseException):
    """Raised from the optimizer hook to end the script after the capture."""


def profile_script(
    script: Path, script_args: list[str], config: CaptureConfig, trace_path: Path, keep_running: bool, log=None
) -> tuple[int, bool, dict[int, int]]:
    """Run ``script`` under the profiler; returns (steps seen, interrupted, torch FLOPs by External id)."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from tuiprof.capture.session import make_profiler, torch_flops, write_trace

    flops: dict[int, int] = {}
    state = {"steps": 0, "written": False}

    def on_trace_ready(prof) -> None:
        write_trace(prof, trace_path)
        state["written"] = True
        if config.with_flops:
            flops.update(torch_flops(prof))

    prof = make_profiler(config, torch.cuda.is_available(), on_trace_ready)

    def after_step(optimizer, args, kwargs) -> None:
        if state["steps"] >= config.total_steps:
            return
        prof.step()
        state["steps"] += 1
        if log:
            print(f"tuiprof: step {state['steps']}/{config.total_steps} ({config.phase_of(state['steps'] - 1)})", file=log, flush=True)
        if state["steps"] >= config.total_steps:
            prof.stop()
            if not keep_running:
                raise _CaptureDone

    hook = register_optimizer_step_post_hook(after_step)
    saved_argv = sys.argv
    sys.argv = [str(script), *script_args]
    interrupted = False
    prof.start()
    try:
        runpy.run_path(str(script), run_name="__main__")
    except _CaptureDone:
        pass
    except SystemExit as exc:
        if exc.code not in (None, 0) and log:
            print(f"tuiprof: {script} exited with {exc.code}", file=log)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        hook.remove()
        sys.argv = saved_argv
        if state["steps"] < config.total_steps:
            prof.stop()  # writes what the active steps recorded, if any
    return state["steps"], interrupted, flops


def run_script_command(args: Namespace) -> int:
    from tuiprof.analysis import load_model
    from tuiprof.analysis.live import LiveFacts, apply_live_facts
    from tuiprof.capture.commands import _check_save_path, config_from_args
    from tuiprof.capture.session import native_stderr_to

    script = Path(args.script)
    if not script.is_file():
        raise TraceError(str(script), "no such script", "check the path")
    if args.save:
        _check_save_path(args.save)
    config = config_from_args(str(script), args)
    scratch = Path(os.environ.get("TMPDIR", "/tmp")) / f"tuiprof-run-{os.getpid()}"
    scratch.mkdir(parents=True, exist_ok=True)
    trace_path = Path(args.save) if args.save else scratch / f"{script.stem}.pt.trace.json.gz"
    log_path = scratch / "profiler.log"
    terminal = os.fdopen(os.dup(2), "w", buffering=1)
    started = time.perf_counter()
    sys.path.insert(0, str(script.resolve().parent))
    try:
        with native_stderr_to(log_path):
            sys.stderr = terminal  # the script's own errors stay visible; Kineto's fd-2 lines go to the log
            try:
                steps, interrupted, flops = profile_script(
                    script, args.script_args, config, trace_path, args.keep_running, terminal
                )
            finally:
                sys.stderr = sys.__stderr__
    finally:
        terminal.close()
    if not trace_path.exists():
        print(
            f"tuiprof: {script}: {steps} optimizer steps seen, {config.total_steps} needed "
            f"(wait {config.wait}, warmup {config.warmup}, active {config.active}); nothing was recorded",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED if interrupted else 2
    print(f"tuiprof: {steps} steps profiled in {time.perf_counter() - started:.1f} s; trace: {trace_path}", file=sys.stderr)
    model = apply_live_facts(load_model(trace_path), LiveFacts(flops_by_external_id=flops))
    if args.no_tui or not sys.stdout.isatty():
        from tuiprof.report.summary import print_summary

        for view in ("ops", "modules"):
            print_summary(model, Namespace(view=view, sort=None, limit=25, group_by_shape=False, top_level_only=False, format="table"))
        return EXIT_INTERRUPTED if interrupted else 0
    from tuiprof.tui.app import ExplorerApp, run_app
    from tuiprof.tui.sources import PreparedSource

    code = run_app(ExplorerApp(PreparedSource(model, str(trace_path), log_path.read_text(errors="replace").splitlines())))
    return EXIT_INTERRUPTED if interrupted and code == 0 else code
