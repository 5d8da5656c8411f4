"""The big-trace engine: array passes equal torch's loops, workers equal one process.

The columnar analysis replaces torch's stack walk (``_populate_cpu_children``)
and duplicate merge (``_remove_dup_nodes``) with pointer jumping; these tests
hold the numpy versions to straightforward Python transcriptions of torch's
loops on random intervals with ties, zero durations, partial overlaps and
several threads.  The decode tests force the worker processes on a small file
and compare every column with an in-process decode.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SAMPLES, SHARED_TRACES, needs_shared
from tests.helpers.gpu_trace import lagging_two_steps
from tests.helpers.store import columns_equal
from tuiprof.analysis import calls, load_model
from tuiprof.analysis.arrays import group_rows
from tuiprof.analysis.calls import (
    _merge_duplicates,
    _nest,
    _nest_in_parts,
    _subtree_totals,
)
from tuiprof.errors import TraceError
from tuiprof.trace import decode, inflating, load, parallel
from tuiprof.trace.columns import CpuEvents, DeviceEvents, FrameColumns
from tuiprof.trace.load import load_trace


def _stack_parents(starts, ends, threads) -> list[int]:
    """torch's _populate_cpu_children, as written there."""
    order = sorted(range(len(starts)), key=lambda i: (threads[i], starts[i], -ends[i]))
    parent = [-1] * len(starts)
    stack: list[int] = []
    thread = None
    for node in order:
        if threads[node] != thread:
            thread, stack = threads[node], []
        while stack:
            top = stack[-1]
            if starts[node] >= ends[top] or ends[node] > ends[top]:
                stack.pop()
            else:
                parent[node] = top
                break
        stack.append(node)
    return parent


def _random_intervals(rng, n: int):
    starts = rng.integers(0, 400, n)
    durations = rng.choice([0, 0, 1, 3, 10, 50, 200], n)
    threads = rng.integers(0, 3, n)
    return starts.astype(np.int64), (starts + durations).astype(np.int64), threads.astype(np.int64)


@pytest.mark.parametrize("seed", range(8))
def test_nesting_equals_torchs_stack_walk(seed: int) -> None:
    starts, ends, threads = _random_intervals(np.random.default_rng(seed), 3000)
    parent = _nest(starts, ends, threads).parent
    assert parent.tolist() == _stack_parents(starts.tolist(), ends.tolist(), threads.tolist())


@pytest.mark.parametrize("count", [2, 3, 8])
@pytest.mark.parametrize(("seed", "biggest"), [(0, 0.34), (1, 0.6), (2, 0.79), (3, 0.9)])
def test_nesting_threads_in_parts_equals_torchs_stack_walk(seed: int, biggest: float, count: int) -> None:
    """Split in groups of threads (nested at once), a thread too big for one part cut in time
    where it can be: the same parents however many parts."""
    rng = np.random.default_rng(seed)
    starts, ends, _ = _random_intervals(rng, 3000)
    threads = np.where(rng.random(3000) < biggest, 7, rng.integers(0, 5, 3000)).astype(np.int64)
    assert len(calls._nesting_parts(starts, ends, threads, count).rows) > 1  # it is split
    parent = _nest_in_parts(starts, ends, threads, count).parent
    assert parent.tolist() == _stack_parents(starts.tolist(), ends.tolist(), threads.tolist())


@pytest.mark.parametrize("count", [4, 7])
@pytest.mark.parametrize("seed", range(4))
def test_slices_with_many_nodes_over_their_cuts_nest_as_torch(monkeypatch, seed: int, count: int) -> None:
    """Cuts that hundreds of nodes span (allowed here: a real trace's are its few script
    frames): those nodes are guests of the later slices; torch's parents, and subtree totals
    over the joined order (duplicates merged) equal a walk up."""
    monkeypatch.setattr(calls, "SPINE_NODES", 100_000)
    rng = np.random.default_rng(seed)
    starts, ends, _ = _random_intervals(rng, 3000)
    threads = np.where(rng.random(3000) < 0.8, 0, rng.integers(1, 3, 3000)).astype(np.int64)
    parts = calls._nesting_parts(starts, ends, threads, count)
    assert len(parts.rows) > 1 and any(len(rows) > owned for rows, owned in zip(parts.rows, parts.owned))  # guests
    nesting = _nest_in_parts(starts, ends, threads, count)
    assert nesting.parent.tolist() == _stack_parents(starts.tolist(), ends.tolist(), threads.tolist())
    assert sorted(nesting.order.tolist()) == list(range(3000))
    names = rng.integers(0, 3, len(starts)).astype(np.int64)
    alive, parent = _merge_duplicates(nesting.parent.copy(), names, 2500)
    values = np.where(alive, rng.integers(0, 1000, len(starts)), 0).astype(np.int64)
    expected = [0] * len(starts)
    for node, value in enumerate(values.tolist()):
        while node >= 0:
            expected[node] += value
            node = int(parent[node])
    assert _subtree_totals(values, parent, nesting.order).tolist() == expected


def test_nesting_very_many_threads_in_parts(monkeypatch) -> None:
    """More threads than are packed one by one (a damaged trace's): the rest go to the parts
    in turn; every node is in one part and the parents are torch's."""
    monkeypatch.setattr(calls, "PACKED_THREADS", 50)
    rng = np.random.default_rng(5)
    starts, ends, _ = _random_intervals(rng, 3000)
    threads = rng.integers(0, 400, 3000).astype(np.int64)
    parts = calls._nesting_parts(starts, ends, threads, 4).rows
    assert len(parts) == 4 and sorted(np.concatenate(parts).tolist()) == list(range(3000))
    assert all(
        len(set(threads[rows].tolist()) & set(threads[other].tolist())) == 0
        for rows in parts
        for other in parts
        if rows is not other
    )
    parent = _nest_in_parts(starts, ends, threads, 4).parent
    assert parent.tolist() == _stack_parents(starts.tolist(), ends.tolist(), threads.tolist())


def _steps_of_one_thread(rng, steps: int, enclosing: bool):
    """A single-threaded trace: steps back to back (each ends where the next starts), random
    intervals inside each, a few of them on a second thread; ``enclosing``: one span over all."""
    parts = []
    for step in range(steps):
        starts, ends, _ = _random_intervals(rng, 400)
        low = step * 400
        parts.append((np.append(starts + low, low), np.append(np.minimum(ends + low, low + 400), low + 400)))
    starts, ends = np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])
    if enclosing:
        starts, ends = np.append(starts, 0), np.append(ends, steps * 400)
    threads = np.zeros(len(starts), dtype=np.int64)
    threads[(rng.random(len(starts)) < 0.05) & (ends - starts < 400)] = 1  # the steps stay on thread 0
    return starts.astype(np.int64), ends.astype(np.int64), threads


@pytest.mark.parametrize("count", [2, 6])
@pytest.mark.parametrize(("seed", "enclosing"), [(0, False), (1, False), (2, True)])
def test_one_thread_nests_in_slices_cut_between_steps(seed: int, enclosing: bool, count: int) -> None:
    """One thread holds 95 % of the nodes: it is cut where a step ends and the next begins
    and each slice nested at once; a span over everything (a with_stack script's frames)
    is a guest of every slice after the first.  Either way torch's parents, and subtree
    totals over the joined order equal a walk up."""
    one = np.zeros(3, dtype=np.int64)
    slices = calls._time_slices(np.array([0, 100, 20]), np.array([100, 200, 60]), one, 0, 2)
    assert [(piece.own.tolist(), piece.guests.tolist()) for piece in slices] == [([0, 2], []), ([1], [])]  # at 100
    slices = calls._time_slices(np.array([0, 100, 50]), np.array([100, 200, 150]), one, 0, 2)
    assert [(piece.own.tolist(), piece.guests.tolist()) for piece in slices] == [
        ([0], []),
        ([1, 2], [0]),
    ]  # at 50: [0, 100) over it
    rng = np.random.default_rng(seed)
    starts, ends, threads = _steps_of_one_thread(rng, 6, enclosing)
    slices = calls._time_slices(starts, ends, threads, 0, count)
    # at the steps' ends: 0-1200-2400 in two, every 400 in six; the span over all a guest of the later slices
    assert len(slices) == count
    bounds = [starts[piece.own].min() for piece in slices[1:]]
    assert bounds == list(range(2400 // count, 2400, 2400 // count))
    assert all(starts[piece.own].max() < bound for piece, bound in zip(slices, bounds))
    spanning_all = [len(starts) - 1] if enclosing else []
    assert [piece.guests.tolist() for piece in slices] == [[], *[spanning_all] * (count - 1)]
    nesting = _nest_in_parts(starts, ends, threads, count)
    assert nesting.parent.tolist() == _stack_parents(starts.tolist(), ends.tolist(), threads.tolist())
    values = rng.integers(0, 1000, len(starts)).astype(np.int64)
    expected = [0] * len(starts)
    for node, value in enumerate(values.tolist()):
        while node >= 0:
            expected[node] += value
            node = int(nesting.parent[node])
    assert _subtree_totals(values, nesting.parent, nesting.order).tolist() == expected


@pytest.mark.parametrize("seed", range(4))
def test_duplicate_merge_equals_torchs_repeated_pass(seed: int) -> None:
    rng = np.random.default_rng(seed)
    starts, ends, threads = _random_intervals(rng, 2000)
    parent = _nest(starts, ends, threads).parent
    names = rng.integers(0, 3, len(starts)).astype(np.int64)  # few names: many merges
    n_ops = 1500  # the rest stand for python frames (never merged)
    alive, living_parent = _merge_duplicates(parent.copy(), names, n_ops)

    # torch: repeat until stable; a merged node's children move to its parent.
    reference_parent = parent.tolist()
    children: dict[int, list[int]] = {}
    for node, p in enumerate(reference_parent):
        children.setdefault(p, []).append(node)
    dead: set[int] = set()
    changed = True
    while changed:
        changed = False
        for node in range(n_ops):
            p = reference_parent[node]
            if node in dead or not (0 <= p < n_ops) or names[p] != names[node] or len(children[p]) != 1:
                continue
            children[p] = children.pop(node, [])
            for child in children[p]:
                reference_parent[child] = p
            dead.add(node)
            changed = True
    assert set(np.flatnonzero(~alive).tolist()) == dead
    living = [i for i in range(len(alive)) if alive[i]]
    assert [living_parent[i] for i in living] == [reference_parent[i] for i in living]


@pytest.mark.parametrize(("seed", "split"), [(0, False), (1, False), (2, True), (3, True)])
def test_device_time_below_a_node_equals_a_walk_up(seed: int, split: bool) -> None:
    """Subtree totals from the nesting order (duplicates merged, threads nested in
    groups or whole) equal adding each node's value to every living ancestor."""
    rng = np.random.default_rng(seed)
    starts, ends, threads = _random_intervals(rng, 3000)
    nesting = _nest_in_parts(starts, ends, threads, 3 if split else 1)
    names = rng.integers(0, 3, len(starts)).astype(np.int64)
    alive, parent = _merge_duplicates(nesting.parent.copy(), names, 2500)
    values = np.where(alive, rng.integers(0, 1000, len(starts)), 0).astype(np.int64)  # merged nodes hold none
    expected = [0] * len(starts)
    for node, value in enumerate(values.tolist()):
        while node >= 0:
            expected[node] += value
            node = int(parent[node])
    assert _subtree_totals(values, parent, nesting.order).tolist() == expected


def test_device_time_below_a_100000_deep_chain() -> None:
    n = 100_000
    starts = np.arange(n, dtype=np.int64)
    ends = (2 * n - starts).astype(np.int64)  # each inside the one before
    nesting = _nest(starts, ends, np.zeros(n, dtype=np.int64))
    assert nesting.parent.tolist() == [-1, *range(n - 1)]
    assert _subtree_totals(np.ones(n, dtype=np.int64), nesting.parent, nesting.order).tolist() == list(range(n, 0, -1))


def _force_workers(monkeypatch) -> None:
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel, "usable_cores", lambda: 2)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 64 << 10)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 64 << 10)


@needs_shared
@pytest.mark.parametrize(
    "name",
    [
        "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz",  # CUDA, frames, memory
        "kineto__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",  # legacy
    ],
)
def test_worker_processes_decode_what_one_process_decodes(tmp_path, monkeypatch, name: str) -> None:
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SHARED_TRACES / name).read_bytes()))
    alone = load_trace(plain)
    _force_workers(monkeypatch)
    started = []
    original = parallel.DecodeWorkers.__init__

    def counting(self, count: int) -> None:
        started.append(count)
        original(self, count)

    monkeypatch.setattr(parallel.DecodeWorkers, "__init__", counting)
    together = load_trace(plain)
    assert started == [2]
    columns_equal(alone, together)


def _workers_that_log(monkeypatch, tmp_path, slow_seconds: float) -> Path:
    """Decode workers that log each span they decode (1 for the slow one, 0 for the others);
    the first worker to start sleeps ``slow_seconds`` before each span."""
    log, mark = tmp_path / "spans.log", tmp_path / "slow.mark"
    paths = parallel.worker_command()[-1].split(";")[1]  # " sys.path[:] = [...]"
    code = f"""import os, sys, time
{paths.strip()}
from tuiprof.trace import parallel
try:
    os.close(os.open({str(mark)!r}, os.O_CREAT | os.O_EXCL)); slow = True
except FileExistsError:
    slow = False
decode = parallel.decode_file_span
def logged(path, start, end):
    time.sleep({slow_seconds} if slow else 0)
    with open({str(log)!r}, "a") as handle:
        handle.write("1\\n" if slow else "0\\n")
    return decode(path, start, end)
parallel.decode_file_span = logged
parallel._serve()
"""
    monkeypatch.setattr(parallel, "worker_command", lambda: [sys.executable, "-I", "-c", code])
    return log


def test_spans_go_to_the_worker_that_is_free(tmp_path, monkeypatch) -> None:
    """Spans handed in turn would give the slow worker half of them (and make the fast one wait)."""
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
    alone = load_trace(plain)
    _force_workers(monkeypatch)
    log = _workers_that_log(monkeypatch, tmp_path, slow_seconds=0.3)  # ~57 spans of 64 kB
    together = load_trace(plain)
    spans = log.read_text().split()
    assert len(spans) >= 20 and spans.count("1") <= len(spans) // 3, spans  # in turn: half
    columns_equal(alone, together)


def test_a_worker_that_dies_leaves_its_spans_to_the_loader(tmp_path, monkeypatch) -> None:
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
    alone = load_trace(plain)
    _force_workers(monkeypatch)
    monkeypatch.setattr(decode, "CHUNK_BYTES", 1 << 20)
    monkeypatch.setattr(parallel, "CHUNK_BYTES", 1 << 20)
    pools = _kept_pools(monkeypatch)
    killed: list[int] = []

    def kill_one(progress) -> None:
        if not killed:
            killed.append(pools[0].processes[0].pid)
            pools[0].processes[0].kill()

    threads = threading.active_count()
    together = load_trace(plain, progress=kill_one)
    assert killed and pools[0].processes[0].poll() is not None
    columns_equal(alone, together)
    assert threading.active_count() == threads


def test_big_gzip_is_decoded_from_a_temporary_file(tmp_path, monkeypatch) -> None:
    sample = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
    from_memory = load_trace(sample)
    monkeypatch.setattr(load, "GZIP_TO_FILE_BYTES", 0)
    _force_workers(monkeypatch)
    from_file = load_trace(sample)
    columns_equal(from_memory, from_file)
    assert from_file.source == str(sample)
    assert not list(tmp_path.glob("tuiprof-*"))


def test_a_big_gzip_is_inflated_in_memory_when_the_machine_has_room(tmp_path, monkeypatch) -> None:
    from tuiprof.trace import source

    memory = tmp_path / "shm"
    memory.mkdir()
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.delenv("TUIPROF_MAX_INFLATE_RATIO", raising=False)
    monkeypatch.setattr(source, "MEMORY_DIRECTORY", str(memory))
    sample = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
    inflated_here = load_trace(sample)  # small: inflated in this process
    size = sample.stat().st_size
    assert source.inflation_directory(size) == str(memory)
    assert source.inflation_directory(1 << 50) is None  # 100x of it would not fit: TMPDIR
    monkeypatch.setenv("TUIPROF_MAX_INFLATE_RATIO", "0")
    assert source.inflation_directory(size) is None  # no bound on what it inflates to
    monkeypatch.delenv("TUIPROF_MAX_INFLATE_RATIO")
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert source.inflation_directory(size) is None  # the user's choice
    monkeypatch.delenv("TMPDIR")

    used: list[str] = []
    original = load.temporary_file

    @contextlib.contextmanager
    def recorded(*args, **kwargs):
        with original(*args, **kwargs) as handle:
            used.append(handle.name)
            yield handle

    monkeypatch.setattr(load, "temporary_file", recorded)
    monkeypatch.setattr(load, "GZIP_TO_FILE_BYTES", 0)
    _force_workers(monkeypatch)
    from_memory = load_trace(sample)
    columns_equal(inflated_here, from_memory)
    assert [Path(name).parent for name in used] == [memory]
    assert not list(memory.iterdir())  # removed once loaded


def _private_temp_dir(tmp_path, monkeypatch):
    """An empty TMPDIR of the test's own, to see what a load leaves in it."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    monkeypatch.setattr(tempfile, "tempdir", None)
    return temp


def _inflate_slowly(monkeypatch) -> list[tuple[int, bool]]:
    """Inflate in 32 kB pieces, a little slowly, with spans cut 64 kB apart and small
    windows: what the loader saw of the document when it handed out each span."""
    from tuiprof.trace import source

    _force_workers(monkeypatch)
    monkeypatch.setattr(load, "GZIP_TO_FILE_BYTES", 0)
    monkeypatch.setattr(source, "INFLATE_PIECE", 32 << 10)
    monkeypatch.setattr(source, "_READ_BYTES", 4 << 10)
    monkeypatch.setattr(decode, "_TAIL_WINDOW", 64 << 10)
    monkeypatch.setattr(decode, "_SEARCH_WINDOW", 16 << 10)
    seen: list[tuple[int, bool]] = []
    write, wait_for = inflating.InflatingFile.write, inflating.InflatingFile.wait_for

    def slow_write(self, data: bytes) -> None:
        time.sleep(0.005)  # slow enough that a loaded machine still plans while it grows
        write(self, data)

    def watched_wait_for(self, size: int) -> tuple[int, bool]:
        answer = wait_for(self, size)
        seen.append(answer)
        return answer

    monkeypatch.setattr(inflating.InflatingFile, "write", slow_write)
    monkeypatch.setattr(inflating.InflatingFile, "wait_for", watched_wait_for)
    return seen


def test_a_big_gzip_is_decoded_while_it_is_inflated(tmp_path, monkeypatch) -> None:
    sample = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
    whole = load_trace(sample)
    temp = _private_temp_dir(tmp_path, monkeypatch)
    seen = _inflate_slowly(monkeypatch)
    streamed = load_trace(sample)
    columns_equal(whole, streamed)
    assert streamed.header.traceName == whole.header.traceName  # a member after the event array
    assert streamed.uncompressed_bytes == whole.uncompressed_bytes
    planned_early = [available for available, complete in seen if not complete]
    assert len(planned_early) > 10  # spans were cut while the file was still growing
    assert not list(temp.iterdir())


@pytest.mark.parametrize("layout", ["bare array", "key after the first megabyte"])
def test_other_layouts_are_inflated_whole_then_decoded_by_the_workers(tmp_path, monkeypatch, layout: str) -> None:
    document = json.loads(gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
    if layout == "bare array":
        text = json.dumps(document["traceEvents"], indent=1)
    else:  # a member before the events longer than where the key is looked for while growing
        text = json.dumps({"padding": "x" * (2 << 20), **document}, indent=1)
    path = tmp_path / "other.json.gz"
    path.write_bytes(gzip.compress(text.encode()))
    plain = tmp_path / "other.json"
    plain.write_text(text)
    whole = load_trace(plain)
    seen = _inflate_slowly(monkeypatch)
    streamed = load_trace(path)
    columns_equal(whole, streamed)
    assert sum(not complete for _, complete in seen) == 1  # the head was looked at once, then...
    assert seen[-1][1]  # ...the plan waited for the whole document


def test_an_error_while_inflating_stops_the_decode(tmp_path, monkeypatch) -> None:
    document = gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(gzip.compress(document)[: len(document) // 20])  # the gzip stream ends early
    temp = _private_temp_dir(tmp_path, monkeypatch)
    _inflate_slowly(monkeypatch)
    threads = threading.active_count()
    with pytest.raises(TraceError, match="truncated"):
        load_trace(path)
    assert not list(temp.iterdir())
    assert threading.active_count() == threads  # the inflating thread and the feeder are gone


def test_a_bomb_is_refused_while_it_is_inflated_beside_the_workers(tmp_path, monkeypatch) -> None:
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [' + b" " * (100 << 20) + b"]}", compresslevel=9))
    temp = _private_temp_dir(tmp_path, monkeypatch)
    _force_workers(monkeypatch)
    monkeypatch.setattr(load, "GZIP_TO_FILE_BYTES", 0)
    started = []
    monkeypatch.setattr(load, "InflatingFile", lambda *a: started.append(a) or inflating.InflatingFile(*a))
    threads = threading.active_count()
    with pytest.raises(TraceError, match="times its compressed size"):
        load_trace(path)
    assert started  # the pipelined path refused it
    assert not list(temp.iterdir())
    assert threading.active_count() == threads


def _kept_pools(monkeypatch) -> list:
    """The worker pools started from now on, kept to look at."""
    pools: list = []
    original = parallel.DecodeWorkers.__init__

    def keep(self, count: int) -> None:
        original(self, count)
        pools.append(self)

    monkeypatch.setattr(parallel.DecodeWorkers, "__init__", keep)
    return pools


def _abort_the_load(monkeypatch, path) -> list:
    """Load ``path`` with a progress callback that raises: the worker pools that load started."""
    pools = _kept_pools(monkeypatch)

    class Abort(Exception):
        pass

    def abort(progress) -> None:
        raise Abort

    with pytest.raises(Abort):
        load_trace(path, progress=abort)
    return pools


def test_aborting_a_load_while_inflating_stops_everything(tmp_path, monkeypatch) -> None:
    temp = _private_temp_dir(tmp_path, monkeypatch)
    _inflate_slowly(monkeypatch)
    threads = threading.active_count()
    pools = _abort_the_load(monkeypatch, SAMPLES / "resnet18_cpu.pt.trace.json.gz")
    assert pools and all(p.poll() is not None for p in pools[0].processes)
    assert threading.active_count() == threads
    assert not list(temp.iterdir())


def test_aborting_a_parallel_load_stops_the_workers(tmp_path, monkeypatch) -> None:
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
    _force_workers(monkeypatch)
    pools = _abort_the_load(monkeypatch, plain)
    assert pools and all(p.poll() is not None for p in pools[0].processes)


def test_parallel_load_gives_the_same_model(tmp_path, monkeypatch) -> None:
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
    alone = load_model(plain)
    _force_workers(monkeypatch)
    together = load_model(plain)
    assert alone.operators() == together.operators()
    assert [n.path for n in alone.modules.walk()] == [n.path for n in together.modules.walk()]


def test_workers_that_cannot_start_leave_the_work_to_this_process(tmp_path, monkeypatch) -> None:
    plain = tmp_path / "trace.json"
    plain.write_bytes(gzip.decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
    alone = load_trace(plain)
    _force_workers(monkeypatch)
    monkeypatch.setattr(parallel.sys, "executable", "/bin/false")  # every worker exits at once
    columns_equal(alone, load_trace(plain))


def test_a_truncated_big_file_is_one_clear_error(tmp_path, monkeypatch) -> None:
    _force_workers(monkeypatch)
    path = tmp_path / "cut.json"
    path.write_bytes(b'{"traceEvents": ')
    with pytest.raises(TraceError):
        load_trace(path)


def test_empty_tables_concatenate() -> None:
    for table in (CpuEvents, FrameColumns, DeviceEvents):
        assert len(table.concat([])) == 0


def _resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="reads Linux's /proc")
def test_columns_of_one_value_cost_no_memory() -> None:
    """Without record_shapes, profile_memory or stacks, a big trace's store has six input-text
    columns of zeros and its calls eight columns of zeros and one of -1 (325 MB at 1 GB of the
    ns trace, a quarter of the parent's peak): zero store columns stay unwritten pages, and
    calls columns of one value share one array."""
    zeros = calls._column(np.zeros(1000, dtype=np.int64))
    assert zeros is calls._column(np.zeros(1000)) and list(zeros) == [0] * 1000
    assert calls._column(np.full(1000, -1)) is calls._column([-1] * 1000)
    mixed = calls._column(np.array([0, 0, 7]))
    assert list(mixed) == [0, 0, 7] and mixed is not calls._column(np.array([0, 0, 7]))
    assert list(calls._column(np.full(3, 5))) == [5, 5, 5]

    part = DeviceEvents(**{name: np.zeros(1 << 21, dtype=np.int64) for name in DeviceEvents.__dataclass_fields__})
    part.name = np.arange(1 << 21)  # the one column with values
    before = _resident_mb()
    joined = DeviceEvents.concat([part, part])
    grown = _resident_mb() - before
    assert joined.name.tolist() == part.name.tolist() * 2 and not joined.stream.any() and len(joined.stream) == 1 << 22
    assert grown < 64, grown  # written: the name column's 32 MB; the nine zero columns would add 288 MB

    model = load_model(lagging_two_steps().write(Path(tempfile.mkdtemp()) / "no_memory.json"))
    assert model.calls.cpu_mem is model.calls.device_mem is model.calls.flops
    assert not np.asarray(model.calls.column("cpu_mem")).any()


@pytest.mark.parametrize("seed", range(5))
def test_an_id_table_of_the_asked_ids_looks_up_the_same(seed: int) -> None:
    """The device joins keep only the ids kernels name (the table of every operator's id was
    the peak RSS): each asked id finds the same first (or last) row as in the full table."""
    from tuiprof.analysis.arrays import id_table, look_up

    rng = np.random.default_rng(seed)
    ids = rng.integers(-1, 40, size=500)  # -1: missing; ids repeat
    asked = np.concatenate((rng.integers(-1, 60, size=50), [ids[7]]))  # some never carried
    for last in (False, True):
        full, kept = id_table(ids, -1, last=last), id_table(ids, -1, last=last, asked=asked)
        assert np.array_equal(look_up(kept, asked, -1), look_up(full, asked, -1))
        assert set(kept[0].tolist()) == set(asked.tolist()) & set(ids.tolist()) - {-1}
    assert len(id_table(ids, -1, asked=np.empty(0, dtype=np.int64))[0]) == 0


def test_row_views_read_as_python_ints_without_copies() -> None:
    import pickle

    from tuiprof.analysis.arrays import NO_ROWS, RowView

    backing = np.arange(10, dtype=np.int64) * 3
    rows = RowView(backing[2:6])
    assert list(rows) == [6, 9, 12, 15] and all(type(r) is int for r in rows)
    assert len(rows) == 4 and rows[1] == 9 and type(rows[1]) is int and list(rows[1:3]) == [9, 12]
    assert np.shares_memory(np.asarray(rows), backing)  # no copy for numpy readers
    assert np.array(rows, dtype=np.int64).tolist() == [6, 9, 12, 15]
    with pytest.raises(ValueError):
        np.asarray(rows)[0] = 1  # read-only: stats are values
    assert backing.flags.writeable  # the caller's array keeps its flags
    assert rows == RowView(np.array([6, 9, 12, 15])) and hash(rows) == hash(RowView(np.array([6, 9, 12, 15])))
    assert rows != RowView(np.array([6, 9])) and not NO_ROWS and 9 in rows
    copy = pickle.loads(pickle.dumps(rows))
    assert copy == rows and not np.shares_memory(np.asarray(copy), backing)


@needs_shared
def test_every_shared_gzip_trace_decodes_the_same_while_inflated(monkeypatch) -> None:
    traces = sorted(SHARED_TRACES.rglob("*.json.gz"))
    wholes = [load_trace(path) for path in traces]
    seen = _inflate_slowly(monkeypatch)
    for path, whole in zip(traces, wholes):
        streamed = load_trace(path)
        columns_equal(whole, streamed)
        assert streamed.header == whole.header, path.name
    assert sum(not complete for _, complete in seen) > 100  # most were cut while they grew


@pytest.mark.parametrize("span", [3, 1 << 16, (1 << 16) + 1, 1 << 63])
def test_group_rows_keeps_rows_in_order_whatever_the_span_of_its_keys(span) -> None:
    """group_rows sorts keys spanning under 2**16 values as uint16 offsets (a radix sort):
    the groups must be those of a plain dict of lists, keys ascending, rows in their order,
    at the edge of that span and past it (int64's whole range)."""
    rng = np.random.default_rng(span % 1000)
    if span <= 1 << 17:
        keys = rng.integers(-3, span - 3, 5000, dtype=np.int64)
        keys[[0, 1]] = -3, span - 4  # the whole span present
    else:
        keys = rng.choice(np.array([-(1 << 63), -7, 0, 5, (1 << 63) - 1], dtype=np.int64), 5000)
    expected: dict[int, list[int]] = {}
    for row, key in enumerate(keys.tolist()):
        expected.setdefault(key, []).append(row)
    found_keys, found_rows = group_rows(keys)
    assert found_keys == sorted(expected)
    assert [rows.tolist() for rows in found_rows] == [expected[key] for key in sorted(expected)]


@pytest.mark.parametrize(
    "kinds, ids",
    [
        ((-1, 3), (-1, 4)),  # a trace's few devices: coded, counted
        ((0, 1), (0, 1)),
        ((0, 2), (-(1 << 62), 2)),  # ids far apart: numpy's axis=0 path
        ((0, 300), (0, 300)),  # 90,000 possible pairs: axis=0
        ((0, 9), (0, 9)),  # more than 64 present pairs: axis=0
    ],
)
def test_memory_device_pairs_are_numpys_unique_rows(kinds, ids) -> None:
    """trace/memory.py's _distinct_pairs codes (kind, device id) pairs instead of numpy's
    ``unique(axis=0)``: same pairs, first rows and inverse, a pair first seen late included."""
    from tuiprof.trace.memory import _distinct_pairs

    rng = np.random.default_rng(len(kinds) + kinds[1])
    kind = rng.integers(kinds[0], kinds[1] + 1, 100_000)
    device = rng.choice(np.array(ids), 100_000) if ids[0] < -1 else rng.integers(ids[0], ids[1] + 1, 100_000)
    kind[90_000], device[90_000] = kinds[1] + 1, ids[1]  # first seen past the leading windows
    pairs, first, inverse = _distinct_pairs(kind, device)
    expected = np.unique(np.stack((kind, device), axis=1), axis=0, return_index=True, return_inverse=True)
    assert pairs == expected[0].tolist()
    assert first.tolist() == expected[1].tolist()
    assert inverse.tolist() == expected[2].ravel().tolist()
