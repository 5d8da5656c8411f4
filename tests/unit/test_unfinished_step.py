"""Dropping the unfinished step from a trace, on a synthetic GPU trace whose answer is known by construction.

Step 1 finished; step 2 was cut.  Step 1's kernel runs on the device after step 2 began on the host
(the device runs behind): it stays.  Step 2's kernel, device annotation and flow go with its launch.
Ids collide across namespaces on purpose: step 1's kernel has External id 8, step 2's launch has
correlation 8; only a correlation removes a kernel.
"""

from __future__ import annotations

from tuiprof.capture.unfinished_step import drop_unfinished_step

HOST = 4242


def _x(name: str, ts: float, dur: float, pid: int = HOST, **args) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": pid, "tid": 1, "ts": ts, "dur": dur, "args": args}


def _trace() -> list[dict]:
    return [
        {"ph": "M", "name": "process_name", "pid": HOST, "args": {"name": "python"}},
        {
            "ph": "X",
            "cat": "Trace",
            "name": "PyTorch Profiler (0)",
            "pid": "Spans",
            "tid": "PyTorch Profiler",
            "ts": 0,
            "dur": 300,
        },
        _x("<module>: train.py", -10, 500),  # an outer Python frame: began before, kept
        _x("ProfilerStep#1", 0, 100, **{"External id": 20}),
        _x("aten::mm", 40, 20, **{"External id": 8}),
        _x("cudaLaunchKernel", 50, 5, **{"External id": 9, "correlation": 7}),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": HOST, "tid": 1, "ts": 50},
        _x("ProfilerStep#2", 100, 50, **{"External id": 21}),
        _x("aten::linear", 105, 10, **{"External id": 30}),
        _x("cudaLaunchKernel", 110, 5, **{"External id": 31, "correlation": 8}),
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 8, "pid": HOST, "tid": 1, "ts": 110},
        {
            "ph": "i",
            "cat": "cpu_instant_event",
            "name": "[memory]",
            "pid": HOST,
            "tid": 1,
            "ts": 112,
            "s": "t",
            "args": {"Bytes": 64},
        },
        _x("kernel of step 1", 120, 30, pid=0, **{"External id": 8, "correlation": 7}),
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 7, "pid": 0, "tid": 7, "ts": 120, "bp": "e"},
        _x("ProfilerStep#1", 10, 160, pid=0, **{"External id": 20}),  # gpu_user_annotation of step 1
        _x("kernel of step 2", 200, 30, pid=0, **{"External id": 30, "correlation": 8}),
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 8, "pid": 0, "tid": 7, "ts": 200, "bp": "e"},
        _x("ProfilerStep#2", 200, 30, pid=0, **{"External id": 21}),  # gpu_user_annotation of step 2
    ]


def _names(events: list[dict]) -> list[tuple]:
    return [(e["name"], e.get("pid"), e.get("id")) for e in events]


def test_the_cut_step_goes_with_its_device_work_and_nothing_else() -> None:
    kept = drop_unfinished_step(_trace(), 2, HOST)
    assert _names(kept) == [
        ("process_name", HOST, None),
        ("PyTorch Profiler (0)", "Spans", None),
        ("<module>: train.py", HOST, None),
        ("ProfilerStep#1", HOST, None),
        ("aten::mm", HOST, None),
        ("cudaLaunchKernel", HOST, None),
        ("ac2g", HOST, 7),
        ("kernel of step 1", 0, None),
        ("ac2g", 0, 7),
        ("ProfilerStep#1", 0, None),
    ]


def test_a_step_not_in_the_trace_changes_nothing() -> None:
    assert drop_unfinished_step(_trace(), 3, HOST) is None
    assert drop_unfinished_step(_trace(), 2, HOST + 1) is None  # another process's step
