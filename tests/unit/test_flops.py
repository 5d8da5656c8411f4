"""FLOPs formulas never crash, and training FLOPs land where the time is (synthetic traces)."""

from __future__ import annotations

import pytest

from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.analysis.flops import COUNTED, FORMULAS, operator_flops

HUGE = 10**40


BROKEN = [
    ("aten::conv2d", [[1, 3, 8, 8], [4, 3, 3, 3], []], ["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"]),  # stride 0
    ("aten::conv2d", [[HUGE, 3, 8, 8], [4, 3, 3, 3], []], ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"]),
    ("aten::mm", [[HUGE, HUGE], [HUGE, HUGE]], []),
    ("aten::addmm", [[4], ["x", 2], [2, 4]], []),
    ("aten::bmm", [[2, 3, 4], None], []),
    ("aten::mul", [[HUGE, HUGE]], []),
]


@pytest.mark.parametrize(
    "formulas, name, dims, concrete",
    [(f, *case) for f in (FORMULAS, COUNTED) for case in BROKEN if case[0] in f],
)
def test_broken_inputs_give_no_flops(formulas, name, dims, concrete) -> None:
    assert operator_flops(name, dims, concrete, formulas) is None


def test_damaged_flops_are_counted_not_raised(tmp_path) -> None:
    trace = GpuTrace()
    trace.op(
        "aten::conv2d",
        0,
        10,
        **{
            "Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], []],
            "Concrete Inputs": ["", "", "", "[0, 0]", "[0, 0]", "[1, 1]", "1"],
        },
    )
    trace.op("aten::mm", 20, 10, **{"Input Dims": [[HUGE, HUGE], [HUGE, HUGE]]})
    trace.op("aten::mm", 40, 10, **{"Input Dims": [[2, 3], [3, 4]]})
    model = load_model(trace.write(tmp_path / "absurd.json"))
    assert model.flops_damaged == 2
    assert any("no FLOPs" in problem for problem in model.report.problems)
    assert {s.name: s.flops for s in model.operators()} == {"aten::conv2d": 0, "aten::mm": 48}
    assert model.step_flops == 48


def test_flops_run_where_the_time_is(tmp_path) -> None:
    """conv2d [0, 100) > convolution [1, 99) > _convolution [2, 98) > {empty [3, 4), mkldnn_convolution [5, 97) > empty [6, 7)}:
    the conv2d counts 2 x 1 x 4*3*3*3 x 6*6 = 7,776 FLOPs; convolution, _convolution and mkldnn_convolution
    run them; neither aten::empty (beside the work) does."""
    trace = GpuTrace()
    dims = {
        "Input Dims": [[1, 3, 8, 8], [4, 3, 3, 3], []],
        "Concrete Inputs": ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "1"],
    }
    trace.op("aten::conv2d", 0, 100, **dims)
    trace.op("aten::convolution", 1, 98)
    trace.op("aten::_convolution", 2, 96)
    trace.op("aten::empty", 3, 1)
    trace.op("aten::mkldnn_convolution", 5, 92)
    trace.op("aten::empty", 6, 1)
    model = load_model(trace.write(tmp_path / "conv.json"))
    executed = {s.name: s.executed_flops for s in model.operators()}
    assert executed == {
        "aten::conv2d": 7776,
        "aten::convolution": 7776,
        "aten::_convolution": 7776,
        "aten::mkldnn_convolution": 7776,
        "aten::empty": 0,
    }
    assert model.step_flops == 7776  # counted once, at the outermost call with a formula


def test_of_equally_heavy_children_the_first_started_runs_the_flops(tmp_path) -> None:
    """mm [0, 100) > {aten::a [0, 50), aten::b [50, 100)}: equal totals (50 each, at least half of 100),
    so the first started runs the 2 x 2*3*4 = 48 FLOPs; mm [200, 300) > aten::c [210, 259): 49 < half
    of 100, so aten::c runs none (the work is beside it)."""
    trace = GpuTrace()
    trace.op("aten::mm", 0, 100, **{"Input Dims": [[2, 3], [3, 4]]})
    trace.op("aten::a", 0, 50)
    trace.op("aten::b", 50, 50)
    trace.op("aten::mm", 200, 100, **{"Input Dims": [[2, 3], [3, 4]]})
    trace.op("aten::c", 210, 49)
    model = load_model(trace.write(tmp_path / "ties.json"))
    executed = {s.name: s.executed_flops for s in model.operators()}
    assert executed == {"aten::mm": 96, "aten::a": 48, "aten::b": 0, "aten::c": 0}
