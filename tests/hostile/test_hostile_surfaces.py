"""Hostile input on the surfaces beside `summary` (issue 30): `diff`, `timeline`, the
parent links every command walks, and the option checks.  Each case: one clean line
and exit 2, or a finished run with the damage said; never a hang, never a traceback."""

from __future__ import annotations

import gc
import gzip
import json
import random
import threading
import time

import numpy as np
import pytest

from tests.conftest import SAMPLES
from tests.helpers.cli import one_line_exit_2, tuiprof_bytes
from tuiprof.analysis.arrays import break_cycles, nearest_ancestor

RESNET_SAMPLE = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
GLOO_RANK1 = SAMPLES / "ddp_gloo_2ranks" / "train_ddp_gloo.rank1.pt.trace.json.gz"


def _compact(events: list[dict]) -> bytes:
    return json.dumps({"traceEvents": events}, separators=(",", ":")).encode()


# ---------------------------------------------------------------- parent links that loop


def _loops_by_walking(parent: list[int]) -> int:
    """Cycles of a parent list, found by walking each chain in plain Python (the oracle)."""
    state = [0] * len(parent)  # 0 unseen, 1 on the current walk, 2 done
    cycles = 0
    for start in range(len(parent)):
        path, node = [], start
        while node >= 0 and state[node] == 0:
            state[node] = 1
            path.append(node)
            node = parent[node]
        cycles += node >= 0 and state[node] == 1
        for seen in path:
            state[seen] = 2
    return cycles


@pytest.mark.parametrize("seed", range(40))
def test_break_cycles_cuts_one_link_per_loop(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    parent = [rng.choice([-1, rng.randrange(n)]) if rng.random() < 0.6 else rng.randrange(n) for _ in range(n)]
    key = [rng.randrange(8) for _ in range(n)]  # ties: the lower index is cut
    repaired, cut = break_cycles(np.array(parent, dtype=np.int64), np.array(key, dtype=np.int64))
    assert cut == _loops_by_walking(parent)
    changed = [i for i in range(n) if repaired[i] != parent[i]]
    assert len(changed) == cut and all(repaired[i] == -1 for i in changed)
    assert _loops_by_walking(repaired.tolist()) == 0
    for i in changed:  # the cut member is the one of least (key, index) in its loop
        loop, node = [i], parent[i]
        while node != i:
            loop.append(node)
            node = parent[node]
        assert (key[i], i) == min((key[m], m) for m in loop)


def test_nearest_ancestor_never_spins_on_a_loop() -> None:
    parent = np.array([-1, 0, 3, 2], dtype=np.int64)  # 2 -> 3 -> 2
    wanted = np.array([True, False, False, False])
    assert _within(10, lambda: nearest_ancestor(parent, wanted).tolist()) == [-1, 0, -1, -1]  # main: spins forever


def _within(seconds: float, work):
    """``work()``'s answer, or None when it takes longer: it runs in a daemon thread,
    so a regression that spins fails the test instead of hanging the suite."""
    answer: list = []
    thread = threading.Thread(target=lambda: answer.append(work()), daemon=True)
    thread.start()
    thread.join(seconds)
    return answer[0] if answer else None


def _looping_frames() -> bytes:
    """An nn.Module frame and two Python frames whose ids point at each other (2 -> 3 -> 2)."""

    def frame(name, ts, dur, args):
        return {
            "ph": "X",
            "cat": "python_function",
            "name": name,
            "pid": 1,
            "tid": 1,
            "ts": ts,
            "dur": dur,
            "args": args,
        }

    return _compact(
        [
            frame("nn.Module: M", 0, 9, {"Python id": 1}),
            frame("f", 1, 7, {"Python id": 2, "Python parent id": 3}),
            frame("g", 2, 5, {"Python id": 3, "Python parent id": 2}),
            {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 3, "dur": 1},
        ]
    )


def _gloo_rank1_with_a_flipped_bit() -> bytes:
    """The 2-rank gloo sample's rank 1 with one bit flipped: frame 2's parent id 1 -> 3,
    and frame 3 descends from frame 2."""
    text = gzip.decompress(GLOO_RANK1.read_bytes())
    before = b'"Python parent id": 1, "Python id": 2,'
    assert text.count(before) == 1
    return text.replace(before, b'"Python parent id": 3, "Python id": 2,')


@pytest.mark.parametrize("make", [_looping_frames, _gloo_rank1_with_a_flipped_bit], ids=["hand-made", "gloo-bit-flip"])
@pytest.mark.parametrize("command", [["summary", "--view", "modules"], ["timeline"], ["diff", "--format", "csv"]])
def test_python_parent_ids_that_loop_are_cut_and_counted(tmp_path, make, command: list[str]) -> None:
    path = tmp_path / "loop.json"
    path.write_bytes(make())
    args = [command[0], str(path), *([str(path)] if command[0] == "diff" else []), *command[1:]]
    result = tuiprof_bytes(*args, timeout=30)  # main: spins forever in arrays.nearest_ancestor
    assert result.returncode == 0, result.stderr
    assert b"Python parent id links that loop (1)" in result.stderr or command[0] != "summary"


def test_a_parent_loop_is_reported_as_a_repair(tmp_path) -> None:
    from tuiprof.analysis import load_model

    path = tmp_path / "loop.json"
    path.write_bytes(_looping_frames())
    model = load_model(path)
    assert model.report.repaired == 1 and [n.name for n in model.modules.walk()] == ["M"]


# ---------------------------------------------------------------- diff cost


def _renamed_under_parents(pairs: int, child: str) -> bytes:
    """``pairs`` operators both sides run, each with one child only this side has:
    every child name is aligned under its own parent (one aligned row each)."""
    events = []
    for i in range(pairs):
        events.append({"ph": "X", "cat": "cpu_op", "name": f"parent_{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 5})
        events.append(
            {"ph": "X", "cat": "cpu_op", "name": f"{child}_{i}", "pid": 1, "tid": 1, "ts": 10 * i + 1, "dur": 3}
        )
    return _compact(events)


def test_a_diff_aligns_each_renamed_child_under_its_parent(tmp_path) -> None:
    from tuiprof.analysis import load_model
    from tuiprof.analysis.diff import diff_traces

    sides = []
    for child in ("a", "b"):
        path = tmp_path / f"{child}.json"
        path.write_bytes(_renamed_under_parents(300, child))
        sides.append(load_model(path))
    rows = diff_traces(*sides).table("ops").rows
    aligned = sorted(r.name for r in rows if r.status == "aligned")
    assert aligned == sorted(f"a_{i} → b_{i}" for i in range(300))
    assert not [r for r in rows if r.status in ("added", "removed")]


def _align_cpu_seconds(names: int) -> float:
    """CPU time of the alignment alone for ``names`` renamed operators, each under its own parent."""
    from tuiprof.analysis.diff import _align

    values_a = {(f"a_{i}", ""): [3.0, 1.0] for i in range(names)}
    values_b = {(f"b_{i}", ""): [4.0, 1.0] for i in range(names)}
    placed_a = {(f"a_{i}", f"parent_{i}"): [3.0, 1.0] for i in range(names)}
    placed_b = {(f"b_{i}", f"parent_{i}"): [4.0, 1.0] for i in range(names)}
    gc.disable()  # a collection landing in one run and not the other is not the alignment's cost
    try:
        started = time.process_time()
        aligned = _align(values_a, values_b, placed_a, placed_b, lambda name: "op")
        spent = time.process_time() - started
    finally:
        gc.enable()
    assert len(aligned) == names and not values_a and not values_b
    return spent


def test_a_kernel_named_like_a_step_is_diffed_by_its_own_name(tmp_path, capsys) -> None:
    """A device event called ``ProfilerStep#3`` under an operator both sides run (fuzz finding:
    the kernel table's placement renamed it ``ProfilerStep*``, which the table did not know:
    KeyError, exit 1).  Named as written, it is aligned with B's kernel under the operator."""
    from tests.helpers.gpu_trace import GpuTrace
    from tuiprof import cli

    paths = []
    for side, kernel in (("a", "ProfilerStep#3"), ("b", "gemm_kernel")):
        trace = GpuTrace()
        trace.step(1, 0, 100)
        mm = trace.op("aten::mm", 10, 50)
        trace.launch(mm, kernel, 12, 5, 20, 30)
        paths.append(str(trace.write(tmp_path / f"{side}.json")))
    assert cli.main(["diff", *paths, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = document["tables"]["kernels"]["rows"]
    assert [(r["name"], r["status"], r["detail"]) for r in rows] == [
        ("ProfilerStep#3 \u2192 gemm_kernel", "aligned", "aligned under aten::mm")
    ]


def test_memory_sums_past_int64_are_no_numpy_warning(tmp_path) -> None:
    """Two allocations of 2**62 bytes inside one operator's children (fuzz finding: their sum,
    a float past int64, was cast with a RuntimeWarning printed on stderr): one clean line."""
    import warnings

    from tests.helpers.gpu_trace import GpuTrace
    from tuiprof.analysis.build import load_model

    trace = GpuTrace()
    trace.op("aten::outer", 0, 100)
    for n in range(2):
        trace.op("aten::empty", 10 + 20 * n, 10)
        trace.memory(12 + 20 * n, 1 << 62, 1 << 62, addr=4096 * (n + 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model = load_model(trace.write(tmp_path / "huge.json"))
    assert len(model.calls) == 3


def test_diff_alignment_is_near_linear_in_distinct_names() -> None:
    # the scan of every key per aligned name made 5,000 vs 20,000 names 0.6 s vs 9 s CPU (x16);
    # two 4.9 MB traces with 50,000 distinct names took 61 s, 5 s of CPU now (load included).
    # 8x the names: x64 if quadratic, x8-x12 linear or n log n; the best of 3 takes out the load.
    small = min(_align_cpu_seconds(2_000) for _ in range(3))
    big = min(_align_cpu_seconds(16_000) for _ in range(3))
    assert big < 24 * max(small, 0.005), (small, big)


# ---------------------------------------------------------------- timeline arguments


def _far_apart(tmp_path) -> str:
    """Two 1-second operators 1e15 us apart (1e18 ns: under 2**62, so valid times)."""
    path = tmp_path / "far.json"
    path.write_bytes(
        _compact(
            [
                {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 10**6}
                for name, ts in (("first", 0), ("last", 10**15))
            ]
        )
    )
    return str(path)


@pytest.mark.parametrize("window", [["--to", "1e18"], ["--from", "1e16", "--to", "1.0000001e16"], ["--from=-1e12"]])
def test_a_window_far_outside_the_trace_is_one_line(window: list[str]) -> None:
    # main: --to 1e18 spun forever in the ruler; --from 1e16 overflowed int64 (exit 1)
    result = tuiprof_bytes("timeline", str(SAMPLES / "resnet18_cpu.pt.trace.json.gz"), *window, timeout=30)
    line = one_line_exit_2(result, "far outside the trace, which lasts 2.973s", "pass --from/--to between -")
    lower, upper = (int(word) for word in line.split("between ")[1].split()[:3:2])
    assert lower == pytest.approx(-2_973_000, abs=1000) and upper == pytest.approx(-2 * lower, abs=2)


def test_a_window_a_little_past_the_trace_is_drawn(tmp_path) -> None:
    result = tuiprof_bytes(
        "timeline", _far_apart(tmp_path), "--from=-1e15", "--to", "2e15", "--width", "30", "--lanes", "cpu"
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.decode().splitlines()[-1] == "thread 1".ljust(16) + " " + " " * 10 + "▁" + " " * 9 + "▁"


def test_events_1e15_us_apart_fill_only_their_own_columns(tmp_path) -> None:
    result = tuiprof_bytes("timeline", _far_apart(tmp_path), "--width", "100", "--lanes", "cpu", "--format", "json")
    assert result.returncode == 0, result.stderr
    lane = json.loads(result.stdout)["lanes"][0]
    drawn = [(column, event) for column, (busy, event) in enumerate(zip(lane["busy"], lane["events"])) if busy or event]
    assert drawn == [(0, "first"), (99, "last")]  # main: "first" also in columns 18, 36, 55, 73, 92; "last" lost


def test_column_edges_are_exact_where_the_product_leaves_int64() -> None:
    from tuiprof.analysis.timeline import Timeline

    start, span, columns = 10**18, 4 * 10**18, 97
    edges = Timeline.edges(start, start + span, columns)
    assert edges.tolist() == [start + i * span // columns for i in range(columns + 1)]  # Python ints: no overflow


def test_the_ruler_of_a_huge_window_has_few_ticks() -> None:
    from types import SimpleNamespace

    from tuiprof.report.timeline import ruler

    drawn = _within(
        10, lambda: ruler(SimpleNamespace(begin_ns=0), 0, 10**24, 100)
    )  # main: a loop turn per tick, 2e11 turns
    assert drawn is not None
    labels, marks = drawn
    assert len(marks) == 100 and 2 <= marks.count("┬") <= 100 // 12 + 1 and labels.startswith("0s")


@pytest.mark.parametrize(
    "event",
    [
        {"ph": "i", "cat": "cpu_instant_event", "name": "x", "pid": 1, "tid": 1, "ts": 5, "s": "t"},
        {"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": 0},
    ],
    ids=["instant", "zero-duration"],
)
def test_a_trace_that_spans_no_time_says_so(tmp_path, event: dict) -> None:
    path = tmp_path / "instant.json"
    path.write_bytes(_compact([event]))
    line = one_line_exit_2(tuiprof_bytes("timeline", str(path)), "span no time", "tuiprof summary")
    assert "--from" not in line  # main: "widen --from/--to" though none was given


def test_a_trace_shorter_than_the_width_names_the_width(tmp_path) -> None:
    path = tmp_path / "short.json"
    path.write_bytes(_compact([{"ph": "X", "cat": "cpu_op", "name": "x", "pid": 1, "tid": 1, "ts": 5, "dur": 0.05}]))
    one_line_exit_2(
        tuiprof_bytes("timeline", str(path), "--width", "80"), "the trace lasts 50 ns", "pass --width 50 or less"
    )


# ---------------------------------------------------------------- timeline cost


def _threads(tmp_path, count: int) -> str:
    """``count`` threads, thread t busy for t + 1 us (so thread count - 1 is the busiest)."""
    path = tmp_path / f"threads{count}.json"
    path.write_bytes(
        _compact(
            [
                {"ph": "X", "cat": "cpu_op", "name": "op", "pid": 1, "tid": t, "ts": 0, "dur": t + 1}
                for t in range(count)
            ]
        )
    )
    return str(path)


def test_a_timeline_of_many_threads_draws_the_busiest_and_says_how_many_more(tmp_path) -> None:
    from tuiprof.report.timeline import MAX_LANES

    path = _threads(tmp_path, 3000)
    started = time.monotonic()
    result = tuiprof_bytes("timeline", path, "--width", "40", "--lanes", "cpu", timeout=60)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30  # main: 10,000 threads 28 s of labelling alone (quadratic)
    lines = result.stdout.decode().splitlines()
    drawn = [int(line.split()[1]) for line in lines if line.startswith("thread ")]
    assert sorted(drawn) == list(range(3000 - MAX_LANES, 3000))  # the busiest, by construction
    assert lines[-1] == f"+{3000 - MAX_LANES:,} quieter threads/streams not drawn (max {MAX_LANES} lanes)"
    assert max(map(len, lines)) <= 16 + 1 + 40


def test_lane_labels_are_linear_in_threads(tmp_path) -> None:
    from tuiprof.analysis import load_model
    from tuiprof.analysis.timeline import build_timeline
    from tuiprof.report.timeline import lane_labels

    timeline = build_timeline(load_model(_threads(tmp_path, 10_000)))
    lanes = timeline.select()
    started = time.process_time()
    labels = lane_labels(timeline, lanes)
    assert time.process_time() - started < 2  # main: 3.9 s here, x4 per doubling (a scan of every lane per thread)
    assert len(labels) == 10_000


def test_json_timeline_memory_is_bounded_by_its_lanes_and_width(tmp_path) -> None:
    from tuiprof.report.timeline import MAX_COLUMNS, MAX_LANES

    path = _threads(tmp_path, 2000)
    one_line_exit_2(
        tuiprof_bytes("timeline", path, "--width", "100000"), "--width 100000", f"between 1 and {MAX_COLUMNS}"
    )
    result = tuiprof_bytes("timeline", path, "--format", "json", "--width", "50", "--lanes", "cpu", timeout=60)
    assert result.returncode == 0, result.stderr
    frame = json.loads(result.stdout)
    assert len(frame["lanes"]) == MAX_LANES and frame["threads_left_out"] == 2000 - MAX_LANES
    assert {lane["label"] for lane in frame["lanes"]} == {f"thread {t}" for t in range(2000 - MAX_LANES, 2000)}


# ---------------------------------------------------------------- diff text and CSV

HOSTILE_NAMES = ["=cmd|'/C calc'!A0", "+1+1", "@SUM(A1)", "-2-2", "cr\rtab\tx", "big" + "x" * 5_000_000]


def _hostile_pair(tmp_path) -> tuple[str, str]:
    paths = []
    for side, dur in (("a", 5), ("b", 9)):
        path = tmp_path / f"{side}.json"
        path.write_bytes(
            _compact(
                [
                    {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": 20 * i, "dur": dur}
                    for i, name in enumerate(HOSTILE_NAMES)
                ]
            )
        )
        paths.append(str(path))
    return paths[0], paths[1]


def test_diff_csv_neutralises_formulas_and_control_characters(tmp_path) -> None:
    import csv
    import io

    result = tuiprof_bytes("diff", *_hostile_pair(tmp_path), "--format", "csv", "--view", "ops")
    assert result.returncode == 0, result.stderr
    text = result.stdout.decode()
    assert "\r" not in text and "\t" not in text  # main: raw CR and TAB inside fields
    limit = csv.field_size_limit(10_000_000)  # the 5 MB name
    rows = list(csv.DictReader(io.StringIO(text)))
    csv.field_size_limit(limit)
    names = sorted(row["name"] for row in rows)
    expected = sorted(
        ["'=cmd|'/C calc'!A0", "'+1+1", "'@SUM(A1)", "'-2-2", "cr\\x0dtab\\x09x", "big" + "x" * 5_000_000]
    )
    assert names == expected  # main: =cmd|... as written, a formula
    assert {row["delta"] for row in rows} == {"4.0"}  # numbers stay numbers


def test_diff_text_cuts_names_as_the_summary_does(tmp_path) -> None:
    from tuiprof.report.render import CELL_CHARS

    result = tuiprof_bytes("diff", *_hostile_pair(tmp_path), "--view", "verdict")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.decode().splitlines()
    assert len(result.stdout) < 10_000  # main: 5 MB (the name whole in the contributors)
    big = next(line for line in lines if line.startswith("  big"))
    assert big == "  big" + "x" * (CELL_CHARS - 4) + "…: +4.000us (16.7 % of the delta)"


# ---------------------------------------------------------------- messages


@pytest.mark.parametrize(
    ("document", "says"),
    [
        (b"null", "not a trace: it starts `null`"),
        (b'"text"', 'not a trace: it starts `"text"`'),
        (b"  5", "not a trace: it starts `5`"),
        (b"{}", "this JSON has no traceEvents"),
        (b'{"traceEvents": {}}', "JSON that is not a trace (Expected `array`, got `object` - at `$.traceEvents`)"),
        (b"hello", "this is not JSON"),
    ],
)
@pytest.mark.parametrize("how", ["file", "stdin"])
def test_json_that_is_not_a_trace_says_what_it_is(tmp_path, document: bytes, says: str, how: str) -> None:
    # main: "this is not JSON" for null, "text", 5 (and {} from a pipe); "not valid JSON" for traceEvents {}
    path = tmp_path / "doc.json"
    path.write_bytes(document)
    result = tuiprof_bytes("summary", str(path)) if how == "file" else tuiprof_bytes("summary", "-", input=document)
    one_line_exit_2(result, says)


GLOO_RUN = SAMPLES / "ddp_gloo_2ranks"


@pytest.mark.parametrize("ranks", ["0,999", "7"])
def test_diff_ranks_that_the_run_lacks_are_named(ranks: str) -> None:
    # main: --ranks 0,999 compared rank 0 alone, silently
    result = tuiprof_bytes("diff", str(GLOO_RUN), str(GLOO_RUN), "--ranks", ranks, "--format", "csv")
    one_line_exit_2(result, f"no trace of rank {ranks.split(',')[-1]} (its ranks: 0, 1)")


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--fail-if-slower", "-5%"),
        ("--fail-if-slower", "1e999%"),
        ("--fail-if-memory", "inf"),
        ("--fail-if-memory", "-0.5"),
        ("--fail-if-slower", "nan%"),
    ],
)
def test_gate_percentages_that_are_no_percentage_are_one_line(option: str, value: str) -> None:
    # main: 1e999% and inf accepted (a gate that can never fail); -5% printed 7 lines of usage
    result = tuiprof_bytes("diff", str(RESNET_SAMPLE), str(RESNET_SAMPLE), option, value)
    one_line_exit_2(result, f"{option} {value}: not a percentage", "write it like 5%")


def test_a_diff_of_device_events_without_any_operator(tmp_path) -> None:
    # found by `fuzz.py --surface diff`; main: IndexError in the launchers table (exit 1)
    kernel = {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce", "pid": 0, "tid": 7, "ts": 100, "dur": 50}
    path = tmp_path / "kernel.json"
    path.write_bytes(_compact([kernel]))
    result = tuiprof_bytes("diff", str(path), str(path), "--format", "csv", "--view", "launchers")
    assert result.returncode == 0, result.stderr
    assert "launchers,us,ncclKernel_AllReduce,(no launcher),same,50.0,50.0,0.0,0.0,,1.0,1.0" in result.stdout.decode()


@pytest.mark.parametrize("order", ["kernel-only first", "kernel-only second"])
def test_a_diff_whose_side_has_kernels_but_no_operator(tmp_path, order: str) -> None:
    # found by `fuzz.py --surface diff` (seed 31); main: IndexError in the kernels table
    # (_kernels_under_matched_operator, then _placed) for the side without any operator
    lone = tmp_path / "lone.json"
    lone.write_bytes(
        _compact([{"ph": "X", "cat": "kernel", "name": "kernel_a", "pid": 0, "tid": 7, "ts": 100, "dur": 50}])
    )
    launched = tmp_path / "launched.json"
    launched.write_bytes(
        _compact(
            [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 0, "dur": 20},
                {"ph": "X", "cat": "kernel", "name": "kernel_b", "pid": 0, "tid": 7, "ts": 100, "dur": 30},
            ]
        )
    )
    sides = (lone, launched) if order == "kernel-only first" else (launched, lone)
    result = tuiprof_bytes("diff", str(sides[0]), str(sides[1]), "--format", "json", "--view", "kernels")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["tables"]["kernels"]["rows"]
    durations = {"kernel_a": 50.0, "kernel_b": 30.0}  # by construction: nothing to align them under
    first, second = ("kernel_a", "kernel_b") if order == "kernel-only first" else ("kernel_b", "kernel_a")
    assert {(r["name"], r["status"], r["a"], r["b"]) for r in rows} == {
        (first, "removed", durations[first], None),
        (second, "added", None, durations[second]),
    }


UNSAFE_IN_JSON = "del\x7f c1\x9b[2J bidi\u202e"  # valid raw in JSON, not on a terminal


def _strings(value: object):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for member in value.values():
            yield from _strings(member)
    elif isinstance(value, list):
        for member in value:
            yield from _strings(member)


@pytest.mark.parametrize("command", [["summary"], ["diff", "SAME"], ["timeline", "--width", "20"]])
def test_json_outputs_escape_del_and_c1_controls_and_keep_the_name(tmp_path, command: list[str]) -> None:
    # found by `fuzz.py --surface timeline` (seed 31): main wrote DEL raw in diff and timeline JSON
    path = tmp_path / "del.json"
    path.write_bytes(
        _compact([{"ph": "X", "cat": "cpu_op", "name": UNSAFE_IN_JSON, "pid": 1, "tid": 1, "ts": 0, "dur": 500}])
    )
    args = [str(path) if a == "SAME" else a for a in command]
    result = tuiprof_bytes(args[0], str(path), *args[1:], "--format", "json")
    assert result.returncode == 0, result.stderr
    out = result.stdout.decode()
    assert not any(c in out for c in "\x7f\x9b\u202e"), out
    assert UNSAFE_IN_JSON in set(_strings(json.loads(out)))  # \u escapes: the same data, not plain()'s text
