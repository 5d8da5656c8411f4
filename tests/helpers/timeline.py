"""The Timeline's synthetic GPU trace, whose answers are worked out by hand
(tests/unit/test_timeline.py, tests/tui/test_timeline_tui.py), and the shared H100 trace."""

from __future__ import annotations

from tests.conftest import SHARED_TRACES

H100 = SHARED_TRACES / "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz"
EVIL = "aten::add_\x1b[2J"  # a name with an escape sequence: must print as text


def complete_event(cat: str, name: str, ts: int, dur: int, tid: int = 10, pid: int = 1, **args) -> dict:
    """One complete ("X") event as Kineto writes it (thread 10 of process 1 unless told)."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}


def synthetic_events() -> list[dict]:
    """One step (100-1000 us) on thread 10, a backward root on thread 11, kernels on
    streams 7 and 9 (a collective), a memcpy, and three allocator records.

    Device activity: 200-500, 500-550 (stream 7), 530-600 (stream 9), 700-720
    (memcpy): busy 200-600 and 700-720, so idle in the step is 100-200,
    600-700 and 720-1000 = 480 us."""
    gpu = {"pid": 0}
    return [
        complete_event("user_annotation", "ProfilerStep#1", 100, 900),
        complete_event("cpu_op", "aten::conv2d", 150, 200, **{"External id": 1}),
        complete_event("cpu_op", "aten::convolution", 160, 150, **{"External id": 2}),
        complete_event("cuda_runtime", "cudaLaunchKernel", 170, 10, correlation=101, **{"External id": 2}),
        complete_event("cpu_op", EVIL, 400, 100, **{"External id": 3}),
        complete_event("cuda_runtime", "cudaLaunchKernel", 410, 5, correlation=102, **{"External id": 3}),
        complete_event(
            "cpu_op", "autograd::engine::evaluate_function: AddBackward0", 520, 60, tid=11, **{"External id": 6}
        ),
        complete_event("cuda_runtime", "cudaLaunchKernel", 530, 5, tid=11, correlation=104, **{"External id": 6}),
        complete_event("user_annotation", "Optimizer.step#SGD.step", 600, 300, **{"External id": 4}),
        complete_event("cpu_op", "aten::mul_", 650, 50, **{"External id": 5}),
        complete_event("cuda_runtime", "cudaMemcpyAsync", 655, 5, correlation=103, **{"External id": 5}),
        complete_event(
            "kernel", "conv_kernel", 200, 300, tid=7, **gpu, correlation=101, stream=7, **{"External id": 2}
        ),
        complete_event("kernel", "add_kernel", 500, 50, tid=7, **gpu, correlation=102, stream=7, **{"External id": 3}),
        complete_event(
            "kernel",
            "ncclKernel_AllReduce_RING",
            530,
            70,
            tid=9,
            **gpu,
            correlation=104,
            stream=9,
            **{"External id": 6},
        ),
        complete_event(
            "gpu_memcpy",
            "Memcpy HtoD (Pageable -> Device)",
            700,
            20,
            tid=7,
            **gpu,
            correlation=103,
            stream=7,
            **{"External id": 5},
        ),
        *(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "name": "[memory]",
                "pid": 1,
                "tid": 10,
                "ts": ts,
                "s": "t",
                "args": {
                    "Bytes": size,
                    "Total Allocated": total,
                    "Total Reserved": 4096,
                    "Device Type": 1,
                    "Device Id": 0,
                },
            }
            for ts, size, total in ((150, 1000, 1000), (400, 500, 1500), (900, -1500, 0))
        ),
    ]
