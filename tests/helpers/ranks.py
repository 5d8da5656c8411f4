"""Synthetic multi-rank runs as Kineto writes them (tests/unit/test_ranks.py's hand-computed
answers; the sidecar, parallel-analysis and straggler tests build on them)."""

from __future__ import annotations

import json
from pathlib import Path

COMM_STREAM, COMPUTE_STREAMS = 20, (7, 8)


class TraceBuilder:
    """A GPU trace as Kineto writes it: a step, launches with correlations, kernels."""

    def __init__(self, rank: int, world_size: int, step_us: tuple[int, int] = (0, 20_000)) -> None:
        self.rank, self.world_size = rank, world_size
        self.events: list[dict] = [
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "ProfilerStep#1",
                "pid": 1,
                "tid": 1,
                "ts": step_us[0],
                "dur": step_us[1] - step_us[0],
            }
        ]
        self.next_id = 100

    def _launch(self, at: int, kernel: str, stream: int, start: int, end: int, parents: list[dict]) -> None:
        correlation = self.next_id = self.next_id + 1
        depth = 0
        for parent in parents:  # nested CPU calls around the launch, each inside the previous
            depth += 1
            self.next_id += 1
            args = {"External id": self.next_id, **parent.get("args", {})}
            self.events.append(
                {"ph": "X", "pid": 1, "tid": 1, "ts": at + depth, "dur": 20 - 2 * depth, **parent, "args": args}
            )
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": at + depth + 1,
                "dur": 2,
                "args": {"correlation": correlation},
            }
        )
        self.events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": kernel,
                "pid": 0,
                "tid": stream,
                "ts": start,
                "dur": end - start,
                "args": {"correlation": correlation, "stream": stream, "device": 0},
            }
        )

    def compute(self, start: int, end: int, stream: int = COMPUTE_STREAMS[0], at: int = 100) -> None:
        self._launch(at, "void gemm_kernel<float>()", stream, start, end, [{"cat": "cpu_op", "name": "aten::mm"}])

    def all_reduce(self, start: int, end: int, nelems: int = 262144, at: int = 200) -> None:
        args = {
            "Collective name": "allreduce",
            "Process Group Name": "0",
            "In msg nelems": nelems,
            "Out msg nelems": nelems,
            "Group size": self.world_size,
            "dtype": "Float",
        }
        self._launch(
            at,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
            COMM_STREAM,
            start,
            end,
            [
                {"cat": "cpu_op", "name": "c10d::allreduce_"},
                {"cat": "cpu_op", "name": "record_param_comms", "args": args},
                {"cat": "user_annotation", "name": "nccl:all_reduce"},
            ],
        )

    def data_loading(self, start: int, end: int) -> None:
        self.events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
                "pid": 1,
                "tid": 1,
                "ts": start,
                "dur": end - start,
            }
        )

    def write(self, directory: Path, name: str | None = None) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / (name or f"host_{self.rank}.{1700000000000 + self.rank}.pt.trace.json")
        document = {
            "schemaVersion": 1,
            "distributedInfo": {"backend": "nccl", "rank": self.rank, "world_size": self.world_size},
            "deviceProperties": [{"id": 0, "name": "Test GPU"}],
            "traceEvents": self.events,
        }
        path.write_text(json.dumps(document))
        return path


def two_rank_run(tmp_path: Path) -> Path:
    """Rank 1 loads data 5 ms longer and enters the all-reduce 5 ms late; rank 0 waits for it."""
    for rank in (0, 1):
        builder = TraceBuilder(rank, 2)
        builder.data_loading(0, 1000 + 5000 * rank)
        builder.compute(1000 + 5000 * rank, 9000 + 1000 * rank, at=1000 + 5000 * rank)
        builder.all_reduce(10_000 + 5000 * rank, 16_000, at=9000)
        builder.write(tmp_path)
    return tmp_path
