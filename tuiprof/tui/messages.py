"""Messages of the explorer, named as events: dataclasses (as toolong's
messages.py), so each says what it carries in one line per field.

Textual's ``Message.__post_init__`` initialises the message; they cannot be
``frozen`` (Textual sets its own fields on them), but nothing changes one after
it is posted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.timeline import TimelineTarget

if TYPE_CHECKING:  # the diff engine loads with diff mode only, the snapshot's with snapshots
    from tuiprof.analysis.diff import TraceDiff
    from tuiprof.analysis.snapshot import OutOfMemory, SnapshotModel
    from tuiprof.analysis.snapshot_trace import PeakPlace


@dataclass
class LoadAdvanced(Message):
    """Loading advanced: a line of text and a fraction done (None: unknown).

    A newer one replaces one still queued, so a fast loader cannot flood the UI."""

    text: str
    fraction: float | None

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadAdvanced)


@dataclass
class LoadFinished(Message):
    """The model is built: every view gets it, with the profiler's log lines (a live capture's)."""

    model: TraceModel
    log_lines: tuple[str, ...]


@dataclass
class DiffReady(Message):
    """Both sides of ``tuiprof diff`` are loaded and compared."""

    diff: TraceDiff


@dataclass
class LoadFailed(Message):
    """Loading failed: the one-line error, and the exit code the app ends with."""

    text: str
    exit_code: int


@dataclass
class JumpTo(Message):
    """Show ``view`` with the cursor on the row named ``name`` (drill-down across views)."""

    view: str
    name: str


@dataclass
class ShowInTimeline(Message):
    """Show in the Timeline what another view's ``T`` (or enter on a step) selected."""

    target: TimelineTarget


@dataclass
class SnapshotReady(Message):
    """An allocator snapshot is read and analysed: the snapshot app's pages get it."""

    model: SnapshotModel
    place: PeakPlace | None


@dataclass
class ShowOom(Message):
    """Enter on the snapshot's OOMs page: show what held memory at ``oom``."""

    oom: OutOfMemory
