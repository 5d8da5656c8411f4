"""Issue 35 item 3: backward time reaches a module only through real autograd events, and
the work outside every module is ``(outside modules)``, never the next step's first module.

The oracles read the raw JSON, not sequence numbers: torch writes a ``fwdbwd`` flow from
the forward op that created each autograd node to the node's backward op; the backward
op's ``autograd::engine::evaluate_function`` span is the backward time of the module the
forward op ran in (its innermost ``nn.Module`` frame).  The work outside modules is every
top-level op, on the threads where modules run, in no module frame and no
``evaluate_function`` span and holding neither, except the ``ProfilerStep`` spans.
Matched by times and thread ids in plain Python.

``tests/data/mlp_work_outside_modules.json.gz`` (scripts/make_work_outside_trace.py) runs
tensor work between ``loss.backward()`` and ``optimizer.step()`` with grad mode on: every
op of it carries the next step's first sequence number.  Charged by number, it put 680 us
in ``Linear_0``'s backward, whose autograd events took 93 us.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, SAMPLES, SHARED_TRACES
from tests.helpers.raw_events import SLACK_US, innermost, inside
from tuiprof.analysis.arrays import ancestors_of
from tuiprof.analysis.build import load_model
from tuiprof.analysis.modules import OUTSIDE_MODULES
from tuiprof.report.views import TRACE_VIEWS, ViewOptions

WORK_OUTSIDE = ROOT / "tests" / "data" / "mlp_work_outside_modules.json.gz"
ENGINE = "autograd::engine::evaluate_function: "
OPS = ("cpu_op", "user_annotation")


def _events(path: Path) -> list[dict]:
    with gzip.open(path, "rt") as handle:
        return json.load(handle)["traceEvents"]


def _frames(events: list[dict]) -> list[dict]:
    return [e for e in events if e.get("cat") == "python_function" and e["name"].startswith("nn.Module: ")]


def backward_by_module(events: list[dict]) -> dict[str, float]:
    """Module frame name -> backward us: each ``fwdbwd`` flow's evaluate_function span, in the
    module its forward op ran in (flows whose forward op ran in no module are no module's)."""
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in OPS]
    by_place = defaultdict(list)
    for op in ops:
        by_place[op["tid"], op["ts"]].append(op)
    roots = [op for op in ops if op["name"].startswith(ENGINE)]
    frames = _frames(events)
    flows = defaultdict(dict)
    for e in events:
        if e.get("cat") == "fwdbwd":
            flows[e["id"]][e["ph"]] = e
    result: Counter[str] = Counter()
    for flow in flows.values():
        forward = min(by_place[flow["s"]["tid"], flow["s"]["ts"]], key=lambda op: float(op["dur"]))
        node = by_place[flow["f"]["tid"], flow["f"]["ts"]][0]
        module = innermost(forward, frames)
        root = node if node["name"].startswith(ENGINE) else innermost(node, roots)
        if module is not None:
            result[module["name"].removeprefix("nn.Module: ")] += float(root["dur"])
    return dict(result)


def outside_calls(events: list[dict]) -> list[dict]:
    """The top-level ops outside modules and the backward (module docstring)."""
    frames = _frames(events)
    threads = {frame["tid"] for frame in frames}
    ops = [e for e in events if e.get("ph") == "X" and e.get("cat") in OPS and e["tid"] in threads]
    roots = [op for op in ops if op["name"].startswith(ENGINE)]
    module_work = frames + roots
    work = [
        op
        for op in ops
        if not op["name"].startswith("ProfilerStep#")
        and not any(inside(op, around) for around in module_work)
        and not any(inside(held, op) for held in module_work)
        and op not in roots
    ]
    return [op for op in work if not any(inside(op, around) for around in work)]


def _own_backward_us(model) -> dict[str, float]:
    """Node name -> the backward time of its own forward ops (its backward roots' totals)."""
    total = model.calls.column("total_ns")
    result: Counter[str] = Counter()
    for node in model.modules.walk():
        if node.backward_rows:
            result[node.name] += int(total[node.backward_rows].sum()) / 1000
    return dict(result)


TRACES = [
    WORK_OUTSIDE,
    SAMPLES / "resnet18_cpu.pt.trace.json.gz",  # loss.item() carries the next number too
    SAMPLES / "tiny_transformer_cpu.pt.trace.json.gz",
    SAMPLES / "ddp_gloo_2ranks" / "train_ddp_gloo.rank0.pt.trace.json.gz",  # DDP's clones after backward
    SHARED_TRACES / "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz",  # backward thread, GPU
]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_each_module_gets_the_backward_its_autograd_events_took(path: Path) -> None:
    if not path.exists():
        pytest.skip(f"{path} not present")
    events = _events(path)
    expected = backward_by_module(events)
    got = _own_backward_us(load_model(path))
    assert expected and set(got) == set(expected)
    for name, us in expected.items():
        assert got[name] == pytest.approx(us, abs=SLACK_US * 10), name


def test_work_between_backward_and_step_is_not_the_next_steps_first_module() -> None:
    model = load_model(WORK_OUTSIDE)
    linear = next(node for node in model.modules.walk() if node.name == "Linear_0")
    assert linear.backward_cpu_us == pytest.approx(backward_by_module(_events(WORK_OUTSIDE))["Linear_0"], abs=0.01)
    assert linear.backward_cpu_us < 100  # its autograd events: 92.7 us; by sequence number it was 680 us
    calls = model.calls
    charged_to_linear = {calls.name(row) for row in model.modules.operator_rows(linear).tolist()}
    assert not charged_to_linear & {"aten::linalg_vector_norm", "aten::matmul", "aten::randn"}


def test_outside_modules_holds_the_work_outside_them() -> None:
    events = _events(WORK_OUTSIDE)
    expected = outside_calls(events)
    model = load_model(WORK_OUTSIDE)
    node = model.modules.outside
    assert node is not None and node.name == OUTSIDE_MODULES
    assert node.calls == len(expected)
    assert node.cpu_total_us == pytest.approx(sum(float(op["dur"]) for op in expected), abs=SLACK_US * len(expected))
    names = Counter(op["name"] for op in expected)
    assert names["aten::matmul"] == names["aten::randn"] // 2 == 3 * 5  # three steps of five
    assert "model_forward" not in names  # the span around the model is a container
    outside = model.outside_modules
    assert Counter({op.name: op.calls for op in outside.operators}) == names
    assert [op.name for op in outside.operators] == sorted(
        names, key=lambda name: -sum(float(op["dur"]) for op in expected if op["name"] == name)
    )
    steps = [e for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")]
    steps.sort(key=lambda e: float(e["ts"]))
    per_step = [sum(float(op["dur"]) for op in expected if inside(op, step)) for step in steps]
    assert outside.step_cpu_us == pytest.approx(per_step, abs=0.01)
    assert outside.per_step_cpu_us == pytest.approx(sum(per_step) / len(steps), abs=0.01)


def test_outside_modules_is_the_modules_views_last_row_with_its_operators() -> None:
    model = load_model(WORK_OUTSIDE)
    rows = TRACE_VIEWS["modules"].build(model, ViewOptions())
    assert rows[-1]["path"] == OUTSIDE_MODULES and [r["path"] for r in rows[:-1]] == [
        node.path for node in model.modules.walk()
    ]
    operators = {stats.name for stats in model.operators(module=model.modules.outside)}
    assert {"aten::matmul", "aten::mm", "aten::linalg_vector_norm", "Optimizer.step#SGD.step"} <= operators
    assert not operators & {"aten::addmm", "autograd::engine::evaluate_function: AddmmBackward0"}
    assert model.modules.cost_us == sum(root.cost_us for root in model.modules.roots)  # module time stays modules'


def test_the_module_diff_shows_work_moved_out_of_the_model() -> None:
    from tuiprof.analysis.diff import diff_traces

    model = load_model(WORK_OUTSIDE)
    diff = diff_traces([model], [model])
    row = diff.table("modules").row(OUTSIDE_MODULES)
    assert row is not None and row.a == pytest.approx(model.modules.outside.self_cpu_us)


def _ancestors_by_walking(parent: np.ndarray, marked: np.ndarray) -> np.ndarray:
    found = np.zeros(len(parent), dtype=bool)
    for node in np.flatnonzero(marked).tolist():
        up = parent[node]
        while up >= 0:
            found[up] = True
            up = parent[up]
    return found


@pytest.mark.parametrize("seed", range(20))
def test_ancestors_of_marks_every_node_above_a_marked_one(seed: int) -> None:
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 300))
    # a random forest: each node's parent is an earlier node or none; some long chains
    parent = np.array([int(rng.integers(-1, i)) if i and rng.random() < 0.9 else -1 for i in range(size)])
    if seed % 4 == 0:
        parent = np.arange(-1, size - 1)  # one chain
    marked = rng.random(size) < rng.choice([0.01, 0.1, 0.5])
    assert np.array_equal(ancestors_of(parent, marked), _ancestors_by_walking(parent, marked))


def test_ancestors_of_a_deep_chain_takes_few_rounds() -> None:
    parent = np.arange(-1, 100_000 - 1)
    marked = np.zeros(100_000, dtype=bool)
    marked[-1] = True
    found = ancestors_of(parent, marked)
    assert found[:-1].all() and not found[-1]
