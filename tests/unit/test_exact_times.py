"""ts/dur are converted from their decimal text to integer ns exactly; unusable ones are damage."""

from __future__ import annotations

import json
import random
from decimal import ROUND_HALF_EVEN, Decimal

import msgspec
import pytest

from tests.conftest import SHARED_TRACES, needs_shared
from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.trace.columns import ABSURD_NS, exact_ns


def _decimal_ns(text: bytes) -> int:
    return int((Decimal(text.decode()) * 1000).to_integral_value(ROUND_HALF_EVEN))


def test_exact_ns_equals_decimal_arithmetic() -> None:
    rng = random.Random(7)
    texts = [b"0", b"-0", b"7", b"-2.25", b"1.5", b"0.0005", b"0.0015", b"12.3456789", b"1.7e+15", b"1E3", b'"12.5"']
    texts += [f"{rng.randrange(-(10**6), 2 * 10**15)}.{rng.randrange(1000):03d}".encode() for _ in range(3000)]
    texts += [f"{rng.randrange(10**9)}.{rng.randrange(10**6):0{rng.randrange(1, 7)}d}".encode() for _ in range(300)]
    texts += [str(rng.randrange(10**15)).encode() for _ in range(300)]
    raws = msgspec.json.decode(b"[" + b",".join(texts) + b"]", type=list[msgspec.Raw])
    values, damaged = exact_ns(raws)
    assert not damaged.any()
    assert values.tolist() == [_decimal_ns(t.strip(b'"')) for t in texts]


@pytest.mark.parametrize(
    "text",
    [
        b"NaN",
        b"Infinity",
        b"1e308",
        b"1e999",
        b"null",
        b'"NaN"',
        b'"inf"',
        b"true",
        b"[1]",
        b"4611686018427387.904",
        b"-4611686018427387.904",
        b"99999999999999999999.5",
    ],
)
def test_unusable_times_are_damaged(text: bytes) -> None:
    values, damaged = exact_ns([text, b"1.5"])
    assert damaged.tolist() == [True, False] and values.tolist() == [0, 1500]


def test_short_texts_do_not_read_their_neighbours_dot() -> None:
    """A 1-3 character text after one with decimals ("1.5", "4"): its own bytes decide."""
    texts = [b"1.5", b"4", b"1.25", b"4", b"2.125", b"44", b"7.5", b"-3", b"0.5", b"12"]
    values, damaged = exact_ns(texts)
    assert not damaged.any()
    assert values.tolist() == [_decimal_ns(t) for t in texts]


def test_largest_usable_time() -> None:
    values, damaged = exact_ns([b"4611686018427387.903"])
    assert values.tolist() == [ABSURD_NS - 1] and not damaged.any()


def test_calls_242_ns_apart_at_epoch_microseconds_stay_apart(tmp_path) -> None:
    """Both starts round to the same float64 (ulp 0.25 us at 1.7e15 us): through a float
    the second call (shorter) would nest in the first and merge into it as its duplicate."""
    trace = GpuTrace()
    trace.op("aten::result_type", 10.126, 0.040)
    trace.op("aten::result_type", 10.368, 0.037)
    assert float(f"{1.7e15 + 10.126:.3f}") == float(f"{1.7e15 + 10.368:.3f}")
    model = load_model(trace.write(tmp_path / "close.json"))
    (stats,) = model.operators()
    assert (stats.calls, stats.cpu_total_us, stats.self_cpu_us) == (2, 0.077, 0.077)
    assert model.calls.start_ns[1] - model.calls.start_ns[0] == 242


def test_damaged_events_are_counted_and_left_out_of_sums(tmp_path) -> None:
    good = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 100.5, "dur": 10}
    bad = [
        {**good, "ts": "NaN"},
        {**good, "ts": 1e308},
        {**good, "dur": -5},
        {**good, "ts": 5e15},  # 5e18 ns: beyond 2**62
        {**good, "ts": None},
        {**good, "cat": "kernel", "dur": "Infinity", "args": {"correlation": 1}},
        {"ph": "X", "cat": "python_function", "name": "f", "pid": 1, "tid": 1, "ts": 100, "dur": -1},
    ]
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps({"traceEvents": [good, *bad, {**good, "ts": 120}]}))
    model = load_model(path)
    assert model.report.damaged == len(bad)
    assert any("finite" in problem for problem in model.report.problems)
    (stats,) = model.operators()
    assert (stats.calls, stats.cpu_total_us, stats.self_cpu_us) == (2, 20.0, 20.0)
    assert not model.has_device and model.info.duration_us == 29.5


@needs_shared
def test_ns_resolution_trace_figures() -> None:
    """The real trace whose float64 timestamps re-nested calls (issue 10: 2,345 calls before)."""
    model = load_model(SHARED_TRACES / "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
    ops = {s.name: s for s in model.operators()}
    assert ops["aten::result_type"].calls == 2415
    assert round(ops["torch::distributed::reducer::mul_out"].self_cpu_us, 1) == 1268.3
    assert round(ops["autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"].self_cpu_us, 1) == 4455.2
    assert round(ops["aten::detach"].self_cpu_us, 1) == 469.8
    step = next(s for s in model.steps if s.name == "ProfilerStep#103")
    assert round(step.idle_pct, 1) == 1.1  # 49 % when only the step's own kernels counted
    assert model.report.damaged == 0
