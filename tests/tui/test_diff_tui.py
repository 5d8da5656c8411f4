"""Diff mode of the explorer driven by keys on the shipped resnet18 pair."""

from __future__ import annotations

import csv
import io

from tests.conftest import SAMPLES
from tests.helpers.tui import loaded, plain_text
from tuiprof.tui.diff_app import DiffApp, DiffSource
from tuiprof.tui.widgets.row_table import RowTable

BATCH_128 = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
BATCH_64 = str(SAMPLES / "resnet18_b64_cpu.pt.trace.json.gz")


async def test_overview_tables_swap_and_sort_cycle(tmp_path) -> None:
    app = DiffApp(DiffSource(BATCH_128, BATCH_64), export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert app.current_view == "diff-overview"
        body = plain_text(app.query_one("#diff-overview-body").content)
        assert "verdict: batch 128 -> 64: B is" in body and "faster per sample" in body
        assert "aten::convolution_backward: -" in body
        header = plain_text(app.query_one("#header").content)
        assert "1 Diff" in header and "2 Operators" in header

        await pilot.press("2")
        table = app.query_one("#diff-ops-table", RowTable)
        top = table.rows[0]
        assert (top["name"], table.sort_key) == ("aten::convolution_backward", "abs_delta")
        assert top["delta"] < 0
        # Colour: a negative delta is drawn green (better).
        strip = table.render_line(1)
        assert any(s.style and s.style.color and s.style.color.name == "green" for s in strip)

        await pilot.press("d")
        assert table.sort_key == "a" and table.rows[0]["a"] == max(r["a"] or 0 for r in table.rows)
        await pilot.press("d")
        assert table.sort_key == "b"
        await pilot.press("d")
        assert table.sort_key == "abs_delta"

        await pilot.press("x")
        await pilot.pause()
        assert app.diff.verdict.outcome == "slower" and app.diff.label_a.endswith("resnet18_b64_cpu.pt.trace.json.gz")
        assert table.rows[0]["name"] == "aten::convolution_backward" and table.rows[0]["delta"] > 0

        await pilot.press("i")  # by input shape: not compared when the batch changed (every shape did)
        assert app.query_one("#diff-ops").shown == "shapes" and not table.rows
        assert "the batch changed" in table.empty_message
        assert "[Operators by input shape]" in plain_text(app.query_one("#header").content)
        await pilot.press("i")
        assert app.query_one("#diff-ops").shown == "ops"

        await pilot.press("slash", *"batch_norm", "enter")
        assert table.rows and all("batch_norm" in r["name"] for r in table.rows)
        await pilot.press("escape")
        assert len(table.rows) == len(table.all_rows)

        await pilot.press("e")
        comment, text = (tmp_path / "tuiprof-diff-ops.csv").read_text().split("\n", 1)
        assert comment.startswith("# tuiprof export: diff-ops of diff of A ") and "no filter" in comment
        exported = list(csv.DictReader(io.StringIO(text)))
        assert exported[0]["name"] == "aten::convolution_backward" and float(exported[0]["delta"]) > 0

        for key, view in (("3", "diff-modules"), ("4", "diff-kernels"), ("5", "diff-steps"), ("6", "diff-memory")):
            await pilot.press(key)
            assert app.current_view == view
        kernels = app.query_one("#diff-kernels-table", RowTable)
        assert not kernels.rows and kernels.empty_message.startswith("not compared: A and B have no device activity")
        await pilot.press("q")
    assert app.return_value == 0


async def test_a_missing_side_ends_the_app_with_exit_2(tmp_path) -> None:
    """No error page waiting for q: the app ends, run_app prints the line (as the explorer)."""
    import asyncio

    app = DiffApp(DiffSource(BATCH_128, str(tmp_path / "missing.json")))
    async with app.run_test(size=(80, 24)):
        for _ in range(200):
            if app.return_value is not None:
                break
            await asyncio.sleep(0.05)
    assert app.return_value == 2
    assert "no such file or directory" in app.error_text


async def test_q_before_the_diff_is_loaded_exits_130() -> None:
    """Stopped by the user before there was anything to show (it exited 0)."""
    import threading

    released = threading.Event()

    class SlowSource(DiffSource):
        def __call__(self, report):
            released.wait(10)  # loading until the test lets go, after q
            return super().__call__(report)

    app = DiffApp(SlowSource(BATCH_128, BATCH_64))
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause(0.1)
        await pilot.press("q")
        released.set()
    assert app.return_value == 130


async def test_help_lists_the_diff_keys_and_columns_at_80x24() -> None:
    from tuiprof.tui.screens.help import HelpScreen

    app = DiffApp(DiffSource(BATCH_128, BATCH_64))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert "6 Memory" in plain_text(app.query_one("#header").content)
        await pilot.press("2")
        palette = {command.title for command in app.get_system_commands(app.screen)}
        assert {"View: Operators", "Swap A/B (x)", "A/B/delta (d)", "Sort: |Delta|"} <= palette
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        keys = dict(app.screen.keys)
        assert keys["x"].startswith("swap A and B") and keys["d"].startswith("sort by A, then by B")
        assert keys["q ctrl+c"] == "quit" and not any(
            "live capture" in what for what in keys.values()
        )  # a diff never captures
        from textual.containers import VerticalScroll
        from textual.widgets import Static

        scroll = app.screen.query_one(VerticalScroll)
        assert scroll.show_vertical_scrollbar  # the help is longer than the screen
        for part in app.screen.query(Static):  # a blank column between the text and the scrollbar
            assert part.region.right <= scroll.scrollable_content_region.right - 1, (
                part.region,
                scroll.scrollable_content_region,
            )
        assert [c.key for c in app.screen.columns.columns][:4] == ["name", "detail", "status", "a"]
        await pilot.press("escape", "q")
    assert app.return_value == 0


async def test_at_60x20_the_table_keeps_the_signed_delta_and_the_verdict_no_half_number() -> None:
    """At 60x20 the Operators table kept only `A  B  |Delta| ▼` (no sign: faster or slower?)
    and the header's verdict read `… (-79.2 %, 7…`.  B (batch 64) runs convolution_backward
    in less time than A (batch 128): its delta is negative by construction of the pair."""
    import re

    app = DiffApp(DiffSource(BATCH_128, BATCH_64))
    async with app.run_test(size=(60, 20)) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        table = app.query_one("#diff-ops-table", RowTable)
        header_row = "".join(segment.text for segment in table.render_line(0))
        assert "Delta |▼|" in header_row and "|Delta|" not in header_row, header_row
        first = "".join(segment.text for segment in table.render_line(1))
        assert first.startswith("…::convolution_backward") and re.search(r" -\d[\d.]*ms", first), first
        line = plain_text(app.query_one("#header").content).splitlines()[0].rstrip()
        assert len(line) <= 60 and not re.search(r"\d…", line), line
        assert "B is 4.80x faster per sample (-79.2 %" in line, line
