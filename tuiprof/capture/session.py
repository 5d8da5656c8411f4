"""Profile real training steps of a model with torch.profiler.

The loop is the seed's: forward inside ``record_function("model_train")``,
CrossEntropyLoss, backward, SGD(lr=0.01, momentum=0.9) step, one
``prof.step()`` per iteration under a ``schedule``.  What comes out is a
Chrome trace (the same file ``tuiprof open`` reads) plus the facts only a live
run knows (:class:`LiveFacts`), so a live capture and a file give one model.
"""

from __future__ import annotations

import gzip
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from tuiprof.analysis.live import LiveFacts, ModuleFacts
from tuiprof.capture.config import CaptureConfig, CaptureError, CaptureProgress, parse_shape
from tuiprof.capture.models import build_model, cifar10_batches, resolve_device, synthetic_batches


@dataclass
class CaptureResult:
    trace_path: Path | None  # None when interrupted before any active step
    facts: LiveFacts
    key_averages: list[dict] = field(default_factory=list)
    interrupted: bool = False
    steps_done: int = 0
    step_times_s: list[float] = field(default_factory=list)


ProgressFn = Callable[[CaptureProgress], None]


def profile_training(
    config: CaptureConfig,
    trace_path: Path,
    on_progress: ProgressFn | None = None,
    stop: threading.Event | None = None,
    want_key_averages: bool = False,
    model: nn.Module | None = None,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]] | None = None,
) -> CaptureResult:
    """Run ``config.total_steps`` training steps under the profiler.

    ``trace_path`` receives the last recorded window (``.json`` or
    ``.json.gz``).  KeyboardInterrupt or ``stop`` ends the loop early; what
    was recorded is still written.  ``model``/``batches`` let callers (and
    tests) pass their own.
    """
    started = time.perf_counter()

    def note(message: str) -> None:
        if on_progress:
            on_progress(CaptureProgress(0, config.total_steps, "setup", time.perf_counter() - started, None, message))

    device = resolve_device(config.device)
    input_shape = parse_shape(config.input_shape)
    note(f"building {config.model} on {device}")
    model = model if model is not None else build_model(config.model, config.num_classes)
    model = model.to(device)
    model.train(config.mode == "train")
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    if batches is None:
        if config.data == "cifar10":
            batches = cifar10_batches(config.data_root, config.batch_size, device)
        else:
            batches = synthetic_batches(config.batch_size, input_shape, config.num_classes, device)

    facts = LiveFacts(device=str(device))
    result = CaptureResult(trace_path=None, facts=facts)
    first_inputs, first_targets = next(batches)
    note("one unprofiled forward to name the modules")
    with _oom_as_error(config):
        facts.modules = describe_modules(model, criterion, first_inputs, first_targets)

    def on_trace_ready(prof: profile) -> None:
        write_trace(prof, trace_path)
        result.trace_path = trace_path
        if config.with_flops:
            facts.flops_by_external_id = torch_flops(prof)
        if want_key_averages:
            result.key_averages = key_average_records(prof)

    loss_value: float | None = None
    prof = make_profiler(config, device.type == "cuda", on_trace_ready)
    try:
        with _oom_as_error(config), prof:
            inputs, targets = first_inputs, first_targets
            for step in range(config.total_steps):
                if stop is not None and stop.is_set():
                    result.interrupted = True
                    break
                phase = config.phase_of(step)
                if on_progress:
                    on_progress(CaptureProgress(step, config.total_steps, phase, time.perf_counter() - started, loss_value))
                step_start = time.perf_counter()
                loss_value = _train_step(model, criterion, optimizer, inputs, targets, config.mode == "train", device)
                prof.step()
                result.step_times_s.append(time.perf_counter() - step_start)
                result.steps_done = step + 1
                inputs, targets = next(batches)
    except KeyboardInterrupt:
        result.interrupted = True
    if on_progress:
        on_progress(
            CaptureProgress(
                result.steps_done, config.total_steps, "done", time.perf_counter() - started, loss_value,
                "interrupted" if result.interrupted else "",
            )
        )
    return result


def make_profiler(config: CaptureConfig, cuda: bool, on_trace_ready: Callable[[profile], None]) -> profile:
    """torch.profiler with the config's schedule and switches (CUDA activity when asked)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    return profile(
        activities=activities,
        schedule=schedule(wait=config.wait, warmup=config.warmup, active=config.active, repeat=config.repeat),
        on_trace_ready=on_trace_ready,
        record_shapes=config.record_shapes,
        profile_memory=config.profile_memory,
        with_stack=config.with_stack,
        with_flops=config.with_flops,
    )


def _train_step(
    model: nn.Module,
    criterion: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    train: bool,
    device: torch.device,
) -> float:
    if train:
        with record_function("model_train"):
            outputs = model(inputs)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    else:
        with torch.no_grad(), record_function("model_eval"):
            outputs = model(inputs)
            loss = criterion(outputs, targets)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return float(loss.detach())


@contextmanager
def _oom_as_error(config: CaptureConfig):
    try:
        yield
    except torch.cuda.OutOfMemoryError:
        raise CaptureError(
            config.model, f"CUDA out of memory at batch size {config.batch_size}", "try a smaller --batch-size"
        ) from None


def describe_modules(
    model: nn.Module, criterion: nn.Module, inputs: torch.Tensor, targets: torch.Tensor
) -> dict[str, ModuleFacts]:
    """Module facts keyed the way with_stack traces name modules (``Conv2d_1``).

    The profiler numbers instances of each class in first-call order; one
    unprofiled forward with global hooks sees the same order.
    """
    qualified = {id(m): (name or "model") for name, m in model.named_modules()}
    qualified[id(criterion)] = "loss"
    counters: dict[str, int] = {}
    seen: dict[int, str] = {}
    facts: dict[str, ModuleFacts] = {}

    def before(module: nn.Module, args) -> None:
        if id(module) in seen:
            return
        cls = type(module).__name__
        key = f"{cls}_{counters.get(cls, 0)}"
        counters[cls] = counters.get(cls, 0) + 1
        seen[id(module)] = key
        facts[key] = ModuleFacts(
            qualified_name=qualified.get(id(module), "?"),
            parameters=sum(p.numel() for p in module.parameters()),
            output_shape="",
        )

    def after(module: nn.Module, args, output) -> None:
        key = seen.get(id(module))
        if key is not None and not facts[key].output_shape:
            facts[key].output_shape = _shape_text(output)

    pre = nn.modules.module.register_module_forward_pre_hook(before)
    post = nn.modules.module.register_module_forward_hook(after)
    try:
        with torch.no_grad():
            criterion(model(inputs), targets)
    finally:
        pre.remove()
        post.remove()
    return facts


def _shape_text(output) -> str:
    if isinstance(output, torch.Tensor):
        return "x".join(str(d) for d in output.shape)
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return _shape_text(output[0])
    return ""


def write_trace(prof: profile, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.name.endswith(".gz"):
        with tempfile.TemporaryDirectory() as scratch:
            plain = Path(scratch) / "trace.json"
            prof.export_chrome_trace(str(plain))
            with open(plain, "rb") as source, gzip.open(path, "wb", compresslevel=6) as target:
                shutil.copyfileobj(source, target)
    else:
        prof.export_chrome_trace(str(path))


def torch_flops(prof: profile) -> dict[int, int]:
    """torch's FLOPs per operator call, keyed by the call's External id.

    Read from the raw Kineto results: ``prof.events()`` would give the same
    numbers after a Python post-processing pass of seconds.
    """
    return {e.correlation_id(): int(e.flops()) for e in prof.profiler.kineto_results.events() if e.flops()}


def key_average_records(prof: profile) -> list[dict]:
    """torch's own ``key_averages()`` numbers, by name and by name + shapes."""
    records = []
    for group_by_shape in (False, True):
        for avg in prof.key_averages(group_by_input_shape=group_by_shape):
            records.append(
                {
                    "name": avg.key,
                    "input_shapes": str(avg.input_shapes) if group_by_shape else None,
                    "calls": avg.count,
                    "self_cpu_us": avg.self_cpu_time_total,
                    "cpu_total_us": avg.cpu_time_total,
                    "self_device_us": avg.self_device_time_total,
                    "device_total_us": avg.device_time_total,
                    "cpu_mem_bytes": avg.cpu_memory_usage,
                    "self_cpu_mem_bytes": avg.self_cpu_memory_usage,
                    "device_mem_bytes": avg.device_memory_usage,
                    "self_device_mem_bytes": avg.self_device_memory_usage,
                    "flops": avg.flops,
                }
            )
    return records


@contextmanager
def native_stderr_to(log_path: Path):
    """Send file descriptor 2 to ``log_path`` while profiling.

    Kineto writes ``profiler_start`` and ``gpuGetDeviceCount failed`` straight
    to fd 2, past ``sys.stderr``: on a full-screen UI they would scribble
    over the screen.
    """
    saved = os.dup(2)
    with open(log_path, "ab") as log:
        os.dup2(log.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
