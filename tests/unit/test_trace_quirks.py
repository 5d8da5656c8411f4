"""One test per trace-format quirk that trace/ settles (docs/trace-format.md)."""

from __future__ import annotations

import json

from tuiprof.analysis import load_model
from tuiprof.trace import load_trace


def _memory(ts: int, size: int, **args) -> dict:
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "s": "t",
        "args": {"Bytes": size, "Addr": ts, **args},
    }


def _op(name: str, ts: int, dur: int, **args) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _write(tmp_path, events: list[dict], **header) -> str:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({**header, "traceEvents": events}))
    return str(path)


def test_hip_memory_is_device_memory(tmp_path) -> None:
    """ROCm reports its GPUs as Device Type 6 (HIP), not 1 (CUDA)."""
    events = [
        _op("aten::empty", 100, 10),
        _memory(105, 512, **{"Device Type": 6, "Device Id": 0, "Total Allocated": 512, "Total Reserved": 2048}),
    ]
    model = load_model(_write(tmp_path, events))
    row = next(s for s in model.operators() if s.name == "aten::empty")
    assert (row.self_device_mem_bytes, row.self_cpu_mem_bytes) == (512, 0)
    assert [(t.device, t.peak_bytes, t.reserved.tolist()) for t in model.memory] == [("HIP:0", 512, [2048])]


def test_files_without_totals_chart_the_running_sum(tmp_path) -> None:
    """Files before 2021 have no Total Allocated: the curve is the running sum of Bytes, reserved unknown."""
    events = [
        _memory(100, 1000, **{"Device Type": 0}),
        _memory(200, 500, **{"Device Type": 0}),
        _memory(300, -1000, **{"Device Type": 0}),
    ]
    (timeline,) = load_model(_write(tmp_path, events)).memory
    assert timeline.allocated.tolist() == [1000, 1500, 500] and timeline.reserved.tolist() == []
    assert (timeline.peak_bytes, timeline.peak_ns, timeline.allocations, timeline.frees) == (1500, 200_000, 2, 1)


def test_records_without_a_device_type_chart_as_cpu_but_count_for_no_operator(tmp_path) -> None:
    events = [_op("aten::empty", 100, 10), _memory(105, 64)]
    model = load_model(_write(tmp_path, events))
    row = next(s for s in model.operators() if s.name == "aten::empty")
    assert (row.self_cpu_mem_bytes, row.self_device_mem_bytes) == (0, 0)
    assert [t.device for t in model.memory] == ["CPU"]


def test_switches_come_from_the_events_when_the_header_has_none(tmp_path) -> None:
    """Files before 2022 write no record_shapes/profile_memory flags: the events show what was recorded."""
    with_dims = [_op("aten::mm", 100, 10, **{"Input Dims": [[2, 2], [2, 2]]}), _memory(105, 64, **{"Device Type": 0})]
    store = load_trace(_write(tmp_path, with_dims))
    assert store.recorded_shapes and store.recorded_memory and not store.recorded_stacks
    bare = load_trace(_write(tmp_path, [_op("aten::mm", 100, 10)]))
    assert not bare.recorded_shapes and not bare.recorded_memory
    flagged = load_trace(_write(tmp_path, [_op("aten::mm", 100, 10)], record_shapes=1, with_stack=1))
    assert flagged.recorded_shapes and flagged.recorded_stacks
