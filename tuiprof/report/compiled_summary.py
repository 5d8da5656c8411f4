"""What a compiled run adds to the Overview and the capture's exit line:
compile time against the profiled step time, how much of the compiled
graphs' time the kernel map placed in modules (analysis/compiled_map.py),
and the graph breaks, recompilations and eager modules (analysis/compiled_run.py)."""

from __future__ import annotations

from tuiprof.analysis.compiled_map import UNATTRIBUTED, CompiledAttribution
from tuiprof.analysis.compiled_run import BreakSite, CompiledFrame, CompiledRun
from tuiprof.analysis.cuda_graphs import GraphReplays
from tuiprof.analysis.model import TraceModel
from tuiprof.report.units import format_us, format_us_short, plural


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
        if mean_us:
            text += f" (the time of {compiled.compile_s * 1e6 / mean_us:,.0f} steps)"
    return text


def attribution_text(compiled: CompiledAttribution) -> str | None:
    """Share of the compiled graphs' time placed below the compiled module, forward and backward."""
    total = compiled.share_below_root()
    if total is None:
        return None
    side = "device" if compiled.on_device else "CPU"
    parts = [f"{100 * total:.1f}% of the compiled graphs' {side} time is in modules below the compiled one"]
    sides = [
        f"{name} {100 * share:.1f}%"
        for name, share in (("fwd", compiled.share_below_root(0)), ("bwd", compiled.share_below_root(1)))
        if share is not None
    ]
    if len(sides) == 2:
        parts.append(f"({', '.join(sides)})")
    graph_ns = sum(compiled.graph_ns)
    rest = graph_ns - sum(compiled.below_root_ns) - sum(compiled.root_ns)
    parts.append(f"; {100 * rest / graph_ns:.1f}% is {UNATTRIBUTED}")
    if sum(compiled.root_ns):
        parts.append(f", {100 * sum(compiled.root_ns) / graph_ns:.1f}% the compiled module's own")
    return " ".join(parts[:2]) + "".join(parts[2:])


SITES_SHOWN = 3  # graph-break places, recompiled frames and eager modules named in the Overview


def compiled_lines(model: TraceModel) -> list[str]:
    """The Overview's lines about compilation (empty for an eager trace)."""
    lines = []
    if model.compiled is not None:
        lines += [text for text in (compile_time_text(model), attribution_text(model.compiled)) if text]
    if model.compiled_run is not None:
        run = model.compiled_run
        lines += [graph_breaks_text(run), recompilations_text(run), *([eager_text(run)] if run.eager_modules else [])]
        if run.cuda_graphs is not None:
            lines.append(cuda_graphs_text(run.cuda_graphs.total))
    return lines


def cuda_graphs_text(replays: GraphReplays) -> str:
    """``CUDA graphs: 3 replays, 12 kernels, 1.2ms of device time`` (reduce-overhead on a GPU)."""
    return (
        f"CUDA graphs: {plural(replays.replays, 'replay')}, {plural(replays.kernels, 'kernel')}, "
        f"{format_us(replays.device_ns / 1000)} of device time"
    )


def break_site_text(site: BreakSite, full_path: bool = False) -> str:
    """``cl.py:9 in forward: Call to `torch._dynamo.graph_break()``` (the reason's first line)."""
    where = f"{site.file if full_path else site.file.rsplit('/', 1)[-1]}:{site.line}"
    reason = site.reason.splitlines()[0].strip() if site.reason else "no reason given"
    return f"{where} in {site.function}: {reason}"


def graph_breaks_text(run: CompiledRun) -> str:
    """How many graph breaks and where: the capture's log, else the trace's nested regions."""
    if not run.from_capture:
        nested = [f.frame for f in run.frames if f.nested]
        if not nested:
            return f"no graph break seen in the trace ({plural(len(run.frames), 'compiled frame')}, none inside another's region)"
        return (
            f"{plural(len(nested), 'graph break')} seen in the trace: {plural(len(nested), 'frame')[len(str(len(nested))) + 1 :]} "
            f"{', '.join(nested)} ran inside another "
            "frame's region (no file:line or reason: the file has no compile log)"
        )
    if not run.graph_breaks:
        return f"no graph break ({plural(len(run.frames), 'compiled frame')})"
    shown = "; ".join(break_site_text(site) for site in run.graph_breaks[:SITES_SHOWN])
    more = len(run.graph_breaks) - SITES_SHOWN
    return f"{plural(len(run.graph_breaks), 'graph break')}: {shown}" + (
        f"; +{more} more in the region nodes' detail" if more > 0 else ""
    )


def frame_label(frame: CompiledFrame) -> str:
    """``frame 0 (forward, cl.py:7)``; ``frame 0`` when only the trace knows it."""
    if not frame.function:
        return f"frame {frame.frame}"
    return f"frame {frame.frame} ({frame.function}, {frame.file.rsplit('/', 1)[-1]}:{frame.line})"


def recompilations_text(run: CompiledRun) -> str:
    recompiled = run.recompiled
    if not recompiled:
        return f"no recompilation: {plural(len(run.frames), 'frame')} compiled once each"
    parts = []
    for frame in recompiled[:SITES_SHOWN]:
        part = f"{frame_label(frame)} compiled {frame.compilations} times"
        if frame.recompile_reasons:
            part += f" ({frame.recompile_reasons[0][1]})"
        parts.append(part)
    more = len(recompiled) - SITES_SHOWN
    return f"recompiled: {'; '.join(parts)}" + (f"; +{more} more frames" if more > 0 else "")


def region_lines(run: CompiledRun, region: str) -> list[str]:
    """The detail of a region node (``[compiled 0:1]``): its frame, its compilations and
    why it was compiled again, and the graph breaks taken in it, with full paths."""
    frame_id, _, compile_number = region.removeprefix("[compiled ").removesuffix("]").rpartition(":")
    frame = run.frame(frame_id)
    if frame is None:
        return []
    lines = [
        f"{frame_label(frame)}: compiled {plural(frame.compilations, 'time')}, {plural(frame.region_calls, 'region call')} in the trace"
    ]
    if frame.file:
        lines.append(f"code: {frame.file}:{frame.line}")
    lines += [
        f"recompiled {compile_id}: {reason}"
        for compile_id, reason in frame.recompile_reasons
        if compile_id == f"{frame_id}/{compile_number}"
    ]
    if frame.nested:
        lines.append("ran inside another frame's region: the code after a graph break")
    replays = run.cuda_graphs.by_region.get(region) if run.cuda_graphs is not None else None
    if replays is not None:
        lines.append(cuda_graphs_text(replays))
    for site in run.breaks_in(frame_id):
        lines.append(f"graph break at {break_site_text(site, full_path=True)}")
        lines += [f"  {line.strip()}" for line in site.reason.splitlines()[1:]]
    return lines


def eager_text(run: CompiledRun) -> str:
    """The modules that ran eagerly, outside every compiled region or at a graph break, by cost."""
    total = sum(m.node.cost_us for m in run.eager_modules)
    pct = 100 * total / run.module_us if run.module_us else None
    share = format_us(total) if pct is None else ("<0.1%" if 0 < pct < 0.05 else f"{pct:.1f}%") + " of module time"
    named = ", ".join(
        f"{m.node.label} {format_us(m.node.cost_us)}" + (" at a graph break" if m.at_graph_break else "")
        for m in run.eager_modules[:SITES_SHOWN]
    )
    more = len(run.eager_modules) - SITES_SHOWN
    where = "outside compiled regions" + (
        " or at a graph break" if any(m.at_graph_break for m in run.eager_modules) else ""
    )
    return f"ran eagerly, {where}: {share}: {named}" + (f" +{more} more" if more > 0 else "")
