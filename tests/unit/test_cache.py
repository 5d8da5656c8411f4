"""The decoded-trace cache (tuiprof/trace/cache.py): a reopen reads it, and nothing it holds is trusted.

The oracle is the synthetic trace's construction (names and call counts known
when it is written) and the store a fresh decode gives; the cache is on here
(tests/conftest.py turns it off for every other test).
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import msgspec
import numpy as np
import pytest

from tests.conftest import ROOT, SHARED_TRACES
from tests.helpers.cache import EVENTS, entries, write_trace
from tests.helpers.store import columns_equal
from tuiprof.cli import main
from tuiprof.trace import cache, load_trace
from tuiprof.trace.schema import EventArgs, TimedEvent


def calls_of(store) -> Counter:
    return Counter(store.names[code] for code in store.cpu.name.tolist())


def summary_calls(capsys, *args: str) -> dict[str, int]:
    assert main(["summary", *args, "--format", "json"]) == 0
    cache.wait_for_writes()
    return {row["name"]: row["calls"] for row in json.loads(capsys.readouterr().out)}


@pytest.mark.parametrize("compressed", [False, True])
def test_a_reopen_reads_the_columns_the_first_open_decoded(cache_on, tmp_path, compressed) -> None:
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    if compressed:
        path = tmp_path / "trace.json.gz"
        path.write_bytes(gzip.compress((tmp_path / "trace.json").read_bytes(), 1))
    first = load_trace(path)
    assert first.cache_key is not None and calls_of(first) == expected
    assert cache.save(first)
    again = load_trace(path)
    assert again.cache_key is None  # it came from the cache
    assert isinstance(again.cpu.start_ns, np.memmap)
    assert calls_of(again) == expected
    columns_equal(first, again)
    size_on_disk = sum(f.stat().st_size for f in entries(cache_on)[0].iterdir())
    assert size_on_disk <= 1.1 * (tmp_path / "trace.json").stat().st_size


def test_structs_from_decode_workers_are_cached(cache_on, tmp_path) -> None:
    """GPU annotations and collective records arrive from workers as unpickled copies, whose
    absent input lists are copies of the empty default: they were written as invalid JSON."""
    path = tmp_path / "trace.json"
    write_trace(path)
    store = load_trace(path)
    annotation = TimedEvent("ProfilerStep#3", 7, 10, 20, EventArgs(external_id=5))
    record = EventArgs(collective_name="allreduce", in_nelems=1024, input_dims=msgspec.Raw(b"[[32, 32]]"))
    store.gpu_annotations, store.comms_records = pickle.loads(pickle.dumps(([annotation], [record])))
    store.event_count += 1  # the annotation
    assert cache.save(store)
    again = load_trace(path)
    assert again.cache_key is None
    assert again.gpu_annotations == [annotation] and again.comms_records[0].in_nelems == 1024
    assert bytes(again.comms_records[0].input_dims) == b"[[32, 32]]" and not again.gpu_annotations[0].args.input_dims


def test_a_file_changed_in_place_is_decoded_again(cache_on, tmp_path) -> None:
    path = tmp_path / "trace.json"
    write_trace(path)
    assert cache.save(load_trace(path))
    before = path.stat()
    expected = write_trace(path, last_name="aten::tsal")  # same size, new content in the tail
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the same mtime
    assert path.stat().st_size == before.st_size
    store = load_trace(path)
    assert store.cache_key is not None and calls_of(store) == expected


def _plant(entry: Path, damage: str) -> None:
    column = entry / "cpu.name.npy"
    rows = len(np.load(column))
    if damage == "codes out of their table":
        np.save(column, np.full(rows, 10_000, dtype=np.int64))
    elif damage == "negative codes":
        np.save(column, np.full(rows, -5, dtype=np.int64))
    elif damage == "a float column":
        np.save(column, np.zeros(rows, dtype=np.float64))
    elif damage == "a short column":
        np.save(column, np.zeros(rows - 1, dtype=np.int64))
    elif damage == "a pickled column":
        np.save(column, np.array([object()] * rows, dtype=object), allow_pickle=True)
    elif damage == "a truncated column":
        column.write_bytes(column.read_bytes()[:200])
    elif damage == "an empty column file":
        column.write_bytes(b"")
    elif damage == "a missing column":
        column.unlink()
    elif damage == "launches before operators":
        category = np.load(entry / "cpu.category.npy")
        category[0] = 3
        np.save(entry / "cpu.category.npy", category)
    elif damage == "negative durations":
        np.save(entry / "cpu.dur_ns.npy", np.full(rows, -1, dtype=np.int64))
    elif damage == "input texts outside the blob":
        np.save(entry / "cpu.dims_len.npy", np.full(rows, 1 << 40, dtype=np.int64))
    elif damage == "fewer names":
        meta = json.loads((entry / "meta.json").read_text())
        meta["names"] = meta["names"][:1]
        (entry / "meta.json").write_text(json.dumps(meta))
    elif damage == "garbage meta":
        (entry / "meta.json").write_bytes(b"\x00not json")
    if damage not in ("garbage meta", "a missing column"):
        reseal(entry)  # as a planter who knows the format would: the checks of the values must refuse it


def reseal(entry: Path) -> None:
    """The CRC-32 of every file of ``entry`` recomputed into its meta.json, and meta.json's own
    seal, its last member: the CRC-32 of the bytes before it, closed (stdlib zlib, not the
    cache's code)."""
    meta = json.loads((entry / "meta.json").read_text())
    meta.pop("seal", None)
    meta["checksums"] = {name: zlib.crc32((entry / name).read_bytes()) for name in meta["checksums"]}
    document = json.dumps(meta).encode()
    (entry / "meta.json").write_bytes(document[:-1] + b',"seal":%d}' % zlib.crc32(document))


@pytest.mark.parametrize(
    "damage",
    [
        "codes out of their table",
        "negative codes",
        "a float column",
        "a short column",
        "a pickled column",
        "a truncated column",
        "an empty column file",
        "a missing column",
        "launches before operators",
        "negative durations",
        "input texts outside the blob",
        "fewer names",
        "garbage meta",
    ],
)
def test_a_planted_or_damaged_cache_is_ignored_and_rebuilt(cache_on, tmp_path, damage) -> None:
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    _plant(entry, damage)
    store = load_trace(path)
    assert store.cache_key is not None, "the planted entry was used"
    assert calls_of(store) == expected
    assert entries(cache_on) == []  # removed, so the next save rebuilds it
    assert cache.save(store) and load_trace(path).cache_key is None


def test_two_processes_open_the_same_trace_at_once(cache_on, tmp_path) -> None:
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tuiprof", "summary", str(path), "--format", "json", "--limit", "20"]
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        for _ in range(2)
    ]
    outputs = [run.communicate(timeout=120) for run in runs]
    assert [run.returncode for run in runs] == [0, 0], [err for _, err in outputs]
    assert outputs[0][0] == outputs[1][0]
    assert {row["name"]: row["calls"] for row in json.loads(outputs[0][0])} == expected
    [entry] = entries(cache_on)  # one entry, no temporary folder left
    assert not entry.name.startswith(".")
    os.utime(entry / "meta.json", (1, 1))
    third = subprocess.run(command, capture_output=True, env=env, cwd=tmp_path, timeout=120)
    assert third.returncode == 0 and third.stdout == outputs[0][0]
    assert (entry / "meta.json").stat().st_mtime > 1  # read (and touched) by the third


def test_no_cache_writes_nothing(cache_on, tmp_path, capsys) -> None:
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    assert summary_calls(capsys, str(path), "--no-cache") == expected
    assert not cache_on.exists()
    os.environ[cache.NO_CACHE_ENV] = "0"  # what --no-cache set (monkeypatch restores it)
    assert summary_calls(capsys, str(path)) == expected
    assert len(entries(cache_on)) == 1  # without the flag, the same command writes one


def test_a_read_only_cache_falls_back_to_no_cache_with_one_line(cache_on, tmp_path) -> None:
    path = tmp_path / "trace.json"
    write_trace(path)
    cache_on.mkdir(parents=True)
    cache_on.chmod(0o555)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        run = subprocess.run(
            [sys.executable, "-m", "tuiprof", "summary", str(path), "--limit", "3"],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )
    finally:
        cache_on.chmod(0o755)
    assert run.returncode == 0 and "aten::op_0" in run.stdout
    lines = run.stderr.splitlines()
    assert len(lines) == 1 and "cache" in lines[0] and "read-only" in lines[0], run.stderr
    assert entries(cache_on) == []


def test_a_trace_from_stdin_is_keyed_by_its_content(cache_on, tmp_path) -> None:
    path = tmp_path / "trace.json"
    expected = write_trace(path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tuiprof", "summary", "-", "--format", "json", "--limit", "20"]
    outputs = []
    for _ in range(2):
        with open(path, "rb") as stdin:
            run = subprocess.run(command, stdin=stdin, capture_output=True, env=env, cwd=tmp_path, timeout=120)
        assert run.returncode == 0, run.stderr
        outputs.append(run.stdout)
        [entry] = entries(cache_on)
        assert entry.name.startswith("c")  # the content's key, not the temporary copy's path
    assert outputs[0] == outputs[1]
    assert {row["name"]: row["calls"] for row in json.loads(outputs[0])} == expected


def test_the_least_recently_used_trace_goes_first(cache_on, tmp_path, monkeypatch) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(first)
    write_trace(second, last_name="aten::tsal")
    one = cache.save(load_trace(first))
    size = sum(f.stat().st_size for f in entries(cache_on)[0].iterdir())
    monkeypatch.setenv(cache.CACHE_SIZE_ENV, str(int(size * 1.5)))  # room for one entry
    assert one and cache.save(load_trace(second))
    assert load_trace(first).cache_key is not None  # evicted: decoded again
    assert load_trace(second).cache_key is None


def test_cache_sizes_parse() -> None:
    assert cache.parse_size("4G") == 4 << 30
    assert cache.parse_size("500M") == 500 << 20
    assert cache.parse_size("1.5GB") == 3 << 29
    assert cache.parse_size("123") == 123
    with pytest.raises(ValueError):
        cache.parse_size("lots")


def test_the_explorer_writes_the_cache_once_its_model_is_built(cache_on, tmp_path) -> None:
    from tuiprof.tui.sources import FileSource

    path = tmp_path / "trace.json"
    expected = write_trace(path)
    model, _ = FileSource(str(path))(lambda text, fraction: None, lambda: False)
    cache.wait_for_writes()
    assert {s.name: s.calls for s in model.operators()} == expected
    assert len(entries(cache_on)) == 1
    model, _ = FileSource(str(path))(lambda text, fraction: None, lambda: False)  # the reopen reads it
    assert {s.name: s.calls for s in model.operators()} == expected
    assert len(entries(cache_on)) == 1


def test_timeline_and_diff_write_the_cache_after_their_output(cache_on, tmp_path, capsys) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    write_trace(first)
    write_trace(second, last_name="aten::tsal")
    assert main(["timeline", str(first), "--width", "60"]) == 0
    cache.wait_for_writes()
    assert "thread 2" in capsys.readouterr().out
    assert len(entries(cache_on)) == 1
    assert main(["diff", str(first), str(second), "--format", "json"]) == 0
    cache.wait_for_writes()
    assert len(entries(cache_on)) == 2  # the first side read from the cache, the second written


def test_a_flipped_bit_inside_a_column_is_not_believed(cache_on, tmp_path) -> None:
    """A bit flip keeps the file's size and, in a start time, the value in range: only the
    CRC-32 of the file, kept in meta.json, tells (issue 30; fuzz --surface cache, seed 5)."""
    path = tmp_path / "trace.json"
    write_trace(path)
    assert cache.save(load_trace(path))
    [entry] = entries(cache_on)
    column = entry / "cpu.start_ns.npy"
    data = bytearray(column.read_bytes())
    data[-8 * 100] ^= 0x01  # the lowest bit of the start of the 100th operator from the end: 1 ns later
    column.write_bytes(bytes(data))
    store = load_trace(path)
    assert store.cache_key is not None, "the flipped column was believed"
    written = [(1_000_000 + 2 * i) * 1000 + 500 for i in range(EVENTS)]  # ts = 1,000,000 + 2i us + 500 ns
    assert sorted(store.cpu.start_ns.tolist()) == written
    assert entries(cache_on) == []


# ------------------------------------------------------------------ what the analysis derived

SAMPLE = ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"  # with_stack: modules, nesting, backward
GPU_SAMPLE = SHARED_TRACES / "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz"  # kernels too


def _tables(model) -> tuple:
    """What the views show, to compare a reopen with a fresh analysis."""
    operators = [(s.name, s.calls, s.self_cpu_us, s.cpu_total_us) for s in model.operators()]
    modules = [
        (n.path, n.calls, n.cpu_total_us, n.self_cpu_us, n.backward_cpu_us, n.flops, n.operator_rows)
        for n in model.modules.rows()  # (outside modules) too
    ]
    calls = model.calls
    launchers = model.activity.launchers.tolist()
    stacks = [timeline.live_stacks for timeline in model.memory]
    return (
        operators,
        modules,
        calls.column("parent").tolist(),
        calls.column("self_ns").tolist(),
        launchers,
        model.steps,
        stacks,
        model.outside_modules,
    )


@pytest.fixture
def small_traces_cached(cache_on, monkeypatch) -> Path:
    monkeypatch.setattr(cache, "MIN_BYTES", 0)
    return cache_on


def _first_open_and_reopen(path: Path):
    from tuiprof.analysis.build import analyze

    first = load_trace(path)
    model = analyze(first)
    assert first.derived and cache.save(first)
    return model, load_trace(path)


def test_a_reopen_reuses_what_the_analysis_derived(small_traces_cached, monkeypatch) -> None:
    from tuiprof.analysis import build, memory, modules

    os.environ[cache.NO_CACHE_ENV] = "1"
    fresh = build.analyze(load_trace(SAMPLE))  # the oracle: decoded and analysed without any cache
    os.environ[cache.NO_CACHE_ENV] = "0"
    _, reopened = _first_open_and_reopen(SAMPLE)
    assert reopened.cache_entry is not None and "modules.parent" in reopened.derived
    assert fresh.steps and len(reopened.derived["steps.name"]) == len(fresh.steps)
    assert any(timeline.live_stacks for timeline in fresh.memory)

    def not_again(*args):
        raise AssertionError("derived again on a reopen")

    monkeypatch.setattr(build, "build_calls", not_again)
    monkeypatch.setattr(build, "build_steps", not_again)
    monkeypatch.setattr(memory, "python_stacks", not_again)
    monkeypatch.setattr(build, "build_module_tree", not_again)
    monkeypatch.setattr(modules, "build_module_tree", not_again)
    monkeypatch.setattr(build, "module_nodes", not_again)
    monkeypatch.setattr(modules, "module_nodes", not_again)
    model = build.analyze(reopened)
    assert _tables(model) == _tables(fresh)
    assert reopened.cache_key is None  # nothing to write again


def _plant_derived(entry: Path, name: str, change) -> None:
    """``derived.NAME.npy`` changed by ``change`` (a constant column written out first), then
    every CRC-32 recomputed: a planted entry that knows the format."""
    meta = json.loads((entry / "meta.json").read_text())
    file = entry / f"derived.{name}.npy"
    if file.exists():
        values = np.load(file)
    else:  # kept as one value in the facts: written out as a file
        values = np.full(meta["derived_facts"]["calls.rows"], meta["derived_facts"].pop(f"calls.constant.{name[6:]}"))
        meta["checksums"][file.name] = 0
    values = change(values.copy())
    np.save(file, values)
    meta["derived"][name] = {"rows": len(values), "dtype": str(values.dtype)}
    (entry / "meta.json").write_text(json.dumps(meta))
    reseal(entry)


def _loop(values):
    values[3], values[7] = 7, 3
    return values


def _set(index: int, value):
    def change(values):
        values[index] = value
        return values

    return change


DERIVED_DAMAGE = {
    "call parents that loop": ("calls.parent", _loop),
    "a parent that starts after its child": ("calls.parent", lambda v: _set(1, len(v) - 1)(v)),
    "a call row outside the operators": ("calls.cpu_row", _set(0, 10**9)),
    "calls out of start order": ("calls.cpu_row", lambda v: v[::-1].copy()),
    "a module frame that is no frame": ("calls.module", _set(0, 10**9)),
    "an absurd self time": ("calls.self_ns", _set(0, 1 << 62)),
    "a launcher out of range": ("activity.launcher", _set(0, 10**9)),
    "module nodes that loop": ("modules.parent", _loop),
    "a module named by another code": ("modules.name", lambda v: v + 1),
    "a module frame without its node": ("modules.frame_node", lambda v: np.where(v >= 0, -1, v)),
    "a call owned by no node": ("modules.call_owner", _set(0, 10**6)),
    "a module total that is no number": ("modules.cpu_total_us", _set(0, np.nan)),
    "a float column for an int one": ("modules.calls", lambda v: v.astype(np.float64)),
    "a call outside modules past the calls": ("modules.outside_row", _set(0, 10**9)),
    "calls outside modules twice": ("modules.outside_row", lambda v: np.sort(np.append(v, v[:1]))),
    "a step named by no step's name": ("steps.name", lambda v: v * 0),
    "a step time that is no number": ("steps.kernel_us", _set(0, np.inf)),
    "a stack frame that is no name": ("memory.stack_frame", _set(0, 10**9)),
    "stacks deeper than their frames": ("memory.stack_depth", lambda v: v + 1),
}


@pytest.mark.parametrize("damage", list(DERIVED_DAMAGE))
def test_a_planted_derived_array_is_not_believed(small_traces_cached, damage) -> None:
    """What the analysis derived, planted with valid CRC-32s: the reopen's checks refuse it (no
    hang on a loop), the analysis runs in full, and the entry is written again, whole."""
    from tuiprof.analysis.build import analyze

    trace = GPU_SAMPLE if damage == "a launcher out of range" else SAMPLE
    if not trace.exists():
        pytest.skip(f"{trace} not present")

    os.environ[cache.NO_CACHE_ENV] = "1"
    fresh = _tables(analyze(load_trace(trace)))
    os.environ[cache.NO_CACHE_ENV] = "0"
    _first_open_and_reopen(trace)
    [entry] = entries(small_traces_cached)
    name, change = DERIVED_DAMAGE[damage]
    _plant_derived(entry, name, change)
    store = load_trace(trace)
    model = analyze(store)
    assert _tables(model) == fresh
    assert store.cache_key is not None, "the planted arrays were believed"
    assert cache.save(store)  # written again: the next reopen reuses it
    again = load_trace(trace)
    assert _tables(analyze(again)) == fresh and again.cache_key is None


def test_a_resealed_entry_with_nothing_changed_is_used(small_traces_cached) -> None:
    """The control of the planted-array tests: resealed as they reseal, with no value changed,
    the entry is used, so what refuses a planted one is the check of its values."""
    from tuiprof.analysis.build import analyze

    _first_open_and_reopen(SAMPLE)
    [entry] = entries(small_traces_cached)
    _plant_derived(entry, "calls.parent", lambda values: values)
    store = load_trace(SAMPLE)
    analyze(store)
    assert store.cache_key is None and "calls.parent" in store.derived


def test_a_flipped_bit_in_a_derived_array_is_not_believed(small_traces_cached) -> None:
    from tuiprof.analysis.build import analyze

    _first_open_and_reopen(SAMPLE)
    [entry] = entries(small_traces_cached)
    file = entry / "derived.calls.self_ns.npy"
    data = bytearray(file.read_bytes())
    data[-8] ^= 0x02
    file.write_bytes(bytes(data))
    store = load_trace(SAMPLE)
    assert store.cache_key is not None  # refused as a whole: decoded and analysed again
    analyze(store)
    assert "calls.self_ns" in store.derived


def test_a_write_started_from_a_daemon_thread_finishes_before_the_process_exits(cache_on, tmp_path) -> None:
    """The explorer's loader runs in a daemon thread; a writer it starts was a daemon too, killed
    when the process ended (the explorer quit, or bench_startup's run): a .tmp- folder was left."""
    path = tmp_path / "trace.json"
    write_trace(path)
    script = (
        "import sys, threading\n"
        "from tuiprof.trace import cache, load_trace\n"
        "loader = threading.Thread(target=lambda: cache.save_in_background(load_trace(sys.argv[1])), daemon=True)\n"
        "loader.start(); loader.join()\n"  # the process ends right after: only a non-daemon writer is waited for
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    run = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    [entry] = entries(cache_on)
    assert not entry.name.startswith(".tmp-") and (entry / "meta.json").is_file()
