"""Analysis stages side by side on threads: the analysis on every core (issue 29).

The analysis is numpy over int64 columns; numpy releases the GIL in its sorts,
``searchsorted``, ufunc loops and ``ufunc.at``, so independent stages (the
nesting of separate CPU threads, the memory per call beside it, the FLOPs beside
the device joins, the module tree beside the kernel, step and memory tables) run
at once on Python threads.  Threads, not processes: a stage takes 10-250 ms of
CPU at 300 MB, while a process would need a fresh interpreter (~0.2-0.3 s) and
the columns shipped to it and back (~100 bytes an event each way); see
``docs/big-traces.md`` ("The analysis on N cores") for what that leaves serial.

Every stage writes only its own results and the caller joins them in a fixed
order, so the model is the same, array for array, whatever the number of threads
(``tests/unit/test_parallel_analysis.py``).  On one core the stages run one after
the other on the calling thread, in the order given: no pool, no threads.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

from tuiprof.trace.parallel import usable_cores

# Tests and benchmarks set it to force a number of analysis threads (1: serial).
THREADS_ENV = "TUIPROF_ANALYSIS_THREADS"
MAX_THREADS = 64

_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


class StageTime(NamedTuple):
    """One stage's run, for ``scripts/bench_analysis.py``."""

    name: str
    wall_s: float
    cpu_s: float  # of its thread, its own side-by-side stages left out (they count apart)


_recorded: list[StageTime] | None = None
_inner_cpu = threading.local()  # per thread, the CPU of the stages run inside the running ones


@contextlib.contextmanager
def recording() -> Iterator[list[StageTime]]:
    """Every stage :func:`side_by_side` runs meanwhile, as it ends (a benchmark's stage table)."""
    global _recorded
    _recorded = []
    try:
        yield _recorded
    finally:
        _recorded = None


def analysis_threads() -> int:
    """How many stages run at once: one per usable core (``THREADS_ENV`` overrides)."""
    wanted = os.environ.get(THREADS_ENV, "")
    count = int(wanted) if wanted.isdigit() and int(wanted) > 0 else usable_cores()
    return min(count, MAX_THREADS)


def side_by_side(*stages: Callable[[], Any]) -> list[Any]:
    """Each stage's result, in the order given: the first stage runs on the calling
    thread, the others on the shared pool at the same time (one after the other on
    one thread when :func:`analysis_threads` is 1).  A stage that raises re-raises
    here, once every stage has ended (no stage is left running behind the caller)."""
    if _recorded is not None:
        stages = tuple(_timed(stage, _recorded) for stage in stages)
    if analysis_threads() < 2 or len(stages) < 2:
        return [stage() for stage in stages]
    futures = [_shared_pool().submit(stage) for stage in stages[1:]]
    try:
        first = stages[0]()
    finally:
        for future in futures:
            future.exception()  # waits; the results are read below
    return [first, *(future.result() for future in futures)]


def _shared_pool() -> ThreadPoolExecutor:
    """One pool for every analysis in the process (stages may nest: a stage's own
    side-by-side stages go to the same pool), sized for that nesting."""
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=2 * MAX_THREADS, thread_name_prefix="tuiprof-analysis")
        return _pool


def _timed(stage: Callable[[], Any], into: list[StageTime]) -> Callable[[], Any]:
    """``stage`` recording its run into ``into``; its CPU is its own thread's, less that of
    the stages it ran on the same thread (the first of its own side-by-side stages)."""
    name = getattr(getattr(stage, "func", stage), "__name__", type(stage).__name__)  # never repr: it holds columns

    def timed() -> Any:
        inner = _inner_cpu.__dict__.setdefault("stack", [])
        inner.append(0.0)
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return stage()
        finally:
            wall_s, cpu_s = time.perf_counter() - started, time.thread_time() - cpu
            own_s = cpu_s - inner.pop()
            if inner:
                inner[-1] += cpu_s
            into.append(StageTime(name, wall_s, own_s))

    return timed
