"""An allocator snapshot: ``torch.cuda.memory._dump_snapshot``'s pickle (or a gzip of one),
told by its first bytes, not its name (trace/snapshot.py ``is_snapshot``): first in ``KINDS``.

Its peak, the stacks that hold it and the OOMs (``--from``/``--to``: within a window);
``--trace`` places the peak in a profiler trace of the same run.
"""

from __future__ import annotations

import math
import sys
from argparse import Namespace
from typing import TYPE_CHECKING

from tuiprof.kinds.base import DIFF, EXPLORER, READING, SUMMARY, TIMELINE, Kind
from tuiprof.report.catalog import SNAPSHOT
from tuiprof.report.units import format_bytes

if TYPE_CHECKING:
    from tuiprof.analysis.snapshot import SnapshotModel, Window
    from tuiprof.analysis.snapshot_trace import PeakPlace
    from tuiprof.trace.snapshot import Snapshot
    from tuiprof.tui.table_app import TableApp

WINDOW = ("window_from", "window_to", "trace")


def summary(path: str, args: Namespace) -> int:
    from tuiprof.analysis.snapshot import analyze_snapshot
    from tuiprof.report.snapshot import print_snapshot_summary

    model = analyze_snapshot(_read_showing_progress(path), _window(args))
    return print_snapshot_summary(model, args.format, args.limit, _place_peak(model, args.trace))


def explorer(path: str, args: Namespace) -> int:
    """The snapshot app; it reads and analyses in its load worker, with progress (a bad
    snapshot ends it with one line on stderr, once the terminal is restored)."""
    from tuiprof.analysis.snapshot import analyze_snapshot
    from tuiprof.trace.snapshot import read_snapshot
    from tuiprof.tui.snapshot_app import run_snapshot_explorer

    window, trace = _window(args), args.trace

    def load(report):
        reading = f"reading the allocator snapshot {path}"
        snapshot = read_snapshot(path, lambda done, total: report(reading, done / total if total else None))
        report("finding the peak, the stacks that hold it and the OOMs", None)
        model = analyze_snapshot(snapshot, window)
        if trace is not None:
            report(f"placing the peak in {trace}", None)
        return model, _place_peak(model, trace)

    return run_snapshot_explorer(load, path)


def diff(a: str, b: str, args: Namespace) -> int:
    """Two allocator snapshots: their peaks by stack (text or JSON; no explorer yet)."""
    from tuiprof.analysis.snapshot import analyze_snapshot, diff_snapshots
    from tuiprof.errors import TraceError
    from tuiprof.report.snapshot import print_snapshot_diff
    from tuiprof.trace.snapshot import read_snapshot

    models = [analyze_snapshot(read_snapshot(path)) for path in (a, b)]
    for path, model in zip((a, b), models):
        if not model.peaks:  # no trace entry and no segment: no device, no peak to compare
            raise TraceError(
                path,
                "has no device: no trace entries and no segments to compare",
                "compare snapshots taken after torch.cuda.memory._record_memory_history()",
            )
    return print_snapshot_diff(diff_snapshots(*models), args.format, args.limit)


def _place_peak(model: SnapshotModel, trace: str | None) -> PeakPlace | None:
    """``--trace`` with a snapshot: where its peak fell in that profiler trace (None without one)."""
    if trace is None:
        return None
    from tuiprof.analysis.snapshot_trace import place_peak
    from tuiprof.trace import load_trace

    return place_peak(model, load_trace(trace))


def _window(args: Namespace) -> Window:
    from tuiprof.analysis.snapshot import Window
    from tuiprof.errors import TraceError

    start, end = args.window_from, args.window_to
    for flag, value in (("--from", start), ("--to", end)):
        if value is not None and not math.isfinite(value):
            raise TraceError(f"{flag} {value}", "must be a number of microseconds", "e.g. --from 0 --to 2e6")
    if start is not None and end is not None and start > end:
        raise TraceError(f"--from {start:g} --to {end:g}", "ends before it starts", "swap them")
    return Window(start, end)


def _read_showing_progress(path: str) -> Snapshot:
    """read_snapshot, with whole percents on one line of stderr when it is a terminal (cleared after)."""
    from tuiprof.trace.snapshot import read_snapshot

    if not sys.stderr.isatty():
        return read_snapshot(path)
    shown = [-1]

    def progress(done: int, total: int) -> None:
        percent = 100 * done // total if total else 0
        if percent != shown[0]:
            shown[0] = percent
            print(
                f"\rtuiprof: reading the allocator snapshot: {percent}% of {format_bytes(total)}",
                end="",
                file=sys.stderr,
                flush=True,
            )

    try:
        return read_snapshot(path, progress)
    finally:
        if shown[0] >= 0:
            print("\r\x1b[K", end="", file=sys.stderr, flush=True)


def apps() -> tuple[type[TableApp], ...]:
    """The snapshot app (its diff prints: no app)."""
    from tuiprof.tui.snapshot_app import SnapshotApp

    return (SnapshotApp,)


def _is_snapshot(path: str) -> bool:
    from tuiprof.trace.snapshot import is_snapshot

    return is_snapshot(path)


KIND = Kind(
    name="snapshot",
    title="an allocator snapshot",
    help="an allocator snapshot (torch.cuda.memory._dump_snapshot; told by its content)",
    detect=_is_snapshot,
    options={
        SUMMARY: (*READING, *WINDOW, "limit", "format"),
        EXPLORER: (*READING, *WINDOW),
        DIFF: (*READING, "limit", "format"),
    },
    summary=summary,
    explorer=explorer,
    diff=diff,
    views=lambda: (SNAPSHOT,),
    apps=apps,
    values={"format": ("table", "json")},
    without={
        TIMELINE: "tuiprof summary {path} --trace TRACE says where its peak fell in a trace of the same run, "
        "whose timeline is tuiprof timeline TRACE",
    },
    hints={
        "fail_if_slower": "compare the peaks in --format json",
        "fail_if_memory": "compare the peaks in --format json",
    },
)
