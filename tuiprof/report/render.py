"""Rows -> text: rich tables for terminals, plain text, CSV, JSON, Markdown."""

from __future__ import annotations

import csv
import io
import re
import shutil
import sys
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TextIO

import orjson
from rich import box
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from tuiprof.report.names import fit_name, fit_names, short_kernel_names
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.views import Column, Row, public_row

# A table cell shows at most this much of a name (a trace can hold a 60 MB one);
# data formats keep the whole text.
CELL_CHARS = 500
NAME_CELLS = 60  # the widest a text column of a printed table gets
MIN_NAME = 22  # narrowest a name column gets before other columns are left out
MIN_OTHER_TEXT = 14  # narrowest a second text column (launcher, module) gets before the name shrinks
MIN_PANE_NAME = 8  # narrowest a name gets in a space too narrow for MIN_NAME and one number
RULE_CELLS = 3  # a column's padding (one cell each side) and divider
# JSON escapes C0 controls itself; DEL, C1 controls (U+009B is CSI to some terminals)
# and bidi overrides are valid raw in JSON strings: written as \u escapes (the same data).
_JSON_UNSAFE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# Spreadsheet programs run a cell that starts with one of these as a formula.
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: object) -> object:
    """A CSV cell that a spreadsheet shows as text: formulas neutralised with a
    leading ``'`` (numbers stay numbers), control characters escaped."""
    if value is None:
        return ""
    if not isinstance(value, str):
        return value
    if value.startswith(_FORMULA_START):
        value = "'" + value
    return plain(value)


def json_text(document: object) -> str:
    """``document`` as indented JSON safe to print: every ``--format json`` output
    (summary, diff, timeline, exports) goes through here.

    Names stay the file's data, not :func:`plain`'s ``\\x7f`` text: DEL, C1 controls
    and bidi overrides, valid raw in JSON, are written as ``\\u`` escapes, so a
    terminal never sees them and ``json.loads`` gives the exact name back."""
    text = orjson.dumps(document, option=orjson.OPT_INDENT_2).decode()
    return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def render_rows(rows: list[Row], columns: tuple[Column, ...], fmt: str, title: str = "") -> str:
    """Text of ``rows`` in ``fmt``; table text is plain (no colour, ASCII rules)."""
    if fmt == "json":
        return json_text([public_row(r, columns) for r in rows])
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([c.key for c in columns])
        for row in rows:
            public = public_row(row, columns)
            writer.writerow([csv_cell(public[c.key]) for c in columns])
        return buffer.getvalue()
    if fmt == "markdown":
        lines = ["| " + " | ".join(c.header for c in columns) + " |"]
        lines.append("|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|")
        for row in rows:
            cells = [plain(c.format(row.get(c.key)), CELL_CHARS).replace("|", "\\|") for c in columns]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"
    return _plain_table(rows, columns, title)


@dataclass(frozen=True)
class ExportOrigin:
    """What an export of the explorer was cut from, written into the file: the view, the
    trace, the sort, the filter and the toggles in force, and how many of the rows it holds."""

    view: str
    source: str  # the trace (a diff: both sides)
    sort: str = ""  # a column key; "": the view's own order
    descending: bool = True
    filter: str = ""
    settings: tuple[str, ...] = ()  # "grouped by input shape", "top-level only"
    total: int | None = None  # rows before the filter

    def describe(self, rows: int) -> str:
        """One line: ``operators of t.json.gz; sorted by self_cpu_us, descending; filter /conv: 12 of 340 rows``."""
        parts = [f"{self.view} of {self.source}"]
        parts.append(
            f"sorted by {self.sort}, {'descending' if self.descending else 'ascending'}"
            if self.sort
            else "in the view's order"
        )
        shown = (
            f"{rows:,} of {self.total:,} rows" if self.total is not None and self.total != rows else f"{rows:,} rows"
        )
        parts.append(f"filter /{self.filter}: {shown}" if self.filter else f"no filter: {shown}")
        parts.extend(self.settings)
        return plain("; ".join(parts))

    def metadata(self, rows: int) -> dict[str, object]:
        return {
            "view": self.view,
            "source": self.source,
            "sort": self.sort or None,
            "descending": self.descending,
            "filter": self.filter or None,
            "settings": list(self.settings),
            "rows": rows,
            "total": self.total,
        }


def render_export(rows: list[Row], columns: tuple[Column, ...], fmt: str, origin: ExportOrigin) -> str:
    """An export file that says where it came from: CSV starts with one ``# tuiprof export:``
    comment line (``pandas.read_csv(comment="#")`` skips it), JSON is an object whose
    ``export`` member holds the view, trace, sort, filter and toggles and ``rows`` the rows."""
    if fmt == "json":
        return json_text({"export": origin.metadata(len(rows)), "rows": [public_row(r, columns) for r in rows]})
    if fmt == "csv":
        return f"# tuiprof export: {origin.describe(len(rows))}\n" + render_rows(rows, columns, fmt)
    return render_rows(rows, columns, fmt)


def _plain_table(rows: list[Row], columns: tuple[Column, ...], title: str) -> str:
    # Not a terminal: no width to respect, every column is kept and no number squeezed.
    layout = layout_table(rows, columns, None)
    console = Console(file=io.StringIO(), width=1000, color_system=None, force_terminal=False)
    console.print(build_rich_table(rows, layout, title, ascii_rules=True))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


@dataclass(frozen=True)
class TableLayout:
    """The columns a table shows, each one's width in cells, and those left out to fit."""

    columns: tuple[Column, ...]
    widths: tuple[int, ...]
    dropped: tuple[Column, ...] = ()

    @property
    def width(self) -> int:
        """Cells of a line: each column, its padding and divider, and the edge."""
        return sum(w + RULE_CELLS for w in self.widths) + 1

    def dropped_line(self, width: int) -> str:
        """What was left out to fit ``width`` columns, in one line (none: "")."""
        if not self.dropped:
            return ""
        headers = [c.header for c in self.dropped]
        for named in range(len(headers), 0, -1):  # as many names as the line has room for
            more = f" and {len(headers) - named} more" if named < len(headers) else ""
            line = f"hidden to fit: {', '.join(headers[:named])}{more} (--wide shows all)"
            if cell_len(line) <= width:
                return line
        return f"{len(headers)} columns hidden (--wide shows all)"


def told_apart(column: Column, values: Iterable[object]) -> dict[object, str]:
    """Texts that ``column.format`` would give several different values, made different: kernels
    whose short names are the same show the template arguments that differ
    (``implicit_convolve_sgemm<1024, 6, 7, 5>``, names.short_kernel_names).  Only the values
    whose text changes are returned."""
    if column.kind != "kernel":
        return {}
    by_text: dict[str, set[str]] = {}
    for value in values:
        if isinstance(value, str):
            by_text.setdefault(column.format(value), set()).add(value)
    clashing = [value for same in by_text.values() if len(same) > 1 for value in same]
    if not clashing:
        return {}
    better = short_kernel_names(plain(value, DISPLAY_CHARS) for value in clashing)
    return {value: better[plain(value, DISPLAY_CHARS)] for value in clashing}


def _cell_texts(rows: list[Row], column: Column) -> list[str]:
    """What each row shows in ``column``, before names are cut to the column's width."""
    values = [row.get(column.key) for row in rows]
    apart = told_apart(column, values)
    return [plain(apart[v] if isinstance(v, str) and v in apart else column.format(v), CELL_CHARS) for v in values]


def layout_table(rows: list[Row], columns: tuple[Column, ...], width: int | None, keep: str = "") -> TableLayout:
    """Every column at its widest cell (names at most ``NAME_CELLS``) when ``width`` is None
    (a pipe, ``--wide``); else what fits ``width`` cells, in this order: columns with no
    value in any row go (all ``--``: they tell nothing, so they never cost a column that has
    values), the columns shown only on wide screens go (``Column.narrow`` False, right to
    left), then texts are cut (the other text columns down to ``MIN_OTHER_TEXT`` cells first,
    then the first text column, the name, down to ``MIN_NAME``: the name is what the row is),
    then other columns go from the right, then the name is cut further.  The first column
    (what the row is) and the sorted column ``keep`` always stay; numbers are never cut."""
    natural = []
    for column in columns:
        widest_cell = max([cell_len(column.header), *map(cell_len, _cell_texts(rows, column))])
        natural.append(widest_cell if column.numeric else min(widest_cell, NAME_CELLS))
    widths = dict(zip((c.key for c in columns), natural))
    if width is None:
        return TableLayout(columns, tuple(natural))
    shown = list(columns)

    def excess() -> int:
        return sum(widths[c.key] + RULE_CELLS for c in shown) + 1 - width

    def last_droppable(wide_only: bool) -> int | None:
        candidates = [i for i, c in enumerate(shown) if i > 0 and c.key != keep and not (wide_only and c.narrow)]
        return candidates[-1] if candidates else None

    dropped: list[Column] = []
    empty = [c for c in shown[1:] if c.key != keep and all(t in ("--", "") for t in _cell_texts(rows, c))]
    if excess() > 0:  # all of them, for good: an empty one back in a place a value lost tells nothing
        dropped += empty
        shown = [c for c in shown if c not in empty]
    while excess() > 0 and (drop := last_droppable(wide_only=True)) is not None:
        dropped.append(shown.pop(drop))
    texts = [c for c in shown if not c.numeric]
    for index, column in reversed(list(enumerate(texts))):  # the other texts (launcher, module) yield before the name
        floor = MIN_NAME if index == 0 else MIN_OTHER_TEXT
        widths[column.key] -= max(0, min(widths[column.key] - floor, excess()))
    while excess() > 0 and (drop := last_droppable(wide_only=False)) is not None:
        dropped.append(shown.pop(drop))
    widest = dict(zip((c.key for c in columns), natural))
    for column in texts:  # still too wide: names below their floor; room left over: names back to their width
        if column in shown:
            floor = min(widest[column.key], MIN_PANE_NAME)
            widths[column.key] = max(floor, min(widest[column.key], widths[column.key] - excess()))
    # Room left where a wide column went: columns come back, numbers before names (a name takes what is left).
    for column in sorted((c for c in reversed(dropped) if c not in empty), key=lambda c: not c.numeric):
        room = -excess() - RULE_CELLS
        if room >= (widest[column.key] if column.numeric else min(widest[column.key], MIN_OTHER_TEXT)):
            widths[column.key] = min(widest[column.key], room)
            shown = [c for c in columns if c in shown or c is column]
    return TableLayout(tuple(shown), tuple(widths[c.key] for c in shown), tuple(c for c in columns if c not in shown))


def print_rich_table(
    rows: list[Row], columns: tuple[Column, ...], title: str, keep: str = "", wide: bool = False
) -> None:
    """Coloured table for a terminal (honours NO_COLOR through rich), fitted to its width
    (a line says which columns were left out) unless ``wide``."""
    console = Console()
    layout = layout_table(rows, columns, None if wide else console.width, keep)
    if not wide:
        title = fit_title(title, min(layout.width, console.width))
    print_layout(console, build_rich_table(rows, layout, title, ascii_rules=False), layout)


def fit_title(title: str, width: int) -> str:
    """``View - trace name`` in ``width`` cells, the name after the first `` - `` cut by the
    one rule (``fit_name``), so that rich never wraps the title in the middle of a word."""
    head, sep, name = title.partition(" - ")
    if cell_len(title) <= width or not sep:
        return title
    return head + sep + fit_name(name, max(width - cell_len(head + sep), 8))


def print_layout(console: Console, table: Table, layout: TableLayout) -> None:
    """``table`` on ``console``: whole when wider than the terminal (``--wide``: the terminal
    wraps its lines, or ``less -S`` keeps them), never cropped mid-number; then the line
    that says which columns were left out."""
    (Console(width=layout.width) if layout.width > console.width else console).print(table)
    if layout.dropped:
        console.print(Text(layout.dropped_line(console.width), style="dim"))


def build_rich_table(rows: list[Row], layout: TableLayout, title: str, ascii_rules: bool) -> Table:
    """Cells and title are plain text: a name like ``[/]`` or ``[@click=...]``
    stays what it is (never rich markup), control characters are escaped.  Names are
    cut by the one rule (report.names.fit_names): rows that differ still read differently."""
    table = Table(
        title=Text(plain(title, CELL_CHARS)) if title else None,
        box=box.ASCII2 if ascii_rules else box.SIMPLE_HEAD,
        header_style="bold",
    )
    columns = []
    for column, width in zip(layout.columns, layout.widths):
        table.add_column(
            column.header, justify="right" if column.numeric else "left", overflow="ellipsis", no_wrap=True, width=width
        )
        texts = _cell_texts(rows, column)
        if not column.numeric:
            cut = fit_names((t for t in texts if cell_len(t) > width), width)
            texts = [cut.get(text, text) for text in texts]
        columns.append(texts)
    for cells in zip(*columns):
        table.add_row(*map(Text, cells))
    return table


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def print_notice(text: str, file: TextIO | None = None) -> None:
    """A notice on stderr (or ``file``, a capture's copy of the terminal), made :func:`plain`:
    on a terminal, wrapped between words at its width (a path longer than a line is folded,
    nothing else is cut mid-word); on a pipe, one line for grep."""
    stream = file or sys.stderr
    text = plain(text)
    if stream.isatty():
        width = shutil.get_terminal_size().columns
        text = textwrap.fill(text, max(width, 20), subsequent_indent="  ", break_on_hyphens=False)
    print(text, file=stream, flush=True)
