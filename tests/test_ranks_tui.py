"""The Ranks and Collectives views of the explorer on a run directory."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import SAMPLES
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.widgets.row_table import RowTable

DDP_SAMPLE = SAMPLES / "ddp_gloo_2ranks"
pytestmark = pytest.mark.skipif(not DDP_SAMPLE.is_dir(), reason="run scripts/make_sample_traces.py")


async def _settled(app: ExplorerApp, pilot) -> None:
    for _ in range(3):
        await app.workers.wait_for_complete()
        await pilot.pause()


async def test_ranks_view_names_the_straggler_and_collectives_view_the_last_rank(tmp_path) -> None:
    run = shutil.copytree(DDP_SAMPLE, tmp_path / "run")
    app = ExplorerApp(FileSource(str(run)))
    async with app.run_test(size=(120, 40)) as pilot:
        await _settled(app, pilot)
        await pilot.press("8")
        await _settled(app, pilot)
        assert app.current_view == "ranks"
        table = app.query_one("#ranks-table", RowTable)
        assert [row["rank"] for row in table.rows] == [0, 1]
        assert table.rows[1]["straggler"].startswith("rank 1: +")
        await pilot.press("down")
        await pilot.pause()
        assert "data loading" in str(app.query_one("#ranks-detail").render())
        await pilot.press("9")
        await _settled(app, pilot)
        collectives = app.query_one("#collectives-table", RowTable)
        assert collectives.rows and all(row["last_rank"] == 1 for row in collectives.rows)
        assert "arrived last" in str(app.query_one("#collectives-detail").render())


async def test_a_single_process_trace_says_what_the_ranks_view_needs() -> None:
    app = ExplorerApp(FileSource(str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot)
        await pilot.press("8")
        await _settled(app, pilot)
        table = app.query_one("#ranks-table", RowTable)
        assert table.rows == [] and "single-process" in table.empty_message
