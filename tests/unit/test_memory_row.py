"""Allocations inside no operator form torch's ``[memory]`` row."""

from __future__ import annotations

import json

from tuiprof.analysis import load_model


def test_allocations_outside_every_operator_are_the_memory_row(tmp_path) -> None:
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 100, "dur": 10, "args": {}},
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 105,
            "s": "t",
            "args": {
                "Bytes": 64,
                "Addr": 1,
                "Total Allocated": 64,
                "Total Reserved": 0,
                "Device Type": 0,
                "Device Id": -1,
            },
        },
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": 1,
            "tid": 1,
            "ts": 200,
            "s": "t",
            "args": {
                "Bytes": 4096,
                "Addr": 2,
                "Total Allocated": 4160,
                "Total Reserved": 0,
                "Device Type": 0,
                "Device Id": -1,
            },
        },
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
