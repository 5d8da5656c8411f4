"""``tuiprof open DIR`` on a watch folder, driven by keys: the chart, the captures, Enter, d, live follow."""

from __future__ import annotations

import io
import json
import shutil

import pytest
from rich.console import Console

from tests.conftest import SAMPLES
from tuiprof.errors import TraceError
from tuiprof.trace.watch import HistoryReader
from tuiprof.tui.watch_app import LIST_COLUMNS, CompareScreen, WatchApp

HEALTHY = "step000007-healthy.pt.trace.json.gz"
SLOW = "step000042-slow.pt.trace.json.gz"


def _text(renderable, width: int = 100) -> str:
    console = Console(width=width, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.file.getvalue()


def _folder(tmp_path, steps: int = 60, ended: bool = True, slow_ms: float = 5.0, settings: dict | None = None):
    """A history by hand: 1 ms steps, ``slow_ms`` from step 40 on; healthy capture at 7-9, slow at 42-44."""
    directory = tmp_path / "w"
    directory.mkdir()
    shutil.copy(SAMPLES / "resnet18_b64_cpu.pt.trace.json.gz", directory / HEALTHY)
    shutil.copy(SAMPLES / "resnet18_cpu.pt.trace.json.gz", directory / SLOW)
    lines = [
        {
            "format": "tuiprof-watch",
            "version": 1,
            "pid": 1,
            "started": 0,
            "what": "train.py",
            "settings": settings or {"ratio": 1.2, "window": 20, "held": 3, "warmup_steps": 5},
        }
    ]
    for step in range(1, steps + 1):
        wall = slow_ms / 1000 if step >= 40 else 0.001
        lines.append(
            {"s": step, "t": step * 0.01, "w": wall, **({"p": 1} if 6 <= step <= 10 or 41 <= step <= 45 else {})}
        )
        if step == 5:
            lines.append({"e": "trigger", "step": 5, "trigger": "healthy", "why": "after the warm-up"})
        if step == 9:
            lines.append(
                {"e": "capture", "trigger": "healthy", "first_step": 7, "last_step": 9, "path": HEALTHY, "bytes": 1}
            )
        if step == 40:
            lines.append({"e": "trigger", "step": 40, "trigger": "slow", "why": "3 steps over"})
        if step == 44:
            lines.append(
                {"e": "capture", "trigger": "slow", "first_step": 42, "last_step": 44, "path": SLOW, "bytes": 1}
            )
    if ended:
        lines.append({"e": "end", "step": steps, "status": "finished"})
    (directory / "watch.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return directory


def _app(directory) -> WatchApp:
    reader = HistoryReader(directory)
    reader.read_new()
    return WatchApp(reader)


async def test_the_chart_marks_the_triggers_and_enter_opens_the_capture(tmp_path) -> None:
    directory = _folder(tmp_path)
    app = _app(directory)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        chart = _text(app.query_one("#chart").render()).splitlines()
        marks = next(line for line in chart if line.strip() and set(line.strip()) <= {"H", "S", " "})
        assert marks.index("H") < marks.index("S")
        assert "step 1 " in chart[-2] and chart[-2].endswith("step 60")
        assert all(len(line) <= 80 for line in chart)
        assert app.query_one("#captures").row_count == 2
        await pilot.press("down", "enter")
    assert app.return_value == ("open", str(directory / SLOW))


async def test_d_compares_with_the_healthy_capture_verdict_first(tmp_path) -> None:
    directory = _folder(tmp_path)
    app = _app(directory)
    async with app.run_test(size=(100, 40)) as pilot:
        await pilot.pause()
        await pilot.press("down", "d")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        await screen.workers.wait_for_complete()
        await pilot.pause()
        text = _text(screen.query_one("#comparison").render()).splitlines()
        assert "B is 4.80x slower per sample" in text[0]  # batches 64 vs 128: compared per sample
        assert text[2].startswith("where the step time went")
        await pilot.press("D")
    assert app.return_value == ("diff", str(directory / HEALTHY), str(directory / SLOW))


async def test_a_running_job_is_followed(tmp_path) -> None:
    directory = _folder(tmp_path, steps=44, ended=False)
    app = _app(directory)
    async with app.run_test(size=(80, 30)) as pilot:
        await pilot.pause()
        assert "44 steps, running" in _text(app.query_one("#job").render())
        with open(directory / "watch.jsonl", "a") as history:
            history.write(
                '{"s":45,"t":1,"w":0.005}\n{"e":"capture","trigger":"demand","first_step":45,"last_step":45,'
                f'"path":"{SLOW}","bytes":1}}\n{{"e":"end","step":45,"status":"finished"}}\n'
            )
        await pilot.pause(1.5)
        assert "45 steps, finished" in _text(app.query_one("#job").render())
        assert app.query_one("#captures").row_count == 3


async def test_a_slow_capture_that_was_not_slower_is_labelled_so(tmp_path) -> None:
    directory = _folder(tmp_path, slow_ms=1.1)  # "slow" at 42-44, but its steps are 1.1x the healthy ones
    app = _app(directory)
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        table = app.query_one("#captures")
        verdict = [c.key for c in LIST_COLUMNS].index("verdict")
        assert [str(table.get_row_at(row)[verdict]) for row in range(2)] == ["", "not slower"]
        assert "1 slow capture not slower than the healthy one (steps 42-44)" in _text(app.query_one("#job").render())


@pytest.mark.parametrize("warmup", ["abc", "1e5", {"a": 1}])
def test_a_setting_of_the_wrong_type_is_an_error_before_the_app_starts(tmp_path, warmup) -> None:
    # Issue 42 item 4: the chart's int() of the setting raised inside the app (a Rich traceback, exit 0).
    directory = _folder(tmp_path, settings={"ratio": 1.2, "warmup_steps": warmup})
    with pytest.raises(TraceError, match="'warmup_steps' is not a whole number"):
        _app(directory)
