"""Messages of the explorer, named as events (all immutable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.message import Message

from tuiprof.analysis.model import TraceModel

if TYPE_CHECKING:  # the diff engine loads with diff mode only
    from tuiprof.analysis.diff import TraceDiff


class LoadAdvanced(Message):
    """Loading advanced: a line of text and a fraction done (None: unknown).

    A newer one replaces one still queued, so a fast loader cannot flood the UI."""

    def __init__(self, text: str, fraction: float | None) -> None:
        super().__init__()
        self.text = text
        self.fraction = fraction

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, LoadAdvanced)


class LoadFinished(Message):
    def __init__(self, model: TraceModel, log_lines: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.log_lines = log_lines


class DiffReady(Message):
    """Both sides of ``tuiprof diff`` are loaded and compared."""

    def __init__(self, diff: TraceDiff) -> None:
        super().__init__()
        self.diff = diff


class LoadFailed(Message):
    def __init__(self, text: str, exit_code: int) -> None:
        super().__init__()
        self.text = text
        self.exit_code = exit_code


class JumpTo(Message):
    """Show ``view`` with the cursor on the row named ``name`` (drill-down across views)."""

    def __init__(self, view: str, name: str) -> None:
        super().__init__()
        self.view = view
        self.name = name


class ShowInTimeline(Message):
    """Show one event selected in the Timeline: ("call", call row), ("device", device
    event index) or ("window", start ns, end ns) for a step."""

    def __init__(self, target: tuple) -> None:
        super().__init__()
        self.target = target
