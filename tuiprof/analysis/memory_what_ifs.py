"""The memory what-ifs: torch's categorised timeline replayed with a remedy applied.

Subtracting a category at the peak was wrong when checked by making the change
(issue 35): the peak moves (gradients freed at ``zero_grad`` lighten the forward,
but the backward makes them again, so the peak can move into it), and torch's
categories are not what a remedy changes (Inductor's channels-last weight copies
are "input" to torch, yet do not grow with the batch).  Each what-if here edits the
saved timeline (analysis/memory_categories.py) change by change, the way the remedy
changes the run, and takes the peak of the result by torch's rule (the state after
each microsecond, the first highest point), so it is comparable with the peak of a
run made with the remedy:

- **gradients set to None** (``zero_grad(set_to_none=True)``): a gradient torch saw
  zeroed in place inside an ``Optimizer.zero_grad#`` span is freed there instead and
  made again at its next new version outside one (AccumulateGrad's ``add_`` in
  backward); the temporary that ``add_`` consumed (same bytes, freed just after) is
  the gradient itself when it is set to None, so it is not freed either;
- **no optimizer state**: every tensor torch ever calls optimizer state is left out;
  for an optimizer other than SGD the remedy is a stateless one (SGD without momentum
  or weight decay), so what its step allocated (Adam's ``sqrt`` and ``div``
  temporaries) is left out too;
- **a smaller batch**: a tensor scales with the batch when every version of it is an
  input, activation, temporary, autograd detail, memory torch tied to no tensor, or a
  "parameter" made during the capture that no module holds (torch's data-flow guess),
  unless it is one of the tensors a weight makes, which have a parameter's size:
  anything the optimizer's step makes; a weight's gradient before AccumulateGrad adds
  it into the kept one; in a module's forward, an input, temporary or untied block the
  size of a parameter of that module or one inside it (Inductor's channels-last weight
  buffers, oneDNN's reordered weights; layer1's activations are not taken for copies
  of layer4's weights); outside every forward (backward), an untied block or an input
  made during the capture the size of any parameter, or a tensor of a parameter's size
  that nothing growing with the batch in a forward has (a compiled backward's weight
  gradients; an activation's gradient has its activation's size).  What a module's
  forward saves for backward (torch's activations) always scales: BatchNorm's
  per-channel statistics do not, a few bytes per channel taken for the batch's.  Sizes
  are all the saved timeline has (no shapes), so an activation's gradient in backward
  exactly the size of some weight's reordered copy is still taken for one.

Where a remedy cannot be placed in the timeline (no ``zero_grad`` span), the caller
abstains.  docs/memory.md, "The what-ifs", has the measured errors.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.memory_categories import CategorisedMemory

ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"  # torch.optim wraps zero_grad and step in these spans
STEP_PREFIX = "Optimizer.step#"
STATE_FREE_OPTIMIZERS = ("SGD",)  # whose state is all there is to drop (momentum); others get a stateless one
BATCH_CATEGORIES = ("input", "activation", "temporary", "autograd_detail", "unknown")
# How far after a gradient's accumulation the temporary it consumed is looked for: AccumulateGrad
# frees it right after its add_, a few allocator changes later at most.
TEMPORARY_WINDOW = 64


@dataclass(frozen=True)
class Span:
    start_ns: int
    end_ns: int
    name: str  # "Optimizer.step#Adam.step"

    @property
    def optimizer(self) -> str:
        """``Adam`` of ``Optimizer.step#Adam.step``."""
        return self.name.partition("#")[2].partition(".")[0]


@dataclass(frozen=True)
class Replayed:
    """The peak of a replayed timeline, by torch's rule."""

    peak_bytes: int
    peak_ns: int


def named_spans(calls: OperatorCalls, prefix: str) -> list[Span]:
    """Every call whose name starts with ``prefix``, in start order."""
    ids = [index for index, name in enumerate(calls.names) if name.startswith(prefix)]
    if not ids:
        return []
    rows = np.flatnonzero(np.isin(np.asarray(calls.name_id, dtype=np.int64), ids)).tolist()
    return [Span(calls.start_ns[row], calls.end_ns[row], calls.name(row)) for row in rows]


def replay(memory: CategorisedMemory, deltas: np.ndarray) -> Replayed:
    """The peak of the timeline whose changes are ``deltas`` (signed bytes, one per change of
    ``memory``): the state after each point of torch's curve, the first highest."""
    totals = np.cumsum(deltas)[memory.changes.last_of_point]
    point = int(np.argmax(totals))
    return Replayed(int(totals[point]), int(memory.times_ns[point]))


def _inside(times: np.ndarray, spans: list[Span]) -> np.ndarray:
    """Per time: the index of the span holding it (-1: none); spans in start order, not nested."""
    if not spans:
        return np.full(len(times), -1, dtype=np.int64)
    starts = np.array([s.start_ns for s in spans], dtype=np.int64)
    ends = np.array([s.end_ns for s in spans], dtype=np.int64)
    index = np.searchsorted(starts, times, side="right") - 1
    found = (index >= 0) & (times >= 0) & (times <= ends[np.maximum(index, 0)])
    return np.where(found, index, -1)


def _new_versions(memory: CategorisedMemory) -> np.ndarray:
    """Per change: whether it and the next are a new version of one tensor (bytes out, then in)."""
    changes = memory.changes
    tensor, time, size = changes.tensor, changes.time_ns, changes.bytes
    starts = np.zeros(len(size), dtype=bool)
    starts[:-1] = (tensor[:-1] == tensor[1:]) & (time[:-1] == time[1:]) & (size[:-1] < 0) & (size[:-1] == -size[1:])
    return starts


def _first_changes(memory: CategorisedMemory) -> np.ndarray:
    """Per tensor row: the index of its first change."""
    tensor = memory.changes.tensor
    first = np.full(len(memory.changes.tensor_module), -1, dtype=np.int64)
    first[tensor[::-1]] = np.arange(len(tensor))[::-1]
    return first


def _last_changes(memory: CategorisedMemory) -> np.ndarray:
    """Per tensor row: the index of its last change."""
    last = np.full(len(memory.changes.tensor_module), -1, dtype=np.int64)
    last[memory.changes.tensor] = np.arange(len(memory.changes.tensor))
    return last


def gradients_set_to_none(memory: CategorisedMemory, zero_grads: list[Span]) -> tuple[np.ndarray, set[int]]:
    """The changes of the run with ``zero_grad(set_to_none=True)``, and the rows of the gradients
    ``zero_grad`` zeroed in place (none: it already sets them to None, nothing changes)."""
    changes = memory.changes
    deltas = changes.bytes.copy()
    pairs = _new_versions(memory)
    gradient = memory.categories.index("gradient")
    in_zero_grad = _inside(changes.time_ns, zero_grads)
    zeroed = np.flatnonzero(pairs & (changes.category == gradient) & (in_zero_grad >= 0))
    if not len(zeroed):
        return deltas, set()
    order = np.argsort(changes.tensor, kind="stable")  # each row's changes together, in time order
    by_row = changes.tensor[order]
    first, last = _first_changes(memory), _last_changes(memory)
    for index in zeroed.tolist():
        row = int(changes.tensor[index])
        deltas[index + 1] = 0  # freed at zero_grad: the zeroed version is never made
        start, end = np.searchsorted(by_row, [row, row + 1])
        position = int(start + np.searchsorted(order[start:end], index + 1, side="right"))
        span_end = zero_grads[int(in_zero_grad[index])].end_ns
        while position < end:
            later = int(order[position])
            if not pairs[later]:  # freed for good (or a change torch pairs with none): it already was
                if changes.bytes[later] < 0:
                    deltas[later] = 0
                break
            if in_zero_grad[later] >= 0:  # zeroed again before any backward: still None
                deltas[later] = deltas[later + 1] = 0
                position += 2
                continue
            # Its accumulation: made again here, from the temporary it would have consumed.
            temporary = _consumed_temporary(memory, later, row, span_end, first, last)
            deltas[later] = 0
            if temporary >= 0:
                deltas[later + 1] = 0
                deltas[temporary] = 0
            break
    return deltas, set(changes.tensor[zeroed].tolist())


def _consumed_temporary(
    memory: CategorisedMemory, accumulated: int, row: int, after_ns: int, first: np.ndarray, last: np.ndarray
) -> int:
    """The change freeing the tensor AccumulateGrad added into gradient ``row`` at change
    ``accumulated``: the first one freed after it, of the gradient's bytes, made after
    ``after_ns`` (the zero_grad) and before the accumulation; -1 when there is none."""
    changes = memory.changes
    size = -int(changes.bytes[accumulated])
    end = min(len(changes.bytes), accumulated + 2 + TEMPORARY_WINDOW)
    for index in range(accumulated + 2, end):
        other = int(changes.tensor[index])
        if other == row or changes.bytes[index] != -size or last[other] != index:
            continue
        made = int(first[other])
        if made < accumulated and changes.time_ns[made] > after_ns:
            return index
    return -1


def without_optimizer_state(memory: CategorisedMemory, steps: list[Span]) -> np.ndarray:
    """The changes of the run without optimizer state: every tensor torch ever called optimizer
    state left out and, in a step of an optimizer other than SGD (replaced by a stateless one),
    every tensor made there."""
    changes = memory.changes
    state = memory.categories.index("optimizer_state")
    dropped = np.zeros(len(changes.tensor_module), dtype=bool)
    dropped[changes.tensor[changes.category == state]] = True
    replaced = [span for span in steps if span.optimizer not in STATE_FREE_OPTIMIZERS]
    if replaced:
        first = _first_changes(memory)
        made_in_step = _inside(changes.time_ns[first], replaced) >= 0
        dropped |= made_in_step & (changes.bytes[first] > 0)
    return np.where(dropped[changes.tensor], 0, changes.bytes)


def batch_sized(
    memory: CategorisedMemory, parents: Mapping[str, str], steps: list[Span], zero_grads: list[Span]
) -> np.ndarray:
    """Per tensor row: whether it grows with the batch (the rules: the module docstring).
    ``parents``: each module's name -> its parent's ("" at the top); ``steps`` and
    ``zero_grads``: the optimizer's spans."""
    changes = memory.changes
    categories = memory.categories
    rows = len(changes.tensor_module)
    first = _first_changes(memory)
    made_ns = np.where(first >= 0, changes.time_ns[first], -1)
    made_as = changes.category[first]
    parameter = changes.category == categories.index("parameter")
    owned = np.array([bool(name) for name in changes.tensor_module], dtype=bool)
    real = np.zeros(rows, dtype=bool)
    real[changes.tensor[parameter]] = True
    real &= owned | (made_ns < 0)  # torch's "parameter" made during the capture that no module holds: its guess
    candidate = np.isin(changes.category, [categories.index(c) for c in BATCH_CATEGORIES])
    other = np.zeros(rows, dtype=bool)
    other[changes.tensor[~(candidate | (parameter & ~real[changes.tensor]))]] = True
    sizes = np.abs(changes.bytes[first])
    anywhere: set[int] = set()  # sizes of parameters no module holds (a compiled model's, captured without it)
    scoped: set[tuple[str, int]] = set()  # (module, or "" for the whole model; a size of a parameter inside it)
    for row in np.flatnonzero(real).tolist():
        size, module = int(sizes[row]), changes.tensor_module[row]
        if not module:
            anywhere.add(size)
        scoped.add(("", size))
        while module:
            scoped.add((module, size))
            module = parents.get(module, "")
    found = ~other & (first >= 0) & (_inside(made_ns, steps) < 0)  # the optimizer works on parameters
    found[_consumed_temporaries(memory, zero_grads)] = False  # weights' gradients before they are accumulated
    unknown, activation, given = (categories.index(c) for c in ("unknown", "activation", "input"))
    forward_sizes: set[int] = set()  # of what grows with the batch in the forwards: its gradients have them
    for row in np.flatnonzero(found & owned).tolist():  # made in that module's forward
        size, module = int(sizes[row]), changes.tensor_module[row]
        if made_as[row] == activation:  # saved for backward: the batch's (BatchNorm's few bytes of statistics too)
            forward_sizes.add(size)
            continue
        scope = module if module in parents else ""
        found[row] = not (size in anywhere or (scope, size) in scoped)
        if found[row]:
            forward_sizes.add(size)
    for row in np.flatnonzero(found & ~owned).tolist():  # outside every forward: backward, the loss
        size, made_as_code = int(sizes[row]), int(made_as[row])
        if made_as_code == given and made_ns[row] < 0:  # the batch, loaded before the capture
            continue
        copied = made_as_code in (unknown, given)  # a reordered or copied weight
        if ("", size) in scoped and (copied or size not in forward_sizes):  # else an activation's gradient
            found[row] = False
    return found


def _consumed_temporaries(memory: CategorisedMemory, zero_grads: list[Span]) -> list[int]:
    """The rows of the tensors AccumulateGrad added into a gradient kept between steps."""
    changes = memory.changes
    gradient = memory.categories.index("gradient")
    accumulated = _new_versions(memory) & (changes.category == gradient) & (_inside(changes.time_ns, zero_grads) < 0)
    first, last = _first_changes(memory), _last_changes(memory)
    found = []
    for index in np.flatnonzero(accumulated).tolist():
        temporary = _consumed_temporary(memory, index, int(changes.tensor[index]), -1, first, last)
        if temporary >= 0:
            found.append(int(changes.tensor[temporary]))
    return found


def batch_scaled(memory: CategorisedMemory, sized: np.ndarray, numerator: int, denominator: int) -> np.ndarray:
    """The changes of the run at ``numerator / denominator`` of the batch; ``sized``: :func:`batch_sized`."""
    changes = memory.changes
    scaled = sized[changes.tensor]
    resized = np.sign(changes.bytes) * (np.abs(changes.bytes) * numerator // denominator)
    return np.where(scaled, resized, changes.bytes)
