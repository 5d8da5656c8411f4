"""``tuiprof open SNAP``'s app: the peak's stacks, the detail pane's full stack as plain text, keys."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from tests.helpers.snapshot_gen import make_snapshot
from tests.helpers.tui import loaded, screen_lines
from tuiprof.analysis.snapshot import analyze_snapshot, stack_frames
from tuiprof.trace.snapshot import decode_snapshot


def _model_with_markup_in_a_frame():
    data, expected = make_snapshot(1, steps=200)
    for trace in data["device_traces"]:
        for entry in trace:
            for frame in entry.get("frames", []):
                if frame["name"].startswith("layer"):
                    frame["filename"] = "/home/user/[bold red]model[/].py"
    return analyze_snapshot(decode_snapshot(data, "markup.pickle")), expected


def _app(model, tmp_path: Path | None = None):
    from tuiprof.tui.snapshot_app import SnapshotApp

    return SnapshotApp(lambda report: (model, None), "gen.pickle", export_dir=tmp_path)


def _rows(app, page: str) -> list[dict]:
    from tuiprof.tui.widgets.row_table import RowTable

    return app.query_one(f"#snap-{page}-table", RowTable).rows


def _text(app, selector: str) -> str:
    from textual.widgets import Static

    return str(app.query_one(selector, Static).render())


async def test_the_app_shows_the_peak_stacks_and_the_full_stack_as_plain_text() -> None:
    model, expected = _model_with_markup_in_a_frame()
    app = _app(model)
    async with app.run_test(size=(100, 40)) as pilot:
        await loaded(pilot)
        top = max(expected.peak_bytes, key=expected.peak_bytes.get)
        assert app.state.device == top
        rows = _rows(app, "peak")
        assert sorted(r["bytes"] for r in rows) == sorted(expected.peak_by_stack[top].values())
        detail = _text(app, "#snap-peak-detail")
        assert "/home/user/[bold red]model[/].py" in detail  # shown as written, not styled
        await pilot.press("down")
        assert _text(app, "#snap-peak-detail") != detail
        await pilot.press("d")
        assert app.state.device == 1 - top
        assert sorted(r["bytes"] for r in _rows(app, "peak")) == sorted(expected.peak_by_stack[1 - top].values())
        await pilot.press("o")
        assert app.state.oom is not None and "out of memory" in _text(app, "#snap-heading")
        await pilot.press("escape")  # back to the peak
        assert app.state.oom is None and "out of memory" not in _text(app, "#snap-heading")
        await pilot.press("question_mark")
        help_text = " ".join(what for _, what in app.screen.keys)
        assert "what held memory at the highlighted OOM" in help_text and "operator" not in help_text
        await pilot.press("escape")
        await pilot.press("q")


async def test_segments_and_ooms_pages_match_the_raw_snapshot() -> None:
    """The Segments page lists the dict's segments of the GPU shown, the OOMs page its oom entries
    in order; enter on an OOM shows what held memory then on the Peak page."""
    data, _ = make_snapshot(1, steps=200)
    app = _app(analyze_snapshot(decode_snapshot(data, "gen.pickle")))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        device = app.state.device
        await pilot.press("3")
        raw = sorted(s["total_size"] for s in data["segments"] if s["device"] == device)
        assert raw and sorted(r["reserved"] for r in _rows(app, "segments")) == raw
        await pilot.press("4")
        raw_ooms = [e for trace in data["device_traces"] for e in trace if e["action"] == "oom"]
        rows = _rows(app, "ooms")
        assert len(rows) == len(raw_ooms) > 1
        assert sorted(r["requested"] for r in rows) == sorted(e["size"] for e in raw_ooms)
        assert [r["order"] for r in rows] == list(range(1, len(rows) + 1))  # in the order they happened
        await pilot.press("down")
        chosen = app.query_one("#snap-ooms-table").current_row.item
        await pilot.press("enter")
        assert app.current_view == "snap-peak" and app.state.oom is chosen
        assert f"(entry {chosen.index:,})" in _text(app, "#snap-heading")
        assert sum(r["bytes"] for r in _rows(app, "peak")) == chosen.allocated


async def test_modules_page_groups_the_peak_by_forward(tmp_path: Path) -> None:
    """Bytes per module at the peak: the generator's per-stack bytes summed by each stack's
    hand-written module path."""
    data, expected = make_snapshot(3, steps=200, modules=True)
    app = _app(analyze_snapshot(decode_snapshot(data, "gen.pickle")), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        device = app.state.device
        by_module: dict[str, int] = {}
        for stack, size in expected.peak_by_stack[device].items():
            path = expected.stack_modules[stack]
            name = " > ".join(path) if path else "(outside any module)"
            by_module[name] = by_module.get(name, 0) + size
        await pilot.press("2")
        assert {r["module"]: r["bytes"] for r in _rows(app, "modules")} == by_module


def _frame_lines(stack: list[dict], kinds: list[str], hide_torch: bool) -> list[str]:
    """The stack pane's frame lines as the generator wrote the frames: its own kind of each
    marks the user's (``› ``) and hides torch's."""
    return [
        ("› " if kind == "own" else "  ") + f"{frame['filename']}:{frame['line']} {frame['name']}"
        for frame, kind in zip(stack, kinds)
        if not (hide_torch and kind == "torch")
    ]


@pytest.mark.parametrize("size", [(60, 20), (80, 24), (120, 40)])
async def test_the_stack_pane_grows_scrolls_marks_your_frames_and_hides_torchs(size) -> None:
    """Stacks of 28 frames, the user's first 8 frames in: the pane shows the user's frame of the
    highlighted stack without scrolling, ``f`` gives it the keys (j/k, end/home), ``t`` hides
    torch's frames and shows them again, esc gives the keys back to the table."""
    from tuiprof.tui.views.snapshot import DetailScroll
    from tuiprof.tui.widgets.row_table import RowTable

    data, expected = make_snapshot(2, steps=200, deep=True)
    model = analyze_snapshot(decode_snapshot(data, "deep.pickle"))
    app = _app(model)
    async with app.run_test(size=size) as pilot:
        await loaded(pilot)
        table = app.query_one("#snap-peak-table", RowTable)
        frames = [(f, line, name) for f, line, name in stack_frames(model.snapshot, table.current_row.item.stack)]
        index = [[(f["filename"], f["line"], f["name"]) for f in s] for s in expected.stacks].index(frames)
        stack, kinds = expected.stacks[index], expected.frame_kinds[index]
        first_own = stack[kinds.index("own")]
        pane = app.query_one("#snap-peak-pane", DetailScroll)
        assert pane.size.height >= {20: 4, 24: 6, 40: 12}[size[1]]  # grows with the terminal
        shown = "\n".join(screen_lines(app))
        assert f"your frame: model.py:{first_own['line']} forward" in shown  # without scrolling
        body = _text(app, "#snap-peak-detail").split(":\n", 1)[1].splitlines()  # after "stack, ...:"
        assert body == _frame_lines(stack, kinds, hide_torch=False)
        assert pane.max_scroll_y > 0 and pane.scroll_y == 0  # the stack is longer than the pane

        await pilot.press("f")
        assert app.focused is pane
        await pilot.press("end")
        assert pane.scroll_y == pane.max_scroll_y
        last = f"› {stack[-1]['filename']}:{stack[-1]['line']} {stack[-1]['name']}"
        assert last in "\n".join(screen_lines(app))  # the outermost frame, on screen now
        await pilot.press("home")
        assert pane.scroll_y == 0
        await pilot.press("j", "j")
        assert pane.scroll_y == 2
        await pilot.press("k")
        assert pane.scroll_y == 1
        assert table.cursor == 0  # the table's cursor did not move

        await pilot.press("t")
        text = _text(app, "#snap-peak-detail")
        assert f"{kinds.count('torch')} frames of torch hidden" in text
        assert text.split(":\n", 1)[1].splitlines() == _frame_lines(stack, kinds, hide_torch=True)
        await pilot.press("t")
        assert _text(app, "#snap-peak-detail").split(":\n", 1)[1].splitlines() == body

        await pilot.press("escape")
        assert app.focused is table and app.state.oom is None
        await pilot.press("q")


async def test_filter_and_export_act_on_the_page(tmp_path: Path) -> None:
    data, expected = make_snapshot(1, steps=200)
    app = _app(analyze_snapshot(decode_snapshot(data, "gen.pickle")), tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        every = _rows(app, "peak")
        await pilot.press("slash", *"layer2", "enter")
        kept = _rows(app, "peak")
        assert 0 < len(kept) < len(every) and all("layer2" in r["where"] for r in kept)
        await pilot.press("e")
        await pilot.pause()
        written = list(tmp_path.glob("tuiprof-snapshot-stacks*.csv")) or list(tmp_path.glob("*.csv"))
        assert len(written) == 1
        lines = [line for line in written[0].read_text().splitlines() if line and not line.startswith("#")]
        assert len(lines) == 1 + len(kept)  # the header, then the filtered rows only
        assert all("layer2" in line for line in lines[1:])


def test_open_off_a_terminal_prints_the_summary(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.conftest import ROOT

    data, expected = make_snapshot(2, steps=100)
    path = tmp_path / "named-like-a.json"
    path.write_bytes(pickle.dumps(data))
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "open", str(path)], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("peak ")
    top = max(expected.peak_bytes.values())
    from tuiprof.report.units import format_bytes

    assert f"peak {format_bytes(top)} allocated" in result.stdout.splitlines()[0]


def test_snapshot_app_screens(snap_compare) -> None:
    """The app at 80x24: headline, curve, the peak's stacks, the detail pane (then the first OOM's holders).
    Update with --snapshot-update and look at tests/tui/__snapshots__/test_snapshot_tui/."""
    data, _ = make_snapshot(1, steps=200)
    app = _app(analyze_snapshot(decode_snapshot(data, "gen.pickle")))
    assert snap_compare(app, terminal_size=(80, 24), press=["o"], run_before=loaded)


def test_snapshot_app_segments_screen(snap_compare) -> None:
    """The Segments page at 120x40 (fragmentation per segment). Update as above."""
    data, _ = make_snapshot(1, steps=200)
    app = _app(analyze_snapshot(decode_snapshot(data, "gen.pickle")))
    assert snap_compare(app, terminal_size=(120, 40), press=["3"], run_before=loaded)


def test_snapshot_app_stack_pane_screen(snap_compare) -> None:
    """The Peak page at 80x24 with deep stacks and torch's frames hidden (t): the user's frame
    second in the pane, their frames marked. Update as above."""
    data, _ = make_snapshot(2, steps=200, deep=True)
    app = _app(analyze_snapshot(decode_snapshot(data, "deep.pickle")))
    assert snap_compare(app, terminal_size=(80, 24), press=["t"], run_before=loaded)
