"""Sidecars (``<trace>.tuiprof-summary``) are untrusted input: one planted, edited, copied from
another user or another trace, or off the schema is ignored, the rank analysed again and its
sidecar rewritten; none reaches an internal error or the terminal raw (trace/run.py, sidecars).

Each case is planted the way its author could: by editing the sidecar tuiprof wrote, keeping
whatever signature it had (on the code before sidecars were signed, a plain JSON edit)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.helpers.cli import tuiprof_bytes
from tests.helpers.ranks import two_rank_run
from tuiprof.analysis.ranks import summarise_run
from tuiprof.trace import run as run_module
from tuiprof.trace.run import open_run, sidecar_path

PLANTED_STEP_US = 987_000_000.0  # a 987 s step


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """A user's cache of its own (its own sidecar key)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


def _first_run(tmp_path: Path):
    directory = two_rank_run(tmp_path / "run")
    first = summarise_run(open_run(directory), workers=1)
    assert first.from_sidecars == 0 and all(sidecar_path(f.path).exists() for f in open_run(directory).ranks)
    return directory, first


def _sidecar_of(directory: Path, rank: int) -> Path:
    return sidecar_path(open_run(directory).file_of(rank).path)


def _edit(sidecar: Path, change, sign: bool = False) -> None:
    """Change the sidecar's JSON with ``change(envelope, summary)``; keep its first line (the
    signature, which whoever plants cannot make) unless ``sign``: then sign it with the
    user's key, as a sidecar of a buggy tuiprof would be."""
    raw = sidecar.read_bytes()
    signed = not raw.startswith(b"{")
    signature, body = raw.split(b"\n", 1) if signed else (b"", raw)
    data = json.loads(body)
    change(data, data["summary"])
    body = json.dumps(data).encode()
    if sign:
        signature = run_module._signature(run_module.sidecar_key(), body)
    sidecar.write_bytes(signature + b"\n" + body if signed else body)


def _slow_steps(envelope: dict, summary: dict) -> None:
    for step in summary["steps"]:
        step["step_us"] = PLANTED_STEP_US
        step["compute_us"] = PLANTED_STEP_US  # rank 0 would become a straggler that is not one


def test_planted_step_times_and_straggler_are_not_believed(tmp_path, cache) -> None:
    directory, first = _first_run(tmp_path)
    _edit(_sidecar_of(directory, 0), _slow_steps)
    again = summarise_run(open_run(directory))
    assert again.from_sidecars == 1 and again.ranks == first.ranks  # rank 0 analysed again
    assert set(again.stragglers()) == {1}
    rebuilt = summarise_run(open_run(directory))
    assert rebuilt.from_sidecars == 2 and rebuilt.ranks == first.ranks  # and its sidecar rewritten


def test_a_planted_rank_that_is_not_a_number_is_no_internal_error(tmp_path, cache) -> None:
    directory, _ = _first_run(tmp_path)

    def text_rank(envelope: dict, summary: dict) -> None:
        envelope["rank"] = "x"
        summary["rank"] = "x"

    _edit(_sidecar_of(directory, 0), text_rank)
    result = tuiprof_bytes(
        "summary", str(directory), "--view", "ranks", "--format", "csv", env=dict(os.environ, XDG_CACHE_HOME=str(cache))
    )
    assert result.returncode == 0, result.stderr
    assert [row.split(",")[0] for row in result.stdout.decode().splitlines()[1:]] == ["0", "1"]


def test_a_planted_rank_number_hides_no_rank(tmp_path, cache) -> None:
    directory, first = _first_run(tmp_path)

    def other_rank(envelope: dict, summary: dict) -> None:
        envelope["rank"] = 1
        summary["rank"] = 1

    _edit(_sidecar_of(directory, 0), other_rank)
    run = open_run(directory)
    assert [f.rank for f in run.ranks] == [0, 1] and not run.problems
    assert summarise_run(run).ranks == first.ranks


def test_a_planted_file_name_is_not_shown(tmp_path, cache) -> None:
    directory, first = _first_run(tmp_path)

    def escaped_file(envelope: dict, summary: dict) -> None:
        summary["file"] = "x\x1b]52;c;cHduZWQ=\x07.json"

    _edit(_sidecar_of(directory, 0), escaped_file)
    again = summarise_run(open_run(directory))
    assert again.ranks == first.ranks and "\x1b" not in again.ranks[0].file


@pytest.mark.parametrize(
    "change",
    [
        lambda e, s: s.update(rank="x"),
        lambda e, s: s.update(rank=1),
        lambda e, s: s.update(world_size=3),
        lambda e, s: s.update(file="other.json"),
        lambda e, s: s.update(size_bytes=s["size_bytes"] + 1),
        lambda e, s: s["steps"][0].update(step_us=-5.0),
        lambda e, s: s.update(steps="x"),
        lambda e, s: e.update(size="1754"),
        lambda e, s: e.update(extra=1),
        lambda e, s: e.update(content="0" * 64),
        lambda e, s: e.update(content="é" * 64),
        lambda e, s: e.update(path="/elsewhere.json"),
    ],
    ids=[
        "rank text",
        "other rank",
        "world size",
        "file",
        "size",
        "negative step",
        "steps text",
        "envelope size text",
        "unknown member",
        "content hash",
        "content hash not ASCII",
        "path",
    ],
)
def test_a_signed_sidecar_off_the_schema_or_the_head_is_ignored(tmp_path, cache, change) -> None:
    """The checks behind the signature: what a sidecar of a buggy or older tuiprof could hold."""
    directory, first = _first_run(tmp_path)
    _edit(_sidecar_of(directory, 0), change, sign=True)
    again = summarise_run(open_run(directory))
    assert again.from_sidecars == 1 and again.ranks == first.ranks


def test_a_trace_rewritten_with_the_same_size_and_mtime_is_analysed_again(tmp_path, cache) -> None:
    """The content hash (head and tail): size and mtime alone would keep the old step time."""
    directory, first = _first_run(tmp_path)
    trace = open_run(directory).file_of(0).path
    status = trace.stat()
    text = trace.read_text()
    assert '"dur": 20000}' in text
    trace.write_text(text.replace('"dur": 20000}', '"dur": 29000}', 1))  # ProfilerStep#1: 20 ms -> 29 ms
    os.utime(trace, ns=(status.st_atime_ns, status.st_mtime_ns))
    assert trace.stat().st_size == status.st_size
    again = summarise_run(open_run(directory))
    assert again.from_sidecars == 1 and again.ranks[0].steps[0].step_us == 29_000


def test_another_users_sidecars_are_not_believed(tmp_path, cache, monkeypatch) -> None:
    directory, first = _first_run(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "another-user"))  # another key
    assert summarise_run(open_run(directory)).from_sidecars == 0


def test_a_key_others_can_read_turns_sidecars_off(tmp_path, cache) -> None:
    directory, first = _first_run(tmp_path)
    key = cache / "tuiprof" / "sidecar.key"
    assert key.stat().st_mode & 0o777 == 0o600
    os.chmod(key, 0o644)
    run_module._key_at.cache_clear()
    try:
        again = summarise_run(open_run(directory))
    finally:
        run_module._key_at.cache_clear()
    assert again.from_sidecars == 0 and again.ranks == first.ranks


@pytest.mark.parametrize("plant", ["fifo", "symlink to a FIFO", "huge"])
def test_a_sidecar_that_is_no_regular_file_or_too_big_is_not_read(tmp_path, cache, plant) -> None:
    """A read of a planted FIFO would block for ever, of a 100 MB file fill memory for nothing."""
    directory, first = _first_run(tmp_path)
    sidecar = _sidecar_of(directory, 0)
    sidecar.unlink()
    if plant == "fifo":
        os.mkfifo(sidecar)
    elif plant == "symlink to a FIFO":
        os.mkfifo(tmp_path / "fifo")
        sidecar.symlink_to(tmp_path / "fifo")
    else:
        with open(sidecar, "wb") as handle:
            handle.truncate(100 << 20)  # sparse: no disk used
    result = tuiprof_bytes(
        "summary",
        str(directory),
        "--view",
        "ranks",
        "--format",
        "csv",
        env=dict(os.environ, XDG_CACHE_HOME=str(cache)),
        timeout=30,
    )
    assert result.returncode == 0 and result.stdout.decode().count("\n") == 3, result.stderr
