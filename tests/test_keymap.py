"""Remappable keys: every binding has an id from the command table, and
$XDG_CONFIG_HOME/tuiprof/keymap.toml remaps them; a bad file is one line and the defaults."""

from __future__ import annotations

import pytest

from tests.conftest import SAMPLES
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.diff_app import DiffApp
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


def test_every_binding_of_the_explorer_has_a_unique_id() -> None:
    from tuiprof.tui.screens.events import EventListScreen
    from tuiprof.tui.views.overview import OverviewScroll
    from tuiprof.tui.widgets.module_tree import ModuleTreeView
    from tuiprof.tui.widgets.row_table import RowTable
    from tuiprof.tui.widgets.timeline_canvas import TimelineCanvas

    ours = [ExplorerApp, DiffApp, RowTable, ModuleTreeView, TimelineCanvas, OverviewScroll, EventListScreen]
    bindings = [(cls, b) for cls in ours for b in cls.__dict__["BINDINGS"]]
    assert len(bindings) > 60
    assert [(cls.__name__, b.key) for cls, b in bindings if not b.id] == []
    for app in (ExplorerApp, DiffApp):  # one id, one command (a screen's e/E reuse the app's ids)
        commands = app.keymap_commands()
        by_id = {}
        for command in commands:
            assert by_id.setdefault(command.id, (command.keys, command.action)) == (command.keys, command.action)
    explorer_ids = {c.id for c in ExplorerApp.keymap_commands()}
    assert {"app.filter", "app.help", "table.down", "tree.expand", "timeline.zoom-in", "view.operators"} <= explorer_ids


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


def test_docs_list_every_id_and_their_example_is_a_valid_keymap(keymap_file, capsys) -> None:
    from tests.conftest import ROOT

    page = (ROOT / "docs" / "views.md").read_text().split("## Keys and the keymap", 1)[1].split("\n## ", 1)[0]
    for app in (ExplorerApp, DiffApp):
        assert [c.id for c in app.keymap_commands() if f"| `{c.id}` |" not in page] == []
    keymap_file.write_text(page.split("```toml\n", 1)[1].split("```", 1)[0])
    keymap = ExplorerApp(FileSource(RESNET)).keymap
    assert capsys.readouterr().err == "" and keymap["app.filter"] == "ctrl+f" and keymap["table.down"] == "down,n"
