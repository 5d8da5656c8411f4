"""Messages the explorer's loading worker posts to the UI (all immutable)."""

from __future__ import annotations

from textual.message import Message

from tuiprof.analysis.model import TraceModel


class LoadProgress(Message):
    """Loading advanced: a line of text and a fraction done (None: unknown)."""

    def __init__(self, text: str, fraction: float | None) -> None:
        super().__init__()
        self.text = text
        self.fraction = fraction


class LoadFinished(Message):
    def __init__(self, model: TraceModel, log_lines: list[str]) -> None:
        super().__init__()
        self.model = model
        self.log_lines = log_lines


class LoadFailed(Message):
    def __init__(self, text: str, exit_code: int = 2) -> None:
        super().__init__()
        self.text = text
        self.exit_code = exit_code
