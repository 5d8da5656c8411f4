"""The Ranks and Collectives views of the explorer on a run directory."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import SAMPLES
from tests.helpers.tui import plain_text
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.views.overview import OverviewView
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
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot)
        await pilot.press("8")
        await _settled(app, pilot)
        assert app.current_view == "ranks"
        table = app.query_one("#ranks-table", RowTable)
        assert [row["rank"] for row in table.rows] == [0, 1]
        # at 80 columns the column holds the short cause, whole, in a column shown beside it
        cause = table.rows[1]["straggler"]
        assert cause.startswith("Data load +") and cause.endswith(" ms")
        lines = ["".join(segment.text for segment in table.render_line(y)) for y in range(3)]
        assert "Data load" in lines[0] and cause in lines[2], lines
        await pilot.press("down")
        await pilot.pause()
        detail = " ".join(str(app.query_one("#ranks-detail").render()).split())
        assert detail.startswith("rank 1 ") and table.rows[1]["straggler_reason"] in detail
        assert "per step" not in cause and "the others wait for it, in Exposed comm" in detail
        await pilot.press("9")
        await _settled(app, pilot)
        collectives = app.query_one("#collectives-table", RowTable)
        assert collectives.rows and all(row["last_rank"] == 1 for row in collectives.rows)
        assert "arrived last" in str(app.query_one("#collectives-detail").render())


async def test_the_overview_of_a_rank_names_the_runs_straggler_first(tmp_path) -> None:
    run = shutil.copytree(DDP_SAMPLE, tmp_path / "run")
    app = ExplorerApp(FileSource(str(run / "train_ddp_gloo.rank0.pt.trace.json.gz")))  # rank 0 is not the straggler
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot)
        assert app.current_view == "overview"
        body = " ".join(plain_text(app.query_one("#overview-body").content, 80).split())
        assert body.startswith("Findings • Straggler rank 1: "), body[:200]
        view = app.query_one(OverviewView)
        _, rows, _ = view.export_rows()
        assert rows[0]["id"] == "straggler" and rows[0]["severity"] == "warning"


async def test_a_single_process_trace_says_what_the_ranks_view_needs() -> None:
    app = ExplorerApp(FileSource(str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot)
        await pilot.press("8")
        await _settled(app, pilot)
        table = app.query_one("#ranks-table", RowTable)
        assert table.rows == [] and "single-process" in table.empty_message


async def test_after_next_rank_the_ranks_view_selects_it_and_the_loading_toast_is_gone(tmp_path) -> None:
    """After `]` the header said rank 1 while the Ranks table kept rank 0 selected; the toast
    `rank 1: loading train_ddp_gloo.rank1.pt.trace.json.g` / `z` came after the rank was shown
    and stayed ~5 s."""
    run = shutil.copytree(DDP_SAMPLE, tmp_path / "run")
    app = ExplorerApp(FileSource(str(run)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot)
        await pilot.press("8")
        await _settled(app, pilot)
        table = app.query_one("#ranks-table", RowTable)
        assert app.model.info.rank == 0 and table.current_row["rank"] == 0
        await pilot.press("right_square_bracket")
        await _settled(app, pilot)
        assert app.model.info.rank == 1
        assert table.current_row["rank"] == 1
        assert not list(app._notifications)  # the load is over: no toast left
        await pilot.press("left_square_bracket")  # rank 0 is kept: shown at once, no toast at all
        await _settled(app, pilot)
        assert app.model.info.rank == 0 and table.current_row["rank"] == 0
        assert not list(app._notifications)
