"""A decoded-trace cache entry is untrusted input (trace/cache.py): one whose files are not
regular files -- a FIFO, a link to one -- is ignored and the trace decoded
again, never read (a FIFO blocks a read for ever); one whose header numpy reads only with a
warning is not used either.  Found by scripts/fuzz.py --surface cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections import Counter

import numpy as np
import pytest

from tests.helpers.cache import entries, write_trace
from tests.helpers.processes import bytes_read
from tuiprof.trace import cache, load_trace


@pytest.mark.parametrize("plant", ["a FIFO column", "meta.json a link to a FIFO"])
def test_a_cache_entry_with_a_file_that_is_no_regular_file_is_not_read(cache_on, tmp_path, plant) -> None:  # noqa: F811
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    if plant == "a FIFO column":
        (entry / "cpu.dur_ns.npy").unlink()
        os.mkfifo(entry / "cpu.dur_ns.npy")
    else:
        os.mkfifo(tmp_path / "fifo")
        (entry / "meta.json").unlink()
        (entry / "meta.json").symlink_to(tmp_path / "fifo")
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--format", "json"],
        capture_output=True,
        timeout=30,
        env=dict(os.environ),
    )
    assert result.returncode == 0, result.stderr
    assert {row["name"]: row["calls"] for row in json.loads(result.stdout)} == expected
    assert [
        e for e in entries(cache_on) if (e / "meta.json").is_file() and not (e / "meta.json").is_symlink()
    ]  # rebuilt


def test_a_column_whose_header_numpy_only_warns_about_is_not_used_and_prints_nothing(cache_on, tmp_path) -> None:  # noqa: F811
    """A ``.npy`` header in Python 2's style (``3L``): numpy reads it with a UserWarning, which
    reached stderr under ``summary`` as two raw lines (found by fuzz --surface cache, seed 3)."""
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    column = entry / "cpu.thread.npy"
    data = column.read_bytes()
    length = int.from_bytes(data[8:10], "little")
    rows = len(np.load(column))
    header = ("{'descr': '<i8', 'fortran_order': False, 'shape': (%dL,), }" % rows).encode()
    header += b" " * (63 - (10 + len(header)) % 64) + b"\n"
    column.write_bytes(data[:8] + len(header).to_bytes(2, "little") + header + data[10 + length :])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        store = load_trace(path)
    assert [str(w.message) for w in caught] == []
    assert store.cache_key is not None, "the planted entry was used"
    assert Counter(store.names[code] for code in store.cpu.name.tolist()) == expected


def test_a_column_file_with_bytes_added_inside_is_not_used(cache_on, tmp_path) -> None:  # noqa: F811
    """Correlation ids are not range-checked (any int64 is one): a span repeated inside a
    correlation column shifts its values and was believed (found by fuzz --surface cache, seed 4,
    in ``device.correlation``: kernels lost their launcher).  The header still says the right
    length; the file is longer than header + rows."""
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    column = entry / "cpu.correlation.npy"
    data = column.read_bytes()
    column.write_bytes(data[:200] + data[200:264] + data[200:])
    store = load_trace(path)
    assert store.cache_key is not None, "the planted entry was used"
    assert Counter(store.names[code] for code in store.cpu.name.tolist()) == expected


def test_a_byte_changed_in_meta_json_is_not_believed(cache_on, tmp_path) -> None:  # noqa: F811
    """meta.json holds the name table, not a checked column: a name changed in place (same
    length, still valid JSON) was believed, and a trace lost its steps without a word (found by
    fuzz --surface cache, seed 20261207: ``ProfilerStep#`` flipped, the steps CSV empty).
    meta.json now carries the CRC-32 of its own bytes."""
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    meta = entry / "meta.json"
    data = meta.read_bytes()
    assert data.count(b'"aten::last"') == 1
    meta.write_bytes(data.replace(b'"aten::last"', b'"aten::lost"'))
    store = load_trace(path)
    assert store.cache_key is not None, "the planted entry was used"
    assert Counter(store.names[code] for code in store.cpu.name.tolist()) == expected


def test_a_sealed_meta_json_reads_back_and_a_cut_seal_does_not() -> None:
    document = b'{"format":3,"names":["a","b"]}'
    sealed = cache.seal(document)
    assert json.loads(sealed)["names"] == ["a", "b"]
    assert cache.unsealed(sealed) == document
    assert cache.unsealed(document) is None  # no seal
    assert cache.unsealed(sealed[:-2] + b"0}") is None  # a seal that does not match
    assert cache.unsealed(sealed.replace(b'"a"', b'"c"')) is None


def _plant_resealed(entry, old: bytes, new: bytes) -> None:
    """A planter who knows the format: a name changed in meta.json (same length), sealed again."""
    meta = entry / "meta.json"
    document = cache.unsealed(meta.read_bytes())
    assert document is not None and document.count(old) == 1
    meta.write_bytes(cache.seal(document.replace(old, new)))


def _summary(path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


@pytest.mark.parametrize(
    "case, problem",
    [
        ("stores 777", "is writable by other users (mode 777"),
        ("tuiprof/ 777", "is in a folder other users may write into"),
        ("stores 755", "is open to other users (mode 755"),
        ("stores another user's", "belongs to another user"),
    ],
)
def test_a_cache_folder_others_could_write_is_refused_in_one_line_and_not_read(
    cache_on,  # noqa: F811
    tmp_path,
    case: str,
    problem: str,
) -> None:
    """Issue 42, item 7: a world-writable stores folder was used without a word, and an entry
    planted there (resealed) was believed.  Now the folder is refused before anything in it is
    read or removed, with one line naming the folder and why."""
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    _plant_resealed(entry, b'"aten::last"', b'"aten::pwnd"')
    planted = (entry / "meta.json").read_bytes()
    if case == "stores another user's":
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another user needs root")
        os.chown(cache_on, 65534, 65534)
    else:
        folder = cache_on.parent if case.startswith("tuiprof/") else cache_on
        folder.chmod(int(case.split()[-1], 8))
    result = _summary(path, dict(os.environ))
    assert result.returncode == 0, result.stderr
    assert {row["name"]: row["calls"] for row in json.loads(result.stdout)} == expected  # not the planted name
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tuiprof: cache {cache_on} ") and problem in lines[0], lines
    assert (entry / "meta.json").read_bytes() == planted  # not read, not removed, not rewritten
    assert entries(cache_on) == [entry]


def test_a_relative_xdg_cache_home_is_ignored(cache_on, tmp_path) -> None:  # noqa: F811
    """Issue 42, item 12: ``XDG_CACHE_HOME=rel`` wrote the cache under the current folder; the
    XDG spec says a relative path is ignored (then ``~/.cache``)."""
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = dict(os.environ, XDG_CACHE_HOME="rel", HOME=str(home))
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=work,
    )
    assert result.returncode == 0, result.stderr
    assert {row["name"]: row["calls"] for row in json.loads(result.stdout)} == expected
    assert list(work.iterdir()) == []
    assert len(entries(home / ".cache" / "tuiprof" / "stores")) == 1


@pytest.mark.parametrize("where", ["--cache-size", "TUIPROF_CACHE_SIZE"])
def test_a_cache_size_of_309_digits_is_one_line_or_the_default(cache_on, tmp_path, where: str) -> None:  # noqa: F811
    """Issue 42, item 8: 309 digits overflow a float to inf, and ``int(inf)`` raised: a traceback
    and exit 1 from the option; from the variable, in the cache writer's thread (no entry)."""
    path = tmp_path / "trace.json"
    write_trace(path)
    huge = "9" * 309
    env = dict(os.environ)
    argv = [sys.executable, "-m", "tuiprof", "summary", str(path), "--limit", "1"]
    if where == "--cache-size":
        argv += ["--cache-size", huge]
    else:
        env[cache.CACHE_SIZE_ENV] = huge
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    assert "Traceback" not in result.stderr and "Error" not in result.stderr, result.stderr
    if where == "--cache-size":
        assert result.returncode == 2 and "more than 4 EiB" in result.stderr, result.stderr
    else:  # a size that cannot be is not one: the default bound, and the entry is written
        assert result.returncode == 0 and result.stderr == "", result.stderr
        assert len(entries(cache_on)) == 1


def test_a_huge_meta_json_is_not_read(cache_on, tmp_path) -> None:  # noqa: F811
    """Issue 42, item 10: a 3 GB sparse meta.json was read whole (10-13 s, 3.2 GB of memory)
    before its seal was checked.  meta.json may hold at most 8 bytes per byte of the trace's
    text (JSON-escaped names) and 1 MB; a 512 MB one is refused by its size, unread."""
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    meta = entry / "meta.json"
    with open(meta, "r+b") as file:
        file.truncate(512 << 20)  # sparse: no disk, but a read gives 512 MB
    before = bytes_read()
    store = load_trace(path)
    read = bytes_read() - before
    assert store.cache_key is not None, "the planted entry was used"
    assert Counter(store.names[code] for code in store.cpu.name.tolist()) == expected
    assert read < 3 * path.stat().st_size, (
        f"{read / 2**20:.0f} MB read for a {path.stat().st_size / 2**20:.0f} MB trace"
    )


def test_a_planted_note_of_100_kb_is_not_printed(cache_on, tmp_path, capsys) -> None:  # noqa: F811
    """The decoder's notes are printed on stderr; a planter's (resealed) meta.json held one of
    100 kB, printed whole.  A note is at most 1,000 characters (the decoder cuts longer ones, a
    60 MB device name in one): an entry with a longer one is not a tuiprof entry."""
    from tuiprof.cli import main

    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    meta = json.loads(cache.unsealed((entry / "meta.json").read_bytes()))
    meta["report"]["problems"] = ["x" * 100_000]
    (entry / "meta.json").write_bytes(cache.seal(json.dumps(meta, separators=(",", ":")).encode()))
    assert main(["summary", str(path), "--format", "json"]) == 0
    cache.wait_for_writes()
    out, err = capsys.readouterr()
    assert {row["name"]: row["calls"] for row in json.loads(out)} == expected
    assert err == ""
