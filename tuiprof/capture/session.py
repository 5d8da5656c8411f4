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
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import torch
from torch import nn
from torch.profiler import ProfilerAction, ProfilerActivity, profile, record_function, schedule

from tuiprof.capture.config import SAVING, CaptureConfig, CaptureError, CaptureProgress, parse_shape
from tuiprof.capture.memory_categories import memory_categories_member
from tuiprof.capture.models import build_model, cifar10_batches, resolve_device, synthetic_batches
from tuiprof.capture.module_names import shape_text
from tuiprof.capture.unfinished_step import drop_unfinished_step
from tuiprof.trace.live import MEMBER, LiveFacts, ModuleFacts, encode_live_facts


@dataclass
class CaptureResult:
    trace_path: Path | None  # None when stopped before an active step finished
    facts: LiveFacts
    key_averages: list[dict] = field(default_factory=list)
    interrupted: bool = False
    steps_done: int = 0  # steps whose work finished (every phase)
    step_times_s: list[float] = field(default_factory=list)
    trace_steps: list[int] = field(default_factory=list)  # N of each ProfilerStep#N in the trace
    dropped_step: int | None = None  # the unfinished step left out of the trace (see unfinished_step)


ProgressFn = Callable[[CaptureProgress], None]


def _never() -> bool:
    return False


def profile_training(
    config: CaptureConfig,
    trace_path: Path,
    on_progress: ProgressFn | None = None,
    stopped: Callable[[], bool] = _never,
    want_key_averages: bool = False,
    model: nn.Module | None = None,
    batches: Iterator[tuple[torch.Tensor, torch.Tensor]] | None = None,
    started: float | None = None,
    read_log: Callable[[], list[str]] | None = None,
) -> CaptureResult:
    """Run ``config.total_steps`` training steps under the profiler.

    ``trace_path`` receives the recorded window (``.json`` or ``.json.gz``,
    see :class:`TraceWindows`) with the run's :class:`LiveFacts` in it.
    KeyboardInterrupt or ``stopped()`` ends the loop early; finished active
    steps are still written (``stopped()`` lets the running step finish; a
    KeyboardInterrupt inside a step leaves that step out of the trace).
    ``model``/``batches`` let callers (and tests) pass their own; ``started``
    is when the user's command began (progress shows time since then);
    ``read_log`` gives the profiler's log lines so far.
    """
    started = time.perf_counter() if started is None else started
    facts = LiveFacts()
    result = CaptureResult(trace_path=None, facts=facts)

    def note(message: str) -> bool:
        """Report a setup stage; whether the user asked to stop."""
        if on_progress:
            on_progress(CaptureProgress(0, config.total_steps, "setup", time.perf_counter() - started, None, message))
        result.interrupted = stopped()
        return result.interrupted

    device = resolve_device(config.device)
    input_shape = parse_shape(config.input_shape)
    if note(f"building {config.model} on {device}"):
        return result
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

    first_inputs, first_targets = next(batches)
    facts.batch_size = int(first_inputs.shape[0]) if first_inputs.dim() else None
    if note("one unprofiled forward to name the modules"):
        return result
    with _oom_as_error(config), _mismatch_as_error(config):
        facts.modules = describe_modules(model, criterion, first_inputs, first_targets)
    if config.compile:
        from tuiprof.capture.compiled import warm_up_compiled

        if note(f"compiling {config.model} (torch.compile, mode {config.compile_mode})"):
            return result
        with _oom_as_error(config):
            model, facts.compiled, facts.compile_s, facts.compile_log = warm_up_compiled(
                model,
                lambda compiled: _train_step(
                    compiled, criterion, optimizer, first_inputs, first_targets, config.mode == "train", device
                ),
                config.compile_mode,
                config.dynamic,
                # one clock a line: the progress line's own (since the start)
                on_tick=lambda seconds: note(f"compiling {config.model} (torch.compile)"),
            )

    def save(prof: profile, window: SavedWindow) -> None:
        if on_progress:  # torch's export takes seconds: say so after the last step
            on_progress(
                CaptureProgress(
                    result.steps_done, config.total_steps, SAVING, time.perf_counter() - started, loss_value
                )
            )
        if config.with_flops:
            facts.flops_by_external_id = torch_flops(prof)
        if read_log is not None:
            facts.log_lines = read_log()
        keys = {known.qualified_name: key for key, known in facts.modules.items()}
        facts.memory_categories = memory_categories_member(prof, model, keys, window.unfinished_step)
        write_trace(prof, trace_path, facts, window.unfinished_step)
        result.trace_path = trace_path
        result.trace_steps, result.dropped_step = window.steps, window.unfinished_step
        if want_key_averages:
            result.key_averages = key_average_records(prof)

    loss_value: float | None = None
    windows = TraceWindows(save, keep_last=config.repeat != 1)
    prof = make_profiler(config, device.type == "cuda", windows)
    try:
        with _oom_as_error(config), windows.recording(prof):
            inputs, targets = first_inputs, first_targets
            for step in range(config.total_steps):
                phase = config.phase_of(step)
                if on_progress:
                    on_progress(
                        CaptureProgress(step, config.total_steps, phase, time.perf_counter() - started, loss_value)
                    )
                step_start = time.perf_counter()
                loss_value = _train_step(model, criterion, optimizer, inputs, targets, config.mode == "train", device)
                result.step_times_s.append(time.perf_counter() - step_start)
                result.steps_done = step + 1
                if step + 1 < config.total_steps and stopped():
                    # No prof.step(): it would open an empty next step in the
                    # trace; the stop closes this finished one instead.
                    result.interrupted = windows.current_step_finished = True
                    break
                prof.step()
                inputs, targets = next(batches)
    except KeyboardInterrupt:
        result.interrupted = True
    if on_progress:
        on_progress(
            CaptureProgress(
                result.steps_done,
                config.total_steps,
                "done",
                time.perf_counter() - started,
                loss_value,
                "interrupted" if result.interrupted else "",
            )
        )
    return result


@dataclass(frozen=True)
class SavedWindow:
    """The steps of a window being written: ``ProfilerStep#N`` of each finished one, and
    the unfinished step recorded after them (None: none), which is left out of the trace."""

    steps: list[int]
    unfinished_step: int | None


RECORDING = (ProfilerAction.RECORD, ProfilerAction.RECORD_AND_SAVE)


class TraceWindows:
    """Which of the profiler's windows reach the trace file, and with which steps.

    torch calls ``on_trace_ready`` at the end of each complete window of the
    schedule, and again when the profiler stops inside one (a partial
    window).  Written here: the first complete window (``keep_last``: each
    complete window replaces the one before, for users who ask for repeats);
    a partial window only while no complete one was written, and only if it
    holds a finished active step -- stopped in warmup, or right as the first
    active step began, it would open as an empty trace.  The step the
    profiler is in when a partial window stops did not finish (unless the
    loop said so, :attr:`current_step_finished`): it is left out of the
    trace (:mod:`tuiprof.capture.unfinished_step`).  Once the first complete
    window is kept, the schedule records nothing more (later cycles would
    only slow the user's loop down).
    """

    def __init__(self, save: Callable[[profile, SavedWindow], None], keep_last: bool = False) -> None:
        self.save = save
        self.keep_last = keep_last
        self.complete = 0  # complete windows written
        self.stopping = False
        # Whether the step the profiler is in has done its work: a loop that
        # stops between its work and prof.step() sets it; after prof.step()
        # (an optimizer hook, a user's loop) the current step is empty.
        self.current_step_finished = False

    def schedule(self, inner: Callable[[int], ProfilerAction]) -> Callable[[int], ProfilerAction]:
        def action(step: int) -> ProfilerAction:
            return ProfilerAction.NONE if self.complete and not self.keep_last else inner(step)

        return action

    def __call__(self, prof: profile) -> None:
        """The profiler's ``on_trace_ready``."""
        partial = self.stopping or prof.current_action == getattr(ProfilerAction, "DEVICE_STOPPED", None)
        finished = finished_active_steps(prof, partial and self.current_step_finished)
        if partial:
            if self.complete or not finished:
                return
        elif self.complete and not self.keep_last:
            return
        unfinished = partial and not self.current_step_finished and prof.schedule(prof.step_num) in RECORDING
        window = SavedWindow(finished, prof.step_num if unfinished else None)
        self.save(prof, window)
        self.complete += not partial

    @contextmanager
    def recording(self, prof: profile) -> Iterator[profile]:
        """``with prof:``, telling the stop's ``on_trace_ready`` that its window is partial."""
        prof.start()
        try:
            yield prof
        finally:
            self.stopping = True
            prof.__exit__(None, None, None)


def finished_active_steps(prof: profile, current_step_finished: bool) -> list[int]:
    """The recorded (active) steps of the window that ends now which did their work (N of ProfilerStep#N)."""
    steps = []
    step = prof.step_num if current_step_finished else prof.step_num - 1
    while step >= 0 and prof.schedule(step) in RECORDING:
        steps.append(step)
        step -= 1
    return steps[::-1]


def make_profiler(config: CaptureConfig, cuda: bool, windows: TraceWindows, first_step: int = 0) -> profile:
    """torch.profiler with the config's schedule and switches (CUDA activity when asked).

    ``first_step``: the number of the first step it will see, so that its
    ``ProfilerStep#N`` are the job's own step numbers (a watched job starts
    one in the middle of a run, :mod:`tuiprof.capture.watch`)."""
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    prof = profile(
        activities=activities,
        schedule=windows.schedule(
            schedule(
                wait=config.wait,
                warmup=config.warmup,
                active=config.active,
                repeat=config.repeat,
                skip_first=first_step,
            )
        ),
        on_trace_ready=windows,
        record_shapes=config.record_shapes,
        profile_memory=config.profile_memory,
        with_stack=config.with_stack,
        with_flops=config.with_flops,
    )
    if first_step:  # torch numbers from 0; the schedule skips the steps before first_step
        prof.step_num = first_step
        # The ignore: torch leaves current_action unannotated, and mypy infers it from torch's
        # __init__ narrower than the ProfilerAction its schedule returns.
        prof.current_action = prof._prev_schedule_action = prof.schedule(first_step)  # type: ignore[assignment]
    return prof


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


@contextmanager
def _mismatch_as_error(config: CaptureConfig):
    """The first forward is where a wrong --input-shape or --num-classes shows: bad input, not a crash."""
    try:
        yield
    except (RuntimeError, ValueError, IndexError) as exc:
        if isinstance(exc, torch.cuda.OutOfMemoryError):
            raise
        problem = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CaptureError(
            config.model,
            f"the model rejects a batch of {config.batch_size}x{config.input_shape} ({problem})",
            "pass the --input-shape (and --num-classes) the model expects",
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
            facts[key].output_shape = shape_text(output)

    pre = nn.modules.module.register_module_forward_pre_hook(before)
    post = nn.modules.module.register_module_forward_hook(after)
    try:
        with torch.no_grad():
            criterion(model(inputs), targets)
    finally:
        pre.remove()
        post.remove()
    return facts


def write_trace(prof: profile, path: Path, facts: LiveFacts | None = None, unfinished_step: int | None = None) -> None:
    """torch's Chrome trace at ``path`` (gzipped if it ends in .gz), with ``facts``
    as the extra top-level member :data:`tuiprof.trace.live.MEMBER`, and without
    ``ProfilerStep#unfinished_step`` (decoded and written again: only then)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tuiprof-") as scratch:
        plain = Path(scratch) / "trace.json"
        prof.export_chrome_trace(str(plain))
        opener = gzip.open(path, "wb", compresslevel=6) if path.name.endswith(".gz") else open(path, "wb")
        with open(plain, "rb") as source, opener as target:
            if unfinished_step is not None:
                _copy_without_step(source, target, unfinished_step, facts)
            elif facts is None:
                shutil.copyfileobj(source, target)
            else:
                _copy_with_member(source, target, encode_live_facts(facts))


def _copy_without_step(source, target, step: int, facts: LiveFacts | None) -> None:
    """Copy torch's trace without the unfinished ``ProfilerStep#step`` (and its FLOPs), adding ``facts``."""
    try:
        document = orjson.loads(source.read().decode("utf-8", "replace"))
        events = document["traceEvents"]
    except (orjson.JSONDecodeError, TypeError, KeyError):
        raise CaptureError(
            str(source.name), "torch wrote a trace that is not a JSON object with traceEvents", "report this as a bug"
        ) from None
    kept = drop_unfinished_step(events, step, os.getpid())
    if kept is not None:
        document["traceEvents"] = kept
        if facts is not None and facts.flops_by_external_id:
            present = {(e.get("args") or {}).get("External id") for e in kept}
            facts.flops_by_external_id = {k: v for k, v in facts.flops_by_external_id.items() if k in present}
    if facts is not None:
        document[MEMBER] = orjson.loads(encode_live_facts(facts))
    target.write(orjson.dumps(document))


def _copy_with_member(source, target, member: bytes) -> None:
    """Copy a JSON object document, adding ``"MEMBER": member`` before its closing brace."""
    size = os.fstat(source.fileno()).st_size
    tail_start = max(0, size - 4096)
    source.seek(tail_start)
    close = tail_start + source.read().rfind(b"}")
    if close < tail_start:
        raise CaptureError(str(source.name), "torch wrote a trace that is not a JSON object", "report this as a bug")
    source.seek(0)
    left = close
    while left:
        chunk = source.read(min(left, 1 << 20))
        target.write(chunk)
        left -= len(chunk)
    target.write(b',\n  "' + MEMBER.encode() + b'": ' + member + b"\n}\n")


def torch_flops(prof: profile) -> dict[int, int]:
    """torch's FLOPs per operator call, keyed by the call's External id.

    Read from the raw Kineto results: ``prof.events()`` would give the same
    numbers after a Python post-processing pass of seconds.
    """
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    assert results is not None, "read once the profiler has stopped"
    return {e.correlation_id(): int(e.flops()) for e in results.events() if e.flops()}


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
