"""Give freed big arrays back to the operating system (glibc only).

glibc serves an allocation of at least its mmap threshold with a mapping of
its own, unmapped on free; but each such free raises the threshold (up to
32 MB), so the analysis's later arrays of 4-32 MB come from the heap, whose
freed pages stay in the process: 10-17 % of a big trace's peak RSS.  A fixed
4 MB threshold keeps big arrays mapped.  One arena for all threads: the
decode's answers are unpickled by a reader thread per worker
(:class:`tuiprof.trace.parallel.DecodeWorkers`), and in arenas of their own
the freed chunk columns stayed in the process (and the analysis after them
ran slower).

Only for tuiprof's own trace-reading commands.  Not in their decode
workers: they reuse the same ~100 MB span after span, and a fixed threshold
made each span's buffers fresh mappings (twice the system time, for the same
peak).  Not in a training process (``tuiprof live``/``run``,
``tuiprof.profile()``): it keeps the allocator it would have without tuiprof,
so its steps are profiled as they are.

Measured before and after each choice: ``docs/bench-log/big-traces.md``
(2026-12-03, "tried, measured, and kept or dropped" and stop 19).
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
