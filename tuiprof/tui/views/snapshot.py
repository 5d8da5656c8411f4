"""The pages of ``tuiprof open SNAP`` (an allocator snapshot): Peak, Modules, Segments, OOMs.

Like diff mode's pages they are not explorer views of a TraceModel: the snapshot app assigns a
:class:`SnapshotState` (the model, the GPU shown, the OOM shown or None for the peak) to their
``state`` reactive.  They compute nothing: rows, columns, the chart and every text come from
report/snapshot_tables.py and report/snapshot.py.  Frames and file names are data: every text
is a ``rich.text.Text`` or a table cell, never markup.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import RenderableType
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.reactive import reactive
from textual.widgets import Static

from tuiprof.analysis.snapshot import OutOfMemory, SnapshotModel, StackGroup
from tuiprof.analysis.snapshot_trace import PeakPlace
from tuiprof.report.snapshot import headline, peak_heading, placement_line, stack_detail
from tuiprof.report.snapshot_tables import (
    HELP_VIEWS,
    ModuleGroupRow,
    OomRow,
    SegmentRow,
    StackRow,
    held_modules,
    memory_chart,
    module_detail,
    module_rows,
    oom_detail,
    oom_heading,
    oom_rows,
    segment_detail,
    segment_rows,
    stack_rows,
)
from tuiprof.report.views import Column, Row, View
from tuiprof.tui.commands import Command, bindings
from tuiprof.tui.messages import ShowOom
from tuiprof.tui.views.base import TableDetailView
from tuiprof.tui.widgets.row_table import RowTable

CHART_ROWS = 4  # on a screen of at least TALL_SCREEN rows; 2 below, so the table keeps its room at 80x24
TALL_SCREEN = 30


@dataclass(frozen=True, eq=False)  # compared by identity: a new state is a new drawing
class SnapshotState:
    model: SnapshotModel
    device: int
    oom: OutOfMemory | None  # None: the peak
    place: PeakPlace | None  # where the peak fell in a profiler trace (--trace)

    def held(self) -> tuple[list[StackGroup], int]:
        """The stacks holding memory at the moment shown, and the device's allocated bytes then."""
        if self.oom is not None:
            return self.oom.held_by, self.oom.allocated
        peak = self.model.peaks[self.device]
        return peak.groups, peak.allocated


@dataclass(frozen=True)
class SnapshotPage:
    view_id: str
    title: str
    table: str  # its table in report.snapshot_tables.HELP_VIEWS


SNAPSHOT_PAGES: tuple[SnapshotPage, ...] = (
    SnapshotPage("snap-peak", "Peak", "stacks"),
    SnapshotPage("snap-modules", "Modules", "modules"),
    SnapshotPage("snap-segments", "Segments", "segments"),
    SnapshotPage("snap-ooms", "OOMs", "ooms"),
)


DETAIL_COMMANDS: tuple[Command, ...] = (
    Command("up,k", "scroll_up", "Up", "detail pane: scroll up", scope="detail", display="↑ k", palette=False),
    Command("down,j", "scroll_down", "Down", "detail pane: scroll down", scope="detail", display="↓ j", palette=False),
    Command("pageup", "page_up", "PgUp", "detail pane: page up", scope="detail", palette=False),
    Command("pagedown", "page_down", "PgDn", "detail pane: page down", scope="detail", palette=False),
    Command(
        "home,g", "scroll_home", "Top", "detail pane: the first line", scope="detail", display="g home", palette=False
    ),
    Command(
        "end,G", "scroll_end", "Bottom", "detail pane: the last line", scope="detail", display="G end", palette=False
    ),
)


class DetailScroll(VerticalScroll):
    """The detail pane: as tall as the table (it grows with the terminal) and scrolled with the
    tables' keys once focused (the app's ``f``; ``esc`` or ``f`` gives the keys back to the table)."""

    PANE_COMMANDS = DETAIL_COMMANDS  # what ? lists on a snapshot page
    BINDINGS = bindings(DETAIL_COMMANDS)


class SnapshotView(TableDetailView):
    """A page: one table of the state, a scrolling detail pane for the cursor's row."""

    state: reactive[SnapshotState | None] = reactive(None, init=False)

    def __init__(self, page: SnapshotPage, **kwargs) -> None:
        super().__init__(id=page.view_id, **kwargs)
        self.page = page

    def compose(self) -> ComposeResult:
        yield RowTable(id=f"{self.id}-table")
        with DetailScroll(id=f"{self.id}-pane", classes="detail"):
            yield Static(id=f"{self.id}-detail")

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        super().show_detail(table, row)
        self.query_one(DetailScroll).scroll_home(animate=False)  # a new row: its first lines

    def toggle_detail_focus(self) -> None:
        """``f``: the keys to the detail pane (to scroll it), or back to the table."""
        pane = self.query_one(DetailScroll)
        self.screen.set_focus(self.query_one(RowTable) if pane.has_focus else pane)

    def watch_state(self, state: SnapshotState | None) -> None:
        if state is not None and not self.app_quitting():
            table = self.query_one(RowTable)
            table.empty_message = self.empty_message(state)
            view = HELP_VIEWS[self.page.table]
            if table.sort_key:
                sort, descending = table.sort_key, table.descending
            else:  # the most bytes first; OOMs in the order they happened
                sort, descending = view.default_sort, self.page.table != "ooms"
            table.set_data(view.columns, self.rows(state), sort, descending)

    def rows(self, state: SnapshotState) -> list[Row]:
        raise NotImplementedError

    def empty_message(self, state: SnapshotState) -> str:
        raise NotImplementedError

    def help_columns(self) -> View:
        return HELP_VIEWS[self.page.table]

    def export_rows(self) -> tuple[str, list[Row], tuple[Column, ...]] | None:
        table = self.query_one(RowTable)
        return (HELP_VIEWS[self.page.table].name, table.rows, table.columns)


class PeakPage(SnapshotView):
    """The headline, the memory chart, and the stacks live at the peak (or at an OOM: ``o``);
    the stack pane marks the user's frames and hides torch's on ``t`` (``torch_hidden``)."""

    torch_hidden: reactive[bool] = reactive(False, init=False)

    def compose(self) -> ComposeResult:
        yield Static(id="snap-headline")
        yield Static(id="snap-chart")
        yield Static(id="snap-heading", classes="muted")
        yield from super().compose()

    def watch_torch_hidden(self) -> None:
        table = self.query_one(RowTable)
        self.show_detail(table, table.current_row)

    def watch_state(self, state: SnapshotState | None) -> None:
        if state is None or self.app_quitting():
            return
        first = headline(state.model) + (f"\n{placement_line(state.place)}" if state.place else "")
        self.query_one("#snap-headline", Static).update(Text(first))
        self._draw_chart()
        heading = oom_heading(state.model, state.oom) if state.oom else peak_heading(state.model, state.device)
        self.query_one("#snap-heading", Static).update(Text(heading))
        super().watch_state(state)

    def on_resize(self, event: events.Resize) -> None:
        self._draw_chart()

    def _draw_chart(self) -> None:
        state = self.state
        if state is None:
            return
        width = self.size.width or 78
        rows = CHART_ROWS if self.app.size.height >= TALL_SCREEN else CHART_ROWS // 2
        self.query_one("#snap-chart", Static).update(
            Text("\n".join(memory_chart(state.model, state.device, width, rows)))
        )

    def rows(self, state: SnapshotState) -> list[Row]:
        groups, whole = state.held()
        return stack_rows(state.model, groups, whole)

    def empty_message(self, state: SnapshotState) -> str:
        return f"nothing was allocated on cuda:{state.device} then"

    def detail_text(self, row: Row) -> RenderableType:
        assert self.state is not None
        if not isinstance(row, StackRow):
            return Text()
        text = Text()
        for line in stack_detail(self.state.model, row.item, self.state.held()[1], self.torch_hidden):
            text.append(line.text + "\n", style="bold" if line.own else "")
        text.rstrip()
        return text


class ModulesPage(SnapshotView):
    def rows(self, state: SnapshotState) -> list[Row]:
        groups, whole = state.held()
        modules = held_modules(state.model, groups) if state.oom else state.model.peaks[state.device].modules
        return module_rows(modules, whole) if any(m.path for m in modules) else []

    def empty_message(self, state: SnapshotState) -> str:
        return "no allocation then ran inside an nn.Module forward (or its frames do not show one)"

    def detail_text(self, row: Row) -> RenderableType:
        assert self.state is not None
        if not isinstance(row, ModuleGroupRow):
            return Text()
        return Text(module_detail(row.item, self.state.held()[1]))


class SegmentsPage(SnapshotView):
    def rows(self, state: SnapshotState) -> list[Row]:
        return segment_rows(state.model, state.device)

    def empty_message(self, state: SnapshotState) -> str:
        return f"no segment on cuda:{state.device} when the snapshot was taken"

    def detail_text(self, row: Row) -> RenderableType:
        return Text(segment_detail(row.item)) if isinstance(row, SegmentRow) else Text()


class OomsPage(SnapshotView):
    """Every OOM; enter shows what held memory at the highlighted one on the Peak page."""

    def rows(self, state: SnapshotState) -> list[Row]:
        return oom_rows(state.model)

    def empty_message(self, state: SnapshotState) -> str:
        return "no out-of-memory error in this snapshot"

    def detail_text(self, row: Row) -> RenderableType:
        assert self.state is not None
        if not isinstance(row, OomRow):
            return Text()
        return Text(oom_detail(self.state.model, row.item) + "\n\nenter: every stack that held memory then")

    @on(RowTable.Selected)
    def _show_held(self, event: RowTable.Selected) -> None:
        if isinstance(event.row, OomRow):
            self.post_message(ShowOom(event.row.item))


def snapshot_page(page: SnapshotPage) -> SnapshotView:
    kinds = {"stacks": PeakPage, "modules": ModulesPage, "segments": SegmentsPage, "ooms": OomsPage}
    return kinds[page.table](page)
