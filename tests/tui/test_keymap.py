"""Remappable keys: every binding has an id from the command table, and
$XDG_CONFIG_HOME/tuiprof/keymap.toml remaps them; a bad file is one line and the defaults."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.sources import FileSource
from tuiprof.tui.widgets.filter_bar import FilterBar
from tuiprof.tui.widgets.key_bar import KeyBar

RESNET = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")


@pytest.fixture
def keymap_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    path = tmp_path / "tuiprof" / "keymap.toml"
    path.parent.mkdir()
    return path


def registry_apps() -> tuple:
    """Every app of views, as the kinds of input declare them (the catch-all kind first)."""
    from tuiprof.kinds import KINDS

    return tuple(dict.fromkeys(app for kind in reversed(KINDS) for app in kind.apps()))


def test_every_binding_of_every_app_has_a_unique_id() -> None:
    from tuiprof.tui.screens.events import EventListScreen
    from tuiprof.tui.views.overview import OverviewScroll
    from tuiprof.tui.views.watch import CapturesTable
    from tuiprof.tui.watch_app import CompareScreen
    from tuiprof.tui.widgets.module_tree import ModuleTreeView
    from tuiprof.tui.widgets.row_table import RowTable
    from tuiprof.tui.widgets.timeline_canvas import TimelineCanvas

    apps = registry_apps()
    assert len(apps) == 4
    ours = [
        *apps,
        RowTable,
        CapturesTable,
        ModuleTreeView,
        TimelineCanvas,
        OverviewScroll,
        EventListScreen,
        CompareScreen,
    ]
    bindings = [(cls, b) for cls in ours for b in cls.__dict__["BINDINGS"]]
    assert len(bindings) > 60
    assert [(cls.__name__, b.key) for cls, b in bindings if not b.id] == []
    for app in apps:  # one id, one command (a screen's e/E reuse the app's ids)
        by_id = {}
        for command in app.keymap_commands():
            assert by_id.setdefault(command.id, (command.keys, command.action)) == (command.keys, command.action)
    explorer_ids = {c.id for c in ExplorerApp.keymap_commands()}
    assert {"app.filter", "app.help", "table.down", "tree.expand", "timeline.zoom-in", "view.operators"} <= explorer_ids


def test_every_app_takes_the_ids_of_every_app_and_no_other(keymap_file) -> None:
    """One keymap file serves every app the kinds declare: each takes the ids of the others (a
    keymap that remapped a snapshot key was refused whole by the explorer), and refuses an id
    none has.  The ids come from the registry: an app a new kind brings is covered here."""
    from tuiprof.tui.keymap import KeymapProblem, known_ids, read_keymap

    apps = registry_apps()
    every = {c.id for app in apps for c in app.keymap_commands()}
    assert known_ids() == every
    for app in apps:
        commands = app.keymap_commands()
        others = sorted(every - {c.id for c in commands})
        assert others, app.__name__
        keymap_file.write_text("".join(f'"{binding_id}" = "f12"\n' for binding_id in others))
        assert read_keymap(keymap_file, commands) == dict.fromkeys(others, "f12"), app.__name__
        keymap_file.write_text(f'"{others[0]}" = "f12"\n"app.no-such-key" = "f11"\n')
        with pytest.raises(KeymapProblem, match="no key has the id 'app.no-such-key'"):
            read_keymap(keymap_file, commands)


def test_a_snapshot_key_in_the_keymap_leaves_the_explorers_keys_applied(keymap_file, capsys) -> None:
    keymap_file.write_text('[app]\n"next-gpu" = "n"\nfilter = "f2"\n[view]\nsegments = "S"\n')
    assert ExplorerApp(FileSource(RESNET)).keymap == {"app.next-gpu": "n", "app.filter": "f2", "view.segments": "S"}
    assert capsys.readouterr().err == ""


async def test_a_remapped_key_runs_its_action_and_every_key_list_shows_it(keymap_file) -> None:
    keymap_file.write_text('"view.operators" = "u"  # a whole id\n\n[app]\nfilter = "f2"  # an id by its scope\n')
    app = ExplorerApp(FileSource(RESNET))
    assert app.keymap == {"app.filter": "f2", "view.operators": "u"}
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("3")  # the old key does nothing now
        assert app.current_view == "overview"
        await pilot.press("u")
        assert app.current_view == "operators"
        assert str(app.query_one(KeyBar).content).find("f2 Filter") >= 0
        await pilot.press("f2")
        await pilot.pause()
        assert app.query_one(FilterBar).display
        await pilot.press("escape")
        header = str(app.query_one("#header").content.renderables[1])
        assert " u Operators" in header and "3 Operators" not in header
        palette = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert "Filter (f2)" in palette and palette["View: Operators"].endswith("(key u)")
        await pilot.press("question_mark")
        await pilot.pause()
        help_keys = dict(app.screen.keys) if isinstance(app.screen, HelpScreen) else {}
        assert help_keys.get("f2", "").startswith("filter the focused table")
        views_row = next(k for k, what in help_keys.items() if what.startswith("views:"))
        assert views_row.split() == ["1", "2", "u", "4", "5", "6", "7", "8", "9", "0"]


BAD_FILES = {
    "not TOML": ("[app\nfilter = f", "not TOML"),
    "unknown id": ('[app]\nfiltre = "f2"\n', "no key has the id 'app.filtre'"),
    "bad key": ('[app]\nfilter = "ctrl+nokey"\n', "app.filter: 'ctrl+nokey' is not a key Textual knows"),
    "not a string": ("[app]\nfilter = 6\n", "app.filter must be a string of keys"),
    "a key taken": ('[app]\nfilter = "e"\n', "app.filter = 'e' is also the key of app.export"),
}


@pytest.mark.parametrize("name", BAD_FILES)
def test_a_bad_keymap_is_one_line_and_the_default_keys(keymap_file, capsys, name) -> None:
    text, problem = BAD_FILES[name]
    keymap_file.write_text(text)
    app = ExplorerApp(FileSource(RESNET))
    assert app.keymap == {}
    err = capsys.readouterr().err
    assert (
        err.count("\n") == 1
        and err.startswith(f"tuiprof: {keymap_file}: ")
        and err.endswith("; using the default keys\n")
    )
    assert problem in err


def test_a_diff_only_id_is_not_unknown_to_the_explorer(keymap_file, capsys) -> None:
    keymap_file.write_text('[app]\n"swap-a-b" = "w"\n')
    assert ExplorerApp(FileSource(RESNET)).keymap == {"app.swap-a-b": "w"}
    assert capsys.readouterr().err == ""


async def test_the_default_keys_work_after_a_bad_keymap(keymap_file, capsys) -> None:
    keymap_file.write_bytes(b"\xff\xfe not text")
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test() as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("3")
        assert app.current_view == "operators"
        shown = [n.message for n in app._notifications]
    assert "cannot be read" in capsys.readouterr().err
    assert len(shown) == 1 and "cannot be read" in shown[0]  # on screen too: stderr is under the explorer


def id_table(apps) -> list[str]:
    """docs/views.md's table of ids, from the apps: grouped by scope, each id with its default
    keys and what it does (the first app's that has it), which apps have it when not all, and
    where an app's default key differs."""
    names = {app: app.TITLE.removeprefix("tuiprof").strip() or "explorer" for app in apps}
    found: dict[str, list] = {}  # id -> [(app, command)]
    for app in apps:
        for command in app.keymap_commands():
            found.setdefault(command.id, [])
            if app not in [a for a, _ in found[command.id]]:
                found[command.id].append((app, command))
    scopes = list(dict.fromkeys(binding_id.split(".")[0] for binding_id in found))
    lines = ["| id | default | what |", "|---|---|---|"]
    for scope in scopes:
        for binding_id, having in found.items():
            if binding_id.split(".")[0] != scope:
                continue
            first = having[0][1]
            default = f"`{first.key_display}`" + "".join(
                f", {names[app]} `{command.key_display}`"
                for app, command in having[1:]
                if command.key_display != first.key_display
            )
            apps_with = [names[app] for app, _ in having]
            listed = apps_with[0] if len(apps_with) == 1 else f"{', '.join(apps_with[:-1])} and {apps_with[-1]}"
            only = "" if len(having) == len(apps) else f" ({listed} only)"
            lines.append(f"| `{binding_id}` | {default} | {first.help}{only} |")
    return lines


def test_docs_id_table_is_the_registrys_and_their_example_is_a_valid_keymap(keymap_file, capsys) -> None:
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "views.md").read_text().split("## Keys and the keymap", 1)[1].split("\n## ", 1)[0]
    table = [line for line in page.splitlines() if line.startswith("|")]
    expected = id_table(registry_apps())
    assert table == expected, "docs/views.md's id table, as the apps have it:\n" + "\n".join(expected)
    keymap_file.write_text(page.split("```toml\n", 1)[1].split("```", 1)[0])
    keymap = ExplorerApp(FileSource(RESNET)).keymap
    assert capsys.readouterr().err == "" and keymap["app.filter"] == "ctrl+f" and keymap["table.down"] == "down,n"
