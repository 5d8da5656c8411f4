"""Hostile run directories: a damaged rank is marked as such wherever the ranks are shown, and
every entry that is not a trace file gets its own line (issue 30, item 12 and the messages)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SAMPLES
from tests.helpers.cli import tuiprof
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.widgets.row_table import RowTable

GLOO = SAMPLES / "ddp_gloo_2ranks"
PY = sys.executable


def _summary(*args: str) -> subprocess.CompletedProcess:
    return tuiprof("summary", *args)


def _run_with_a_bad_rank(tmp_path: Path, damage: str) -> Path:
    """The 2-rank gloo sample, uncompressed; rank 1 cut at half its bytes (``truncated``) or
    with one event's closing brace removed (``broken``)."""
    run = tmp_path / "run"
    run.mkdir()
    for source in sorted(GLOO.glob("*.pt.trace.json.gz")):  # not the sidecars a run may have left
        text = gzip.decompress(source.read_bytes())
        if ".rank1." in source.name:
            if damage == "truncated":
                text = text[: len(text) // 2]
            else:  # the first event's args lose their closing brace: that event cannot be read
                document = json.loads(text)
                events = [json.dumps(e) for e in document.pop("traceEvents")]
                events[0] = events[0][:-1]
                head = json.dumps(document)[:-1]
                text = (head + ', "traceEvents": [' + ",\n".join(events) + "]}").encode()
        (run / source.name.removesuffix(".gz")).write_bytes(text)
    return run


@pytest.mark.parametrize(("damage", "label"), [("truncated", "truncated"), ("broken", "1 event lost")])
def test_a_damaged_rank_is_marked_in_summary_view_ranks(tmp_path, damage: str, label: str) -> None:
    run = _run_with_a_bad_rank(tmp_path, damage)
    for attempt in ("analysed", "from sidecars"):
        result = _summary(str(run), "--view", "ranks", "--format", "json")
        assert result.returncode == 0, result.stderr
        rows = {row["rank"]: row for row in json.loads(result.stdout)}
        assert rows[0]["damaged"] == "" and rows[0]["damage"] == "", attempt
        assert rows[1]["damaged"] == label, (attempt, rows[1])
        lines = [line for line in result.stderr.splitlines() if "is damaged" in line]
        assert len(lines) == 1 and "rank 1 is damaged" in lines[0] and "numbers are partial" in lines[0], (
            attempt,
            result.stderr,
        )
        assert len(list(run.glob("*.tuiprof-summary"))) == 2  # the second attempt reads these
    table = _summary(str(run), "--view", "ranks")
    header = next(line for line in table.stdout.splitlines() if line.startswith("| Rank "))
    rank_1 = next(line for line in table.stdout.splitlines() if line.startswith("|    1 "))
    assert "Damaged" in header and label in rank_1


def test_intact_ranks_show_no_damaged_column(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for source in GLOO.glob("*.pt.trace.json.gz"):
        (run / source.name).write_bytes(source.read_bytes())
    result = _summary(str(run), "--view", "ranks")
    assert result.returncode == 0 and "Damaged" not in result.stdout and "damaged" not in result.stderr


async def test_the_ranks_view_marks_the_damaged_rank(tmp_path) -> None:
    run = _run_with_a_bad_rank(tmp_path, "truncated")
    app = ExplorerApp(FileSource(str(run / "train_ddp_gloo.rank0.pt.trace.json")))
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        await pilot.press("8")
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        table = app.query_one("#ranks-table", RowTable)
        assert [row["damaged"] for row in table.rows] == ["", "truncated"]
        assert "damaged" in [c.key for c in table.columns]
        await pilot.press("down")
        await pilot.pause()
        detail = " ".join(str(app.query_one("#ranks-detail").render()).split())
        assert "damaged file (truncated): this rank's numbers are partial" in detail


# ---------------------------------------------------------------- entries that are not trace files


def test_links_fifos_devices_and_folders_in_a_run_directory_get_one_line_each(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    for source in GLOO.glob("*.pt.trace.json.gz"):
        (run / source.name).write_bytes(source.read_bytes())
    (run / "loop.json").symlink_to("loop.json")
    (run / "dangling.json").symlink_to("nowhere.json")
    os.mkfifo(run / "fifo.json")  # nothing writes to it: never opened, or this would hang
    (run / "device.json").symlink_to("/dev/zero")
    (run / "folder.json").mkdir()
    (run / "notes.txt").symlink_to("nowhere.txt")  # not a trace's name: not mentioned
    expected = {
        "loop.json": "a symbolic link that loops; skipped",
        "dangling.json": "a symbolic link to nowhere.json, which does not exist; skipped",
        "fifo.json": "a named pipe, not a trace file; skipped",
        "device.json": "a symbolic link to a character device, not a trace file; skipped",
        "folder.json": "a folder, not a trace file; skipped",
    }
    result = _summary(str(run), "--view", "ranks", "--format", "csv")
    assert result.returncode == 0, result.stderr
    for name, what in expected.items():
        assert [line for line in result.stderr.splitlines() if f"/{name}:" in line] == [
            f"tuiprof: {run / name}: {what}"
        ]
    assert "notes.txt" not in result.stderr
    assert [row.split(",")[0] for row in result.stdout.splitlines()[1:]] == ["0", "1"]


def test_a_run_directory_of_only_bad_entries_says_why_it_has_no_trace(tmp_path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "rank0.json").symlink_to("rank0.json")
    result = _summary(str(run), "--view", "ranks")
    expected = (
        f"tuiprof: {run}: no trace files (*.json, *.json.gz) in this directory "
        f"(1 skipped: {run / 'rank0.json'}: a symbolic link that loops; skipped); pass a run directory"
    )
    assert result.returncode == 2 and result.stderr.splitlines() == [expected]


def test_a_run_of_unreadable_files_names_what_is_wrong_in_its_one_line(tmp_path):
    """'no readable trace file; see the lines above' had no lines above it: the one line names a
    file and what is wrong with it, and how many more there are."""
    (tmp_path / "a.pt.trace.json").write_text("")
    (tmp_path / "b.pt.trace.json").write_text("")
    done = _summary(str(tmp_path), "--view", "ranks")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert "see the lines above" not in lines[0]
    assert ".pt.trace.json: the file is empty" in lines[0] and "and 1 more" in lines[0]


@pytest.mark.parametrize("view", ["operators", "findings"])
def test_a_chosen_rank_that_fails_to_load_is_one_line(tmp_path, view: str) -> None:
    """``summary RUN_DIR --view V`` shows the run's lowest rank and says so; when that rank is
    bad, its error is the one line (the "holds 2 traces; showing rank 0" line came first: two)."""
    run = tmp_path / "run"
    run.mkdir()
    for source in sorted(GLOO.glob("*.pt.trace.json.gz")):
        data = source.read_bytes()
        (run / source.name).write_bytes(data[: len(data) // 2] if ".rank0." in source.name else data)
    result = _summary(str(run), "--view", view)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "rank0" in result.stderr and "truncated" in result.stderr
    intact = _summary(str(GLOO), "--view", view, "--no-sidecars")
    assert intact.returncode == 0 and "holds 2 traces; showing rank 0" in intact.stderr
