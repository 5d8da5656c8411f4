"""The explorer shows text from a trace or a path as plain text: no markup, no control
characters, no frozen UI on absurd names, no export through a planted symlink."""

from __future__ import annotations

import json
import time

from tests.helpers.tui import plain_text
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.widgets.row_table import RowTable

HOSTILE = ["[/]", "[@click=app.quit]click me", "\x1b]0;pwned\x07title", "\x1b[2Jclear", "x" * 2_000_000]


def _trace(path, names: list[str]) -> str:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 100 + 20 * i, "dur": 10, "args": {}}
        for i, name in enumerate(names)
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    return str(path)


def _screen_text(app) -> str:
    return "".join(plain_text(widget.content, 300) for widget in app.screen.query("Static"))


async def test_hostile_names_and_paths_are_plain_text(tmp_path) -> None:
    folder = tmp_path / "[@click=app.quit]x"
    folder.mkdir()
    app = ExplorerApp(FileSource(_trace(folder / "[b]t[x].json", HOSTILE)), export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        started = time.perf_counter()
        await pilot.press("3")
        await pilot.pause()
        table = app.query_one("#operators-table", RowTable)
        for _ in range(len(HOSTILE)):
            await pilot.press("j")
        await pilot.pause()
        assert time.perf_counter() - started < 10  # a 2 MB name does not freeze the UI
        shown = [column.format(row["name"]) for row in table.rows for column in table.columns[:1]]
        assert "[/]" in shown and "[@click=app.quit]click me" in shown
        assert "\\x1b]0;pwned\\x07title" in shown and "\\x1b[2Jclear" in shown
        assert all(len(text) <= 501 for text in shown)
        assert app.is_running  # no markup ran (app.quit) and nothing raised
        assert "\x1b" not in _screen_text(app)
        target = tmp_path / "victim.txt"
        target.write_text("keep")
        (tmp_path / "tuiprof-operators-[b]t[x].csv").symlink_to(target)  # planted where the export would go
        await pilot.press("e")
        await pilot.pause()
        assert target.read_text() == "keep"
        written = [p for p in tmp_path.glob("tuiprof-operators-*.csv") if not p.is_symlink()]
        assert len(written) == 1 and "\\x1b[2Jclear" in written[0].read_text()
