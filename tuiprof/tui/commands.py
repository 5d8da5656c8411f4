"""Every key of the explorer in one table: the bindings, the footer, the ``?``
help and the command palette are all derived from it (as harlequin and
dolphie do), so a key is described once.

``scope`` says where a key is bound: ``app`` (anywhere), ``view`` (the view
keys, anywhere), ``table`` (a :class:`RowTable`), ``tree`` (the module tree),
``timeline`` (its canvas), ``overview`` (the Overview page), ``memory`` (the Memory view),
``detail`` (a snapshot page's detail pane, once focused).  Views add their keys
with :meth:`Command` entries of their own and the same helpers.  A pane widget
names its keys in ``PANE_COMMANDS``: ``?`` lists the keys of the panes the current
view holds (:func:`pane_commands`), never another view's.

Every binding has an id, ``scope.title`` in lower case with dashes
(``app.filter``, ``table.down``, ``view.operators``): the names a user's keymap
file remaps (tui/keymap.py, docs/views.md).  Renaming a command's title renames
its id, so titles are unique within a scope (tests/tui/test_keymap.py checks).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from textual.app import SystemCommand
from textual.binding import Binding, BindingType
from textual.keys import format_key
from textual.widget import Widget

if TYPE_CHECKING:  # both import this module
    from tuiprof.tui.table_app import TableApp
    from tuiprof.tui.widgets.row_table import RowTable


@dataclass(frozen=True)
class Command:
    keys: str  # Textual key names, comma-separated: "question_mark,f1"
    action: str  # Textual action: "export('csv')"
    title: str  # the footer's and the palette's short name
    help: str  # what it does, for ? and the palette
    scope: str = "app"
    show: bool = False  # in the footer
    display: str | None = None  # how ? shows the key(s), default: the key names
    priority: bool = False
    palette: bool = True  # offered in ctrl+p (needs an app action)

    @property
    def key_display(self) -> str:
        return self.display or self.keys.replace(",", " ")

    @property
    def id(self) -> str:
        """The binding id a keymap names: ``scope.title-in-lower-case`` (``app.export-json``)."""
        return f"{self.scope}.{re.sub(r'[^a-z0-9]+', '-', self.title.lower()).strip('-')}"

    def shown_keys(self, keymap: Mapping[str, str]) -> str:
        """How ``?``, the palette and the header show the keys: the keymap's when it remaps
        this command (Textual's long key names, comma-separated), else :attr:`key_display`."""
        keys = keymap.get(self.id)
        return " ".join(display_key(key) for key in keys.split(",")) if keys else self.key_display


def display_key(key: str) -> str:
    """``question_mark`` -> ``?``, ``ctrl+n`` -> ``^n`` (as Textual's key bar shows keys)."""
    *modifiers, name = key.strip().split("+")
    shown = format_key(name)
    if "ctrl" in modifiers:
        modifiers.remove("ctrl")
        shown = f"^{shown}"
    return "+".join([*modifiers, shown])


APP_COMMANDS: tuple[Command, ...] = (
    Command(
        "q",
        "quit",
        "Quit",
        "quit (during a live capture: stop after this step and show what was recorded)",
        show=True,
        palette=False,
    ),
    Command("ctrl+c", "quit", "Quit now", "quit", priority=True, palette=False, display="ctrl+c"),
    Command(
        "question_mark,f1",
        "help",
        "Help",
        "help (also F1): every key and what each column of this view means",
        show=True,
        display="?",
    ),
    Command(
        "slash",
        "filter",
        "Filter",
        "filter the focused table by name; enter keeps it, esc clears",
        show=True,
        display="/",
    ),
    Command(
        "escape", "back", "Back", "clear the filter, else go back to the previous view", palette=False, display="esc"
    ),
    Command("i", "toggle_shapes", "By shape", "operators: one row per name and input shapes", show=True),
    Command(
        "t",
        "toggle_top_level",
        "Top-level",
        "operators: only calls with no enclosing operator (ProfilerStep spans do not count)",
        show=True,
    ),
    Command(
        "left_square_bracket",
        "switch_rank(-1)",
        "Prev rank",
        "distributed runs: the previous rank, in every view",
        display="[",
    ),
    Command(
        "right_square_bracket",
        "switch_rank(1)",
        "Next rank",
        "distributed runs: the next rank, in every view",
        display="]",
    ),
    Command(
        "less_than_sign",
        "cycle_view(-1)",
        "Prev view",
        "the previous view (every view, also those past the tenth, which have no key)",
        display="<",
        palette=False,
    ),
    Command("greater_than_sign", "cycle_view(1)", "Next view", "the next view", display=">", palette=False),
    Command(
        "V",
        "views",
        "Views",
        "the views palette: every view by name, with its key (type to narrow, enter to go)",
        display="V",
        palette=False,
    ),
    Command(
        "T",
        "show_in_timeline",
        "In timeline",
        "the row's call in the Timeline, selected (an operator's longest, with the device work it launched; a kernel's longest; a step's window)",
        display="T",
    ),
    Command(
        "e",
        "export('csv')",
        "Export",
        "export what the view shows as CSV (sort and filter kept) into the current directory",
        show=True,
    ),
    Command("E", "export('json')", "Export JSON", "export what the view shows as JSON", display="E"),
)

# The explorer's keys that mean the same in the other apps of views (diff mode, the snapshot app).
SHARED_ACTIONS = (
    "quit",
    "help",
    "filter",
    "back",
    "cycle_view(-1)",
    "cycle_view(1)",
    "views",
    "export('csv')",
    "export('json')",
)


def shared_commands() -> tuple[Command, ...]:
    """The explorer's commands of :data:`SHARED_ACTIONS`, ``q`` without a live capture's words."""
    return tuple(replace(c, help="quit") if c.keys == "q" else c for c in APP_COMMANDS if c.action in SHARED_ACTIONS)


TABLE_COMMANDS: tuple[Command, ...] = (
    Command("up,k", "cursor(-1)", "Up", "move up", scope="table", display="↑ k", palette=False),
    Command("down,j", "cursor(1)", "Down", "move down", scope="table", display="↓ j", palette=False),
    Command("pageup", "page(-1)", "PgUp", "page up", scope="table", palette=False),
    Command("pagedown", "page(1)", "PgDn", "page down", scope="table", palette=False),
    Command("home,g", "jump(0)", "Top", "first row", scope="table", display="g home", palette=False),
    Command("end,G", "jump(-1)", "Bottom", "last row", scope="table", display="G end", palette=False),
    Command(
        "s", "next_sort", "Sort", "sort by the next column (or click a header)", scope="table", show=True, palette=False
    ),
    Command("r", "reverse_sort", "Reverse", "reverse the sort order", scope="table", show=True, palette=False),
    Command(
        "enter",
        "select",
        "Open",
        "drill in: an operator's calls, a kernel's launches, a module's operator",
        scope="table",
        palette=False,
    ),
)

MEMORY_COMMANDS: tuple[Command, ...] = (
    Command(
        "m",
        "next_table",
        "Table",
        "Memory view: the next table (at the peak: modules, allocations, what-ifs; operators)",
        scope="memory",
        show=True,
        palette=False,
    ),
)

TREE_COMMANDS: tuple[Command, ...] = (
    Command("j", "cursor_down", "Down", "move down", scope="tree", palette=False),
    Command("k", "cursor_up", "Up", "move up", scope="tree", palette=False),
    Command("g,home", "scroll_home", "Top", "first module", scope="tree", palette=False),
    Command("G,end", "scroll_end", "Bottom", "last module", scope="tree", palette=False),
    Command(
        "right,l",
        "expand",
        "Expand",
        "expand the module, or step into its first child",
        scope="tree",
        display="→ l",
        palette=False,
    ),
    Command(
        "left,h",
        "collapse",
        "Collapse",
        "collapse the module, or go to its parent",
        scope="tree",
        display="← h",
        palette=False,
    ),
    Command("space", "toggle_node", "Toggle", "expand / collapse", scope="tree", palette=False),
)

VIEW_CYCLE_ACTIONS = ("cycle_view(-1)", "cycle_view(1)", "views")  # how ? says views without a key are reached

NAVIGATION_HELP: tuple[tuple[str, str], ...] = (
    ("tab shift+tab", "next / previous pane"),
    ("ctrl+p", "command palette: every action, and sort by any column"),
)


class Viewable(Protocol):
    """What a view key names: an explorer view class (tui/views) or a page of diff mode or of
    the snapshot app (a ``DiffPage``, a ``SnapshotPage``)."""

    @property
    def view_id(self) -> str: ...

    @property
    def title(self) -> str: ...


ViewKey = tuple[str, str, Viewable]  # (key or "", view id, the view): tui/views' view_keys


def view_commands(views: Iterable[ViewKey]) -> tuple[Command, ...]:
    """The view keys (``1`` Overview...) as commands: ids ``view.<title>``, remappable like the others."""
    return tuple(_view_command(key, view_id, view) for key, view_id, view in views if key)


def _view_command(key: str, view_id: str, view: Viewable) -> Command:
    return Command(key, f"show_view('{view_id}')", view.title, f"the {view.title} view", scope="view", palette=False)


def shown_view_keys(views: Iterable[ViewKey], keymap: Mapping[str, str]) -> list[ViewKey]:
    """``views`` (key, view id, view) with each key as the header and palette show it: the keymap's."""
    return [
        (_view_command(key, view_id, view).shown_keys(keymap) if key else "", view_id, view)
        for key, view_id, view in views
    ]


def bindings(commands: Iterable[Command], namespace: str = "") -> list[BindingType]:
    """Textual bindings of ``commands``, each with its :attr:`Command.id`; ``namespace``
    prefixes the actions (``app``: a screen's key that runs the app's action).  Typed as
    Textual types ``BINDINGS``, which a list of ``Binding`` is not (lists are invariant)."""
    prefix = f"{namespace}." if namespace else ""
    return [
        Binding(
            c.keys,
            prefix + c.action,
            c.title,
            show=c.show,
            key_display=c.display,
            priority=c.priority,
            tooltip=c.help,
            id=c.id,
        )
        for c in commands
    ]


def pane_commands(view: Widget) -> list[Command]:
    """The keys of the view itself and of the panes inside it: each class's ``PANE_COMMANDS``,
    once, in pane order (the Operators view has a table's keys, Modules a tree's and a table's,
    Memory its own ``m`` and a table's)."""
    found: list[Command] = []
    for widget in (view, *view.query("*")):
        found += [command for command in getattr(widget, "PANE_COMMANDS", ()) if command not in found]
    return found


def key_span(keys: Sequence[str]) -> str:
    """The view keys as ``?`` names them: runs of consecutive digits joined, ``1-9 0``
    for 1 to 9 then 0 (the tenth view's key), ``1-6`` for six pages."""
    runs: list[list[str]] = []
    for key in keys:
        last = runs[-1][-1] if runs else ""
        if key.isdigit() and last.isdigit() and int(key) == int(last) + 1:
            runs[-1].append(key)
        else:
            runs.append([key])
    return " ".join(run[0] if len(run) == 1 else f"{run[0]}-{run[-1]}" for run in runs)


def help_rows(
    views: Sequence[Command],
    app_commands: Iterable[Command] = APP_COMMANDS,
    panes: Iterable[Command] = (),
    keymap: Mapping[str, str] | None = None,
    unkeyed: Sequence[str] = (),
) -> list[tuple[str, str]]:
    """(keys, what) for the help screen: every app command, the view keys (``views``:
    :func:`view_commands`; ``unkeyed``: the titles of the views past the tenth, which
    have no key, named with the keys that reach them: ``< > or V``), then the keys of the current view's panes (``panes``), one row
    per action: an action under two keys lists both (``↓ j``), a key two panes use says
    both actions (``g home``: "first module / first row").  ``app_commands``: the app's
    own keys, diff mode has its own; ``keymap``: the user's, whose keys are shown."""
    keymap = keymap or {}
    rows: list[list[str]] = []

    def add(key: str, what: str) -> None:
        for row in rows:
            if row[1] == what:
                row[0] = " ".join(dict.fromkeys(row[0].split() + key.split()))
                return
            if row[0] == key:
                row[1] = f"{row[1]} / {what}"
                return
        rows.append([key, what])

    for command in app_commands:
        add(command.shown_keys(keymap), command.help)
    keyed = [(view.shown_keys(keymap), view.title) for view in views]
    remapped = any(view.id in keymap for view in views)
    span = " ".join(key for key, _ in keyed) if remapped else key_span([key for key, _ in keyed])
    reach = [c.shown_keys(keymap) for c in app_commands if c.action in VIEW_CYCLE_ACTIONS]  # < > V
    how = " or ".join(filter(None, (" ".join(reach[:-1]), *reach[-1:]))) or "ctrl+p"
    beyond = f"; then {', '.join(unkeyed)} ({how})" if unkeyed else ""
    add(span, "views: " + ", ".join(f"{key} {title}" for key, title in keyed) + beyond)
    for key, what in NAVIGATION_HELP:
        add(key, what)
    for command in panes:
        add(command.shown_keys(keymap), command.help)
    return [(key, what) for key, what in rows]


def palette_commands(
    app: TableApp,
    views: list[ViewKey],
    table: RowTable | None,
    app_commands: Iterable[Command] = APP_COMMANDS,
    keymap: Mapping[str, str] | None = None,
) -> Iterator[SystemCommand]:
    """The command palette: every view, every app command, and sorting the
    focused table by any of its columns (hidden ones too); keys as ``keymap`` has them."""
    keymap = keymap or {}
    for key, view_id, view in shown_view_keys(views, keymap):
        yield SystemCommand(
            f"View: {view.title}",
            f"Show the {view.title} view" + (f" (key {key})" if key else ""),
            lambda v=view_id: app.action_show_view(v),
        )
    for command in app_commands:
        if command.palette:
            yield SystemCommand(
                f"{command.title} ({command.shown_keys(keymap)})",
                command.help,
                lambda a=command.action: app.run_action(a),
            )
    if table is not None:
        for column in table.columns:
            yield SystemCommand(f"Sort: {column.header}", column.help, lambda k=column.key, t=table: t.sort_by(k))
