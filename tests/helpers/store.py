"""Decoded stores compared column by column (tests/unit/test_big_traces.py: workers against one
process; tests/unit/test_cache.py: a reopen against a fresh decode)."""

from __future__ import annotations

import numpy as np

from tuiprof.trace.columns import input_texts

_CODED = ("name", "thread", "module", "stream", "grid", "block")


def _resolve(store, table: str, codes: np.ndarray) -> list:
    values = getattr(store, table)
    return [values[c] if c >= 0 else None for c in codes.tolist()]


def columns_equal(a, b) -> None:
    """Two decoded stores hold the same events: every column equal, coded ones by what the codes
    name, blob offsets left out (they depend on where the chunks were cut)."""
    for table in ("cpu", "frames", "device", "memory"):
        left, right = getattr(a, table), getattr(b, table)
        for name in left.__dataclass_fields__:
            if name.endswith("_at"):
                continue  # blob offsets depend on where chunks were cut
            if name in _CODED:  # codes depend on which chunk met a name first: compare what they name
                table_of = "threads" if name == "thread" else "names"
                assert _resolve(a, table_of, getattr(left, name)) == _resolve(b, table_of, getattr(right, name)), name
            else:
                assert np.array_equal(getattr(left, name), getattr(right, name), equal_nan=True), (table, name)
    texts = [input_texts(a.cpu, a.inputs, row) for row in range(len(a.cpu))]
    assert texts == [input_texts(b.cpu, b.inputs, row) for row in range(len(b.cpu))]
    assert set(a.names) == set(b.names) and set(a.threads) == set(b.threads)
    assert a.event_count == b.event_count and a.other_events == b.other_events
    assert len(a.gpu_annotations) == len(b.gpu_annotations)
