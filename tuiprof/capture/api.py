"""``with tuiprof.profile() as p:`` for users who profile inside their own code."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from tuiprof.report.plain import plain


class ProfileSession:
    """What ``tuiprof.profile()`` yields: ``step()`` like torch's, and the trace path."""

    def __init__(self, profiler: Any, path: Path) -> None:
        self.profiler = profiler  # the torch.profiler.profile object
        self.path = path
        self.written = False  # whether ``path`` holds a trace yet
        self.steps: list[int] = []  # with a schedule: N of each ProfilerStep#N written

    def step(self) -> None:
        self.profiler.step()


@contextmanager
def profile(
    path: str | Path = "tuiprof.pt.trace.json.gz",
    *,
    activities: Iterable[Any] | None = None,
    schedule: Callable[[int], Any] | None = None,
    keep: Literal["first", "last"] = "first",
    record_shapes: bool = True,
    profile_memory: bool = True,
    with_stack: bool = True,
    with_flops: bool = True,
    open_explorer: bool = False,
    **profiler_kwargs: Any,
) -> Iterator[ProfileSession]:
    """Profile the block with tuiprof's defaults (shapes, memory, stacks, FLOPs on).

    Arguments mirror ``torch.profiler.profile``.  On exit the trace is
    written to ``path`` (``.json`` or ``.json.gz``).  With a ``schedule``,
    the first complete window is kept and nothing is recorded after it
    (``keep="last"``: each complete window replaces the one before, for a
    schedule with repeats); a window cut short by the end of the block is
    written only when no complete one was, and only if it holds a finished
    active step.  The step the block ends in (an exception, Ctrl-C, or the
    empty step the last ``step()`` opened) did not finish: it is left out of
    the trace, and ``session.steps`` lists the steps written.  ``open_explorer=True`` opens the explorer on the trace.
    Under torchrun each rank writes its own file, the rank in its name
    (``run.rank1.pt.trace.json.gz``), and only rank 0 opens the explorer, on
    the run directory, once every rank's file is written.
    """
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from tuiprof.capture.compiled import KernelMapRecorder
    from tuiprof.capture.distributed import gather_run, rank_trace_path, torchrun_launch, write_rank_trace
    from tuiprof.capture.memory_categories import memory_categories_member
    from tuiprof.capture.module_names import ModuleNames
    from tuiprof.capture.session import SavedWindow, TraceWindows, write_trace
    from tuiprof.report.render import print_notice
    from tuiprof.trace.live import LiveFacts

    if keep not in ("first", "last"):
        raise ValueError(f"keep must be 'first' or 'last', not {keep!r}")
    launch = torchrun_launch()  # under torchrun: one file per rank (rank in the name), written whole
    target = rank_trace_path(Path(path), launch) if launch else Path(path)
    write = write_rank_trace if launch else write_trace
    if activities is None:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    session: ProfileSession

    compiled_graphs = KernelMapRecorder()  # graphs the block compiles (torch.compile) map their kernels here
    names = ModuleNames()  # the modules the block calls, for the trace's qualified names

    def facts(prof: Any, unfinished_step: int | None = None) -> LiveFacts:
        """What only this process knows: the modules' qualified names, the compiled graphs'
        kernel map, torch's memory categories."""
        compiled, compile_s = compiled_graphs.taken()
        modules, note = names.facts(prof) if with_stack else ({}, "")
        if note:
            print_notice(f"tuiprof.profile: {note}")
        return LiveFacts(
            modules=modules,
            compiled=compiled,
            compile_s=compile_s,
            compile_log=compiled_graphs.compile_log.taken(),
            memory_categories=memory_categories_member(prof, unfinished_step=unfinished_step),
        )

    def save(prof: Any, window: SavedWindow) -> None:
        write(prof, target, facts(prof, window.unfinished_step), window.unfinished_step)
        if not windows.keep_last:
            names.unhook()  # nothing more is recorded: the rest of the block runs without them
        session.written = True
        session.steps = window.steps

    windows = TraceWindows(save, keep_last=keep == "last")
    profiler = torch_profile(
        activities=list(activities),
        schedule=windows.schedule(schedule) if schedule is not None else None,
        on_trace_ready=windows if schedule is not None else None,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
        **profiler_kwargs,
    )
    session = ProfileSession(profiler, target)
    with compiled_graphs.recording(), names.hooked(with_stack), windows.recording(profiler):
        yield session
    if schedule is None:
        write(profiler, target, facts(profiler))
        session.written = True
    elif not session.written:
        warnings.warn(
            "tuiprof.profile: the block ended before an active step of the schedule finished; "
            f"nothing was written to {plain(str(target))}",
            stacklevel=3,
        )
    if open_explorer and session.written and (launch is None or launch.rank == 0):
        from tuiprof.tui.app import run_explorer

        run_explorer(str(target) if launch is None else str(gather_run(target, launch)))
