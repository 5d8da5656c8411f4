"""The detail pane's "% of parent" counts only the calls under that parent."""

from __future__ import annotations

from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.analysis.detail import operator_detail


def test_share_of_parent_counts_only_the_calls_under_it(tmp_path) -> None:
    """Three 10 us aten::add_ calls, each in a 20 us AccumulateGrad, and two 50 us ones at the top:
    the share is 30 / 60 = 50 %, not all add_ time over the parents' (130 / 60 = 217 %)."""
    trace = GpuTrace()
    for start in (0, 100, 200):
        trace.op("torch::autograd::AccumulateGrad", start, 20)
        trace.op("aten::add_", start + 5, 10)
    trace.op("aten::add_", 300, 50)
    trace.op("aten::add_", 400, 50)
    model = load_model(trace.write(tmp_path / "shares.json"))
    stats = next(s for s in model.operators() if s.name == "aten::add_")
    detail = operator_detail(model, stats)
    assert detail.parents == [("torch::autograd::AccumulateGrad", 3)]
    assert detail.share_of_parent_pct == 50.0
