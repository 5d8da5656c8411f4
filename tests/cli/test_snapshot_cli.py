"""The commands on allocator snapshots: summary's JSON, diff, and one line for what is not offered."""

from __future__ import annotations

import json
import pickle
import re
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers.cli import tuiprof
from tests.helpers.snapshot_gen import make_snapshot

SAMPLE = ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"


def test_summary_json_and_diff_of_two_snapshots(tmp_path: Path) -> None:
    paths = []
    for seed in (1, 2):
        data, expected = make_snapshot(seed, steps=150)
        path = tmp_path / f"s{seed}.pickle"
        path.write_bytes(pickle.dumps(data))
        paths.append((path, expected))
    result = tuiprof("summary", str(paths[0][0]), "--format", "json", "--limit", "2")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert {p["device"]: p["allocated_bytes"] for p in document["peaks"]} == paths[0][1].peak_bytes
    assert all(len(p["stacks"]) <= 2 for p in document["peaks"])
    result = tuiprof("diff", str(paths[0][0]), str(paths[1][0]), "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["a"]["peak_bytes"], document["b"]["peak_bytes"]) == (
        max(paths[0][1].peak_bytes.values()),
        max(paths[1][1].peak_bytes.values()),
    )
    assert (
        sum(row["change_bytes"] for row in document["stacks"])
        == document["b"]["peak_bytes"] - document["a"]["peak_bytes"]
    )


def test_summary_names_each_stacks_first_frame_of_yours_and_counts_the_frames_left_out(tmp_path: Path) -> None:
    """Stacks of 28 frames whose first frame of the user's code is 8 frames in (the generator
    writes each frame's kind by hand): each row at the peak names that frame and the other 27;
    JSON says how many stacks the peak has and how many it lists."""
    data, expected = make_snapshot(2, steps=200, deep=True)
    path = tmp_path / "deep.pickle"
    path.write_bytes(pickle.dumps(data))
    result = tuiprof("summary", str(path), "--limit", "50")
    assert result.returncode == 0, result.stderr
    row = re.compile(r"^ +[\d.]+ \w+ +[\d.]+% +[\d,]+  (.+)$")
    for device, by_stack in expected.peak_by_stack.items():
        block = result.stdout.split(f"cuda:{device}: peak ", 1)[1].split("largest single allocation", 1)[0]
        shown = {m[1] for line in block.splitlines() if (m := row.match(line))}
        wanted = set()
        for index in by_stack:
            stack, kinds = expected.stacks[index], expected.frame_kinds[index]
            first = stack[kinds.index("own")]
            wanted.add(f"model.py:{first['line']} {first['name']} (+{len(stack) - 1} frames)")
        assert shown == wanted
    document = json.loads(tuiprof("summary", str(path), "--format", "json", "--limit", "2").stdout)
    for peak in document["peaks"]:
        total = len(expected.peak_by_stack[peak["device"]])
        assert (peak["stacks_total"], peak["stacks_shown"]) == (total, min(2, total)) == (total, len(peak["stacks"]))


def test_what_is_not_offered_for_snapshots_is_one_line(tmp_path: Path) -> None:
    data, _ = make_snapshot(0, steps=30)
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(data))
    for args in (
        ("summary", str(path), "--format", "csv"),
        ("diff", str(path), str(SAMPLE)),
        ("summary", str(SAMPLE), "--view", "snapshot"),
    ):
        result = tuiprof(*args)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr, (
            args,
            result.stderr,
        )


def test_a_diff_with_a_snapshot_of_no_device_is_one_line(tmp_path: Path) -> None:
    """{"segments": []} has no device, so no peak (found by fuzz --snapshot-scan, seed 7: was an
    internal error from max() of no peaks)."""
    empty, full = tmp_path / "empty.pickle", tmp_path / "full.pickle"
    empty.write_bytes(pickle.dumps({"segments": []}, protocol=4))
    full.write_bytes(pickle.dumps(make_snapshot(0, steps=30)[0], protocol=4))
    for pair in ((empty, full), (full, empty), (empty, empty)):
        result = tuiprof("diff", *map(str, pair), "--format", "json")
        lines = result.stderr.splitlines()
        assert result.returncode == 2 and len(lines) == 1, result.stderr
        assert lines[0].startswith(f"tuiprof: {empty}: has no device"), lines


def test_a_window_that_cannot_be_is_one_line(tmp_path: Path) -> None:
    data, _ = make_snapshot(0, steps=30)
    path = tmp_path / "s.pickle"
    path.write_bytes(pickle.dumps(data))
    for window in (("--from", "nan"), ("--from", "500", "--to", "100"), ("--to", "inf")):
        result = tuiprof("summary", str(path), *window)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, (window, result.stderr)
        assert "None" not in result.stderr, result.stderr  # only the options given are named (was: --to None)
        assert result.stderr.startswith(f"tuiprof: {window[0]} "), result.stderr
    result = tuiprof("summary", str(SAMPLE), "--from", "5")
    assert result.returncode == 2 and "timeline" in result.stderr


def test_a_snapshot_without_history_says_how_to_record_it(tmp_path: Path) -> None:
    data, expected = make_snapshot(3, steps=150)
    data["device_traces"] = [[], []]  # _snapshot() without _record_memory_history(): segments only
    path = tmp_path / "state.pickle"
    path.write_bytes(pickle.dumps(data))
    result = tuiprof("summary", str(path))
    assert result.returncode == 0, result.stderr
    from tuiprof.report.units import format_bytes

    first = result.stdout.splitlines()[0]
    assert first.startswith(f"{format_bytes(max(expected.live_end.values()))} allocated on cuda:")
    assert "_record_memory_history()" in first
