"""The user's keys: ``$XDG_CONFIG_HOME/tuiprof/keymap.toml`` (``~/.config/tuiprof/keymap.toml``
by default) maps binding ids (tui/commands.py: ``app.filter``, ``table.down``) to keys::

    [app]
    filter = "f"            # the id app.filter; a TOML table per scope
    [table]
    down = "down,n"         # several keys: comma-separated, as Textual writes them
    "view.operators" = "o"  # or the whole id, quoted

One file serves every app (the explorer, diff mode, the snapshot and watch apps): an id of any
of them is known to all.  The app hands it to Textual's ``App.set_keymap``; ``?``, the key bar,
the palette and the header show the remapped keys.  The file is input like a trace: a file that is not TOML,
names an id no binding has, a key Textual has no name for, or a key another command of the
same place already answers, is not applied.  One line on stderr says why and the default
keys stay (a half-applied keymap would surprise more than none).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from textual.keys import REPLACED_KEYS, Keys, key_to_character

from tuiprof.report.plain import plain
from tuiprof.report.render import print_notice
from tuiprof.tui.commands import Command
from tuiprof.tui.textual_internals import normalize_key_list

if TYPE_CHECKING:  # the apps import this module
    from tuiprof.tui.table_app import TableApp

MODIFIERS = frozenset({"ctrl", "shift", "alt", "meta", "super", "hyper"})
NAMED_KEYS = frozenset(k.value for k in Keys if "+" not in k.value and not k.value.startswith("<"))
GLOBAL_SCOPES = frozenset({"app", "view"})  # keys answered wherever the focus is


class KeymapProblem(Exception):
    """Why the keymap file is not applied (one line, after the file's name)."""


def keymap_path() -> Path:
    config = os.environ.get("XDG_CONFIG_HOME", "")  # relative: ignored, as the XDG spec says
    return (Path(config) if os.path.isabs(config) else Path.home() / ".config") / "tuiprof" / "keymap.toml"


def load_keymap(commands: Iterable[Command]) -> tuple[dict[str, str], str | None]:
    """The user's keymap for an app with ``commands`` ({} without a file), and what is wrong
    with a bad file: then ({}, the line), the line also on stderr, where scrollback keeps it
    (the app shows it as a notification too)."""
    path = keymap_path()
    if not path.is_file():
        return {}, None
    try:
        return read_keymap(path, tuple(commands)), None
    except KeymapProblem as problem:
        line = f"{plain(str(path))}: {problem}; using the default keys"
        print_notice(f"tuiprof: {line}")
        return {}, line


def read_keymap(path: Path, commands: tuple[Command, ...]) -> dict[str, str]:
    """The keymap in ``path`` as Textual takes it (id -> normalised keys), checked against
    ``commands`` (the app's); raises :class:`KeymapProblem`."""
    # Imported here: 10 ms of the explorer's start-up, for users without a keymap too.
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # the same parser, before it joined the standard library
        import tomli as tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as error:
        raise KeymapProblem(f"cannot be read ({error})") from None
    except tomllib.TOMLDecodeError as error:
        raise KeymapProblem(f"not TOML ({error})") from None
    keymap: dict[str, str] = {}
    for binding_id, keys in _flatten(data):
        if not isinstance(keys, str) or not keys.strip():
            raise KeymapProblem(f'{binding_id} must be a string of keys ("f", "ctrl+f,f2"), not {keys!r}')
        for key in keys.split(","):
            if not is_key(key.strip()):
                raise KeymapProblem(
                    f"{binding_id}: {key.strip()!r} is not a key Textual knows (a character, f1, ctrl+x, pageup...)"
                )
        keymap[binding_id] = normalize_key_list(keys)
    own = {command.id: command for command in commands}
    unknown = sorted(set(keymap) - own.keys() - known_ids())
    if unknown:
        raise KeymapProblem(f"no key has the id {unknown[0]!r} (the ids are listed in docs/views.md, Keys)")
    _check_clashes({k: v for k, v in keymap.items() if k in own}, own)
    return keymap


def is_key(key: str) -> bool:
    """A key Textual can bind: modifiers and a character or a key name (``question_mark``, ``f5``)."""
    *modifiers, name = key.split("+")
    if not name or any(m not in MODIFIERS for m in modifiers):
        return False
    return len(name) == 1 or name in NAMED_KEYS or key_to_character(REPLACED_KEYS.get(name, name)) is not None


def every_app() -> tuple[type[TableApp], ...]:
    """Every app of views: the apps the kinds of input declare (tuiprof/kinds: each ``Kind``'s
    ``apps``).  Listed here again because the tui layer never imports the kinds (the layer
    contract in pyproject.toml); tests/tui/test_keymap.py holds the two lists equal, so a kind that
    brings a new app fails it until the app is added here.  Imported on demand: no app loads
    the others to start."""
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.diff_app import DiffApp
    from tuiprof.tui.snapshot_app import SnapshotApp
    from tuiprof.tui.watch_app import WatchApp

    return (ExplorerApp, DiffApp, SnapshotApp, WatchApp)


def known_ids() -> set[str]:
    """Every id of every app (one file serves them all): read only when a keymap names an
    id the running app lacks."""
    return {command.id for app in every_app() for command in app.keymap_commands()}


def _flatten(data: Mapping[str, object], prefix: str = "") -> Iterable[tuple[str, object]]:
    """``{"app": {"filter": "f"}}`` -> ``("app.filter", "f")`` (TOML's tables and dotted keys)."""
    for name, value in data.items():
        if isinstance(value, dict):
            yield from _flatten(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _check_clashes(keymap: Mapping[str, str], commands: Mapping[str, Command]) -> None:
    """A remapped key must not be one another command answers in the same place (or
    everywhere): Textual would silently drop one of the two."""
    normalised = {i: set((keymap.get(i) or normalize_key_list(c.keys)).split(",")) for i, c in commands.items()}
    for binding_id, keys in keymap.items():
        scope = commands[binding_id].scope
        for other_id, other in commands.items():
            overlap = scope == other.scope or {scope, other.scope} & GLOBAL_SCOPES
            taken = set(keys.split(",")) & normalised[other_id]
            if other_id != binding_id and overlap and taken:
                raise KeymapProblem(
                    f"{binding_id} = {min(taken)!r} is also the key of {other_id}; remap that one too, or pick another key"
                )
