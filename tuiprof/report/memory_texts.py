"""What the Memory view, the Overview and ``summary`` say about the memory peak:
its categories and modules in words, and each remedy with its arithmetic."""

from __future__ import annotations

from rich.text import Text

from tuiprof.analysis.memory import PeakFigure
from tuiprof.analysis.memory_peak import MemoryBreakdown, ModuleMemory, PeakAllocation, WhatIf
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.python_stack import user_frame
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import format_bytes, format_us, plural

CATEGORY_WORDS = {
    "parameter": "parameters",
    "optimizer_state": "optimizer state",
    "input": "inputs",
    "temporary": "temporaries",
    "activation": "activations",
    "gradient": "gradients",
    "autograd_detail": "autograd detail",
    "unknown": "unknown",
}
NEEDS_CAPTURE = (
    "Memory categories (parameters, activations, gradients...) need a tuiprof capture "
    "(tuiprof live/run or tuiprof.profile()), or torch's export_memory_timeline with "
    "profile_memory, record_shapes and with_stack; this file has only allocator events, "
    "so the peak is shown by operator and module."
)
NEEDS_CAPTURE_SHORT = "Categories need a tuiprof capture · m: allocations at peak"  # fits 60 columns
STACK_JOINER = " > "  # a stack on one line (data formats), outermost frame first
REMEDIES = {
    "grads-to-none": "Gradients to None",
    "no-momentum": "SGD without momentum",
    "stateless-optimizer": "A stateless optimizer",
    "checkpoint": "Activation checkpointing",
    "half-batch": "Half the batch",
}


def share(part: int, whole: int) -> str:
    """``28 %``: whole percents, the house style (``<1 %`` for a little, never ``0 %``)."""
    if not whole:
        return "--"
    percent = round(100 * part / whole)
    return "<1 %" if part and not percent else f"{percent} %"


# The two peaks, named the same way in the header, the Overview, the Memory view and summary:
# "peak" is torch's categorised peak (every tensor torch sees, those from before the trace
# included), "allocator peak" the Total Allocated of the [memory] events (what the header shows
# only when a trace has no categories).  docs/memory.md, "Two peaks".
PEAK = "peak"
ALLOCATOR_PEAK = "allocator peak"
MIN_BEFORE_SHARE = 0.01  # memory from before the trace under 1 % of the peak is not worth a line


def short_frame(frame: str) -> str:
    """``modeling_vit.py(366): forward`` for ``transformers/models/vit/modeling_vit.py(366): forward``:
    a frame in a table column, its folders left to the detail pane and data formats."""
    place, colon, function = frame.partition("): ")
    return place.replace("\\", "/").rpartition("/")[2] + colon + function if colon else frame


def peak_name(figure: PeakFigure) -> str:
    return ALLOCATOR_PEAK if figure.allocator else PEAK


def before_trace_sentence(peak_bytes: int, before_bytes: int) -> str | None:
    """``204.92 MB was allocated before the trace began: ...``: why the allocations a trace
    shows do not add up to its peak (``peak_bytes``).  None when it is a trifle."""
    if before_bytes <= MIN_BEFORE_SHARE * peak_bytes:
        return None
    return f"{format_bytes(before_bytes)} was allocated before the trace began: weights and buffers the trace never saw allocated."


def memory_peak_lines(model: TraceModel, view: str) -> list[str]:
    """The lines ``summary`` prints above a memory table: the peak once (not on every row) and
    the memory from before the trace, in the words of the header and the Overview."""
    figure = model.peak_figure
    if figure is None:
        return []
    lines = []
    if view == "memory":
        if not figure.allocator:  # the table's allocator peaks next to the categorised one
            lines.append(
                f"Allocator peaks: what the trace saw allocated. The {PEAK} by torch's categories is "
                f"{format_bytes(figure.bytes)} {figure.device} (--view memory-categories), tensors from before the trace included."
            )
    else:
        breakdown = model.memory_breakdown
        place = peak_place(breakdown) if breakdown is not None else ""
        at = format_us((figure.at_ns - model.calls.origin_ns) / 1000)
        lines.append(
            f"{figure.device} memory {peak_name(figure)} {format_bytes(figure.bytes)} at {at}{' ' + place if place else ''}."
        )
    before = before_trace_sentence(figure.bytes, figure.before_trace_bytes)
    if before is not None:
        lines.append(before)
    return lines


def peak_place(breakdown: MemoryBreakdown | WhatIf) -> str:
    """``in backward of step 3``, ``in step 3``, or '' outside every step: where the peak
    falls, or the peak a what-if replayed."""
    if breakdown.step is None:
        return ""
    if breakdown.phase:
        return f"in {breakdown.phase} of step {breakdown.step.number}"
    return f"in step {breakdown.step.number}"


def memory_peak_sentence(model: TraceModel) -> str | None:
    """The Overview's one line: ``Peak CPU memory 159.7 MB in backward of step 3: 28 %
    parameters, ...; layer4 holds the most activations.``  None without
    categories.  Short enough for the Overview's finding width (report/plain.py)."""
    if model.categorised_peak is None:  # before the breakdown: a file's costs a search per allocation
        return None
    breakdown = model.memory_breakdown
    peak = breakdown.peak_bytes
    # The categories worth a remedy (5 % or more); the Memory view has them all.
    parts = [
        f"{share(size, peak)} {CATEGORY_WORDS[name]}" for name, size in breakdown.by_category if 100 * size >= 5 * peak
    ]
    place = peak_place(breakdown)
    text = f"Peak {breakdown.device} memory {format_bytes(peak)}{' ' + place if place else ''}: {', '.join(parts)}"
    most = breakdown.most_activations
    if most is not None:
        text += f"; {most.label} holds the most activations"
    return text + "."


def remedy_line(what_if: WhatIf) -> str:
    """What to change, in one line (a finding's ``remedy``)."""
    if what_if.remedy == "grads-to-none":
        return "optimizer.zero_grad(set_to_none=True)"
    if what_if.remedy == "no-momentum":
        return "SGD(momentum=0), if the model trains as well without momentum"
    if what_if.remedy == "stateless-optimizer":
        return (
            f"a stateless optimizer (SGD without momentum) instead of {what_if.optimizer}, if the model trains as well"
        )
    if what_if.remedy == "checkpoint":
        return f"torch.utils.checkpoint around {what_if.module}"
    return "half the batch size (half the samples a step)"


def gradient_bound_sentence(what_if: WhatIf) -> str:
    """Where torch counts more gradient bytes than there are parameters: said, with the bound."""
    bound = what_if.bound
    if bound is None or not bound.over_counted:
        return ""
    modules = (
        f", more than their own parameters in {plural(bound.modules_over, 'module')}" if bound.modules_over else ""
    )
    return (
        f" torch counts {format_bytes(bound.gradient_bytes)} of gradients at the peak for "
        f"{format_bytes(bound.parameter_bytes)} of parameters{modules}: gradients it saw made before the "
        f"capture and never saw freed. A parameter has one gradient its size: gradients are at most "
        f"{format_bytes(bound.parameter_bytes)}."
    )


def what_if_text(what_if: WhatIf) -> str:
    """One remedy in plain words: the peak of the timeline replayed with it, or why tuiprof
    does not predict it."""
    saves, peak, basis = what_if.saves_bytes, what_if.peak_bytes, what_if.basis_bytes
    name = REMEDIES[what_if.remedy]
    if saves is None:
        text = f"{name}: tuiprof does not predict the saving ({what_if.why_not})."
        if what_if.remedy == "checkpoint":
            text = (
                f"Activation checkpointing of {what_if.module}: tuiprof does not predict the saving "
                f"({what_if.why_not}); at most its {format_bytes(basis)} of activations at the peak "
                f"({share(basis, peak)}). Costs its forward again in backward: +{format_us(what_if.recompute_us)} per step."
            )
        return text + (gradient_bound_sentence(what_if) if what_if.remedy == "grads-to-none" else "")
    place = peak_place(what_if)
    after = (
        f"replayed, the peak is {format_bytes(what_if.peak_after or 0)}{' ' + place if place else ''}: "
        f"saves {format_bytes(saves)} ({share(saves, peak)} of the peak)"
    )
    if what_if.remedy == "grads-to-none":
        if not basis:
            text = (
                "Gradients set to None: saves nothing here; no gradient is zeroed in place at zero_grad "
                "(set_to_none=True, torch's default, frees them)."
            )
        else:
            text = (
                f"optimizer.zero_grad(set_to_none=True): gradients zeroed in place ({format_bytes(basis)} at the peak) "
                f"freed at zero_grad instead and made again in backward; {after}."
            )
        return text + gradient_bound_sentence(what_if)
    if what_if.remedy in ("no-momentum", "stateless-optimizer"):
        if not saves:
            return f"{name}: saves nothing here; there is no optimizer state at the peak."
        if what_if.remedy == "no-momentum":
            return f"SGD(momentum=0): without its momentum buffers ({format_bytes(basis)} at the peak); {after}."
        return (
            f"A stateless optimizer (SGD without momentum or weight decay) instead of {what_if.optimizer}: "
            f"without its state ({format_bytes(basis)} at the peak) and what its step allocates; {after}."
        )
    return (
        f"Half the batch: the tensors that grow with it halve ({format_bytes(basis)} at the peak: inputs, "
        f"activations, temporaries, autograd detail and untied blocks, but not what the weights make: their "
        f"copies, their gradients, the optimizer's tensors); {after}."
    )


def module_memory_detail(breakdown: MemoryBreakdown, module: ModuleMemory) -> Text:
    """The Memory view's detail for one module row: its bytes by category at the peak."""
    text = Text(module.label, style="bold")  # a trace's name: plain text, never markup
    text.append(f"  {format_bytes(module.total)} at the peak ({share(module.total, breakdown.peak_bytes)})")
    parts = sorted(((c, b) for c, b in module.bytes.items() if b and c != "total"), key=lambda item: -item[1])
    if parts:
        text.append("\n" + ", ".join(f"{CATEGORY_WORDS.get(c, c)} {format_bytes(b)}" for c, b in parts))
    checkpoint = next((w for w in breakdown.what_ifs if w.remedy == "checkpoint"), None)
    if module is breakdown.most_activations and checkpoint is not None:
        text.append("\nHolds the most activations at the peak: ", style="bold")
        text.append(
            f"checkpointing it saves at most {format_bytes(checkpoint.basis_bytes)} "
            f"({share(checkpoint.basis_bytes, checkpoint.peak_bytes)} of the peak) and costs "
            f"+{format_us(checkpoint.recompute_us)} per step (m: what-ifs)."
        )
    return text


def allocation_detail(allocation: PeakAllocation) -> Text:
    """The Memory view's detail for one allocation row."""
    text = Text(format_bytes(allocation.bytes), style="bold")
    if allocation.category:
        text.append(f" of {CATEGORY_WORDS.get(allocation.category, allocation.category)}")
    if allocation.count > 1:
        text.append(f" in {allocation.count} allocations")
    text.append(" live at the peak\noperator: ")
    text.append(allocation.operator or "(none: allocated before the capture, or outside every operator)")
    text.append("\nmodule: ")
    text.append(allocation.module or "(outside every module's forward)")
    text.append("\nPython stack (outermost first):" if allocation.stack else "\nPython stack: ", style="bold")
    if not allocation.stack:
        text.append(
            "(none: allocated before the capture, on a thread without Python frames, or a trace without with_stack)"
        )
    user = user_frame(allocation.stack)
    for frame in allocation.stack:
        text.append("\n  " + plain(frame, DISPLAY_CHARS), style="bold" if frame == user else "")
    return text


def peak_title(breakdown: MemoryBreakdown) -> Text:
    """``CPU memory by category: peak 159.7 MB in backward of step 3``."""
    place = peak_place(breakdown)
    kind = "by category" if breakdown.memory is not None else ""
    text = Text(f"{breakdown.device} memory {kind}".rstrip(), style="bold")
    text.append(f": peak {format_bytes(breakdown.peak_bytes)}{' ' + place if place else ''}", style="bold red")
    return text
