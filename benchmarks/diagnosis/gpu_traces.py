"""GPU scenarios as synthetic traces: each cause built in, and its remedied twin built without it.

No GPU is needed: the traces are written the way Kineto writes them (tests/helpers/gpu_trace.py's
:class:`GpuTrace`: operators, runtime calls with correlation ids and ``ac2g`` flows, kernels
with real names on streams, ``ProfilerStep#N`` spans, ``nn.Module`` frames), and the clocks
below place every launch and kernel as a CUDA stream would: a kernel starts once it is
launched (plus the launch latency) and its stream is free.

Each remedied trace is the steady state of the fixed loop: where the host no longer waits
for the device it runs ahead until CUDA's launch queue is full, and from then on each step
takes as long as the device's work, the host's wait sitting in a launch call.  The mean
step of the remedied trace is the measured value the finding's prediction is scored against.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.helpers.gpu_trace import MAIN_THREAD, PID, GpuTrace

STEPS = 6  # ProfilerStep#2..#7: a schedule's active steps
COMPUTE, COPY_STREAM = 7, 8  # the default stream and a side stream
LAUNCH_LATENCY_US = 4.0  # launch call start to kernel start on an idle stream

GEMM = "ampere_sgemm_128x64_tn"
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
    "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)"
)
MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::MulScalarFunctor<float, float>, "
    "at::detail::Array<char*, 2> >(int, at::native::MulScalarFunctor<float, float>, at::detail::Array<char*, 2>)"
)
RELU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "clamp_min_scalar_kernel_impl(at::TensorIteratorBase&, c10::Scalar)::{lambda()#1}::operator()() const::"
    "{lambda()#8}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, "
    "at::native::(anonymous namespace)::clamp_min_scalar_kernel_impl(at::TensorIteratorBase&, c10::Scalar)::"
    "{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(float)#1}, "
    "at::detail::Array<char*, 2>)"
)
PAGEABLE_HTOD = "Memcpy HtoD (Pageable -> Device)"
PINNED_HTOD = "Memcpy HtoD (Pinned -> Device)"
DTOH = "Memcpy DtoH (Device -> Pageable)"


@dataclass
class Clocks:
    """A trace being written step by step: the host's time on the main thread and when each
    stream is next free (us after the trace's epoch)."""

    trace: GpuTrace = field(default_factory=GpuTrace)
    host: float = 0.0
    free: dict[int, float] = field(default_factory=lambda: {COMPUTE: 0.0, COPY_STREAM: 0.0})
    _python_id: int = 1_000_000

    def kernel_op(
        self,
        op: str,
        kernel: str,
        cpu_us: float,
        launch_us: float,
        gpu_us: float,
        *,
        stream: int = COMPUTE,
        kind: str = "kernel",
        runtime: str = "cudaLaunchKernel",
        wait_us: float = 0.0,
        **args,
    ) -> float:
        """``op`` on the host (``cpu_us``, its launch call inside it, ``wait_us`` longer when the
        launch waits for a slot in a full queue) launching one ``gpu_us`` device event; returns
        when that event ends."""
        start = self.host
        launch_at = start + 2.0
        external = self.trace.op(op, start, cpu_us + wait_us, **args)
        begin = max(self.free[stream], launch_at + LAUNCH_LATENCY_US)
        grid, block = ((1, 1, 1), (128, 1, 1)) if kind == "kernel" else (None, None)
        self.trace.launch(
            external,
            kernel,
            launch_at,
            launch_us + wait_us,
            begin,
            gpu_us,
            stream=stream,
            kind=kind,
            runtime=runtime,
            grid=grid,
            block=block,
        )
        self.free[stream] = begin + gpu_us
        self.host = start + cpu_us + wait_us
        return self.free[stream]

    def python_frame(self, name: str, start: float, end: float, parent: int | None = None) -> int:
        """A ``python_function`` frame (with_stack), e.g. ``train.py(41): train_step``."""
        self._python_id += 1
        self.trace.events.append(
            {
                "ph": "X",
                "cat": "python_function",
                "name": name,
                "pid": PID,
                "tid": MAIN_THREAD,
                "ts": start,
                "dur": end - start,
                "args": {"Python id": self._python_id, "Python parent id": parent},
            }
        )
        return self._python_id

    def steps(self, one_step: Callable[[Clocks, int], None], backlog_us: float = 0.0) -> GpuTrace:
        """STEPS steps of ``one_step`` (which moves the host clock), each in its ProfilerStep span.
        ``backlog_us``: device work launched before the trace (the profiler starts mid-run), still
        running when it begins: the steady state's (the device's step less the host's), so that
        the first step is like the others."""
        self.free[COMPUTE] = self.host + backlog_us
        for number in range(2, 2 + STEPS):
            start = self.host
            one_step(self, number)
            self.trace.step(number, start, self.host - start)
            self.host += 5.0  # the profiler's step() between two steps
        return self.trace


def forward(clocks: Clocks, layers: int, gemm_us: float, relu_us: float, cpu_us: float) -> None:
    """``layers`` Linear+ReLU pairs inside an ``nn.Module: Net_0`` frame."""
    start = clocks.host
    clocks.host += 3.0
    for _ in range(layers):
        clocks.kernel_op("aten::addmm", GEMM, cpu_us, 6.0, gemm_us)
        clocks.kernel_op("aten::clamp_min", RELU, cpu_us, 6.0, relu_us)
    clocks.trace.module("Net_0", start, clocks.host - start + 2.0)
    clocks.host += 3.0


def launch_bound(remedied: bool) -> GpuTrace:
    """Injected: each step is 300 tiny elementwise ops (an unfused optimizer over many small
    tensors), 12 us of host time each around a 7 us cudaLaunchKernel, for a 2.5 us kernel:
    the host takes 3.6 ms a step, the device is busy 0.75 ms of it.

    Remedied (CUDA graphs, or torch.compile's fused kernels): one cudaGraphLaunch replays the
    same 300 kernels back to back; the step is the device's 0.75 ms plus the 0.3 us between
    kernels, the host waiting in the graph launch for the device."""

    def step(clocks: Clocks, number: int) -> None:
        if remedied:
            start = clocks.host
            begin = max(clocks.free[COMPUTE], start + 2.0 + LAUNCH_LATENCY_US)
            kernels, at = [], begin
            for i in range(300):
                kernels.append((ADD if i % 2 else MUL, at, 2.5))
                at += 2.8
            external = clocks.trace.op("Optimizer.step#SGD.step", start, at - start)
            clocks.trace.graph_launch(external, start + 2.0, at - start - 4.0, kernels, stream=COMPUTE)
            clocks.free[COMPUTE] = at
            clocks.host = at
            return
        for i in range(300):
            clocks.kernel_op("aten::add_" if i % 2 else "aten::mul_", ADD if i % 2 else MUL, 12.0, 7.0, 2.5)

    return Clocks().steps(step)


def host_sync(remedied: bool) -> GpuTrace:
    """Injected: after a 20-layer forward (2.3 ms of device work launched in 0.48 ms),
    ``loss.item()`` (train.py line 52, in ``log_loss``) waits for the device
    (cudaMemcpyAsync DtoH, then cudaStreamSynchronize), then 1.2 ms of Python (logging)
    runs with the device idle.

    Remedied (no .item() in the loop; the loss read every N steps): the host's 1.7 ms of work
    overlap the device's 2.3 ms, which set the step; the host waits in its first launch."""
    clocks = Clocks()
    script = clocks.python_frame("train.py(40): <module>", 0.0, 0.0)  # its span is set once the steps are written
    frame = clocks.trace.events[-1]

    def step(clocks: Clocks, number: int) -> None:
        if remedied:
            wait = max(0.0, clocks.free[COMPUTE] - clocks.host - LAUNCH_LATENCY_US - 2.0)
            clocks.kernel_op("aten::addmm", GEMM, 12.0, 6.0, 95.0, wait_us=wait)
            forward(clocks, 20, 95.0, 20.0, 12.0)
        else:
            forward(clocks, 20, 95.0, 20.0, 12.0)
            start, done = clocks.host, clocks.free[COMPUTE]
            clocks.python_frame("train.py(52): log_loss", start, done + 22.0, script)
            item = clocks.trace.op("aten::item", start + 1.0, done - start + 20.0)
            clocks.trace.op("aten::_local_scalar_dense", start + 2.0, done - start + 18.0)
            clocks.trace.launch(
                item,
                DTOH,
                start + 3.0,
                done - start + 8.0,
                done + 1.0,
                1.5,
                stream=COMPUTE,
                kind="gpu_memcpy",
                runtime="cudaMemcpyAsync",
            )
            clocks.trace.op("cudaStreamSynchronize", done + 12.0, 3.0)
            clocks.free[COMPUTE] = done + 2.5
            clocks.host = done + 22.0
        clocks.host += 1200.0  # Python between steps: logging, metrics, no operator

    trace = clocks.steps(step, backlog_us=698.0 if remedied else 0.0)  # 2390 - 1692 us
    frame["dur"] = clocks.host
    return trace


def exposed_copy(remedied: bool) -> GpuTrace:
    """Injected: each step copies its 18.4 MB batch from pageable memory (``.to("cuda")``):
    cudaMemcpyAsync blocks the host while the copy waits for the stream and runs (1.94 ms
    at 9.9 GB/s, as pageable copies measure), then cudaStreamSynchronize; the 25 kernels of
    the step (2.5 ms) start only after it: the copy is exposed.

    Remedied (DataLoader(pin_memory=True) and ``.to(device, non_blocking=True)``, the next
    batch copied on a side stream): the pinned copy (0.77 ms at 24 GB/s) runs on stream 8
    during the step's compute; the step is the device's 2.5 ms of kernels."""
    batch_bytes = 19_267_584
    pageable_us, pinned_us = 1940.0, 770.0

    def step(clocks: Clocks, number: int) -> None:
        start = clocks.host
        if remedied:
            copy = clocks.trace.op("aten::copy_", start, 12.0)
            begin = max(clocks.free[COPY_STREAM], start + 2.0 + LAUNCH_LATENCY_US)
            clocks.trace.launch(
                copy,
                PINNED_HTOD,
                start + 2.0,
                8.0,
                begin,
                pinned_us,
                stream=COPY_STREAM,
                kind="gpu_memcpy",
                runtime="cudaMemcpyAsync",
            )
            clocks.free[COPY_STREAM] = begin + pinned_us
            clocks.host = start + 12.0
            wait = max(0.0, clocks.free[COMPUTE] - clocks.host - LAUNCH_LATENCY_US - 2.0)
            clocks.kernel_op("aten::addmm", GEMM, 12.0, 6.0, 100.0, wait_us=wait)
        else:
            begin = max(clocks.free[COMPUTE], start + 4.0 + LAUNCH_LATENCY_US)
            end = begin + pageable_us  # the host is blocked until the pageable copy is done
            clocks.trace.op("aten::to", start, end + 10.0 - start)
            copy = clocks.trace.op("aten::copy_", start + 1.0, end + 8.0 - start)
            correlation = clocks.trace.launch(
                copy,
                PAGEABLE_HTOD,
                start + 4.0,
                end - start - 3.0,
                begin,
                pageable_us,
                stream=COMPUTE,
                kind="gpu_memcpy",
                runtime="cudaMemcpyAsync",
            )
            memcpy = next(
                e for e in clocks.trace.events if e["cat"] == "gpu_memcpy" and e["args"]["correlation"] == correlation
            )
            memcpy["args"].update({"bytes": batch_bytes, "memory bandwidth (GB/s)": batch_bytes / pageable_us / 1000})
            clocks.trace.op("cudaStreamSynchronize", end + 2.0, 4.0)
            clocks.free[COMPUTE] = end
            clocks.host = end + 10.0
            clocks.kernel_op("aten::addmm", GEMM, 12.0, 6.0, 100.0)
        for _ in range(24):
            clocks.kernel_op("aten::addmm", GEMM, 12.0, 6.0, 100.0)

    return Clocks().steps(step, backlog_us=2201.0)  # 2500 us less the 299 us that launched it


BUILDERS: dict[str, Callable[[bool], GpuTrace]] = {
    "launch-bound": launch_bound,
    "host-sync": host_sync,
    "exposed-copy": exposed_copy,
}


def write_pair(builder: str, folder: Path) -> tuple[Path, Path]:
    """The injected and remedied traces of ``builder`` in ``folder``."""
    build = BUILDERS[builder]
    injected = build(False).write(folder / f"{builder}.pt.trace.json.gz")
    remedied = build(True).write(folder / f"{builder}-remedied.pt.trace.json.gz")
    return injected, remedied
