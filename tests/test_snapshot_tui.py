"""``tuiprof open SNAP``'s app: the peak's stacks, the detail pane's full stack as plain text, keys."""

from __future__ import annotations

import pickle
from pathlib import Path

from tests.snapshot_gen import make_snapshot
from tuiprof.analysis.snapshot import analyze_snapshot
from tuiprof.trace.snapshot import decode_snapshot


def _model_with_markup_in_a_frame():
    data, expected = make_snapshot(1, steps=200)
    for trace in data["device_traces"]:
        for entry in trace:
            for frame in entry.get("frames", []):
                if frame["name"].startswith("layer"):
                    frame["filename"] = "/home/user/[bold red]model[/].py"
    return analyze_snapshot(decode_snapshot(data, "markup.pickle")), expected


async def test_the_app_shows_the_peak_stacks_and_the_full_stack_as_plain_text() -> None:
    from textual.widgets import DataTable, Static

    from tuiprof.tui.snapshot_app import SnapshotApp

    model, expected = _model_with_markup_in_a_frame()
    app = SnapshotApp(model)
    async with app.run_test(size=(100, 40)) as pilot:
        top = max(expected.peak_bytes, key=expected.peak_bytes.get)
        assert app.device == top
        table = app.query_one(DataTable)
        assert table.row_count == len(expected.peak_by_stack[top])
        detail = str(app.query_one("#detail", Static).render())
        assert "/home/user/[bold red]model[/].py" in detail  # shown as written, not styled
        await pilot.press("down")
        assert str(app.query_one("#detail", Static).render()) != detail
        await pilot.press("d")
        assert app.device == 1 - top and table.row_count == len(expected.peak_by_stack[1 - top])
        await pilot.press("o")
        assert app.showing_oom and "out of memory" in str(app.query_one("#heading", Static).render())
        await pilot.press("q")


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


async def _settle(pilot) -> None:
    await pilot.pause()
    await pilot.pause()


def test_snapshot_app_screens(snap_compare) -> None:
    """The app at 80x24: headline, curve, the peak's stacks, the detail pane (then the first OOM's holders).
    Update with --snapshot-update and look at tests/__snapshots__/test_snapshot_tui/."""
    from tuiprof.tui.snapshot_app import SnapshotApp

    data, _ = make_snapshot(1, steps=200)
    app = SnapshotApp(analyze_snapshot(decode_snapshot(data, "gen.pickle")))
    assert snap_compare(app, terminal_size=(80, 24), press=["o"], run_before=_settle)
