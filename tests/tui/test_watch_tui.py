"""``tuiprof open DIR`` on a watch folder, driven by keys: the chart, the captures, Enter, d, live
follow, and what the app host gives every app (help, filter, export, palette, keymap, errors)."""

from __future__ import annotations

import json
import threading

import pytest
from textual.worker import WorkerFailed

from tests.conftest import WATCH_HEALTHY, WATCH_SLOW, make_watch_folder
from tests.helpers.tui import loaded, plain_text
from tuiprof.errors import TraceError
from tuiprof.trace.watch import HistoryReader
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.watch_app import CompareScreen, WatchApp
from tuiprof.tui.widgets.row_table import RowTable

FOLLOW_S = 0.2  # the follow's period in these tests (a second in the app)


@pytest.fixture(autouse=True)
def _fast_follow(monkeypatch) -> None:
    from tuiprof.tui import watch_app

    monkeypatch.setattr(watch_app, "FOLLOW_SECONDS", FOLLOW_S)


def _app(directory, **options) -> WatchApp:
    reader = HistoryReader(directory)
    reader.read_new()
    return WatchApp(reader, **options)


def _lines(app: WatchApp) -> list[str]:
    """The captures list as drawn: its header, then one line per row (the cells read back)."""
    table = app.query_one("#watch-table", RowTable)
    return [table.render_line(y).text.rstrip() for y in range(len(table.rows) + 1)]


def _append(directory, *records: dict) -> None:
    with open(directory / "watch.jsonl", "a") as history:
        history.write("".join(json.dumps(record) + "\n" for record in records))


async def test_the_chart_marks_the_triggers_and_enter_opens_the_capture(tmp_path) -> None:
    directory = make_watch_folder(tmp_path)
    app = _app(directory)
    async with app.run_test(size=(80, 30)) as pilot:
        await loaded(pilot)
        chart = plain_text(app.query_one("#chart").render(), 100).splitlines()
        marks = next(line for line in chart if line.strip() and set(line.strip()) <= {"H", "S", " "})
        assert marks.index("H") < marks.index("S")
        assert "step 1 " in chart[-2] and chart[-2].endswith("step 60")
        assert all(len(line) <= 80 for line in chart)
        lines = _lines(app)
        assert len(lines) == 3 and "step000007-healthy" in lines[1] and "step000042-slow" in lines[2]
        assert all(len(line) <= 80 for line in lines)
        await pilot.press("down", "enter")
    assert app.next_action == ("open", str(directory / WATCH_SLOW)) and app.return_code == 0


async def test_the_chart_is_drawn_again_for_a_new_width(tmp_path) -> None:
    directory = make_watch_folder(tmp_path, steps=200)
    app = _app(directory)
    async with app.run_test(size=(80, 30)) as pilot:
        await loaded(pilot)
        steps_line = plain_text(app.query_one("#chart").render(), 200).splitlines()[-2]
        assert steps_line.rstrip().endswith("step 200") and len(steps_line.rstrip()) <= 80
        await pilot.resize_terminal(120, 30)
        await pilot.pause(0.5)
        await loaded(pilot)
        steps_line = plain_text(app.query_one("#chart").render(), 200).splitlines()[-2]
        assert steps_line.rstrip().endswith("step 200") and 100 < len(steps_line.rstrip()) <= 120


async def test_d_compares_with_the_healthy_capture_verdict_first(tmp_path) -> None:
    directory = make_watch_folder(tmp_path)
    app = _app(directory)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("d")  # on the healthy capture: nothing to compare
        assert not isinstance(app.screen, CompareScreen)
        await pilot.press("down", "d")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await screen.workers.wait_for_complete()
        await pilot.pause()
        text = plain_text(screen.query_one("#comparison").render(), 100).splitlines()
        assert "B is 4.80x slower per sample" in text[0]  # batches 64 vs 128: compared per sample
        assert text[2].startswith("where the step time went")
        await pilot.press("question_mark")  # the comparison's keys, not the list's
        assert isinstance(app.screen, HelpScreen)
        assert [k for k, _ in app.screen.keys] == ["esc q", "D", "?"]
        await pilot.press("escape", "D")
    assert app.next_action == ("diff", str(directory / WATCH_HEALTHY), str(directory / WATCH_SLOW))


async def test_a_running_job_is_followed(tmp_path) -> None:
    directory = make_watch_folder(tmp_path, steps=44, ended=False)
    app = _app(directory)
    async with app.run_test(size=(80, 30)) as pilot:
        await loaded(pilot)
        assert "44 steps, running" in plain_text(app.query_one("#job").render(), 100)
        _append(
            directory,
            {"s": 45, "t": 1, "w": 0.005},
            {"e": "capture", "trigger": "demand", "first_step": 45, "last_step": 45, "path": WATCH_SLOW, "bytes": 1},
            {"e": "end", "step": 45, "status": "finished"},
        )
        await pilot.pause(3 * FOLLOW_S)
        await loaded(pilot)
        assert "45 steps, finished" in plain_text(app.query_one("#job").render(), 100)
        assert len(_lines(app)) == 4 and _lines(app)[3].startswith("demand")


async def test_the_follow_reads_the_history_off_the_ui_thread(tmp_path, monkeypatch) -> None:
    """Each second of a running job the history is read and summarised: in a worker, so a long
    history never holds a key press (it was read, summarised and charted on the UI thread)."""
    directory = make_watch_folder(tmp_path, steps=44, ended=False)
    app = _app(directory)
    readers: list[str] = []
    read_new = HistoryReader.read_new

    def recorded(reader: HistoryReader) -> bool:
        readers.append(threading.current_thread().name)
        return read_new(reader)

    monkeypatch.setattr(HistoryReader, "read_new", recorded)
    async with app.run_test(size=(80, 30)) as pilot:
        await loaded(pilot)
        _append(directory, {"s": 45, "t": 1, "w": 0.005})
        await pilot.pause(3 * FOLLOW_S)
        await loaded(pilot)
        assert "45 steps, running" in plain_text(app.query_one("#job").render(), 100)
    assert readers and threading.main_thread().name not in readers


async def test_the_cursor_stays_on_its_capture_as_the_list_changes(tmp_path) -> None:
    directory = make_watch_folder(tmp_path, steps=44, ended=False)
    app = _app(directory)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("down")  # the slow capture, second in the list
        _append(  # the healthy one is taken again: the first is dropped, a new one comes last
            directory,
            {"s": 45, "t": 1, "w": 0.001},
            {"e": "capture", "trigger": "healthy", "first_step": 45, "last_step": 45, "path": "h2", "bytes": 1},
            {"e": "dropped", "path": WATCH_HEALTHY, "why": "taken again"},
        )
        await pilot.pause(3 * FOLLOW_S)
        await loaded(pilot)
        assert "45 steps, running" in plain_text(app.query_one("#job").render(), 100)
        await pilot.press("enter")
    assert app.next_action == ("open", str(directory / WATCH_SLOW))


async def test_a_slow_capture_that_was_not_slower_is_labelled_so(tmp_path) -> None:
    directory = make_watch_folder(tmp_path, slow_ms=1.1)  # "slow" at 42-44, but its steps are 1.1x the healthy ones
    app = _app(directory)
    async with app.run_test(size=(120, 30)) as pilot:
        await loaded(pilot)
        header, healthy, slow = _lines(app)
        at = header.index("Verdict")
        assert healthy[at:].split()[0] == "step000007-healthy"  # no verdict: the path comes next
        assert slow[at:].startswith("not slower")
        assert "1 slow capture not slower than the healthy one (steps 42-44)" in plain_text(
            app.query_one("#job").render(), 100
        )


async def test_the_list_has_the_hosts_keys_help_filter_export_palette(tmp_path) -> None:
    directory = make_watch_folder(tmp_path)
    app = _app(directory, export_dir=tmp_path)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = dict(app.screen.keys)
        assert keys["d"].startswith("the highlighted capture against the healthy one")
        assert keys["enter"].startswith("open the highlighted capture")
        assert app.screen.columns is not None and "Verdict" in [c.header for c in app.screen.columns.columns]
        await pilot.press("escape")
        palette = {c.title for c in app.get_system_commands(app.screen)}
        assert {"Diff vs healthy (d)", "Export (e)", "Sort: Verdict"} <= palette
        await pilot.press("slash", "s", "l", "o", "w", "enter")  # the first text column: the trigger
        assert len(_lines(app)) == 2 and "step000042-slow" in _lines(app)[1]
        await pilot.press("e")
        await pilot.pause()
        written = (tmp_path / "tuiprof-watch-w.csv").read_text().splitlines()
        assert written[0].startswith("# tuiprof export: watch") and "filter" in written[0]
        assert written[1].split(",")[0] == "trigger" and len(written) == 3
        assert written[2].startswith("slow,42,44,") and written[2].endswith(str(directory / WATCH_SLOW))
        await pilot.press("escape")  # the filter goes
        assert len(_lines(app)) == 3
        await pilot.press("q")
    assert app.next_action is None and app.return_code == 0


async def test_a_remapped_key_of_the_watch_app_works(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    (tmp_path / "tuiprof").mkdir()
    (tmp_path / "tuiprof" / "keymap.toml").write_text('[app]\n"diff-vs-healthy" = "c"\n[compare]\n"full-diff" = "F"\n')
    directory = make_watch_folder(tmp_path)
    app = _app(directory)
    assert app.keymap == {"app.diff-vs-healthy": "c", "compare.full-diff": "F"}
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        await pilot.press("down", "d")
        assert not isinstance(app.screen, CompareScreen)
        await pilot.press("c")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        await app.screen.workers.wait_for_complete()
        await pilot.press("F")
    assert app.next_action == ("diff", str(directory / WATCH_HEALTHY), str(directory / WATCH_SLOW))


async def test_a_bug_while_following_is_one_line_not_a_traceback(tmp_path, monkeypatch) -> None:
    directory = make_watch_folder(tmp_path, steps=44, ended=False)
    app = _app(directory)
    armed = threading.Event()
    read_new = HistoryReader.read_new

    def broken(reader: HistoryReader) -> bool:
        if armed.is_set():
            raise RuntimeError("a bug in reading")
        return read_new(reader)

    monkeypatch.setattr(HistoryReader, "read_new", broken)
    with pytest.raises(WorkerFailed):  # Pilot re-raises what ended the app
        async with app.run_test(size=(80, 30)) as pilot:
            await loaded(pilot)
            armed.set()
            await pilot.pause(5 * FOLLOW_S)
    assert app._exit_renderables == []  # nothing for Textual to print: no traceback, no locals
    assert app.internal_error.startswith("internal error: WorkerFailed: ") and "a bug in reading" in app.internal_error


async def test_damage_appended_later_is_said_once_and_the_list_stays(tmp_path) -> None:
    directory = make_watch_folder(tmp_path, steps=44, ended=False)
    app = _app(directory)
    async with app.run_test(size=(100, 30)) as pilot:
        await loaded(pilot)
        with open(directory / "watch.jsonl", "a") as history:
            history.write("not json\n")
        await pilot.pause(5 * FOLLOW_S)
        shown = [n.message for n in app._notifications]
        assert len(shown) == 1 and "the line is not JSON" in shown[0] and "no longer following" in shown[0]
        assert len(_lines(app)) == 3


@pytest.mark.parametrize("warmup", ["abc", "1e5", {"a": 1}])
def test_a_setting_of_the_wrong_type_is_an_error_before_the_app_starts(tmp_path, warmup) -> None:
    # Issue 42 item 4: the chart's int() of the setting raised inside the app (a Rich traceback, exit 0).
    directory = make_watch_folder(tmp_path, settings={"ratio": 1.2, "warmup_steps": warmup})
    with pytest.raises(TraceError, match="'warmup_steps' is not a whole number"):
        _app(directory)
