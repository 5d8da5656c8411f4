"""The one-line summary of a trace the explorer's header shows."""

from __future__ import annotations

from rich.text import Text

from tuiprof.analysis.model import TraceModel
from tuiprof.report.plain import plain
from tuiprof.report.units import format_bytes_short, format_count, format_us_short, plural


def trace_title(model: TraceModel) -> str:
    """The trace's file name without the profiler's suffixes."""
    return plain(model.info.trace_name.removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace"), 200)


# Parts of the header line, most important first: a narrow terminal drops whole parts from
# the end of this order (a number never loses its unit to an ellipsis).
PART_ORDER = ("name", "rank", "steps", "device", "peak", "flops")


def header_parts(model: TraceModel) -> dict[str, str]:
    info = model.info
    parts = {"name": trace_title(model), "device": ", ".join(dict.fromkeys(info.devices)) if info.devices else "CPU"}
    if info.rank is not None:
        parts["rank"] = f"rank {info.rank} of {info.world_size}" if info.world_size else f"rank {info.rank}"
    if model.steps:
        parts["steps"] = f"{plural(len(model.steps), 'step')} × {format_us_short(model.step_time_us)}"
    else:
        parts["steps"] = f"{format_us_short(info.duration_us)} traced"
    peak = model.peak_memory
    if peak is not None:
        parts["peak"] = f"peak {format_bytes_short(peak.peak_bytes)} {peak.device}"
    if model.step_flops:  # FLOPs of a step (FlopCounterMode's formulas) over the step time
        flops = f"{format_count(model.step_flops).replace(' ', '')}FLOP" + ("/step" if model.steps else "")
        if model.step_flops_per_s:
            flops += f" {format_count(model.step_flops_per_s).replace(' ', '')}FLOP/s"
        parts["flops"] = flops
    return parts


def header_line(model: TraceModel, width: int = 10_000) -> Text:
    """The parts that fit in ``width`` cells, in display order (the name is cut last)."""
    parts = header_parts(model)
    kept: set[str] = set()
    used = 0
    for key in PART_ORDER:
        if key in parts and (not kept or used + 3 + len(parts[key]) <= width):
            kept.add(key)
            used += (3 if used else 0) + len(parts[key])
    shown = [text for key, text in parts.items() if key in kept]
    return Text(" · ".join(shown), style="bold", overflow="ellipsis", no_wrap=True)
