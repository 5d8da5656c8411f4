"""Issue 25 item 3: every allocation live at the peak has its Python stack (the with_stack
frames enclosing it on its thread), its deepest frame of user code in the table and
``summary --view memory-allocations``, the whole stack in data formats and the detail."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tuiprof.analysis import load_model
from tuiprof.report.memory_texts import allocation_detail

MAIN, OTHER = 7, 8


def _frame(name: str, ts: int, dur: int, python_id: int, parent: int, tid: int = MAIN) -> dict:
    return {
        "ph": "X",
        "cat": "python_function",
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": {"Python id": python_id, "Python parent id": parent},
    }


def _alloc(ts: int, size: int, total: int, addr: int, tid: int = MAIN) -> dict:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "s": "t",
        "args": {
            "Bytes": size,
            "Addr": addr,
            "Total Allocated": total,
            "Total Reserved": 0,
            "Device Type": 0,
            "Device Id": -1,
        },
    }


# The stack at t=160 on MAIN, outermost first, by construction; OTHER runs a frame at the same time.
FORWARD_STACK = [
    "train.py(10): main",
    "nn.Module: Net_0",
    "torch/nn/modules/module.py(1750): _call_impl",
    "project/model.py(5): forward",
    "torch/nn/functional.py(1500): relu",
    "<built-in method relu of type object>",
]


def _trace(path):
    events = [
        _frame(FORWARD_STACK[0], 0, 1000, 1, 0),
        _frame(FORWARD_STACK[1], 100, 500, 2, 1),
        _frame(FORWARD_STACK[2], 110, 480, 3, 2),
        _frame(FORWARD_STACK[3], 120, 400, 4, 3),
        _frame(FORWARD_STACK[4], 140, 100, 5, 4),
        _frame(FORWARD_STACK[5], 150, 50, 6, 5),
        _frame("typing.py(359): inner", 300, 50, 7, 4),  # a sibling that ended before the second allocation
        _frame("other.py(1): work", 0, 1000, 8, 0, tid=OTHER),
        {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": MAIN, "ts": 155, "dur": 40, "args": {}},
        _alloc(160, 4096, 4096, 1),
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": MAIN, "ts": 700, "dur": 10, "args": {}},
        _alloc(705, 1024, 5120, 2),
    ]
    path.write_text(json.dumps({"traceEvents": events, "profile_memory": 1, "with_stack": 1}))
    return path


def test_each_allocation_live_at_the_peak_has_its_python_stack(tmp_path) -> None:
    path = _trace(tmp_path / "stacks.json")
    allocations = {a.operator: a for a in load_model(path).memory_breakdown.allocations}
    assert list(allocations["aten::relu"].stack) == FORWARD_STACK
    assert list(allocations["aten::empty"].stack) == ["train.py(10): main"]
    detail = allocation_detail(allocations["aten::relu"]).plain
    assert detail.index("project/model.py(5): forward") < detail.index(
        "<built-in method relu"
    )  # outermost first, one per line

    run = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--view", "memory-allocations", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    rows = {r["operator"]: r for r in json.loads(run.stdout)}
    assert (
        rows["aten::relu"]["code"] == "model.py(5): forward"
    )  # the deepest frame neither torch's nor a built-in, no folders
    assert rows["aten::relu"]["stack"] == " > ".join(FORWARD_STACK)
    assert rows["aten::empty"]["code"] == "train.py(10): main"
    text = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--view", "memory-allocations"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"COLUMNS": "100", "PATH": ""},
    ).stdout
    assert "model.py(5): forward" in text


def test_a_categorised_capture_gives_its_tensors_their_stacks() -> None:
    """The shipped MLP capture: activations were made in its script's forward, gradients in backward."""
    model = load_model(ROOT / "tests" / "data" / "mlp_memory_categories.pt.trace.json.gz")
    made = [a for a in model.memory_breakdown.allocations if a.operator]
    assert made and all(a.stack for a in made)
    relu = next(a for a in made if a.operator == "aten::relu")
    assert relu.stack[-1].startswith("<built-in") and "make_memory_category_trace.py(42): forward" in relu.stack
