"""Synthetic GPU traces for tests, written the way Kineto writes them.

No GPU is needed to test GPU logic: :class:`GpuTrace` writes operators,
runtime launches, kernels on several streams, memcpys, memsets, NCCL kernels,
``ac2g`` flows and ``ProfilerStep#N`` spans, with times given in
microseconds relative to an epoch base (~1.7e15 us, written with three
decimals, as some writers do: the exact-timestamp path is always exercised).

:func:`lagging_two_steps` is the scenario the GPU tests read; its expected
tables are worked out by hand in its docstring.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path

EPOCH_US = 1_700_000_000_000_000  # absolute epoch microseconds: a float64 can't hold .001 here
PID = 4242
MAIN_THREAD = 4242


@dataclass
class GpuTrace:
    """A trace document built event by event; times are us after :data:`EPOCH_US`."""

    events: list[dict] = field(default_factory=list)
    fake_external_ids: bool = False  # launches and device events carry External id == correlation
    members: dict = field(default_factory=dict)  # top-level members written after traceEvents ("tuiprofLive")
    _next_external: int = 1
    _next_correlation: int = 1001

    def _complete(self, cat: str, name: str, ts: float, dur: float, tid: int | str, pid: int, args: dict) -> dict:
        event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": args}
        self.events.append(event)
        return event

    def op(
        self, name: str, ts: float, dur: float, tid: int = MAIN_THREAD, external_id: int | None = None, **args
    ) -> int:
        """A ``cpu_op``; returns its External id."""
        if external_id is None:
            external_id, self._next_external = self._next_external, self._next_external + 1
        self._complete("cpu_op", name, ts, dur, tid, PID, {"External id": external_id, **args})
        return external_id

    def step(self, number: int, ts: float, dur: float) -> None:
        self._complete(
            "user_annotation",
            f"ProfilerStep#{number}",
            ts,
            dur,
            MAIN_THREAD,
            PID,
            {"External id": self._take_external()},
        )

    def gpu_annotation(self, name: str, ts: float, dur: float, stream: int = 0) -> None:
        """A ``gpu_user_annotation`` (the device-side span of a record_function, ROCm and CUDA)."""
        self._complete("gpu_user_annotation", name, ts, dur, stream, 0, {"External id": self._take_external()})

    def _take_external(self) -> int:
        external_id, self._next_external = self._next_external, self._next_external + 1
        return external_id

    def launch(
        self,
        op_external_id: int,
        name: str,
        cpu_ts: float,
        cpu_dur: float,
        gpu_ts: float,
        gpu_dur: float,
        *,
        stream: int = 7,
        kind: str = "kernel",
        runtime: str = "cudaLaunchKernel",
        runtime_category: str = "cuda_runtime",
        grid: tuple[int, int, int] | None = (1, 1, 1),
        block: tuple[int, int, int] | None = (1, 1, 1),
        occupancy: float | None = None,
        tid: int = MAIN_THREAD,
        device_external_id: int | None = None,
    ) -> int:
        """A runtime call on ``tid`` launching one device event (kind: kernel, gpu_memcpy,
        gpu_memset) and its ``ac2g`` flow; returns the correlation id.  ``runtime_category``:
        Kineto writes driver calls (``cuLaunchKernel``, Triton's launches) as ``cuda_driver``."""
        correlation, self._next_correlation = self._next_correlation, self._next_correlation + 1
        launch_external = correlation if self.fake_external_ids else op_external_id
        self._complete(
            runtime_category,
            runtime,
            cpu_ts,
            cpu_dur,
            tid,
            PID,
            {"External id": launch_external, "correlation": correlation},
        )
        args: dict = {
            "External id": device_external_id if device_external_id is not None else launch_external,
            "correlation": correlation,
            "device": 0,
            "stream": stream,
        }
        if kind == "kernel":
            if grid is not None:
                args["grid"] = list(grid)
            if block is not None:
                args["block"] = list(block)
            if occupancy is not None:
                args["est. achieved occupancy %"] = occupancy
        self._complete(kind, name, gpu_ts, gpu_dur, stream, 0, args)
        self.events.append(
            {
                "ph": "s",
                "cat": "ac2g",
                "id": correlation,
                "pid": PID,
                "tid": tid,
                "ts": cpu_ts,
                "name": "ac2g",
                "bp": "e",
            }
        )
        self.events.append(
            {
                "ph": "f",
                "cat": "ac2g",
                "id": correlation,
                "pid": 0,
                "tid": stream,
                "ts": gpu_ts,
                "name": "ac2g",
                "bp": "e",
            }
        )
        return correlation

    def graph_launch(
        self,
        op_external_id: int,
        cpu_ts: float,
        cpu_dur: float,
        kernels: list[tuple[str, float, float]],
        *,
        stream: int = 7,
        runtime: str = "cudaGraphLaunch",
        tid: int = MAIN_THREAD,
    ) -> int:
        """A CUDA-graph replay: one ``cudaGraphLaunch`` runtime call and the kernels it ran,
        ``(name, device ts, device dur)`` each, all carrying the launch's correlation id
        (as CUPTI reports a graph's kernels); returns the correlation id."""
        correlation, self._next_correlation = self._next_correlation, self._next_correlation + 1
        self._complete(
            "cuda_runtime",
            runtime,
            cpu_ts,
            cpu_dur,
            tid,
            PID,
            {"External id": op_external_id, "correlation": correlation},
        )
        for name, ts, dur in kernels:
            self._complete(
                "kernel",
                name,
                ts,
                dur,
                stream,
                0,
                {"External id": op_external_id, "correlation": correlation, "device": 0, "stream": stream},
            )
        return correlation

    def module(self, name: str, ts: float, dur: float, parent: int | None = None) -> int:
        """An ``nn.Module: <name>`` python frame (with_stack) under the frame ``parent``
        (a Python id, None at the top); returns its Python id."""
        python_id = self._take_external()
        self._complete(
            "python_function",
            f"nn.Module: {name}",
            ts,
            dur,
            MAIN_THREAD,
            PID,
            {"Python id": python_id, "Python parent id": parent},
        )
        return python_id

    def memory(self, ts: float, size: int, total: int, device_type: int = 1, addr: int = 4096) -> None:
        """A ``[memory]`` record on the main thread: ``size`` bytes (negative: freed), ``total`` allocated
        after it, at ``addr`` (an allocation and its free share it)."""
        self.events.append(
            {
                "ph": "i",
                "s": "t",
                "name": "[memory]",
                "pid": PID,
                "tid": MAIN_THREAD,
                "ts": ts,
                "args": {
                    "Bytes": size,
                    "Total Allocated": total,
                    "Total Reserved": 1 << 20,
                    "Device Type": device_type,
                    "Device Id": 0,
                    "Addr": addr,
                },
            }
        )

    def text(self) -> str:
        """The JSON document; ``ts`` as exact decimals with three places (json.dumps would
        write the nearest float64, which at epoch magnitudes is not the decimal meant)."""
        events = [{**event, "ts": f"@ts@{Decimal(EPOCH_US) + Decimal(str(event['ts'])):.3f}@"} for event in self.events]
        metadata = [{"ph": "M", "name": "process_name", "pid": 0, "tid": 0, "args": {"name": "GPU 0"}}]
        document = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "Synthetic GPU", "totalGlobalMem": 1 << 34, "numSms": 132}],
            "traceEvents": metadata + events,
            **self.members,
        }
        return re.sub(r'"@ts@([-0-9.]+)@"', r"\1", json.dumps(document))

    def write(self, path: Path) -> Path:
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "wt") as handle:
            handle.write(self.text())
        return path


def lagging_two_steps(trace: GpuTrace | None = None) -> GpuTrace:
    """Two steps on one thread; the device lags the host and the steps' device windows overlap.

    Times in us (CPU on thread 4242, device streams 7, 8, 9)::

        ProfilerStep#1 [0, 100)                    ProfilerStep#2 [100, 200)
          aten::addmm   [10, 30)  launch [12, 17)  -> gemm_kernel      s7 [40, 80)   grid 128x1x1 block 256x1x1 occ 50
          aten::copy_   [35, 50)  memcpy [36, 40)  -> Memcpy HtoD      s7 [85, 95)
          aten::zero_   [55, 60)  memset [56, 58)  -> Memset (Device)  s8 [96, 98)
          nccl:all_reduce [70, 90) launch [72, 74) -> ncclKernel_AllReduce s9 [110, 150)  (runs in step 2's time)
          aten::mul     [120, 125) launch [121, 123) -> elementwise_mul s7 [160, 170)  grid 64x1x1 block 128x1x1 occ 25
          aten::add     [130, 135) launch [131, 133) -> elementwise_add s8 [140, 145)  (no grid/block/occupancy)

    Device windows: step 1 = CPU start 0 to the end of its last device work
    (150) -> [0, 150); step 2 = [100, 200) (its work ends at 170).
    Step 1: busy = 40 + 10 + 2 + 40 = 92, idle 58; kernels (gemm, add at
    [140,145)) 45; memcpy 10; memset 2; communication 40.
    Step 2: the NCCL kernel [110, 150) covers add [140, 145); busy = 40 + 10 = 50,
    idle 50; kernels (add, mul) 15; communication 40; memcpy 0; memset 0.
    """
    trace = trace or GpuTrace()
    trace.step(1, 0, 100)
    trace.step(2, 100, 100)
    addmm = trace.op("aten::addmm", 10, 20)
    trace.launch(addmm, "gemm_kernel", 12, 5, 40, 40, stream=7, grid=(128, 1, 1), block=(256, 1, 1), occupancy=50.0)
    copy = trace.op("aten::copy_", 35, 15)
    trace.launch(
        copy, "Memcpy HtoD (Pageable -> Device)", 36, 4, 85, 10, stream=7, kind="gpu_memcpy", runtime="cudaMemcpyAsync"
    )
    zero = trace.op("aten::zero_", 55, 5)
    trace.launch(zero, "Memset (Device)", 56, 2, 96, 2, stream=8, kind="gpu_memset", runtime="cudaMemsetAsync")
    reduce = trace.op("nccl:all_reduce", 70, 20)
    trace.launch(
        reduce,
        "ncclKernel_AllReduce_RING_LL_Sum_float",
        72,
        2,
        110,
        40,
        stream=9,
        grid=(2, 1, 1),
        block=(512, 1, 1),
        occupancy=12.5,
    )
    mul = trace.op("aten::mul", 120, 5)
    trace.launch(mul, "elementwise_mul", 121, 2, 160, 10, stream=7, grid=(64, 1, 1), block=(128, 1, 1), occupancy=25.0)
    add = trace.op("aten::add", 130, 5)
    trace.launch(add, "elementwise_add", 131, 2, 140, 5, stream=8, grid=None, block=None)
    return trace


def launch_bound_step() -> GpuTrace:
    """One step [0, 100) whose only operator launches ten 1 us kernels, each launch 8 us of CPU.

    Launch calls are 80 of the 100 us of self CPU time: launch-bound."""
    trace = GpuTrace()
    trace.step(1, 0, 100)
    op = trace.op("aten::add", 5, 90)
    for i in range(10):
        trace.launch(op, "tiny_kernel", 6 + 8 * i, 8, 20 + 8 * i, 1, stream=7)
    return trace


def rocm_marker_steps() -> GpuTrace:
    """Two steps whose ``gpu_user_annotation`` is an 18 us marker placed 2.2 ms into
    the step's device work, as ROCm writes it.

    Times in us; each step launches (on thread 4242, device stream 7)::

        ProfilerStep#1 [0, 3000)     conv [100, 400)  -> conv_kernel  [150, 1500)
                                     copy [500, 600)  -> Memcpy HtoD  [1500, 1800)
                                     relu [700, 800)  -> relu_kernel  [1900, 2600)
          annotation [2350, 2368)
        ProfilerStep#2 [3000, 6000)  the same, 3000 us later

    Each step's device window is [150, 2600) (+3000 for step 2): 2450 us, with
    kernels 2050, memcpy 300 and idle 100 (1800 to 1900).  Read from the
    annotation alone, step 1's window would start at 2350 and hold 250 us.
    """
    trace = GpuTrace()
    for number, base in ((1, 0), (2, 3000)):
        trace.step(number, base, 3000)
        conv = trace.op("aten::convolution", base + 100, 300)
        trace.launch(conv, "conv_kernel", base + 110, 10, base + 150, 1350, runtime="hipLaunchKernel")
        copy = trace.op("aten::copy_", base + 500, 100)
        trace.launch(
            copy, "Memcpy HtoD", base + 510, 10, base + 1500, 300, kind="gpu_memcpy", runtime="hipMemcpyWithStream"
        )
        relu = trace.op("aten::relu", base + 700, 100)
        trace.launch(relu, "relu_kernel", base + 710, 10, base + 1900, 700, runtime="hipLaunchKernel")
        trace.gpu_annotation(f"ProfilerStep#{number}", base + 2350, 18)
    return trace
