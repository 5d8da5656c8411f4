"""The one-line summary of a trace the explorer's header shows."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from tuiprof.analysis.model import TraceModel
from tuiprof.report.names import fit_name
from tuiprof.report.plain import plain
from tuiprof.report.units import format_bytes_short, format_count, format_us_short, plural


def trace_title(model: TraceModel) -> str:
    """The trace's file name without the profiler's suffixes."""
    return plain(model.info.trace_name.removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace"), 200)


# Parts of the header line, most important first: a narrow terminal drops whole parts from
# the end of this order (a number never loses its unit to an ellipsis).
PART_ORDER = ("name", "rank", "steps", "device", "peak", "flops")
NAME_MIN = 24  # cells the trace's name keeps before other parts are dropped


def header_parts(model: TraceModel) -> dict[str, str]:
    info = model.info
    devices = ", ".join(dict.fromkeys(info.devices)) if info.devices else "CPU"
    parts = {"name": trace_title(model), "device": plain(devices, 200)}  # deviceProperties names come from the file
    if info.rank is not None:
        parts["rank"] = f"rank {info.rank} of {info.world_size}" if info.world_size else f"rank {info.rank}"
    if model.steps:
        parts["steps"] = f"{plural(len(model.steps), 'step')} × {format_us_short(model.step_time_us)}"
    else:
        parts["steps"] = f"{format_us_short(info.duration_us)} traced"
    peak = model.peak_figure  # named as the Overview and the Memory view name it (report/memory_texts.py)
    if peak is not None:
        parts["peak"] = f"{'alloc peak' if peak.allocator else 'peak'} {format_bytes_short(peak.bytes)} {peak.device}"
    if model.step_flops:  # FLOPs of a step (FlopCounterMode's formulas) over the step time
        flops = f"{format_count(model.step_flops).replace(' ', '')}FLOP" + ("/step" if model.steps else "")
        if model.step_flops_per_s:
            flops += f" {format_count(model.step_flops_per_s).replace(' ', '')}FLOP/s"
        parts["flops"] = flops
    return parts


def header_line(model: TraceModel, width: int = 10_000) -> Text:
    """The parts that fit in ``width`` cells, in display order.

    The trace's name is cut in its middle (report.names.fit_name: the rank and suffix stay) down to ``NAME_MIN`` cells before any other part is
    dropped: a long file name (``tracelens__h100__Falconsai_nsfw_image...``) used to push the
    device and the peak memory off an 80-column header."""
    parts = header_parts(model)
    name = parts["name"]
    name_floor = min(cell_len(name), NAME_MIN)
    kept = {"name"}
    used = name_floor
    for key in PART_ORDER[1:]:
        if key in parts and used + 3 + cell_len(parts[key]) <= width:
            kept.add(key)
            used += 3 + cell_len(parts[key])
    room = width - (used - name_floor)  # what the name may take
    if cell_len(name) > room:
        parts["name"] = fit_name(name, max(2, room))
    shown = [text for key, text in parts.items() if key in kept]
    return Text(" · ".join(shown), style="bold", overflow="ellipsis", no_wrap=True)
