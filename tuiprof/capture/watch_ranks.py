"""Watching under torchrun: rank 0 decides, every rank captures the same steps.

Rank 0 alone applies the triggers (its steps wait for the slowest rank in the
collectives, so a slowdown anywhere shows in its step times; only it reads
``tuiprof capture`` requests).  When it triggers at step N, it picks a start
boundary B = N + lead, far enough ahead that every rank hears of it in time
(lead >= 2 steps and >= :data:`LEAD_SECONDS` of steps at the current median),
and writes ``seq:B:trigger`` under :data:`KEY` in the process group's store
(the ``TCPStore`` torchrun set up).  The other ranks look at the key at most
every :data:`POLL_SECONDS` (``check`` then ``get``: one round trip each) and
start their profiler at boundary B too; a rank that hears of it too late
writes a failure line and skips that capture.  Each rank writes its own trace
into the capture's run directory ``DIR/stepNNNNNN-TRIGGER/`` (the rank in the
file's name, ``distributedInfo`` in its header), which opens in the ranks views.

``--catch`` (every rank profiles every step): rank 0 judges each step and
writes its verdict under ``CATCH_KEY/N`` (the trigger the step is kept for,
or ``-``); every other rank, before closing its window of step N, waits for
that key (a blocking store ``wait``: the store answers as soon as rank 0 has
written it) and keeps or drops its own trace of step N alike.  So the kept
step numbers agree across ranks.  Rank 0 deletes the key of step
N - :data:`CATCH_KEYS_KEPT` as it writes step N's (the store stays small on
a job of millions of steps); a rank that many steps behind rank 0 cannot
exist in a job whose steps meet in collectives.
"""

from __future__ import annotations

import math
from typing import Any

KEY = "tuiprof-watch/capture"
POLL_SECONDS = 0.1  # a store round trip (~0.1 ms) this often: about 0.1 % of the time
LEAD_SECONDS = 0.5  # five polls: a rank hears of a capture before its start boundary
MAX_LEAD = 10_000
CATCH_KEY = "tuiprof-watch/catch"
CATCH_KEYS_KEPT = 1024  # step verdicts kept in the store behind rank 0's latest
CATCH_WAIT_SECONDS = 60.0  # a rank waits this long for rank 0's verdict, then keeps nothing more
NOT_KEPT = "-"


def lead_steps(median_step_s: float | None) -> int:
    """Steps between rank 0's decision and the boundary every rank starts at."""
    if not median_step_s:
        return 2
    return max(2, min(MAX_LEAD, math.ceil(LEAD_SECONDS / median_step_s)))


class RankChannel:
    """The process group's store as a one-key channel from rank 0 to the others."""

    def __init__(self) -> None:
        self._store: Any = None
        self._sequence = 0  # rank 0: orders sent; others: the last order taken
        self._next_poll = 0.0

    def _ready(self) -> bool:
        """Whether the script's process group (and so its store) exists yet."""
        if self._store is None:
            import torch.distributed as dist

            if dist.is_available() and dist.is_initialized():
                from torch.distributed.distributed_c10d import _get_default_store

                self._store = _get_default_store()
        return self._store is not None

    def announce(self, start_boundary: int, trigger: str) -> bool:
        """Rank 0: every rank starts its profiler at ``start_boundary``; False when there is no store yet."""
        if not self._ready():
            return False
        self._sequence += 1
        self._store.set(KEY, f"{self._sequence}:{start_boundary}:{trigger}")
        return True

    def poll(self, now: float) -> tuple[int, str] | None:
        """The other ranks: a new order (start boundary, trigger), looked for at most every POLL_SECONDS."""
        if now < self._next_poll or not self._ready():
            return None
        self._next_poll = now + POLL_SECONDS
        if not self._store.check([KEY]):
            return None
        sequence, boundary, trigger = self._store.get(KEY).decode().split(":")
        if int(sequence) <= self._sequence:
            return None
        self._sequence = int(sequence)
        return int(boundary), trigger

    def publish_verdict(self, step: int, trigger: str | None) -> bool:
        """Rank 0, ``--catch``: step ``step`` is kept for ``trigger`` (None: dropped) on every rank;
        False when there is no store yet."""
        if not self._ready():
            return False
        self._store.set(f"{CATCH_KEY}/{step}", trigger or NOT_KEPT)
        if step > CATCH_KEYS_KEPT:
            self._store.delete_key(f"{CATCH_KEY}/{step - CATCH_KEYS_KEPT}")
        return True

    def verdict(self, step: int) -> str | None:
        """The other ranks, ``--catch``: the trigger rank 0 kept step ``step`` for (None: dropped),
        waiting for it at most CATCH_WAIT_SECONDS; TimeoutError when rank 0 did not say."""
        if not self._ready():
            return None  # before the process group: rank 0 keeps its steps alone
        from datetime import timedelta

        key = f"{CATCH_KEY}/{step}"
        try:
            self._store.wait([key], timedelta(seconds=CATCH_WAIT_SECONDS))
        except Exception as exc:  # the store's timeout (DistStoreError, RuntimeError by version)
            raise TimeoutError(f"rank 0 gave no verdict on step {step} within {CATCH_WAIT_SECONDS:g} s") from exc
        trigger = self._store.get(key).decode()
        return None if trigger == NOT_KEPT else trigger
