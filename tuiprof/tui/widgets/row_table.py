"""A sortable, filterable table that renders only the lines on screen.

Textual's DataTable builds every row up front and freezes above a few
thousand rows (3.4 s for 10k).  This table keeps the rows as plain dicts,
sorts an index, and formats only the ~40 visible lines on each paint, so a
million rows cost the same per key press as a hundred.
"""

from __future__ import annotations

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tuiprof.report.names import cut_end, fit_name, fit_names
from tuiprof.report.render import (  # the printed tables' limits
    MIN_NAME,
    MIN_OTHER_TEXT,
    MIN_PANE_NAME,
    NAME_CELLS,
    told_apart,
)
from tuiprof.report.views import Column, Row, sort_rows
from tuiprof.tui.commands import TABLE_COMMANDS, bindings

GAP = 2
WIDTH_SAMPLE = 2000  # rows measured to size columns
NAME_SAMPLE = 20_000  # rows whose names are cut so that no two read the same (the rest: each on its own)


class RowTable(ScrollView, can_focus=True):
    """Rows of one view; line 0 is the header, the rest scroll under it."""

    PANE_COMMANDS = TABLE_COMMANDS  # what ? lists for a view holding a table
    BINDINGS = bindings(TABLE_COMMANDS)
    COMPONENT_CLASSES = {
        "row-table--header",
        "row-table--cursor",
        "row-table--sorted",
        "row-table--dim",
        "row-table--filter",
    }
    DEFAULT_CSS = """
    RowTable { background: $surface; }
    RowTable > .row-table--header { text-style: bold; color: $text; background: $panel; }
    RowTable > .row-table--cursor { background: $accent 40%; }
    RowTable:focus > .row-table--cursor { background: $accent; color: $text; }
    RowTable > .row-table--sorted { text-style: bold; }
    RowTable > .row-table--dim { color: $text-muted; }
    RowTable > .row-table--filter { color: $warning; }
    """

    cursor = reactive(0, always_update=True)

    class Highlighted(Message):
        """The cursor moved onto ``row`` (None when the table is empty)."""

        def __init__(self, table: RowTable, row: Row | None) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> RowTable:
            return self.table

    class Selected(Highlighted):
        """Enter was pressed on ``row``."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.columns: tuple[Column, ...] = ()
        self.all_rows: list[Row] = []
        self.rows: list[Row] = []  # filtered and sorted: what is shown
        self.sort_key = ""
        self.descending = True
        self.filter_text = ""
        self.empty_message = "nothing to show"
        self._widths: dict[str, int] = {}
        self._styles_kept: dict[tuple[str, bool], Style] = {}  # _style()
        self._sorted_as: tuple[str, bool] | None = None  # the order all_rows came in, when sorted elsewhere
        self._shown: tuple[Column, ...] = ()
        self._cut_names: dict[tuple[str, int], dict[str, str]] = {}  # (column, width) -> name -> as shown
        self._apart: dict[
            str, dict[object, str]
        ] = {}  # column -> value -> its text, where format() alone reads the same

    # ------------------------------------------------------------ data

    def set_data(
        self,
        columns: tuple[Column, ...],
        rows: list[Row],
        sort_key: str = "",
        descending: bool = True,
        presorted: bool = False,
    ) -> None:
        """Replace every row; keeps the filter, applies ``sort_key``.  ``presorted``: the rows
        already come in that order (sorted in a worker: 100k rows take most of a second here)."""
        self.columns = columns
        self.all_rows = rows
        if sort_key or self.sort_key not in {c.key for c in columns}:
            self.sort_key = sort_key
            self.descending = descending
        self._sorted_as = (self.sort_key, self.descending) if presorted else None
        self._cut_names = {}
        sample = rows[:NAME_SAMPLE]
        self._apart = {c.key: apart for c in columns if (apart := told_apart(c, (row.get(c.key) for row in sample)))}
        self._measure()
        self._apply()
        self.refresh_bindings()  # sort and the app's keys on rows come and go with the rows (check_action)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No sort on a table without rows: it would only move an empty header's arrow."""
        return bool(self.all_rows) or action not in ("next_sort", "reverse_sort")

    def set_filter(self, text: str) -> None:
        self.filter_text = text
        self._apply()

    def sort_by(self, key: str, descending: bool | None = None) -> None:
        """Sort (s, r, a header click, the palette) and show the top of the new order: the
        cursor and the scroll go to the first row.  Following the row under the cursor
        (as a filter does) scrolled the rows the sort was asked for out of view."""
        column = next((c for c in self.columns if c.key == key), None)
        if column is None:
            return
        self.sort_key = key
        self.descending = column.numeric if descending is None else descending
        self._apply(keep_row=False)

    def select_where(self, matches) -> bool:
        """Move the cursor to the first shown row for which ``matches(row)`` is true
        (scrolled into view once laid out: the table may just have been shown)."""
        for index, row in enumerate(self.rows):
            if matches(row):
                self.cursor = index
                self.call_after_refresh(self._scroll_to_cursor)
                return True
        return False

    @property
    def current_row(self) -> Row | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def _apply(self, keep_row: bool = True) -> None:
        """Filter and sort ``all_rows``; the cursor stays on its row (``keep_row``) or goes to the first."""
        previous = self.current_row if keep_row else None
        needle = self.filter_text.lower()
        rows = self.all_rows
        if needle:
            text_key = self._filtered_key()
            rows = [r for r in rows if needle in str(r.get(text_key, "")).lower()]
        if self.sort_key and not (rows is self.all_rows and self._sorted_as == (self.sort_key, self.descending)):
            rows = sort_rows(rows, self.sort_key, self.descending)
        self.rows = rows
        self._layout_columns()
        self.virtual_size = Size(self._line_width(), len(rows) + 1)
        index = next((i for i, r in enumerate(rows) if r is previous), 0) if previous is not None else 0
        self.cursor = min(index, max(0, len(rows) - 1))
        self.refresh()

    def _filtered_key(self) -> str:
        """The column ``/`` filters: the first text column (the name)."""
        return next((c.key for c in self.columns if not c.numeric), "")

    def _measure(self) -> None:
        sample = self.all_rows[:WIDTH_SAMPLE]
        widths = {}
        for column in self.columns:
            width = cell_len(column.header) + 2  # room for the sort arrow
            for row in sample:
                width = max(width, cell_len(self._text(column, row.get(column.key))))
            widths[column.key] = min(width, NAME_CELLS) if not column.numeric else width
        self._widths = widths

    def _layout_columns(self) -> None:
        """Columns that fit: drop wide-only ones (right to left) until the rest fit,
        then numbers from the right; the name yields first and the sorted column always stays."""
        available = max(20, self.size.width or 80)
        shown = list(self.columns)
        keep = self._kept_for_sort()
        while self._total(shown) > available and any(not c.narrow and c.key != keep for c in shown):
            drop = max(i for i, c in enumerate(shown) if not c.narrow and c.key != keep)
            shown.pop(drop)

        # Still too wide: keep the name readable, drop numbers from the right
        # (never the sort column).
        def squeezed(columns: list[Column]) -> int:
            return sum(
                min(self._widths.get(c.key, 8), MIN_NAME) if not c.numeric else self._widths.get(c.key, 8)
                for c in columns
            ) + GAP * len(columns)

        while squeezed(shown) > available and sum(c.numeric for c in shown) > 1:
            drop = max(i for i, c in enumerate(shown) if c.numeric and c.key != keep)
            shown.pop(drop)
        self._shown = tuple(shown)

    def _kept_for_sort(self) -> str:
        """The column that always stays: the sorted one, or the one that stands in for it
        when it is shown only on wide screens (``Column.stands_in``: |Delta| by Delta)."""
        sorted_column = next((c for c in self.columns if c.key == self.sort_key), None)
        if (
            sorted_column is not None
            and not sorted_column.narrow
            and sorted_column.stands_in in {c.key for c in self.columns}
        ):
            if self._total(list(self.columns)) > max(20, self.size.width or 80):
                return sorted_column.stands_in
        return self.sort_key

    def _total(self, columns: list[Column]) -> int:
        return sum(self._widths.get(c.key, 8) + GAP for c in columns)

    def _line_width(self) -> int:
        return max(self.size.width, self._total(list(self._shown)))

    def on_resize(self, event: events.Resize) -> None:
        self._layout_columns()
        self.virtual_size = Size(self._line_width(), len(self.rows) + 1)

    # ------------------------------------------------------------ drawing

    def _cell_widths(self) -> list[int]:
        """Final widths: the first text column (the name) takes what the screen has left,
        and gives way last (after the other text columns) when the screen is too narrow."""
        widths = [self._widths.get(c.key, 8) for c in self._shown]
        spare = self.size.width - sum(w + GAP for w in widths)
        first_text = next((i for i, c in enumerate(self._shown) if not c.numeric), None)
        if first_text is None:
            return widths
        if spare >= 0:
            widths[first_text] += spare  # the name takes what is left
            return widths
        # Too narrow: the other text columns (launcher, module) yield first, then the name
        # (what the row is: it keeps its width longest); numbers never.  In a narrow pane the
        # name may go below MIN_NAME rather than push numbers off the edge.
        numbers = sum(w + GAP for w, c in zip(widths, self._shown) if c.numeric)
        name_floor = max(MIN_PANE_NAME, min(MIN_NAME, self.size.width - numbers - GAP))
        for i, column in sorted(enumerate(self._shown), key=lambda item: item[0] == first_text):
            floor = name_floor if i == first_text else MIN_OTHER_TEXT
            if column.numeric or spare >= 0 or widths[i] <= floor:
                continue
            cut = min(widths[i] - floor, -spare)
            widths[i] -= cut
            spare += cut
        return widths

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        base = self._style("")
        if y == 0:
            strip = self._header_strip()
        else:
            index = scroll_y + y - 1
            if index >= len(self.rows):
                message = self.empty_message
                if self.filter_text and self.all_rows:
                    message = f"No row matches /{self.filter_text} (esc clears the filter)."
                lines = _wrap(message, max(10, width - 2)) if not self.rows else []
                if 1 <= y <= len(lines):  # the empty state, wrapped: it says why and what to do
                    style = self._style("row-table--dim")
                    return Strip([Segment(f" {lines[y - 1]}".ljust(width), style)], width)
                return Strip.blank(width, base)
            strip = self._row_strip(index)
        return strip.crop_extend(scroll_x, scroll_x + width, base)

    def _style(self, component: str) -> Style:
        """The widget's style ("") or a component's, kept until the styles change: looked up
        for every line drawn, each lookup walked the widget's ancestors (a fifth of the first
        draw of a table)."""
        key = (component, self.has_focus)
        style = self._styles_kept.get(key)
        if style is None:
            style = self._styles_kept[key] = self.get_component_rich_style(component) if component else self.rich_style
        return style

    def notify_style_update(self) -> None:
        self._styles_kept.clear()  # a theme, the CSS or a pseudo-class changed
        super().notify_style_update()

    def _header_strip(self) -> Strip:
        style = self._style("row-table--header")
        filtered = self._filtered_key() if self.filter_text else None
        segments = []
        for column, width in zip(self._shown, self._cell_widths()):
            label = column.header
            if column.key == self.sort_key:
                label += " ▼" if self.descending else " ▲"
            elif column.key == self._kept_for_sort():  # standing in for the sorted column (|Delta| by Delta)
                label += " |▼|" if self.descending else " |▲|"
            if column.key == filtered:  # the filter in force, where it applies: "name /conv 12/340"
                text = _fit(f"{label} /{self.filter_text} {len(self.rows):,}/{len(self.all_rows):,}", width, False)
                segments.append(Segment(text[: len(label)], style))
                segments.append(Segment(text[len(label) :] + " " * GAP, style + self._style("row-table--filter")))
                continue
            segments.append(Segment(_fit(label, width, column.numeric) + " " * GAP, style))
        return Strip(segments)

    def _row_strip(self, index: int) -> Strip:
        row = self.rows[index]
        if index == self.cursor:
            style = self._style("row-table--cursor")
            sorted_style = style + Style(bold=True)
        else:
            style = self._style("")
            sorted_style = style + self._style("row-table--sorted")
        segments = []
        for column, width in zip(self._shown, self._cell_widths()):
            value = row.get(column.key)
            text = _fit(self._cut(column, self._text(column, value), width), width, column.numeric)
            cell = sorted_style if column.key == self.sort_key else style
            colour = getattr(column, "cell_style", None)  # columns that colour their values (diff deltas)
            if colour is not None and (name := colour(value)):
                segments.append(Segment(text, cell + Style.parse(name)))
                segments.append(Segment(" " * GAP, cell))
            else:
                segments.append(Segment(text + " " * GAP, cell))
        return Strip(segments)

    def _text(self, column: Column, value: object) -> str:
        """A cell's text before it is fitted: ``column.format``, told apart from rows that would read the same."""
        apart = self._apart.get(column.key)
        return apart[value] if apart and isinstance(value, str) and value in apart else column.format(value)

    def _cut(self, column: Column, text: str, width: int) -> str:
        """A text cell in ``width`` cells, cut by the one rule for names (report.names.fit_names):
        rows whose names differ still differ on screen."""
        if column.numeric or cell_len(text) <= width:
            return text
        key = (column.key, width)
        if key not in self._cut_names:
            texts = {self._text(column, row.get(column.key)) for row in self.all_rows[:NAME_SAMPLE]}
            self._cut_names[key] = fit_names((t for t in texts if cell_len(t) > width), width)
        return self._cut_names[key].get(text) or fit_name(text, width)

    # ------------------------------------------------------------ movement

    def watch_cursor(self, old: int, new: int) -> None:
        self._scroll_to_cursor()
        self.refresh()
        self.post_message(self.Highlighted(self, self.current_row))

    def _scroll_to_cursor(self) -> None:
        visible = max(1, self.size.height - 1)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False)
        elif self.cursor >= top + visible:
            self.scroll_to(y=self.cursor - visible + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        if self.rows:
            self.cursor = max(0, min(len(self.rows) - 1, self.cursor + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(1, self.size.height - 2))

    def action_jump(self, where: int) -> None:
        if self.rows:
            self.cursor = 0 if where == 0 else len(self.rows) - 1

    def action_next_sort(self) -> None:
        keys = [c.key for c in self._shown]
        if not keys:
            return
        position = keys.index(self.sort_key) if self.sort_key in keys else -1
        self.sort_by(keys[(position + 1) % len(keys)])

    def action_reverse_sort(self) -> None:
        if self.sort_key:
            self.sort_by(self.sort_key, not self.descending)

    def action_select(self) -> None:
        self.post_message(self.Selected(self, self.current_row))

    def on_click(self, event: events.Click) -> None:
        if event.y == 0:
            x = event.x + self.scroll_offset.x
            for column, width in zip(self._shown, self._cell_widths()):
                if x < width + GAP:
                    same = column.key == self.sort_key
                    self.sort_by(column.key, (not self.descending) if same else None)
                    return
                x -= width + GAP
            return
        index = self.scroll_offset.y + event.y - 1
        if 0 <= index < len(self.rows):
            self.cursor = index


def _wrap(text: str, width: int) -> list[str]:
    """Words in lines of at most ``width`` cells (a longer word is cut)."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        if line and cell_len(line) + 1 + cell_len(word) > width:
            lines.append(line)
            line = ""
        line = f"{line} {word}" if line else word[:width]
    return [*lines, line] if line else lines


def _fit(text: str, width: int, right: bool) -> str:
    """Pad to ``width``; a header or the filter line is cut at its end, a number never (it would
    lose its unit; names are cut before, by :meth:`RowTable._cut`)."""
    if not right:
        text = cut_end(text, width)
    return text.rjust(width) if right else text.ljust(width)
