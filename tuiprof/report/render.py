"""Rows -> text: rich tables for terminals, plain text, CSV, JSON, Markdown."""

from __future__ import annotations

import csv
import io
import re
import sys

import orjson
from rich import box
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from tuiprof.report.plain import plain
from tuiprof.report.views import Column, Row, public_row

# A table cell shows at most this much of a name (a trace can hold a 60 MB one);
# data formats keep the whole text.
CELL_CHARS = 500
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


def render_rows(rows: list[Row], columns: tuple[Column, ...], fmt: str, title: str = "") -> str:
    """Text of ``rows`` in ``fmt``; table text is plain (no colour, ASCII rules)."""
    if fmt == "json":
        text = orjson.dumps([public_row(r, columns) for r in rows], option=orjson.OPT_INDENT_2).decode()
        return _JSON_UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow([c.key for c in columns])
        for row in rows:
            writer.writerow([csv_cell(row.get(c.key)) for c in columns])
        return buffer.getvalue()
    if fmt == "markdown":
        lines = ["| " + " | ".join(c.header for c in columns) + " |"]
        lines.append("|" + "|".join("---:" if c.numeric else "---" for c in columns) + "|")
        for row in rows:
            cells = [plain(c.format(row.get(c.key)), CELL_CHARS).replace("|", "\\|") for c in columns]
            lines.append("| " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"
    return _plain_table(rows, columns, title)


def _plain_table(rows: list[Row], columns: tuple[Column, ...], title: str) -> str:
    # Not a terminal: no width to respect, so never squeeze numbers.
    console = Console(file=io.StringIO(), width=1000, color_system=None, force_terminal=False)
    console.print(build_rich_table(rows, columns, title, ascii_rules=True))
    text = console.file.getvalue()  # type: ignore[attr-defined]
    return "\n".join(line.rstrip() for line in text.splitlines()) + "\n"


def print_rich_table(rows: list[Row], columns: tuple[Column, ...], title: str) -> None:
    """Coloured table for a terminal (honours NO_COLOR through rich)."""
    table = build_rich_table(rows, columns, title, ascii_rules=False)
    terminal_console(table).print(table)


def terminal_console(*tables: RenderableType) -> Console:
    """A console on stdout as wide as the widest of ``tables``, at least the terminal.

    A table wider than the terminal is printed whole, its lines wrapped by the
    terminal (or kept whole by ``less -S``), never cropped mid-number: rich
    would cut each line at the terminal's width."""
    console = Console()
    unbounded = console.options.update_width(1 << 16)
    widest = max((console.measure(table, options=unbounded).maximum for table in tables), default=0)
    return Console(width=widest) if widest > console.width else console


def build_rich_table(rows: list[Row], columns: tuple[Column, ...], title: str, ascii_rules: bool) -> Table:
    """Cells and title are plain text: a name like ``[/]`` or ``[@click=...]``
    stays what it is (never rich markup), control characters are escaped."""
    table = Table(title=Text(plain(title, CELL_CHARS)) if title else None, box=box.ASCII2 if ascii_rules else box.SIMPLE_HEAD, header_style="bold")
    for column in columns:
        table.add_column(
            column.header,
            justify="right" if column.numeric else "left",
            overflow="ellipsis",
            no_wrap=True,
            max_width=60 if not column.numeric else None,
            min_width=len(column.header),
        )
    for row in rows:
        table.add_row(*(Text(plain(column.format(row.get(column.key)), CELL_CHARS)) for column in columns))
    return table


def stdout_is_terminal() -> bool:
    return sys.stdout.isatty()
