"""The array primitives every analysis pass is built from.

Each replaces a Python loop over calls or events with a few numpy passes:
climbing a parent array (:func:`nearest_ancestor`), grouping rows by a key
(:func:`group_rows`), joining on ids (:func:`id_table`, :func:`look_up`),
coding texts that repeat (:func:`slice_codes`) and counting values the way
``collections.Counter`` orders them (:func:`counts_first_seen`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

NO_ROW = -1


class RowView(Sequence[int]):
    """Row numbers held as a read-only slice of one int64 array; read as Python ints.

    A group's rows (an operator's calls, a kernel's launches) were a tuple of
    Python ints: 36 bytes a row, ~98 MB for one operator table of a 1 GB
    trace (2.7 M calls), and the explorer keeps three.  A view of the array
    the grouping sorts anyway costs nothing more, and ``np.asarray`` of it
    is free (the detail pane and the longest call read every row)."""

    __slots__ = ("_rows",)

    def __init__(self, rows: np.ndarray) -> None:
        self._rows = rows.view()
        self._rows.flags.writeable = False

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> RowView: ...

    def __getitem__(self, index):
        return RowView(self._rows[index]) if isinstance(index, slice) else int(self._rows[index])

    def __iter__(self) -> Iterator[int]:
        return iter(self._rows.tolist())

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        return self._rows if dtype is None else self._rows.astype(dtype, copy=False)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RowView) and np.array_equal(self._rows, other._rows)

    def __hash__(self) -> int:
        return hash(self._rows.tobytes())

    def __reduce__(self):
        return RowView, (self._rows.copy(),)  # the rows alone, not the array they are a view of

    def __repr__(self) -> str:
        return f"RowView({self._rows.tolist()!r})" if len(self) <= 8 else f"RowView(<{len(self)} rows>)"


NO_ROWS = RowView(np.empty(0, dtype=np.int64))


def jump_rounds(nodes: int) -> int:
    """Pointer-jumping rounds that walk any chain of ``nodes`` nodes: each round
    doubles the distance jumped, so a chain longer than this is a loop."""
    return int(nodes).bit_length() + 1


def nearest_ancestor(parent: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """For every node, its nearest proper ancestor where ``wanted`` is true (-1: none).

    ``parent`` must not loop (links read from a file go through :func:`break_cycles`
    first); should one loop anyway, the rounds are bounded and a node still
    climbing then gets -1 instead of spinning forever."""
    result = parent.copy()
    pending = np.flatnonzero(result >= 0)
    for _ in range(jump_rounds(len(parent))):
        if not len(pending):
            break
        pending = pending[~wanted[result[pending]]]
        # Jump to the candidate's own candidate: it has moved past unwanted
        # nodes too, so the chain left to walk halves each round.
        result[pending] = result[result[pending]]
        pending = pending[result[pending] >= 0]
    else:
        result[pending[~wanted[result[pending]]]] = NO_ROW
    return result


def ancestors_of(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    """For every node, whether it is a proper ancestor of a ``marked`` node.

    Pointer doubling: after round k every node 1 .. 2**k links above a marked one is
    found (the nodes found so far jump 2**k links, which the jump table doubles each
    round), so a chain 100,000 deep takes 17 rounds, never a step per level.
    ``parent`` must not loop (as for :func:`nearest_ancestor`; the rounds are bounded)."""
    found = np.zeros(len(parent), dtype=bool)
    first = parent[marked & (parent >= 0)]
    found[first] = True
    jump = parent.copy()  # 2**k links up
    for _ in range(jump_rounds(len(parent))):
        rows = np.flatnonzero(found)
        above = jump[rows]
        above = above[above >= 0]
        if not len(above):
            break
        found[above] = True
        jump = np.where(jump >= 0, jump[jump], -1)
    return found


def break_cycles(parent: np.ndarray, key: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """``parent`` with one link of every cycle cut (set to -1), and the number of cycles cut.

    Parent links read from a file (``Python parent id``) can loop (2 -> 3 -> 2);
    every walk up them would then spin.  The member of a cycle cut loose is the
    one of least ``key``, then lowest index: it becomes a root.
    Array passes only: pointer jumping finds the nodes that still climb after
    enough rounds to walk any chain (those are on a cycle or lead into one);
    among them, a second jumping pass carries each path's least rank and the
    node ``2**rounds`` links up, which is always on the cycle."""
    n = len(parent)
    rounds = jump_rounds(n)
    reach = parent.copy()
    pending = np.flatnonzero(reach >= 0)
    for _ in range(rounds):  # asynchronous jumping: at least as far as doubling each round
        if not len(pending):
            return parent, 0
        reach[pending] = reach[reach[pending]]
        pending = pending[reach[pending] >= 0]
    if not len(pending):
        return parent, 0
    # Every pending node's path stays among pending nodes: jump them in step (synchronously).
    rank = np.arange(n, dtype=np.int64)  # only pending nodes' ranks are read
    if key is not None:
        rank[pending[np.lexsort((pending, key[pending]))]] = np.arange(len(pending))
    up, least = parent.copy(), rank.copy()
    for _ in range(rounds):
        least[pending], up[pending] = np.minimum(least[pending], least[up[pending]]), up[up[pending]]
    on_cycle = np.zeros(n, dtype=bool)
    on_cycle[up[pending]] = True  # 2**rounds > n links up: on the cycle, and each cycle member is hit
    cut = pending[on_cycle[pending] & (least[pending] == rank[pending])]
    repaired = parent.copy()
    repaired[cut] = NO_ROW
    return repaired, len(cut)


def group_rows(keys: np.ndarray) -> tuple[list[int], list[np.ndarray]]:
    """Distinct keys (ascending) and, for each, the indices holding it in their order.

    One stable sort: rows stay in their original order within a group.  Keys spanning fewer
    than 2**16 values (names, most codes) are sorted as uint16 offsets, where numpy's stable
    sort is a radix sort: 10-25x faster than on int64 for millions of rows."""
    if not len(keys):
        return [], []
    order = np.argsort(_narrowed(keys), kind="stable")
    sorted_keys = keys[order]
    cuts = np.flatnonzero(sorted_keys[1:] != sorted_keys[:-1]) + 1
    return sorted_keys[np.concatenate(([0], cuts))].tolist(), np.split(order, cuts)


def _narrowed(keys: np.ndarray) -> np.ndarray:
    """``keys`` as uint16 offsets from their least when they span fewer than 2**16 values
    (the same order), else as they are."""
    if keys.dtype.kind not in "iu" or keys.dtype.itemsize <= 2:
        return keys
    least = int(keys.min())
    if int(keys.max()) - least >= 1 << 16:
        return keys
    return (keys - least).astype(np.uint16) if least else keys.astype(np.uint16)


def id_table(
    ids: np.ndarray, missing: int, *, last: bool = False, asked: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ids (``missing`` left out) and the first (or last) index carrying each.

    ``asked``: the ids that will be looked up; only those are kept.  The kernels of a big
    trace name a fraction of its operators' ids, and sorting them all was the peak RSS."""
    present = ids != missing
    if asked is not None:
        asked = np.unique(asked)
        if len(asked):
            present &= asked[np.minimum(np.searchsorted(asked, ids), len(asked) - 1)] == ids
        else:
            present[:] = False
    present = np.flatnonzero(present)
    if last:
        present = present[::-1]
    unique, first = np.unique(ids[present], return_index=True)
    return unique, present[first]


def look_up(table: tuple[np.ndarray, np.ndarray], ids: np.ndarray, missing: int) -> np.ndarray:
    """The index :func:`id_table` holds for each id (``NO_ROW`` where none, or ``missing``)."""
    keys, rows = table
    if not len(keys):
        return np.full(len(ids), NO_ROW, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
    return np.where((keys[at] == ids) & (ids != missing), rows[at], NO_ROW)


def gather(values: np.ndarray, rows: np.ndarray, missing: int) -> np.ndarray:
    """``values[rows]`` where a row is >= 0, ``missing`` elsewhere; safe when
    ``values`` is empty (a trace of device events without any operator)."""
    result = np.full(len(rows), missing, dtype=values.dtype if len(values) else np.int64)
    known = rows >= 0
    result[known] = values[rows[known]]
    return result


def counts_first_seen(values: np.ndarray) -> list[tuple[int, int]]:
    """(value, count) pairs in first-seen order, as a Counter fed one by one keeps them."""
    if not len(values):
        return []
    unique, first, counts = np.unique(values, return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    return list(zip(unique[order].tolist(), counts[order].tolist()))


def slice_codes(blob: bytes, at: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """A code per slice ``blob[at:at + length]`` and the distinct slices (first-seen order).

    Input lists repeat (a model calls the same shapes every step): one bytes
    slice and dict look-up per row, then work per distinct text only."""
    if not length.any():  # nothing recorded (no record_shapes): no slice to look at
        return np.zeros(len(at), dtype=np.int64), [b""] if len(at) else []
    texts: dict[bytes, int] = {}
    code = texts.setdefault
    codes = np.fromiter(
        (code(blob[a : a + n], len(texts)) for a, n in zip(at.tolist(), length.tolist())), dtype=np.int64, count=len(at)
    )
    return codes, list(texts)
