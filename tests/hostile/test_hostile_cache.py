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
