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

from tuiprof.analysis.advice import (
    LAUNCH_NAMES,
    host_syncs,
    idle_split,
    launch_held_us,
    loading_advice,
    outside_work,
    pageable_copies,
)
from tuiprof.analysis.advice import slow_module as advice_slow_module
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.ranking import (
    concentrated_modules,
    costliest_class,
    module_time_us,
    operator_rank_key,
    top_operators,
)
from tuiprof.analysis.ranks import RunSummary, run_step_us
from tuiprof.report.catalog import FINDINGS
from tuiprof.report.memory_texts import before_trace_sentence, memory_peak_sentence, remedy_line
from tuiprof.report.stragglers import saving_doubt, straggler_cause, straggler_chain, straggler_remedy
from tuiprof.report.units import format_bytes, format_count, format_us, plural
from tuiprof.report.views import Column, Row, View, ViewOptions

# A share below these is normal for a healthy training step and not worth a line.
DATA_LOADING_SHARE = 0.05  # input pipelines that keep up cost a few % of the step
GPU_IDLE_SHARE = 0.10  # a device busy 90 % of the step is as good as eager mode gets
COPY_SHARE = 0.10  # host-device copies above this are usually avoidable (pinned memory, .to once)
LAUNCH_SHARE = 0.20  # CPU time in launch calls above this means the GPU waits for launches
TINY_KERNEL_US = 10.0  # kernels shorter than this cost less than their launch
TOP_MODULE_PART_SHARE = 0.10  # a part of the top modules named beside them: smaller ones are noise
# Gradients kept between steps are memory spent for nothing (set_to_none=True changes no result):
# a tenth of the peak so spent is a warning.  Other what-ifs trade something (the optimizer, the
# batch) and a peak is only a problem near the device's limit, which a trace does not say: info.
WASTED_MEMORY_SHARE = 0.10

COPY_OPS = ("aten::copy_", "aten::to", "aten::_to_copy", "cudaMemcpyAsync", "hipMemcpyWithStream", "cudaMemcpy")


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
            return f"saving not predicted: {self.why_not}" if self.why_not else ""
        if self.metric == PEAK_MEMORY:
            amount, after = format_bytes(int(self.amount)), format_bytes(int(self.current - self.amount))
            return f"saves about {amount} of the peak (to {after})"
        return f"saves about {format_us(self.amount)} a step (to {format_us(self.current - self.amount)})"


MIN_STEPS_TO_PREDICT = 2  # one step shows no noise: a saving against it could be the noise


def step_saving(model: TraceModel, amount: float | None, why_not: str = "") -> Saving:
    """A predicted saving of the mean step, or an abstention where the evidence is too weak:
    fewer than MIN_STEPS_TO_PREDICT steps, or steps that spread (half of slowest minus fastest)
    more than the saving itself: the change could not be told from the noise."""
    step = model.step_time_us
    durations = [s.duration_us for s in model.steps]
    if amount is not None and len(durations) < MIN_STEPS_TO_PREDICT:
        return Saving(
            STEP_TIME, step, None, f"{plural(len(durations), 'step')} in the trace: too few to tell the noise"
        )
    noise = (max(durations) - min(durations)) / 2 if durations else 0.0
    if amount is not None and amount < noise:
        return Saving(STEP_TIME, step, None, f"the steps vary by +-{format_us(noise)}, more than the saving")
    return Saving(STEP_TIME, step, amount, why_not)


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
    """Data loading in the step, with the DataLoader workers that would hide it and what the
    step would then be (analysis/advice.py ``loading_advice``)."""
    advice = loading_advice(model)
    if advice is None or advice.loading_us / advice.step_us < DATA_LOADING_SHARE:
        return None
    share = advice.loading_us / advice.step_us
    where = {"main process": ", in the main process (num_workers=0)", "workers": ", waiting on its workers"}
    text = f"Data loading is {100 * share:.0f} % of step time ({format_us(advice.loading_us)} per step){where.get(advice.loader, '')}."
    pinned = ", pin_memory=True" if model.kernels else ""
    if advice.loader == "main process":
        remedy = (
            f"DataLoader(num_workers={advice.workers}, persistent_workers=True{pinned}), "
            f"with {advice.workers} free cores if __getitem__ computes rather than waits"
        )
    elif advice.loader == "workers":
        remedy = (
            f"more DataLoader workers (num_workers), a larger prefetch_factor{pinned}, or a faster Dataset.__getitem__"
        )
    else:
        remedy = "load the next batch while this step runs (a DataLoader with num_workers, or a prefetching iterator)"
    saved = None if advice.step_after_us is None else advice.step_us - advice.step_after_us
    return Finding(
        "data-loading",
        "warning",
        text,
        remedy=remedy,
        saving=step_saving(model, saved, advice.why_not),
        weight=share,
    )


def slow_module(model: TraceModel) -> Finding | None:
    """A module that costs far more a step than its like siblings (or, without any, spends its
    step in its own Python code): the excess named in the modules' terms, with the operator or
    the Python time that holds it (analysis/advice.py ``slow_module``)."""
    found = advice_slow_module(model)
    if found is None:
        return None
    node, step = found.node, model.step_time_us
    name = node.qualified_name or node.path
    label = f"{name} ({node.class_name})"
    python = not found.top_operator
    share = f"{100 * found.excess_us / step:.0f} % of the step"
    if not found.siblings:
        text = f"{label} spends {format_us(found.host_us)} a step in its own Python code, in no operator ({share})."
    else:
        text = (
            f"{label} takes {format_us(found.cost_us)} a step{' on the device' if found.on_device else ''}, "
            f"{found.cost_us / found.sibling_us:.1f}x the median of its "
            f"{plural(len(found.siblings), f'like {node.class_name}')} ({format_us(found.sibling_us)})"
        )
        if python:
            text += f"; {format_us(found.excess_us)} a step more than theirs is its own Python code, in no operator ({share})."
        else:
            text += (
                f": {format_us(found.excess_us)} more ({share}), most in {found.top_operator}"
                f" (+{format_us(found.top_operator_us)})."
            )
    remedy = (
        f"remove the Python work in {name}'s forward (a sleep, I/O, a loop over tensors, .item() or .tolist())"
        if python
        else f"make {name} do what its like siblings do: its {found.top_operator} takes "
        f"{format_us(found.top_operator_us)} a step more there (extra calls, larger inputs, or a branch only it takes)"
    )
    saving = (
        step_saving(model, found.excess_us)
        if not found.on_device
        else step_saving(model, None, "the step gains the device time only where the device bounds it")
    )
    return Finding(
        "slow-module", "warning", text, see="modules", remedy=remedy, saving=saving, weight=found.excess_us / step
    )


HOST_SYNC_SHARE = 0.05  # device idle after syncs at 5 % of the step is worth removing them


def host_sync(model: TraceModel) -> Finding | None:
    """The CPU waiting for the device inside the steps (``.item()``, ``.cpu()``, a blocking copy),
    and the device idle each wait leaves until the next launch: what removing them saves
    (analysis/advice.py ``host_syncs``)."""
    found = host_syncs(model)
    if found is None or found.saving_us < HOST_SYNC_SHARE * found.step_us:
        return None
    where = f" in {found.module}" if found.module else ""
    text = (
        f"The CPU waits for the GPU {found.per_step:.0f} times a step ({found.caller}{where}), "
        f"then the GPU idles {format_us(found.idle_after_us)} a step until the next launch "
        f"({100 * found.idle_after_us / found.step_us:.0f} % of the step)."
    )
    return Finding(
        "host-sync",
        "warning",
        text,
        see="timeline",
        remedy=f"keep the value on the GPU: no {found.caller} (.item(), .cpu(), print of a tensor) in the step, or only every N steps",
        saving=step_saving(model, found.saving_us),
        weight=found.saving_us / found.step_us,
    )


OUTSIDE_SHARE = 0.10  # a tenth of the step in work no module, optimizer or loader did


def outside_modules(model: TraceModel) -> Finding | None:
    """Work in the step that no module did and that is not the optimizer, the loader or what
    backward() starts with (metrics, gradient norms, logging between backward and step):
    analysis/advice.py ``outside_work``, its top calls named; removing it saves the spans of
    its runs (its calls and the Python looping over them)."""
    work = outside_work(model)
    step = model.step_time_us
    if work is None or not step or work.span_us < OUTSIDE_SHARE * step:
        return None
    top = ", ".join(f"{name} x{calls:.0f} ({format_us(spent)})" for name, calls, spent in work.operators[:3])
    return Finding(
        "outside-modules",
        "warning",
        f"Outside every module (not the optimizer or the loader), {format_us(work.span_us)} a step "
        f"({100 * work.span_us / step:.0f} % of the step), {format_us(work.calls_us)} of it in calls: {top}.",
        see="modules",
        remedy=f"take this work out of the step, or do it every N steps (metrics, norms, logging): {work.operators[0][0]}",
        saving=step_saving(model, work.span_us)
        if not model.kernels
        else step_saving(model, None, "on a GPU the host's work costs the step only where the device waits"),
        weight=work.span_us / step if not model.kernels else min(work.span_us, _host_idle_us(model)) / step,
    )


def _host_idle_us(model: TraceModel) -> float:
    """On a GPU, host work costs the step only as device idle while the CPU ran Python."""
    split = idle_split(model)
    return split.host_us if split is not None else 0.0


def gpu_idle(model: TraceModel) -> Finding | None:
    """Device idle over the steps' device windows, summed as the Steps rows add up: the share
    the Steps view and the Timeline show (``steps.idle_share``), split by what the CPU did
    meanwhile (analysis/advice.py ``idle_split``): loading data, waiting in a sync (each its own
    finding, with its remedy), or the rest (Python and launches: the host is too slow to keep the
    device fed).  Its weight is that rest less what the launch calls hold (launch-bound's), so
    the causes with their own finding come first."""
    split = idle_split(model)
    if split is None or split.share < GPU_IDLE_SHARE:
        return None
    parts = [
        f"{format_us(split.loading_us)} while data loaded" if split.loading_us >= 1 else "",
        f"{format_us(split.sync_us)} after syncs" if split.sync_us >= 1 else "",
        f"{format_us(split.host_us)} while the CPU ran Python and launched kernels" if split.host_us >= 1 else "",
    ]
    step = model.step_time_us
    return Finding(
        "gpu-idle",
        "warning",
        f"GPU idle {100 * split.share:.0f} % of the steps' device windows, a step: "
        f"{', '.join(part for part in parts if part)}.",
        remedy="less host work per step: torch.compile (mode='reduce-overhead' for CUDA graphs), a larger batch, "
        "no Python loops over tensors"
        if split.host_us >= max(split.loading_us, split.sync_us)
        else "",
        saving=step_saving(model, None, "the trace does not show how much host work a change removes"),
        weight=max(split.host_us - launch_held_us(model), 0.0) / step if step else 0.0,
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
    """The costliest operator (self device time on GPU traces, else self CPU)."""
    top = top_operators(model, 1)
    key = operator_rank_key(model)
    total = model.total_device_us if key == "self_device_us" else model.total_self_cpu_us
    if not top or not total:
        return None
    stats = top[0]
    share = getattr(stats, key) / total
    what = "self device" if key == "self_device_us" else "self CPU"
    return Finding(  # a fact, never a warning: it names no cause and no remedy (the rules' findings lead)
        "top-operator",
        "info",
        f"Top operator: {stats.name}, {format_us(getattr(stats, key))} {what} time, {100 * share:.0f} % of all {what} time ({plural(stats.calls, 'call')}).",
    )


def copies(model: TraceModel) -> Finding | None:
    """Copies: on a device, the pageable host-device copies that block the CPU like a sync and
    the device idle they leave (saved by pinned memory and non-blocking copies,
    analysis/advice.py ``pageable_copies``), else their share of CPU time; named host-device
    copies only where the trace has a device."""
    blocking = pageable_copies(model)
    if blocking is not None and blocking.saving_us >= HOST_SYNC_SHARE * blocking.step_us:
        where = f" in {blocking.module}" if blocking.module else ""
        return Finding(
            "copies",
            "warning",
            f"{blocking.per_step:.0f} host-to-device copies a step from pageable memory ({blocking.caller}{where}) "
            f"block the CPU until done: {format_us(blocking.exposed_us)} a step with no kernel beside them and "
            f"{format_us(blocking.idle_after_us)} of device idle after them "
            f"({100 * blocking.saving_us / blocking.step_us:.0f} % of the step).",
            see="timeline",
            remedy=PINNED_COPIES,
            saving=step_saving(model, blocking.saving_us),
            weight=blocking.saving_us / blocking.step_us,
        )
    total_self = model.total_self_cpu_us
    spent = sum(s.self_cpu_us for s in model.operators() if s.name in COPY_OPS)
    if not total_self or spent / total_self < COPY_SHARE:
        return None
    share = f"{100 * spent / total_self:.0f} % of CPU time"
    if not model.kernels:
        return Finding(
            "copies",
            "info",
            f"Copies (aten::copy_, to) are {share}: tensor copies and dtype or layout conversions on the CPU.",
        )
    return Finding(
        "copies",
        "warning",
        f"Copies (aten::copy_, to, memcpy) are {share}: host-device copies.",
        remedy=PINNED_COPIES,
        saving=step_saving(
            model, None, "the copies' CPU time is not the step's: it counts only where the device waits"
        ),
    )


PINNED_COPIES = (
    "DataLoader(pin_memory=True) and .to(device, non_blocking=True), the next batch copied while this one computes"
)


def launch_bound(model: TraceModel) -> Finding | None:
    """Launch calls' share of CPU time; weighed by the part of the step they hold
    (analysis/advice.py ``launch_held_us``).  That saving is not claimed: CUDA graphs or fusing
    also remove the Python around each launch, which the trace cannot separate (docs/advice.md)."""
    total_self = model.total_self_cpu_us
    launches = sum(s.self_cpu_us for s in model.operators() if s.name in LAUNCH_NAMES)
    if not model.kernels or not total_self or launches / total_self < LAUNCH_SHARE:
        return None
    tiny = sum(k.calls for k in model.kernels if k.avg_us < TINY_KERNEL_US)
    step = model.step_time_us
    return Finding(
        "launch-bound",
        "warning",
        f"Kernel launches take {100 * launches / total_self:.0f} % of CPU time ({plural(tiny, 'launch', 'launches')} under "
        f"{TINY_KERNEL_US:.0f} us): launch-bound.",
        remedy="fewer, larger kernels: torch.compile (mode='reduce-overhead' adds CUDA graphs), or CUDA graphs by hand",
        saving=step_saving(model, None, "fusing or graphs also remove the Python around each launch, unseen here"),
        weight=launch_held_us(model) / step if step else 0.0,
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
    """The rank of the run whose fix shortens the step most (``find_stragglers``' order,
    docs/ranks.md), where its extra time went and what to change; the other stragglers only
    as "also".  The saving: the run's step had it worked like the others (its holdup at most
    its excess work), or why it is not claimed.  A rule over the run, not the trace."""
    found = list(run.stragglers().values())
    if not found:
        return None
    first, step_us = found[0], run_step_us(run.ranks)
    others = ", ".join(f"rank {s.rank} ({straggler_cause(s)})" for s in found[1:])
    also = f" Also {others}." if others else ""
    doubt = saving_doubt(first)
    return Finding(
        "straggler",
        "warning",
        f"Straggler {straggler_chain(first)}.{also}",
        see="ranks",
        remedy=straggler_remedy(first),
        saving=Saving(STEP_TIME, step_us, None if doubt else first.saving_us, doubt),
        weight=first.saving_us / step_us if step_us else 0.0,
    )


RULES: tuple[Callable[[TraceModel], Finding | None], ...] = (
    slow_module,
    outside_modules,
    host_sync,
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
