"""Issue 24 item 6: a backward operator names the modules its time is charged to.

The oracle reads the raw JSON of the shipped resnet18 sample: each
``aten::convolution_backward`` runs under an ``autograd::engine::evaluate_function``
root whose ``Sequence number`` is that of a forward operator; the innermost
``nn.Module`` frame around the forward ``aten::convolution`` with that number is the module (matched here by
times and ids in plain Python, not by the code under test).
"""

from __future__ import annotations

import gzip
import json
from collections import Counter

from tests.conftest import SAMPLES
from tests.helpers.raw_events import innermost
from tuiprof.analysis.detail import operator_detail
from tuiprof.report.details import operator_text
from tuiprof.report.views import build_call_rows


def _backward_modules() -> list[tuple[str, float]]:
    """(module name, call duration) for every ``aten::convolution_backward`` call, from the raw JSON:
    its root's sequence number -> the ``aten::convolution`` that created the node -> its module.
    (``loss.item()`` and ``detach`` calls outside the model carry the same numbers: not creators.)"""
    with gzip.open(SAMPLES / "resnet18_cpu.pt.trace.json.gz", "rt") as handle:
        events = json.load(handle)["traceEvents"]
    ops = [e for e in events if e.get("cat") == "cpu_op"]
    frames = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    roots = [e for e in ops if e["name"].startswith("autograd::engine::evaluate_function: ")]
    forward_by_sequence: dict[int, list[dict]] = {}
    for op in ops:
        sequence = op.get("args", {}).get("Sequence number")
        if sequence is not None and op["name"] == "aten::convolution":  # the op that creates ConvolutionBackward0
            forward_by_sequence.setdefault(sequence, []).append(op)
    result = []
    for call in (e for e in ops if e["name"] == "aten::convolution_backward"):
        root = innermost(call, roots)
        forward = min(forward_by_sequence[root["args"]["Sequence number"]], key=lambda e: float(e["ts"]))
        module = innermost(forward, frames)
        result.append((module["name"].removeprefix("nn.Module: "), float(call["dur"])))
    return result


def test_backward_operator_detail_names_the_modules_charged(resnet_model) -> None:
    expected = _backward_modules()
    calls = Counter(name for name, _ in expected)
    time = Counter()
    for name, duration in expected:
        time[name] += duration
    assert len(calls) == 20  # every Conv2d of resnet18
    stats = next(s for s in resnet_model.operators() if s.name == "aten::convolution_backward")
    detail = operator_detail(resnet_model, stats)
    assert detail.module_count == len(calls)
    assert [(path.rsplit("/", 1)[1], n, backward) for path, n, backward in detail.modules] == [
        (name, calls[name], True) for name, _ in time.most_common(len(detail.modules))
    ]
    costliest = time.most_common(1)[0][0]
    line = next(line for line in operator_text(resnet_model, stats).plain.splitlines() if line.startswith("in: "))
    assert "(outside modules)" not in line and f"/{costliest} ({calls[costliest]} bwd)" in line


def test_backward_calls_drill_down_names_the_modules_charged(resnet_model) -> None:
    expected = Counter(f"{name} (backward)" for name, _ in _backward_modules())
    stats = next(s for s in resnet_model.operators() if s.name == "aten::convolution_backward")
    assert Counter(row["module"] for row in build_call_rows(resnet_model, stats.rows)) == expected


def test_the_timeline_detail_names_the_module_a_call_is_charged_to(resnet_model) -> None:
    """Issue 28 item 8, one answer to "a call's module": the Timeline's detail of a call names
    the module it ran in, and for a backward call the module of its forward op, marked
    (backward), as the operator detail and the drill-down above do (it named no module)."""
    from tuiprof.analysis.timeline import build_timeline

    with gzip.open(SAMPLES / "resnet18_cpu.pt.trace.json.gz", "rt") as handle:
        events = json.load(handle)["traceEvents"]
    frames = [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]
    forward = Counter(
        innermost(e, frames)["name"].removeprefix("nn.Module: ")
        for e in events
        if e.get("cat") == "cpu_op" and e["name"] == "aten::convolution"
    )
    backward = Counter(f"{name} (backward)" for name, _ in _backward_modules())
    timeline, calls = build_timeline(resnet_model), resnet_model.calls

    def modules_named(operator: str) -> Counter:
        rows = (row for row in range(len(calls)) if calls.name(row) == operator)
        facts = (dict(timeline.detail(timeline.call_slice(row)).facts) for row in rows)
        return Counter(fact["module"].rsplit("/", 1)[1] for fact in facts)

    assert modules_named("aten::convolution") == forward
    assert modules_named("aten::convolution_backward") == backward
