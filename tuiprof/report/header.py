"""The one-line summary of a trace the explorer's header shows."""

from __future__ import annotations

from rich.text import Text

from tuiprof.analysis.model import TraceModel
from tuiprof.report.units import format_bytes_short, format_count, format_us_short, plural


def trace_title(model: TraceModel) -> str:
    """The trace's file name without the profiler's suffixes."""
    return model.info.trace_name.removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace")


def header_line(model: TraceModel) -> Text:
    info = model.info
    parts = [trace_title(model), ", ".join(dict.fromkeys(info.devices)) if info.devices else "CPU"]
    if info.rank is not None:
        parts.append(f"rank {info.rank} of {info.world_size}" if info.world_size else f"rank {info.rank}")
    if model.steps:
        parts.append(f"{plural(len(model.steps), 'step')} × {format_us_short(model.step_time_us)}")
    else:
        parts.append(f"{format_us_short(info.duration_us)} traced")
    peak = model.peak_memory
    if peak is not None:
        parts.append(f"peak {format_bytes_short(peak.peak_bytes)} {peak.device}")
    if model.step_flops:  # training FLOPs of a step (forward + backward) over the step time
        flops = f"{format_count(model.step_flops).replace(' ', '')}FLOP/step"
        if model.step_flops_per_s:
            flops += f" {format_count(model.step_flops_per_s).replace(' ', '')}FLOP/s"
        parts.append(flops)
    return Text(" · ".join(parts), style="bold", overflow="ellipsis", no_wrap=True)
