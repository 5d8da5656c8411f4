"""``with tuiprof.profile() as p:`` for users who profile inside their own code."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class ProfileSession:
    """What ``tuiprof.profile()`` yields: ``step()`` like torch's, and the trace path."""

    def __init__(self, profiler: Any, path: Path) -> None:
        self.profiler = profiler  # the torch.profiler.profile object
        self.path = path
        self.written = False

    def step(self) -> None:
        self.profiler.step()


@contextmanager
def profile(
    path: str | Path = "tuiprof.pt.trace.json.gz",
    *,
    activities: Iterable[Any] | None = None,
    schedule: Callable[[int], Any] | None = None,
    record_shapes: bool = True,
    profile_memory: bool = True,
    with_stack: bool = True,
    with_flops: bool = True,
    open_explorer: bool = False,
    **profiler_kwargs: Any,
) -> Iterator[ProfileSession]:
    """Profile the block with tuiprof's defaults (shapes, memory, stacks, FLOPs on).

    Arguments mirror ``torch.profiler.profile``.  On exit the trace is
    written to ``path`` (``.json`` or ``.json.gz``; with a ``schedule``, the
    last recorded window) and, with ``open_explorer=True``, the explorer
    opens on it.
    """
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    from tuiprof.capture.session import write_trace

    target = Path(path)
    if activities is None:
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    session: ProfileSession

    def on_trace_ready(prof: Any) -> None:
        write_trace(prof, target)
        session.written = True

    profiler = torch_profile(
        activities=list(activities),
        schedule=schedule,
        on_trace_ready=on_trace_ready if schedule is not None else None,
        record_shapes=record_shapes,
        profile_memory=profile_memory,
        with_stack=with_stack,
        with_flops=with_flops,
        **profiler_kwargs,
    )
    session = ProfileSession(profiler, target)
    with profiler:
        yield session
    if not session.written:
        write_trace(profiler, target)
        session.written = True
    if open_explorer:
        from tuiprof.tui.app import run_explorer

        run_explorer(str(target))
