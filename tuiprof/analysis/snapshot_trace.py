"""An allocator snapshot's peak placed in a profiler trace of the same run (``--trace``).

Clocks (the rule, and its limits):

- A snapshot entry's ``time_us`` is microseconds since the Unix epoch: the
  allocator stamps entries with its approximate clock and the writer
  (``torch/csrc/cuda/Module.cpp``) converts them to the system clock.
  ``torch.cuda.memory._snapshot``'s docstring does not list the field.
- A Kineto trace's ``ts`` is microseconds after ``baseTimeNanoseconds``
  (older traces have no base: their ``ts`` is already since the epoch), so an
  event's epoch nanoseconds are ``ts * 1000 + baseTimeNanoseconds``.
- Both are the system clock of the host the process ran on: the two files
  line up only for the same host (or hosts whose clocks are synchronised),
  to within the clocks' conversion error (microseconds): an operator
  shorter than that may be missed or the one next to it named.  A peak
  outside the trace's span is said in one line (another run, or another
  time range of the same run), never placed.

Snapshot entries carry no thread, so the thread is the one running a
``ProfilerStep#N`` at the peak's time (the training loop), else any thread;
the operator is the innermost call (the latest-starting one that contains the
time) on that thread, with the innermost ``nn.Module`` around it when the
trace was recorded with stacks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.calls import build_calls, is_step_name
from tuiprof.analysis.snapshot import SnapshotModel, highest_peak
from tuiprof.trace.store import TraceEvents


@dataclass(frozen=True)
class PeakPlace:
    """Where the highest peak falls in the trace; epoch nanoseconds throughout."""

    trace: str
    device: int
    peak_ns: int | None  # None: the snapshot has no times (or no trace entries)
    trace_start_ns: int
    trace_end_ns: int
    step: str | None = None  # "ProfilerStep#12"
    operator: str | None = None
    module: str | None = None
    thread: int | str | None = None

    @property
    def inside(self) -> bool:
        return self.peak_ns is not None and self.trace_start_ns <= self.peak_ns <= self.trace_end_ns


def _innermost(starts: np.ndarray, rows: np.ndarray) -> int:
    """Of calls that all contain one time, the innermost: the latest start (the later row on a tie)."""
    latest = starts[rows] == starts[rows].max()
    return int(rows[latest][-1])


def place_peak(model: SnapshotModel, store: TraceEvents) -> PeakPlace:
    """The highest peak's step, operator and module in ``store`` (see the module docstring)."""
    calls, _, _ = build_calls(store)
    base_ns = store.header.baseTimeNanoseconds or 0
    starts = np.asarray(calls.start_ns, dtype=np.int64) + base_ns
    ends = np.asarray(calls.end_ns, dtype=np.int64) + base_ns
    span = (int(starts.min()), int(ends.max())) if len(starts) else (0, -1)
    peak = highest_peak(model) if model.peaks else None
    timed = peak is not None and peak.row >= 0 and model.snapshot.entries.has_times
    at = peak.time_us * 1000 if timed and peak is not None else None
    place = PeakPlace(store.source, peak.device if peak else 0, at, *span)
    if at is None or not place.inside:
        return place
    containing = np.flatnonzero((starts <= at) & (ends >= at))
    is_step = np.asarray([is_step_name(calls.name(row)) for row in containing.tolist()], dtype=bool).reshape(-1)
    steps, operators = containing[is_step], containing[~is_step]
    thread = None
    step = None
    if len(steps):
        step_row = _innermost(starts, steps)
        step, thread = calls.name(step_row), calls.thread[step_row]
        on_thread = operators[np.asarray(calls.thread, dtype=np.int64)[operators] == thread]
        operators = on_thread if len(on_thread) else operators
    if not len(operators):
        return PeakPlace(place.trace, place.device, at, *span, step=step, thread=calls.tid(step_row) if step else None)
    row = _innermost(starts, operators)
    module_row = int(calls.module[row])
    module = store.module_names().get(module_row) if module_row >= 0 else None
    return PeakPlace(
        place.trace, place.device, at, *span, step=step, operator=calls.name(row), module=module, thread=calls.tid(row)
    )
