"""Plain-language findings for the Overview: what a profiler expert would say first.

One rule per function, each returning a :class:`Finding` or None; the
thresholds are named constants with the reason beside them.  ``findings``
runs every rule in ``RULES`` order (the order the Overview lists them).
``straggler`` is a rule over a run (a RunSummary), not a trace: the Overview
of a rank of a run lists it first, once the run is summarised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranking import (
    concentrated_modules,
    costliest_class,
    module_time_us,
    operator_rank_key,
    top_operators,
)
from tuiprof.analysis.ranks import RunSummary
from tuiprof.analysis.steps import idle_share
from tuiprof.report.catalog import FINDINGS
from tuiprof.report.memory_texts import before_trace_sentence, memory_peak_sentence, remedy_line
from tuiprof.report.stragglers import straggler_cause, straggler_sentence
from tuiprof.report.units import format_bytes, format_count, format_us, plural
from tuiprof.report.views import Column, Row, View, ViewOptions

# A share below these is normal for a healthy training step and not worth a line.
DATA_LOADING_SHARE = 0.05  # input pipelines that keep up cost a few % of the step
GPU_IDLE_SHARE = 0.10  # a device busy 90 % of the step is as good as eager mode gets
DOMINANT_OPERATOR_SHARE = 0.15  # one operator at this share of the time is a warning, not just the top
COPY_SHARE = 0.10  # host-device copies above this are usually avoidable (pinned memory, .to once)
LAUNCH_SHARE = 0.20  # CPU time in launch calls above this means the GPU waits for launches
TINY_KERNEL_US = 10.0  # kernels shorter than this cost less than their launch
TOP_MODULE_PART_SHARE = 0.10  # a part of the top modules named beside them: smaller ones are noise
# Gradients kept between steps are memory spent for nothing (set_to_none=True changes no result):
# a tenth of the peak so spent is a warning.  Other what-ifs trade something (the optimizer, the
# batch) and a peak is only a problem near the device's limit, which a trace does not say: info.
WASTED_MEMORY_SHARE = 0.10

COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "cudaMemcpyAsync", "hipMemcpyWithStream", "cudaMemcpy")
LAUNCH_NAMES = ("cudaLaunchKernel", "hipLaunchKernel", "cuLaunchKernel", "hipModuleLaunchKernel")


# What a saving is measured in again once the remedy is applied (docs/advice.md).
STEP_TIME = "step_us"  # the mean step (microseconds), as the Steps view measures it
PEAK_MEMORY = "peak_bytes"  # the memory peak (bytes), as the Memory view measures it


@dataclass(frozen=True)
class Saving:
    """What applying a finding's remedy saves, predicted in the terms it is measured again in.

    ``amount`` None means tuiprof abstains: it names the cause but cannot predict the saving
    within 10 % (``why_not`` says why); a number is only given where the diagnosis benchmark
    (benchmarks/diagnosis) shows it re-measures within 10 %."""

    metric: str  # STEP_TIME or PEAK_MEMORY
    current: float  # the metric now: the mean step (us) or the peak (bytes)
    amount: float | None  # the predicted saving, in the metric's unit; None: abstained
    why_not: str = ""  # why no number is claimed (with amount None)

    def sentence(self) -> str:
        """``saves about 61.2ms a step (to 36.8ms)``, or why it is not predicted."""
        if self.amount is None:
            return f"tuiprof does not predict the saving: {self.why_not}" if self.why_not else ""
        if self.metric == PEAK_MEMORY:
            amount, after = format_bytes(int(self.amount)), format_bytes(int(self.current - self.amount))
            return f"saves about {amount} of the peak (to {after})"
        return f"saves about {format_us(self.amount)} a step (to {format_us(self.current - self.amount)})"


@dataclass(frozen=True)
class Finding:
    id: str  # stable, for tests and exports: "gpu-idle"
    severity: str  # "warning": costs time now; "info": a fact about the trace or how it was recorded
    text: str  # the finding alone: never names a key or a command (each surface says where to look)
    see: str = ""  # where the details are: a view name of report/catalog.py ("ranks"), or ""
    remedy: str = ""  # one line: what to change ("DataLoader(num_workers=4, pin_memory=True)"), or ""
    saving: Saving | None = None  # what the remedy is predicted to save, or why it is not
    weight: float = 0.0  # the share (0-1) of its metric the cause holds: orders the warnings

    def advice(self) -> str:
        """The remedy and its predicted saving as one sentence, or ''."""
        if not self.remedy:
            return ""
        saving = self.saving.sentence() if self.saving is not None else ""
        return f"Fix: {self.remedy}" + (f"; {saving}." if saving else ".")

    def pointed(self, where: Callable[[str], str]) -> str:
        """The text, the remedy and where to look, in the words of one surface: ``where("ranks")``
        is ``the Ranks view (8)`` in the explorer, ``summary --view ranks`` on the command line."""
        pointer = where(self.see) if self.see else ""
        text = f"{self.text} {self.advice()}" if self.remedy else self.text
        return f"{text} See {pointer}." if pointer else text


def summary_pointer(view: str) -> str:
    """Where to look, for the command line (``summary --view findings``)."""
    return f"summary --view {view}"


def data_loading(model: TraceModel) -> Finding | None:
    steps = model.steps
    if not steps:
        return None
    mean_step = sum(s.duration_us for s in steps) / len(steps)
    loading = sum(s.data_loading_us for s in steps) / len(steps)
    if not mean_step or loading / mean_step < DATA_LOADING_SHARE:
        return None
    return Finding(
        "data-loading",
        "warning",
        f"Data loading is {100 * loading / mean_step:.0f} % of step time ({format_us(loading)} per step).",
    )


def gpu_idle(model: TraceModel) -> Finding | None:
    """Device idle over the steps' device windows, summed as the Steps rows add up: the share
    the Steps view and the Timeline show (``steps.idle_share``)."""
    idle = idle_share(sum(s.device_idle_us for s in model.steps), sum(s.device_window_us for s in model.steps))
    if idle is None or idle < GPU_IDLE_SHARE:
        return None
    return Finding(
        "gpu-idle",
        "warning",
        f"GPU idle {100 * idle:.0f} % of the steps' device windows: the device waits for the CPU.",
    )


def no_steps(model: TraceModel) -> Finding | None:
    if model.steps:
        return None
    return Finding(
        "no-steps", "info", "No ProfilerStep spans: profile with a schedule and call prof.step() to see steps."
    )


def top_module(model: TraceModel) -> Finding | None:
    """Where module time concentrates, backward included: the class of modules that
    holds at least half of it, its instances summed (``ranking.concentrated_modules``),
    then one step further: the costliest class inside them when it holds
    TOP_MODULE_PART_SHARE of module time, else the costliest instance.  Nothing
    rather than a share that prints as 0 %."""
    group = concentrated_modules(model)
    total = module_time_us(model)
    if group is None or round(100 * group.cost_us / total) == 0:
        return None
    split = f" (fwd {format_us(group.forward_us)} + bwd {format_us(group.backward_us)})" if group.backward_us else ""
    share = f"{100 * group.cost_us / total:.0f} % of module time"
    if len(group.nodes) == 1:
        node = group.nodes[0]
        text = f"Top module: {node.qualified_name or node.path}, {format_us(group.cost_us)}{split}, {share}"
    else:
        text = f"Top modules: {group.label}, {format_us(group.cost_us)}{split}, {share}"
    inner = costliest_class(child for node in group.nodes for child in node.children)
    if inner is not None and inner.cost_us >= TOP_MODULE_PART_SHARE * total:
        text += f"; inside {'it' if len(group.nodes) == 1 else 'them'}, {inner.label}: {format_us(inner.cost_us)} ({100 * inner.cost_us / total:.0f} %)"
    elif len(group.nodes) > 1:
        top = group.nodes[0]
        text += f"; the costliest: {top.qualified_name or top.path}, {format_us(top.cost_us)} ({100 * top.cost_us / total:.0f} %)"
    return Finding("top-module", "info", text + ".")


def top_operator(model: TraceModel) -> Finding | None:
    """The costliest operator (self device time on GPU traces, else self CPU); a warning
    when one operator alone holds DOMINANT_OPERATOR_SHARE of that time."""
    top = top_operators(model, 1)
    key = operator_rank_key(model)
    total = model.total_device_us if key == "self_device_us" else model.total_self_cpu_us
    if not top or not total:
        return None
    stats = top[0]
    share = getattr(stats, key) / total
    what = "self device" if key == "self_device_us" else "self CPU"
    severity = "warning" if share >= DOMINANT_OPERATOR_SHARE else "info"
    return Finding(
        "top-operator",
        severity,
        f"Top operator: {stats.name}, {format_us(getattr(stats, key))} {what} time, {100 * share:.0f} % of all {what} time ({plural(stats.calls, 'call')}).",
    )


def copies(model: TraceModel) -> Finding | None:
    total_self = model.total_self_cpu_us
    spent = sum(s.self_cpu_us for s in model.operators() if s.name in COPY_OPS)
    if not total_self or spent / total_self < COPY_SHARE:
        return None
    return Finding(
        "copies",
        "warning",
        f"Copies (aten::copy_, to, memcpy) are {100 * spent / total_self:.0f} % of CPU time: host-device copies.",
    )


def launch_bound(model: TraceModel) -> Finding | None:
    total_self = model.total_self_cpu_us
    launches = sum(s.self_cpu_us for s in model.operators() if s.name in LAUNCH_NAMES)
    if not model.kernels or not total_self or launches / total_self < LAUNCH_SHARE:
        return None
    tiny = sum(k.calls for k in model.kernels if k.avg_us < TINY_KERNEL_US)
    return Finding(
        "launch-bound",
        "warning",
        f"Kernel launches take {100 * launches / total_self:.0f} % of CPU time ({plural(tiny, 'launch', 'launches')} under "
        f"{TINY_KERNEL_US:.0f} us): launch-bound; try CUDA graphs or torch.compile.",
    )


def backward_ratio(model: TraceModel) -> Finding | None:
    roots = model.modules.roots
    forward = sum(r.cpu_total_us for r in roots)
    backward = sum(r.backward_cpu_us for r in roots)
    if not forward or not backward:
        return None
    return Finding("backward-ratio", "info", f"Backward takes {backward / forward:.1f}x the forward CPU time.")


def module_tree_missing(model: TraceModel) -> Finding | None:
    if model.modules.roots:
        return None
    if model.info.with_stack:
        return Finding(
            "no-module-tree",
            "info",
            "No nn.Module frames although stacks were recorded (TorchScript or compiled code?): no module tree.",
        )
    return Finding(
        "no-module-tree",
        "info",
        "No module tree: profile with with_stack=True (with_modules alone records nothing for eager models).",
    )


def shapes_and_flops(model: TraceModel) -> Finding | None:
    if not model.info.record_shapes and len(model.calls):
        return Finding(
            "no-shapes", "info", "No input shapes recorded: profile with record_shapes=True for shapes and FLOPs."
        )
    if model.step_flops:
        # The step's rate: over the whole mean step (data loading, optimizer included); a module's
        # rate (Modules) divides by its own forward + backward time, so it reads higher.
        over = "the mean step time" if model.steps else "the trace's span"
        rate = f", {format_count(model.step_flops_per_s)}FLOP/s over {over}" if model.step_flops_per_s else ""
        backward = model.backward_pass
        what = (
            "forward + backward"
            if backward.counted
            else "forward only (its backward operators have no FLOPs formula)"
            if backward.ran
            else "forward only (no backward in this trace)"
        )
        where = (
            f"per step: {format_count(model.step_flops)}FLOP {what}"
            if model.steps
            else (f"over the whole trace (no ProfilerStep spans): {format_count(model.step_flops)}FLOP {what}")
        )
        return Finding(
            "step-flops",
            "info",
            f"FLOPs {where} (FlopCounterMode's formulas) in {format_us(model.step_time_us)}{rate}. "
            f"Operator FLOPs (profiler's formulas) {model.flops_source}.",
        )
    if model.total_flops:
        return Finding("flops-source", "info", f"FLOPs {model.flops_source}.")
    return None


def external_ids_ignored(model: TraceModel) -> Finding | None:
    if not model.external_ids_ignored:
        return None
    return Finding(
        "external-ids",
        "info",
        "The file's External ids were not used (its writer set them equal to correlation ids): kernels were joined "
        "to the operator around each runtime launch instead.",
    )


def memory_not_recorded(model: TraceModel) -> Finding | None:
    if model.info.profile_memory:
        return None
    return Finding("no-memory", "info", "No memory events: profile with profile_memory=True to see allocations.")


def memory_peak(model: TraceModel) -> Finding | None:
    categorised = memory_peak_sentence(model)  # what the peak is made of, when a capture saved torch's categories
    if categorised is not None:
        # The remedy: gradients set to None when they waste enough, else the what-if that saves the most;
        # where none is predicted, the first that could save something, with why tuiprof abstains.
        what_ifs = model.memory_breakdown.what_ifs
        peak = model.memory_breakdown.peak_bytes
        claimed = sorted((w for w in what_ifs if w.saves_bytes), key=lambda w: -(w.saves_bytes or 0))
        wasted = [
            w for w in claimed if w.remedy == "grads-to-none" and (w.saves_bytes or 0) >= WASTED_MEMORY_SHARE * peak
        ]
        best = (wasted or claimed or [w for w in what_ifs if w.saves_bytes is None and w.basis_bytes] or [None])[0]
        if best is None:
            return Finding("memory-peak", "info", categorised, see="memory-categories")
        saving = Saving(PEAK_MEMORY, peak, best.saves_bytes, "" if best.saves_bytes is not None else best.why_not)
        return Finding(
            "memory-peak",
            "warning" if wasted else "info",
            categorised,
            see="memory-categories",
            remedy=remedy_line(best),
            saving=saving,
            weight=(best.saves_bytes or 0) / peak if peak else 0.0,
        )
    peak = model.peak_memory
    if peak is None or peak.peak_operator_row < 0:
        return None
    return Finding(
        "memory-peak",
        "info",
        f"{peak.device} memory allocator peak {format_bytes(peak.peak_bytes)} during {model.calls.name(peak.peak_operator_row)}.",
    )


def memory_before_trace(model: TraceModel) -> Finding | None:
    """How much of the peak the trace never saw allocated (the weights): why its allocations do not add up."""
    figure = model.peak_figure
    sentence = before_trace_sentence(figure.bytes, figure.before_trace_bytes) if figure is not None else None
    return Finding("memory-before-trace", "info", sentence) if sentence else None


def damaged_file(model: TraceModel) -> Finding | None:
    report = model.report
    parts = [
        f"{plural(report.repaired, 'event')} repaired" if report.repaired else "",
        f"{plural(report.skipped, 'event')} skipped" if report.skipped else "",
        f"{plural(report.damaged, 'event')} with impossible times left out" if report.damaged else "",
        f"{plural(model.flops_damaged, 'call')} with impossible input sizes given no FLOPs"
        if model.flops_damaged
        else "",
    ]
    parts = [part for part in parts if part]
    if not parts:
        return None
    return Finding("damaged", "warning", "The file was damaged: " + ", ".join(parts) + ".")


def straggler(run: RunSummary) -> Finding | None:
    """The rank of the run that holds the others up (the one with the most extra work
    per step first), in the words of the Ranks view; a rule over the run, not the trace."""
    found = sorted(run.stragglers().values(), key=lambda s: (s.excess_us, s.last_arrivals), reverse=True)
    if not found:
        return None
    others = ", ".join(f"rank {s.rank} ({straggler_cause(s)})" for s in found[1:])
    also = f" Also {others}." if others else ""
    return Finding("straggler", "warning", f"Straggler {straggler_sentence(found[0])}.{also}", see="ranks")


RULES: tuple[Callable[[TraceModel], Finding | None], ...] = (
    top_module,
    top_operator,
    data_loading,
    gpu_idle,
    no_steps,
    copies,
    launch_bound,
    backward_ratio,
    module_tree_missing,
    shapes_and_flops,
    external_ids_ignored,
    memory_not_recorded,
    memory_peak,
    memory_before_trace,
    damaged_file,
)


def ranked(found: Sequence[Finding]) -> list[Finding]:
    """Warnings first, the heaviest cause (``weight``: its share of the step or the peak) first
    among them, then the facts; ties keep the rules' order.  The first line is what to fix."""
    return sorted(found, key=lambda f: (f.severity != "warning", -f.weight))


def findings(model: TraceModel) -> list[Finding]:
    """Every rule that has something to say, in the Overview's order (:func:`ranked`)."""
    return ranked([finding for rule in RULES if (finding := rule(model)) is not None])


# ------------------------------------------------------------------ as a table (Overview export, summary --view findings)

FINDING_COLUMNS = (
    Column("id", "Finding", "text", "Stable id of the rule (report/findings.py)."),
    Column("severity", "Severity", "text", "warning: costs time now; info: how the trace was recorded."),
    Column("text", "Text", "text", "What the Overview says, its remedy, and where to look (summary: the --view)."),
    Column("remedy", "Remedy", "text", "What to change, in one line ('' where the finding has none)."),
    Column("metric", "Metric", "text", "What the saving is measured in: step_us (mean step) or peak_bytes."),
    Column("current", "Current", "count", "That metric now (us or bytes); empty without a saving."),
    Column("saving", "Saving", "count", "The predicted saving in the metric's unit; empty where tuiprof abstains."),
    Column("abstain", "Abstains", "text", "Why no saving is predicted ('' where one is, or none applies)."),
)


def finding_rows(found: Sequence[Finding], where: Callable[[str], str] = summary_pointer) -> list[Row]:
    """Findings as rows of FINDING_COLUMNS (a run's straggler first where the caller has one),
    each pointing where ``where`` says (the command line's --view unless told)."""
    return [
        {
            "id": f.id,
            "severity": f.severity,
            "text": f.pointed(where),
            "remedy": f.remedy,
            "metric": f.saving.metric if f.saving else "",
            "current": f.saving.current if f.saving else None,
            "saving": f.saving.amount if f.saving else None,
            "abstain": f.saving.why_not if f.saving and f.saving.amount is None else "",
        }
        for f in found
    ]


def build_finding_rows(
    model: TraceModel, options: ViewOptions | None = None, run_findings: Sequence[Finding] = ()
) -> list[Row]:
    """The Overview's findings, in its order (report/findings.py's rules), after the run's."""
    return finding_rows((*run_findings, *findings(model)))


# Not in TRACE_VIEWS: a list of sentences, printed one per line (``summary --view findings``), not a table.
FINDINGS_VIEW = View(FINDINGS, "Findings", FINDING_COLUMNS, "", build_finding_rows)
