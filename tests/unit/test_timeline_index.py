"""The Timeline's lane indexes against brute force on random intervals.

Every answer an index gives in O(log n) is recomputed here by looking at
every interval in plain Python: overlaps, zero durations, nesting, events
crossing cell borders, windows reaching past the data.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.oracle import covered_ns
from tuiprof.analysis.intervals import (
    NO_EVENT,
    CounterIndex,
    IntervalIndex,
    MaxTree,
    merge_spans,
    subtract_spans,
)
from tuiprof.analysis.timeline import Timeline, _depths

SEEDS = range(40)


def _overlapping(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    starts = rng.integers(0, 1000, n)
    durations = rng.choice([0, 0, 1, 3, 17, 50, 200], n) * rng.integers(0, 3, n)
    return starts, starts + durations


def _nested(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Intervals that nest like calls: each child inside a random earlier one."""
    starts, ends = [0], [1000]
    for _ in range(n - 1):
        parent = int(rng.integers(0, len(starts)))
        a, b = starts[parent], ends[parent]
        s = int(rng.integers(a, b + 1))
        e = int(rng.integers(s, b + 1))
        starts.append(s)
        ends.append(e)
    return np.array(starts), np.array(ends)


def _disjoint(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Sequential events with gaps (one stream, one nesting depth); zero durations too."""
    cuts = np.sort(rng.integers(0, 1000, 2 * n))
    return cuts[0::2], cuts[1::2]


GENERATORS = {"overlapping": _overlapping, "nested": _nested, "disjoint": _disjoint}


def _edges(rng: np.random.Generator, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Cells from a random window (sometimes past the data), borders on event edges too."""
    lo = int(rng.integers(-50, 600))
    hi = lo + int(rng.integers(1, 700))
    columns = int(rng.integers(1, 40))
    if hi - lo < columns:
        hi = lo + columns
    edges = Timeline.edges(lo, hi, columns)
    if len(starts) and rng.random() < 0.5:  # move inner borders onto event starts/ends (cell-border crossings)
        snapped = np.sort(rng.choice(np.concatenate((starts, ends)), columns - 1))
        inner = np.unique(np.clip(snapped, lo + 1, hi - 1))
        edges = np.concatenate(([lo], inner, [hi]))
    return edges


def _brute_busy(starts, ends, a: int, b: int) -> int:
    return covered_ns(list(zip(starts.tolist(), ends.tolist())), a, b)


def _overlap(s: int, e: int, a: int, b: int) -> int:
    return max(0, min(e, b) - max(s, a))


@pytest.mark.parametrize("kind", GENERATORS)
@pytest.mark.parametrize("seed", SEEDS)
def test_busy_fraction_equals_brute_force(kind: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts, ends = GENERATORS[kind](rng, int(rng.integers(0, 60)))
    index = IntervalIndex(starts, ends, np.zeros(len(starts)))
    for _ in range(5):
        edges = _edges(rng, starts, ends)
        busy = index.busy(edges)
        for i, (a, b) in enumerate(zip(edges[:-1].tolist(), edges[1:].tolist())):
            assert busy[i] == pytest.approx(_brute_busy(starts, ends, a, b) / (b - a), abs=1e-12), (i, a, b)
    assert index.busy_ns == _brute_busy(starts, ends, -(10**9), 10**9)


@pytest.mark.parametrize("kind", GENERATORS)
@pytest.mark.parametrize("seed", SEEDS)
def test_fullest_event_per_cell(kind: str, seed: int) -> None:
    """Exact (the largest overlap) on lanes without overlaps; otherwise an event of the cell,
    found exactly when some event overlaps it."""
    rng = np.random.default_rng(1000 + seed)
    starts, ends = GENERATORS[kind](rng, int(rng.integers(0, 60)))
    index = IntervalIndex(starts, ends, np.arange(len(starts)))
    s, e = index.starts.tolist(), index.ends.tolist()
    for _ in range(5):
        edges = _edges(rng, starts, ends)
        dominant = index.dominant(edges)
        for i, (a, b) in enumerate(zip(edges[:-1].tolist(), edges[1:].tolist())):
            best = max((_overlap(x, y, a, b) for x, y in zip(s, e)), default=0)
            row = int(dominant[i])
            if best == 0:
                assert row == NO_EVENT
                continue
            assert row != NO_EVENT and _overlap(s[row], e[row], a, b) > 0
            if kind == "disjoint":
                assert _overlap(s[row], e[row], a, b) == best


@pytest.mark.parametrize("seed", SEEDS)
def test_slice_lookups(seed: int) -> None:
    rng = np.random.default_rng(2000 + seed)
    starts, ends = _overlapping(rng, int(rng.integers(1, 50)))
    index = IntervalIndex(starts, ends, np.zeros(len(starts)))
    s, e = index.starts.tolist(), index.ends.tolist()
    for t in rng.integers(-10, 1300, 30).tolist():
        row = index.at(t)
        holding = [i for i in range(len(s)) if s[i] <= t < e[i] or s[i] == t]
        assert (row in holding) if holding else row == NO_EVENT
        after = [i for i in range(len(s)) if s[i] > t]
        assert index.next_after(t) == (after[0] if after else NO_EVENT)
        before = [i for i in range(len(s)) if s[i] < t]
        assert index.previous_before(t) == (before[-1] if before else NO_EVENT)


@pytest.mark.parametrize("seed", SEEDS)
def test_max_tree_argmax(seed: int) -> None:
    rng = np.random.default_rng(3000 + seed)
    values = rng.integers(0, 20, int(rng.integers(0, 70)))
    tree = MaxTree(len(values), values.__getitem__)
    lo = rng.integers(0, len(values) + 1, 50)
    hi = np.array([int(rng.integers(a, len(values) + 1)) for a in lo.tolist()])
    found = tree.argmax(lo, hi)
    for a, b, got in zip(lo.tolist(), hi.tolist(), found.tolist()):
        expected = a + int(np.argmax(values[a:b])) if b > a else NO_EVENT  # leftmost on ties
        assert got == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_counter_highest_in_cell(seed: int) -> None:
    rng = np.random.default_rng(4000 + seed)
    n = int(rng.integers(0, 40))
    times = np.sort(rng.integers(0, 1000, n))
    values = rng.integers(0, 10_000, n)
    counter = CounterIndex(times, values)
    edges = _edges(rng, times, times)

    def value_at(t: int) -> int:
        held = [v for x, v in zip(times.tolist(), values.tolist()) if x <= t]
        return held[-1] if held else 0

    highest = counter.highest(edges)
    for i, (a, b) in enumerate(zip(edges[:-1].tolist(), edges[1:].tolist())):
        inside = [v for x, v in zip(times.tolist(), values.tolist()) if a <= x < b]
        assert highest[i] == max([value_at(a), *inside])


@pytest.mark.parametrize("seed", SEEDS)
def test_window_minus_union(seed: int) -> None:
    """Gaps = each window minus the union of busy spans, checked nanosecond by nanosecond."""
    rng = np.random.default_rng(5000 + seed)
    busy_starts, busy_ends = merge_spans(*_overlapping(rng, int(rng.integers(0, 30))))
    windows = np.sort(rng.integers(0, 1300, (int(rng.integers(1, 4)), 2)), axis=1)
    gap_starts, gap_ends, owner = subtract_spans(windows[:, 0], windows[:, 1], busy_starts, busy_ends)
    covered = np.zeros(1400, dtype=bool)
    for a, b in zip(busy_starts.tolist(), busy_ends.tolist()):
        covered[a:b] = True
    for number, (a, b) in enumerate(windows.tolist()):
        idle = np.zeros(1400, dtype=bool)
        idle[a:b] = ~covered[a:b]
        mine = owner == number
        got = np.zeros(1400, dtype=bool)
        for s, e in zip(gap_starts[mine].tolist(), gap_ends[mine].tolist()):
            assert s < e
            got[s:e] = True
        assert (got == idle).all()


def test_depths_by_pointer_jumping() -> None:
    parent = np.array([-1, 0, 1, 2, 0, -1, 5, 3])
    assert _depths(parent).tolist() == [0, 1, 2, 3, 1, 0, 1, 4]
