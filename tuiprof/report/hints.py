"""Plain-language findings for the Overview: what a profiler expert would say first."""

from __future__ import annotations

from tuiprof.analysis.model import TraceModel
from tuiprof.report.units import format_bytes, format_us

COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "cudaMemcpyAsync", "hipMemcpyWithStream", "cudaMemcpy")
LAUNCH_NAMES = ("cudaLaunchKernel", "hipLaunchKernel", "cuLaunchKernel", "hipModuleLaunchKernel")


def build_hints(model: TraceModel) -> list[str]:
    hints: list[str] = []
    ops = model.operators()
    total_self = model.total_self_cpu_us or 1.0
    steps = model.steps
    if steps:
        mean_step = sum(s.duration_us for s in steps) / len(steps)
        loading = sum(s.data_loading_us for s in steps) / len(steps)
        if mean_step and loading / mean_step >= 0.05:
            hints.append(f"Data loading is {100 * loading / mean_step:.0f} % of step time ({format_us(loading)} per step).")
        windows = [s for s in steps if s.device_window_us]
        if windows:
            idle = sum(s.device_idle_us for s in windows) / sum(s.device_window_us for s in windows)
            if idle >= 0.1:
                hints.append(f"GPU idle {100 * idle:.0f} % of the step: the device waits for the CPU.")
    else:
        hints.append("No ProfilerStep spans: profile with a schedule and call prof.step() to see steps.")
    ranked = sorted((s for s in ops if s.name != "ProfilerStep*"), key=lambda s: s.self_cpu_us, reverse=True)
    if ranked and ranked[0].self_cpu_us / total_self >= 0.15:
        top = ranked[0]
        hints.append(f"{top.name} is {100 * top.self_cpu_us / total_self:.0f} % of self CPU time ({top.calls} calls).")
    copies = sum(s.self_cpu_us for s in ops if s.name in COPY_OPS)
    if copies / total_self >= 0.1:
        hints.append(f"Copies (aten::copy_, to, memcpy) are {100 * copies / total_self:.0f} % of CPU time: host-device copies.")
    launches = sum(s.self_cpu_us for s in ops if s.name in LAUNCH_NAMES)
    if model.kernels and launches / total_self >= 0.2:
        tiny = sum(k.calls for k in model.kernels if k.avg_us < 10)
        hints.append(
            f"Kernel launches take {100 * launches / total_self:.0f} % of CPU time ({tiny} launches under 10 us): "
            "launch-bound; try CUDA graphs or torch.compile."
        )
    roots = model.modules.roots
    if roots:
        forward = sum(r.cpu_total_us for r in roots)
        backward = sum(r.backward_cpu_us for r in roots)
        if forward and backward:
            hints.append(f"Backward takes {backward / forward:.1f}x the forward CPU time.")
    elif model.info.with_stack:
        hints.append("No nn.Module frames although stacks were recorded (TorchScript or compiled code?): no module tree.")
    else:
        hints.append("No module tree: profile with with_stack=True (with_modules alone records nothing for eager models).")
    if not model.info.record_shapes and len(model.calls):
        hints.append("No input shapes recorded: profile with record_shapes=True for shapes and FLOPs.")
    elif model.total_flops:
        hints.append(f"FLOPs {model.flops_source}.")
    if not model.info.profile_memory:
        hints.append("No memory events: profile with profile_memory=True to see allocations.")
    peak = model.peak_memory
    if peak is not None and peak.peak_operator_row >= 0:
        hints.append(
            f"Peak {peak.device} memory {format_bytes(peak.peak_bytes)} during {model.calls.name(peak.peak_operator_row)}."
        )
    if model.report.skipped or model.report.repaired:
        hints.append(f"The file was damaged: {model.report.repaired} events repaired, {model.report.skipped} skipped.")
    return hints
