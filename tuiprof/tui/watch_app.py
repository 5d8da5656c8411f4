"""``tuiprof open DIR`` on a watch folder: the step-time history as a chart, triggers marked,
and the list of captures.

Enter opens the selected capture in the explorer; ``d`` compares it with the
healthy capture (the verdict first, then where the step time went, then the
operator diff), and from there ``D`` opens the full diff explorer.  While the
job runs (its history has no end line) the chart and the list follow it,
re-read every second.  The explorers run after this app exits and it comes
back when they are closed (:func:`run_watch_explorer`).  It only draws:
reading is :mod:`tuiprof.trace.watch`, numbers :mod:`tuiprof.analysis.watch`,
texts :mod:`tuiprof.report.watch`.
"""

from __future__ import annotations

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from tuiprof.analysis.watch import CaptureComparison, WatchSummary, compare_captures, summarise_watch
from tuiprof.errors import TraceError
from tuiprof.report.plain import plain
from tuiprof.report.watch import WATCH_COLUMNS, capture_label, chart_text, comparison_text, header_lines, watch_rows
from tuiprof.trace.watch import HistoryReader

FOLLOW_SECONDS = 1.0
LIST_COLUMNS = tuple(c for c in WATCH_COLUMNS if c.key != "dropped")  # the list shows kept captures only


class CompareScreen(Screen):
    """A capture against the healthy one (computed in a worker: two traces are loaded)."""

    BINDINGS = [Binding("escape,q", "back", "Back"), Binding("D", "full_diff", "Full diff")]

    def __init__(self, healthy: str, other: str) -> None:
        super().__init__()
        self.paths = (healthy, other)
        self.comparison: CaptureComparison | None = None

    def compose(self) -> ComposeResult:
        yield Static(Text(f"comparing {capture_label(self.paths[1])} with the healthy capture..."), id="compare-title")
        with VerticalScroll():
            yield Static(id="comparison")
        yield Footer()

    def on_mount(self) -> None:
        self._compare()

    @work(thread=True, exclusive=True)
    def _compare(self) -> None:
        try:
            comparison = compare_captures(*self.paths)
        except TraceError as exc:
            self.app.call_from_thread(self._show, Text(f"cannot compare: {plain(str(exc))}"))
            return
        self.comparison = comparison
        self.app.call_from_thread(self._show, comparison_text(comparison))

    def _show(self, text: Text) -> None:
        self.query_one("#compare-title", Static).update(
            Text(f"{capture_label(self.paths[1])} against the healthy capture")
        )
        self.query_one("#comparison", Static).update(text)

    def action_back(self) -> None:
        self.app.pop_screen()

    def action_full_diff(self) -> None:
        self.app.exit(("diff", *self.paths))


class WatchApp(App):
    TITLE = "tuiprof watch"
    CSS = """
    #chart { height: auto; padding: 0 1; }
    #job { height: auto; padding: 0 1; }
    #captures { height: 1fr; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("enter", "open_capture", "Open", priority=True),
        Binding("d", "compare", "Diff vs healthy"),
    ]

    def __init__(self, reader: HistoryReader) -> None:
        super().__init__()
        self.reader = reader
        self.summary: WatchSummary = summarise_watch(reader.history)
        self.shown: list[dict] = []

    def compose(self) -> ComposeResult:
        yield Static(id="job")
        yield Static(id="chart")
        yield DataTable(id="captures", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#captures", DataTable)
        for column in LIST_COLUMNS:
            table.add_column(column.header, key=column.key)
        self._draw()
        if self.reader.history.end_status is None:
            self.set_interval(FOLLOW_SECONDS, self._follow)

    def on_resize(self) -> None:
        self._draw_chart()

    def _follow(self) -> None:
        """A running job: take what it appended (the chart and the list grow)."""
        try:
            appended = self.reader.read_new()
        except TraceError as exc:
            self.notify(plain(str(exc)), severity="error", markup=False)
            return
        if appended:
            self.summary = summarise_watch(self.reader.history)
            self._draw()

    def _draw(self) -> None:
        self.query_one("#job", Static).update(Text("\n".join(header_lines(self.summary))))
        self._draw_chart()
        table = self.query_one("#captures", DataTable)
        row = table.cursor_row
        table.clear()
        self.shown = watch_rows(self.summary, with_dropped=False)
        for item in self.shown:
            shown = dict(item, path=capture_label(str(item["path"])))
            table.add_row(
                *(
                    Text(plain(c.format(shown.get(c.key))), justify="right" if c.numeric else "left")
                    for c in LIST_COLUMNS
                )
            )
        if self.shown:
            table.move_cursor(row=min(row, len(self.shown) - 1))

    def _draw_chart(self) -> None:
        width = max(20, self.size.width - 2)
        self.query_one("#chart", Static).update(chart_text(self.reader.history, width))

    def _selected(self) -> dict | None:
        table = self.query_one("#captures", DataTable)
        return self.shown[table.cursor_row] if self.shown and 0 <= table.cursor_row < len(self.shown) else None

    def action_open_capture(self) -> None:
        selected = self._selected()
        if selected is not None:
            self.exit(("open", str(selected["path"])))

    def action_compare(self) -> None:
        selected = self._selected()
        healthy = self.summary.healthy
        if selected is None:
            return
        if healthy is None or healthy.capture.dropped is not None:
            self.notify("no healthy capture to compare with", severity="warning")
            return
        healthy_path = str(self.summary.history.directory / healthy.capture.path)
        if selected["path"] == healthy_path:
            self.notify("this is the healthy capture: pick another", severity="warning")
            return
        self.push_screen(CompareScreen(healthy_path, str(selected["path"])))


def run_watch_explorer(directory: str) -> int:
    """The watch app; an explorer it asks for runs in its place, then the watch app comes back."""
    from tuiprof.trace.watch import read_history  # bad input: one line before any screen

    read_history(directory)
    while True:
        reader = HistoryReader(directory)
        reader.read_new()
        action = WatchApp(reader).run()
        if not action:
            return 0
        kind, *paths = action
        if kind == "open":
            from tuiprof.tui.app import run_explorer

            run_explorer(paths[0])
        else:
            from tuiprof.tui.diff_app import DiffSource, run_diff_explorer

            run_diff_explorer(DiffSource(*paths))
