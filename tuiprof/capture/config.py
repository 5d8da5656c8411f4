"""What a capture is asked to do, and how far it got (no torch import here:
the explorer's UI starts before torch is loaded)."""

from __future__ import annotations

from dataclasses import dataclass

from tuiprof.errors import TraceError


@dataclass
class CaptureConfig:
    model: str = "resnet18"
    device: str = "auto"
    batch_size: int = 128
    input_shape: str = "3x32x32"
    num_classes: int = 10
    mode: str = "train"
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1
    record_shapes: bool = True
    profile_memory: bool = True
    with_stack: bool = True
    with_flops: bool = True
    data: str = "synthetic"
    data_root: str | None = None
    compile: bool = False  # torch.compile the model (compiled in an unprofiled warm-up step)
    compile_mode: str = "default"  # default | reduce-overhead | max-autotune
    dynamic: bool = False  # torch.compile(dynamic=True)

    @property
    def total_steps(self) -> int:
        return (self.wait + self.warmup + self.active) * max(1, self.repeat)

    def phase_of(self, step: int) -> str:
        cycle = step % (self.wait + self.warmup + self.active)
        if cycle < self.wait:
            return "wait"
        return "warmup" if cycle < self.wait + self.warmup else "active"


# The phase after the last step: torch writes the trace (seconds on a real model), then
# tuiprof analyses it; progress says so rather than sitting still at the last step.
SAVING = "saving"
ANALYSING = "analysing the captured trace"  # what follows: tuiprof reads the trace it wrote


@dataclass(frozen=True)
class CaptureProgress:
    step: int  # steps finished
    total_steps: int
    phase: str
    elapsed_s: float
    loss: float | None
    message: str = ""


def describe_steps(
    steps_run: int,
    trace_steps: list[int],
    unfinished_step: int | None,
    capture_s: float,
    compile_s: float | None = None,
) -> list[str]:
    """The lines a capture ends with: the steps run, and exactly the steps its trace holds.

    ``4 steps run in 3.00s (capture); the trace holds 2 (ProfilerStep#2-#3)``: the time
    is the capture's alone (never the time spent in the explorer afterwards), with
    ``--compile`` its compiling part named (``43.0s (capture, 24.1s of it compiling)``);
    then, when the capture stopped inside a step, ``ProfilerStep#4 did not finish and was
    left out of the trace`` (see :mod:`tuiprof.capture.unfinished_step`).  Times are
    written glued to their unit, as every time tuiprof prints (report/units.py)."""
    from tuiprof.report.units import format_us_short

    compiling = f", {format_us_short(compile_s * 1e6)} of it compiling" if compile_s else ""
    text = (
        f"{steps_run} step{'' if steps_run == 1 else 's'} run in {format_us_short(capture_s * 1e6)} (capture{compiling});"
        f" the trace holds {len(trace_steps)}"
    )
    if trace_steps:
        last = f"-#{trace_steps[-1]}" if len(trace_steps) > 1 else ""
        text += f" (ProfilerStep#{trace_steps[0]}{last})"
    if unfinished_step is None:
        return [text]
    return [text, f"ProfilerStep#{unfinished_step} did not finish and was left out of the trace"]


class CaptureError(TraceError):
    """A capture that cannot start: a bad model name, no CUDA, no dataset (exit code 2)."""


def parse_shape(text: str) -> tuple[int, ...]:
    try:
        shape = tuple(int(part) for part in text.lower().split("x"))
    except ValueError:
        shape = ()
    if not shape or any(d <= 0 for d in shape):
        raise CaptureError(f"--input-shape {text}", "not a shape", "write it like 3x32x32")
    return shape
