"""Indexes over one timeline lane, built once, so a frame never walks the lane's events.

A Timeline frame asks, for every lane and every column (a time cell), how
busy the cell is and which event fills it most.  With a million events per
lane and 60 lanes x 200 columns per frame, anything that looks at every event
in the window is too slow when zoomed out.  These indexes answer in
O(columns x log(events)) with a few numpy calls per lane:

- :class:`IntervalIndex` keeps the lane's intervals sorted by start, their
  union as disjoint spans with prefix sums of covered time (busy time up to
  any instant is one ``searchsorted``), a running "furthest-reaching event"
  index (what is still open at an instant) and a :class:`MaxTree` over
  durations (the longest event starting inside a range).
- :class:`CounterIndex` keeps a step function (allocated bytes over time) with
  a :class:`MaxTree` over its values (the highest level inside a cell).

Times are integer nanoseconds, as everywhere in the analysis layer.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

NO_EVENT = -1


class MaxTree:
    """Bottom-up segment tree of argmax positions: the position of the largest value
    in ``values[lo:hi]`` for many ranges at once, O(log n) numpy passes.

    It stores one int32 position per node (2 x the next power of two) and
    reads values through ``value_of(positions)``, so an index that can compute
    them (durations from starts and ends) keeps no copy.  On ties the leftmost
    position wins.
    """

    def __init__(self, n: int, value_of: Callable[[np.ndarray], np.ndarray]) -> None:
        size = 1 << max(0, (n - 1).bit_length())
        self._value_of, self._n = value_of, n
        tree = np.full(2 * size, n, dtype=np.int32 if n < 2**31 - 1 else np.int64)
        tree[size : size + n] = np.arange(n)
        level = size
        while level > 1:  # fill parents level by level
            left, right = tree[level : 2 * level : 2], tree[level + 1 : 2 * level : 2]
            half = level // 2
            tree[half:level] = np.where(self._values(right) > self._values(left), right, left)
            level = half
        self._tree, self._size = tree, size

    @property
    def nbytes(self) -> int:
        return self._tree.nbytes

    def _values(self, positions: np.ndarray) -> np.ndarray:
        """Values at positions; the sentinel position ``n`` is lower than any value."""
        lowest = np.iinfo(np.int64).min
        if not self._n:
            return np.full(len(positions), lowest, dtype=np.int64)
        real = positions < self._n
        values = np.asarray(self._value_of(np.where(real, positions, 0)), dtype=np.int64)
        return np.where(real, values, lowest)

    def argmax(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Position of the largest value in each ``[lo, hi)`` (``NO_EVENT`` where empty)."""
        tree = self._tree
        best = np.full(len(lo), self._n, dtype=np.int64)
        best_value = self._values(best)
        left = np.asarray(lo, dtype=np.int64) + self._size
        right = np.maximum(np.asarray(hi, dtype=np.int64) + self._size, left)
        while True:
            active = left < right
            if not active.any():
                break
            take = active & (left & 1 == 1)
            best, best_value = self._better(
                best, best_value, np.where(take, tree[np.minimum(left, len(tree) - 1)], self._n)
            )
            left = left + take
            take = active & (right & 1 == 1)
            right = right - take
            best, best_value = self._better(
                best, best_value, np.where(take, tree[np.minimum(right, len(tree) - 1)], self._n)
            )
            left >>= 1
            right >>= 1
        return np.where(best < self._n, best, NO_EVENT)

    def _better(self, best: np.ndarray, best_value: np.ndarray, candidate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The larger of two positions' values; the leftmost on a tie."""
        value = self._values(candidate)
        wins = (value > best_value) | ((value == best_value) & (candidate < best))
        return np.where(wins, candidate, best), np.where(wins, value, best_value)


class IntervalIndex:
    """The intervals of one lane (any overlaps, zero durations allowed), indexed.

    Rows are sorted by (start, longer first); ``order`` maps them back to the
    caller's rows, ``refs`` and ``kinds`` travel along (a call row, a device
    event, what colour).  Busy fractions are exact for any intervals.  The
    event filling a cell most is exact when the lane's intervals do not
    overlap each other (one nesting depth of a thread, one GPU stream); with
    overlaps it is the best of three candidates (the one reaching furthest
    into the cell, the longest starting inside it, the last starting inside it).
    """

    def __init__(
        self,
        starts: np.ndarray,
        ends: np.ndarray,
        names: np.ndarray,
        refs: np.ndarray | None = None,
        kinds: np.ndarray | None = None,
    ) -> None:
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.maximum(np.asarray(ends, dtype=np.int64), starts)
        order = np.lexsort((-ends, starts))
        self.starts, self.ends = starts[order], ends[order]
        # Codes and rows as int32 (names, call rows and device events stay below 2**31): the
        # index of a 1 GB trace holds ~2 M events, and every byte per event is 2 MB.
        self.names = np.asarray(names)[order].astype(np.int32)
        self.refs = (order if refs is None else np.asarray(refs)[order]).astype(np.int32)
        self.kinds = np.zeros(len(order), dtype=np.int8) if kinds is None else np.asarray(kinds)[order].astype(np.int8)
        self.union_starts, self.union_ends = merge_spans(self.starts, self.ends)
        # [k]: busy ns of the union's spans before span k
        self._covered_before = np.concatenate(([0], np.cumsum(self.union_ends - self.union_starts))).astype(np.int64)
        self._reach = _running_argmax(self.ends).astype(np.int32)
        self._longest = MaxTree(len(order), lambda rows: self.ends[rows] - self.starts[rows])

    @property
    def nbytes(self) -> int:
        """Memory held by the index."""
        arrays = (
            self.starts,
            self.ends,
            self.names,
            self.refs,
            self.kinds,
            self.union_starts,
            self.union_ends,
            self._covered_before,
            self._reach,
        )
        return sum(a.nbytes for a in arrays) + self._longest.nbytes

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def busy_ns(self) -> int:
        return int(self._covered_before[-1])

    def covered(self, times: np.ndarray) -> np.ndarray:
        """Busy nanoseconds of the lane before each instant (the union's measure of (-inf, t))."""
        times = np.asarray(times, dtype=np.int64)
        if not len(self.union_starts):
            return np.zeros(len(times), dtype=np.int64)
        k = np.searchsorted(self.union_starts, times, side="right")  # spans starting at or before t
        prior = np.maximum(k - 1, 0)
        partial = np.clip(times - self.union_starts[prior], 0, self.union_ends[prior] - self.union_starts[prior])
        return np.where(k > 0, self._covered_before[prior] + partial, 0)

    def busy(self, edges: np.ndarray) -> np.ndarray:
        """Busy fraction of each cell ``[edges[i], edges[i+1])``: union inside the cell / cell length."""
        edges = np.asarray(edges, dtype=np.int64)
        covered = self.covered(edges)
        widths = np.diff(edges)
        return np.divide(np.diff(covered), widths, out=np.zeros(len(widths)), where=widths > 0)

    def dominant(self, edges: np.ndarray) -> np.ndarray:
        """For each cell, the row of the event with the largest overlap with it (NO_EVENT if none > 0)."""
        edges = np.asarray(edges, dtype=np.int64)
        c0, c1 = edges[:-1], edges[1:]
        if not len(self):
            return np.full(len(c0), NO_EVENT, dtype=np.int64)
        lo = np.searchsorted(self.starts, c0, side="left")
        hi = np.searchsorted(self.starts, c1, side="left")
        starts, ends = self.starts, self.ends

        def overlap(rows: np.ndarray) -> np.ndarray:
            safe = np.maximum(rows, 0)
            amount = np.minimum(ends[safe], c1) - np.maximum(starts[safe], c0)
            return np.where(rows >= 0, amount, -1)

        open_row = np.where(lo > 0, self._reach[np.maximum(lo - 1, 0)], NO_EVENT)
        last_row = np.where(hi > lo, hi - 1, NO_EVENT)
        longest_row = self._longest.argmax(lo, np.maximum(hi - 1, lo))
        best, best_overlap = open_row, overlap(open_row)
        for rows in (longest_row, last_row):
            amount = overlap(rows)
            better = amount > best_overlap
            best, best_overlap = np.where(better, rows, best), np.where(better, amount, best_overlap)
        return np.where(best_overlap > 0, best, NO_EVENT)

    def at(self, time: int) -> int:
        """The row of an event holding ``time`` (the latest-starting one reaching past it), else NO_EVENT."""
        k = int(np.searchsorted(self.starts, time, side="right")) - 1
        if k < 0:
            return NO_EVENT
        if self.ends[k] > time or self.starts[k] == time:
            return k
        reach = int(self._reach[k])
        return reach if self.ends[reach] > time else NO_EVENT

    def next_after(self, time: int) -> int:
        """The first row starting after ``time`` (NO_EVENT at the end)."""
        k = int(np.searchsorted(self.starts, time, side="right"))
        return k if k < len(self) else NO_EVENT

    def previous_before(self, time: int) -> int:
        """The last row starting before ``time`` (NO_EVENT at the beginning)."""
        k = int(np.searchsorted(self.starts, time, side="left")) - 1
        return k if k >= 0 else NO_EVENT

    def starting_in(self, start: int, end: int) -> slice:
        """Rows whose start lies in ``[start, end)``."""
        return slice(int(np.searchsorted(self.starts, start, "left")), int(np.searchsorted(self.starts, end, "left")))


class CounterIndex:
    """A step function over time (allocated bytes after each allocator event).

    The level in a cell is the highest value the function takes inside it:
    the value holding at the cell's start, or any change inside the cell.
    """

    def __init__(self, times: np.ndarray, values: np.ndarray) -> None:
        order = np.argsort(np.asarray(times, dtype=np.int64), kind="stable")
        self.times = np.asarray(times, dtype=np.int64)[order]
        self.values = np.asarray(values, dtype=np.int64)[order]
        self.peak = int(self.values.max()) if len(self.values) else 0
        self._highest = MaxTree(len(self.values), self.values.__getitem__)

    @property
    def nbytes(self) -> int:
        return self.times.nbytes + self.values.nbytes + self._highest.nbytes

    def __len__(self) -> int:
        return len(self.times)

    def value_at(self, times: np.ndarray) -> np.ndarray:
        """The value holding at each instant (0 before the first change)."""
        k = np.searchsorted(self.times, np.asarray(times, dtype=np.int64), side="right") - 1
        return np.where(k >= 0, self.values[np.maximum(k, 0)] if len(self) else 0, 0)

    def highest(self, edges: np.ndarray) -> np.ndarray:
        """The highest value inside each cell ``[edges[i], edges[i+1])``."""
        edges = np.asarray(edges, dtype=np.int64)
        holding = self.value_at(edges[:-1])
        if not len(self):
            return holding
        lo = np.searchsorted(self.times, edges[:-1], side="left")
        hi = np.searchsorted(self.times, edges[1:], side="left")
        inside = self._highest.argmax(lo, hi)
        return np.where(inside >= 0, np.maximum(holding, self.values[np.maximum(inside, 0)]), holding)


def merge_spans(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of spans as disjoint sorted spans (touching spans merge; empty spans vanish)."""
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return starts, ends
    order = np.argsort(starts, kind="stable")
    starts, ends = starts[order], ends[order]
    reach = np.maximum.accumulate(ends)
    fresh = np.ones(len(starts), dtype=bool)
    fresh[1:] = starts[1:] > reach[:-1]
    firsts = np.flatnonzero(fresh)
    return starts[firsts], np.maximum.reduceat(ends, firsts)


def subtract_spans(
    window_starts: np.ndarray, window_ends: np.ndarray, busy_starts: np.ndarray, busy_ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each window minus the disjoint sorted busy spans: the gaps as (starts, ends, window index).

    A window's busy spans are found by ``searchsorted``, so the cost is the
    windows plus the busy spans inside them."""
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    for number, (begin, end) in enumerate(zip(window_starts.tolist(), window_ends.tolist())):
        lo = int(np.searchsorted(busy_ends, begin, side="right"))
        hi = int(np.searchsorted(busy_starts, end, side="left"))
        gap_starts = np.concatenate(([begin], np.clip(busy_ends[lo:hi], begin, end)))
        gap_ends = np.concatenate((np.clip(busy_starts[lo:hi], begin, end), [end]))
        keep = gap_ends > gap_starts
        parts.append((gap_starts[keep], gap_ends[keep], np.full(int(keep.sum()), number)))
    if not parts:
        empty = np.empty(0, dtype=np.int64)
        return empty, empty, empty
    return tuple(np.concatenate(column).astype(np.int64) for column in zip(*parts))  # type: ignore[return-value]


def _running_argmax(values: np.ndarray) -> np.ndarray:
    """For each position, the position of the largest value up to it (the latest on a tie)."""
    if not len(values):
        return np.empty(0, dtype=np.int64)
    running = np.maximum.accumulate(values)
    positions = np.arange(len(values))
    # A position that sets a new running maximum is where the running maximum comes from.
    setter = np.where(values == running, positions, 0)
    return np.maximum.accumulate(setter)
