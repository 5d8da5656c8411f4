"""What a compiled capture adds to the Overview and the capture's exit line:
compile time against the profiled step time, and how much of the compiled
graphs' time the kernel map placed in modules (analysis/compiled_map.py)."""

from __future__ import annotations

from tuiprof.analysis.compiled_map import UNATTRIBUTED, CompiledAttribution
from tuiprof.analysis.model import TraceModel
from tuiprof.report.units import format_us, format_us_short


def compile_time_text(model: TraceModel) -> str | None:
    """``compile 31.2s vs 84.100ms per profiled step``, None when no capture measured it
    (times glued to their unit, as everywhere: report/units.py).

    ``tuiprof live --compile`` measures its unprofiled warm-up step; ``run`` and
    ``profile()`` take Dynamo's own count over the run (docs/compiled.md)."""
    compiled = model.compiled
    if compiled is None or compiled.compile_s is None:
        return None
    text = f"compile {format_us_short(compiled.compile_s * 1e6)}"
    if model.steps:
        mean_us = sum(step.duration_us for step in model.steps) / len(model.steps)
        text += f" vs {format_us(mean_us)} per profiled step"
    return text


def attribution_text(compiled: CompiledAttribution) -> str | None:
    """Share of the compiled graphs' time placed below the compiled module, forward and backward."""
    total = compiled.share_below_root()
    if total is None:
        return None
    side = "device" if compiled.on_device else "CPU"
    parts = [f"{100 * total:.1f}% of the compiled graphs' {side} time is in modules below the compiled one"]
    sides = [f"{name} {100 * share:.1f}%" for name, share in (("fwd", compiled.share_below_root(0)), ("bwd", compiled.share_below_root(1))) if share is not None]
    if len(sides) == 2:
        parts.append(f"({', '.join(sides)})")
    graph_ns = sum(compiled.graph_ns)
    rest = graph_ns - sum(compiled.below_root_ns) - sum(compiled.root_ns)
    parts.append(f"; {100 * rest / graph_ns:.1f}% is {UNATTRIBUTED}")
    if sum(compiled.root_ns):
        parts.append(f", {100 * sum(compiled.root_ns) / graph_ns:.1f}% the compiled module's own")
    return " ".join(parts[:2]) + "".join(parts[2:])


def compiled_lines(model: TraceModel) -> list[str]:
    """The Overview's lines about compilation (empty for an eager trace)."""
    if model.compiled is None:
        return []
    return [text for text in (compile_time_text(model), attribution_text(model.compiled)) if text]
