"""Allocations inside no operator form torch's ``[memory]`` row."""

from __future__ import annotations

import json

from tests.helpers.raw_events import cpu_memory_event
from tuiprof.analysis import load_model


def test_allocations_outside_every_operator_are_the_memory_row(tmp_path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 100, "dur": 10, "args": {}},
        cpu_memory_event(105, 64, 64, addr=1),
        cpu_memory_event(200, 4096, 4160, addr=2),
    ]
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"traceEvents": events, "profile_memory": 1}))
    rows = {s.name: s for s in load_model(path).operators()}
    assert rows["aten::empty"].self_cpu_mem_bytes == 64
    memory = rows["[memory]"]
    assert (memory.calls, memory.self_cpu_mem_bytes, memory.cpu_mem_bytes, memory.self_cpu_us, memory.flops) == (
        1,
        4096,
        4096,
        0,
        0,
    )
