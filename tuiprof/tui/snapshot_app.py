"""``tuiprof open SNAP`` on a terminal: an allocator snapshot's peak, what holds it, and each stack.

A small app of its own (like diff_app.py): the curve of allocated memory, the
stacks live at the peak (or at an OOM: ``o``) as a table, and the highlighted
stack's frames in full in a detail pane.  Everything shown is computed by
analysis/snapshot.py and worded by report/snapshot.py; frames are data, shown
as ``rich.text.Text``, never markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.widgets import DataTable, Footer, Sparkline, Static

from tuiprof.analysis.snapshot import SnapshotModel, StackGroup
from tuiprof.analysis.snapshot_trace import PeakPlace
from tuiprof.report.snapshot import (
    curve,
    device_heading,
    headline,
    module_where,
    placement_line,
    short_where,
    stack_detail,
)
from tuiprof.report.units import format_bytes

CURVE_POINTS = 200


class SnapshotApp(App):
    CSS = """
    #headline { height: auto; }
    #curve { height: 4; }
    #heading { height: auto; color: $text-muted; }
    #stacks { height: 3fr; }
    #detail { height: 2fr; border-top: solid $primary; overflow-y: auto; }
    """
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("d", "next_device", "Next device"),
        Binding("o", "toggle_oom", "Peak/OOM"),
    ]

    def __init__(self, model: SnapshotModel, place: PeakPlace | None = None) -> None:
        super().__init__()
        self.model = model
        self.place = place
        self.device = max(model.peaks, key=lambda p: p.allocated).device if model.peaks else 0
        self.showing_oom = False
        self.groups: list[StackGroup] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            first = headline(self.model) + (f"\n{placement_line(self.place)}" if self.place else "")
            yield Static(Text(first), id="headline")
            yield Sparkline([0.0], id="curve")
            yield Static(id="heading")
            yield DataTable(id="stacks", cursor_type="row", zebra_stripes=True)
            yield Static(id="detail")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("bytes", "share", "allocs", "where (innermost own frame)", "module")
        self.show()

    def show(self) -> None:
        model = self.model
        if not model.peaks:
            return
        ooms = [o for o in model.ooms if o.device == self.device]
        self.showing_oom = self.showing_oom and bool(ooms)
        whole = ooms[0].allocated if self.showing_oom else model.peaks[self.device].allocated
        self.groups = ooms[0].held_by if self.showing_oom else model.peaks[self.device].groups
        self.query_one(Sparkline).data = curve(model, self.device, CURVE_POINTS)
        self.query_one("#heading", Static).update(Text(device_heading(model, self.device, self.showing_oom)))
        table = self.query_one(DataTable)
        table.clear()
        for group in self.groups:
            share = f"{100 * group.bytes / whole:.1f}%" if whole else "-"
            table.add_row(
                Text(format_bytes(group.bytes), justify="right"),
                Text(share, justify="right"),
                Text(f"{group.count:,}", justify="right"),
                Text(short_where(model, group.stack)),
                Text(module_where(model, group.stack)),
            )
        self.show_detail(0)

    def show_detail(self, row: int) -> None:
        detail = self.query_one("#detail", Static)
        if 0 <= row < len(self.groups):
            whole = sum(g.bytes for g in self.groups)
            detail.update(Text(stack_detail(self.model, self.groups[row], whole)))
        else:
            detail.update(Text("nothing was allocated here"))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_detail(event.cursor_row)

    def action_next_device(self) -> None:
        self.device = (self.device + 1) % max(1, len(self.model.peaks))
        self.show()

    def action_toggle_oom(self) -> None:
        if any(o.device == self.device for o in self.model.ooms):
            self.showing_oom = not self.showing_oom
            self.show()
        else:
            self.notify(f"no out-of-memory error on cuda:{self.device}", markup=False)  # text, never markup


def run_snapshot_explorer(model: SnapshotModel, place: PeakPlace | None = None) -> int:
    return int(SnapshotApp(model, place).run() or 0)
