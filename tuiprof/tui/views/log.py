"""Log: what the profiler printed during a live capture (Kineto writes to fd 2)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import RichLog

from tuiprof.analysis.model import TraceModel
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.views import Column
from tuiprof.tui.views.base import ExplorerView

LINE_COLUMN = Column("line", "Line", "text", "A line the profiler printed.")
NO_LOG = "No profiler log: a trace file carries none. `tuiprof live` and `tuiprof run` show what Kineto printed here."


class LogView(ExplorerView):
    view_id = "log"
    title = "Log"

    @classmethod
    def available(cls, model: TraceModel, log_lines: tuple[str, ...]) -> bool:
        return bool(log_lines)

    def compose(self) -> ComposeResult:
        yield RichLog(id="log-lines", wrap=True, min_width=20)  # wraps to the pane (default: 78 columns, clipped at 60)

    def focus_target(self):
        return self.query_one(RichLog)

    def has_no_rows(self) -> bool:
        return not self.log_lines

    def export_rows(self):
        return ("log", [{"line": line} for line in self.log_lines], (LINE_COLUMN,)) if self.log_lines else None

    def show_model(self, model: TraceModel) -> None:
        log = self.query_one(RichLog)
        log.clear()
        for line in self.log_lines or (NO_LOG,):
            log.write(Text(plain(line, 4 * DISPLAY_CHARS)))

    def watch_log_lines(self) -> None:
        if self.model is not None:
            self.show_model(self.model)
