"""Profile an unmodified training script (the profiling half of ``tuiprof run``).

The script runs in this process (``runpy``, ``__name__ == "__main__"``,
its own ``sys.argv``) under ``torch.profiler``.  A global optimizer hook
advances the schedule on every ``optimizer.step()``.  Once the schedule's
steps are recorded the trace is written and, by default, the script is
stopped there (a training run may last hours; ``keep_running`` lets it run
to its end unprofiled).  Ctrl-C stops the script where it is: the step it
was in did not finish and is left out of the trace
(:mod:`tuiprof.capture.unfinished_step`).  With stacks recorded, global module hooks
give the trace's modules their qualified names (:mod:`tuiprof.capture.module_names`).
"""

from __future__ import annotations

import runpy
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tuiprof.capture.config import SAVING, CaptureConfig, CaptureProgress
from tuiprof.trace.live import LiveFacts


class _CaptureDone(BaseException):
    """Raised from the optimizer hook to end the script after the capture."""


@dataclass
class ScriptResult:
    steps: int  # optimizer steps seen while profiling
    interrupted: bool
    written: bool  # a window with a finished active step reached the trace
    trace_steps: list[int] = field(default_factory=list)  # N of each ProfilerStep#N in the trace
    dropped_step: int | None = None  # the unfinished step left out of the trace
    exit_note: str = ""  # "exited with 3" when the script stopped itself with an error code
    facts: LiveFacts = field(default_factory=LiveFacts)


def profile_script(
    script: Path,
    script_args: list[str],
    config: CaptureConfig,
    trace_path: Path,
    keep_running: bool,
    on_progress: Callable[[CaptureProgress], None],
    started: float,
    read_log: Callable[[], list[str]] | None = None,
) -> ScriptResult:
    """Run ``script`` under the profiler; the trace (with torch's FLOPs) goes to ``trace_path``."""
    import torch
    from torch.optim.optimizer import register_optimizer_step_post_hook

    from tuiprof.capture.compiled import KernelMapRecorder
    from tuiprof.capture.distributed import ensure_distributed_info, torchrun_launch, write_rank_trace
    from tuiprof.capture.memory_categories import memory_categories_member
    from tuiprof.capture.module_names import ModuleNames
    from tuiprof.capture.session import SavedWindow, TraceWindows, make_profiler, torch_flops, write_trace
    from tuiprof.report.render import print_notice

    result = ScriptResult(0, False, False)
    launch = torchrun_launch()  # under torchrun: each rank's file written whole, with distributedInfo

    def progress(phase: str, message: str = "") -> None:
        step = result.steps
        on_progress(CaptureProgress(step, config.total_steps, phase, time.perf_counter() - started, None, message))

    def save(prof, window: SavedWindow) -> None:
        progress(SAVING)  # torch's export takes seconds: say so after the last step
        if config.with_flops:
            result.facts.flops_by_external_id = torch_flops(prof)
        if read_log is not None:
            result.facts.log_lines = read_log()
        result.facts.compiled, result.facts.compile_s = compiled_graphs.taken()
        result.facts.compile_log = compiled_graphs.compile_log.taken()
        result.facts.memory_categories = memory_categories_member(prof, unfinished_step=window.unfinished_step)
        if config.with_stack:
            result.facts.modules, note = names.facts(prof)
            if note:
                print_notice(f"tuiprof: {note}")
        (write_rank_trace if launch else write_trace)(prof, trace_path, result.facts, window.unfinished_step)
        result.written = True
        result.trace_steps, result.dropped_step = window.steps, window.unfinished_step

    windows = TraceWindows(save, keep_last=config.repeat != 1)
    prof = make_profiler(config, torch.cuda.is_available(), windows)
    compiled_graphs = KernelMapRecorder()  # graphs the script compiles (torch.compile) map their kernels here
    names = ModuleNames()  # the modules the script calls, for the trace's qualified names

    def after_step(optimizer, args, kwargs) -> None:
        if result.steps >= config.total_steps:
            return
        if launch:
            ensure_distributed_info(prof)
        result.steps += 1  # before prof.step(): the trace it may write holds this finished step
        prof.step()
        if result.steps >= config.total_steps:
            names.unhook()  # the capture ended: a script that goes on runs without them
            progress("done")
            if not keep_running:
                raise _CaptureDone
            return
        progress(config.phase_of(result.steps))

    hook = register_optimizer_step_post_hook(after_step)
    saved_argv = sys.argv
    sys.argv = [str(script), *script_args]
    progress("setup", f"running {script.name}; profiling starts at its first optimizer.step()")
    try:
        with compiled_graphs.recording(), names.hooked(config.with_stack), windows.recording(prof):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except _CaptureDone:
                pass
            except SystemExit as exc:
                if exc.code not in (None, 0):
                    result.exit_note = f"exited with {exc.code}"
    except KeyboardInterrupt:
        result.interrupted = True
    finally:
        hook.remove()
        sys.argv = saved_argv
    return result
