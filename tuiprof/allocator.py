"""Give freed big arrays back to the operating system (glibc only).

glibc serves an allocation of at least its mmap threshold with a mapping of
its own, unmapped on free; but each such free raises the threshold (up to
32 MB), so the analysis's later arrays of 4-32 MB come from the heap, whose
freed pages stay in the process.  On a big trace that left 10-17 % of the
peak RSS as freed memory (load and analysis of the 300 MB shapes of
``scripts/bench_load.py``, peak RSS: mi300 317 -> 290 MB, cpu 341 -> 296 MB,
ns 479 -> 426 MB; time within the noise on mi300 and cpu, ns ~5 % slower
from the page faults of fresh mappings).  A fixed 4 MB threshold keeps big
arrays mapped.  One arena for all threads: the decode's answers are unpickled
by a reader thread per worker (:class:`tuiprof.trace.parallel.DecodeWorkers`),
and in arenas of their own the freed chunk columns stayed in the process
(cpu shape at 300 MB: peak 279 -> 310 MB, and the analysis after ~20 %
slower); with one arena, 272-276 MB and the same analysis time.

Only for tuiprof's own trace-reading commands.  Not in their decode
workers: they reuse the same ~100 MB span after span, and a fixed threshold
cost them 0.15-0.2 s more system time per 300 MB (page faults of fresh
mappings) for the same peak.  Not in a training process (``tuiprof
live``/``run``, ``tuiprof.profile()``): it keeps the allocator it would have
without tuiprof, so its steps are profiled as they are.
"""

from __future__ import annotations

import ctypes

_M_MMAP_THRESHOLD = -3  # glibc's mallopt parameters
_M_ARENA_MAX = -8
MMAP_THRESHOLD_BYTES = 4 << 20


def return_freed_memory() -> bool:
    """Fix glibc's mmap threshold at 4 MB and its arenas at one; False where there is no glibc (macOS, musl)."""
    try:
        libc = ctypes.CDLL(None)  # this process: glibc is in it where there is one (find_library would run ldconfig)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt(_M_ARENA_MAX, 1)
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES))
