"""Two traces compared: a verdict on the step time, then matched tables at every level.

``diff_traces(a, b)`` takes the models of run A and run B (one per rank; several
ranks are averaged) and returns a frozen :class:`TraceDiff`:

- the **verdict**: the median step of A against the median step of B, and the
  step-to-step noise of each side (its steps' range over its median); a
  difference inside the larger noise is "no change";
- **tables** matched by key: operators by name and by name + input shapes,
  modules by path (by qualified name when both sides know them), with a row
  ``(outside modules)`` for the work outside them (so work moved out of the
  model, or into it, shows where it went), kernels by
  their whole name (each template instance its own row) and by (launching
  operator, kernel), steps by position, memory peaks by
  device.  Each row has A, B, delta, delta % and its share of the table's
  total delta; rows are sorted by absolute delta, rows only in A are
  ``removed`` and rows only in B ``added``;
- **structural alignment**: an operator (or kernel) name that exists on one
  side only is placed under its nearest ancestor operator whose name both
  sides have (``aten::cudnn_convolution`` and ``aten::miopen_convolution``
  both under ``aten::convolution``); a few names that meet under the same
  ancestor become one ``aligned`` row, so the time is compared where it moved;
- **batch**: each side's batch (:mod:`tuiprof.analysis.batch`); when both are
  known and differ, the verdict and every time table are per sample;
- **overlap**: each side's share of operator time in operators both sides
  run; below :data:`SAME_PROGRAM_SHARE_PCT` the traces look like different
  programs (the report says so first and the gates refuse to judge);
- **notes**: one line per thing that could not be compared (no steps, no
  module tree, a CPU-only side, an unknown batch).

Units follow the tables: operator, module and kernel times are totals over
the trace (``_us``), divided by the step count when the two sides recorded a
different number of steps, by the batch when the batches differ, and by the rank count when a side has several
ranks (a mean rank).  Steps take the slowest rank at each position (a
synchronous step waits for it).  Pure Python and numpy: no torch, no Textual.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from tuiprof.analysis.arrays import gather, nearest_ancestor
from tuiprof.analysis.batch import Batch, detect_batch
from tuiprof.analysis.build import analyze, load_model
from tuiprof.analysis.calls import is_step_name
from tuiprof.analysis.compiled_diff import (
    is_compiled,
    knows_qualified_names,
    module_self_parts,
    qualified_module_values,
    tree_total,
)
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.operators import STEP_WILDCARD
from tuiprof.errors import TraceError
from tuiprof.trace import load_trace_file, resolve_trace
from tuiprof.trace.columns import OPERATOR_CATEGORY_CODES

# Operator deltas "cover" the step delta when they sum to it within this share.
COVERAGE_TOLERANCE = 0.01
# Below this share of either side's operator time in operators both sides run
# (matched by name, or aligned), two traces look like different programs.
# Measured: two runs of one program share 99-100 %; ResNet training on an MI300
# (torch 2.x) against ResNet-50 on a V100 (torch 1.9, other backward names)
# 37-40 %; unrelated pairs (ResNet vs a transformer, DLRM vs ResNet, an HF
# ViT vs ResNet) 4-17 % on the smaller side.
SAME_PROGRAM_SHARE_PCT = 30.0
CONTRIBUTORS = 5
ALIGN_ARROW = " → "
# An aligned row reads as a rename (cudnn -> miopen, a kernel split in two or
# three): more names on a side under one ancestor are different work, not a rename.
MAX_ALIGNED_NAMES = 3

TABLES = ("ops", "shapes", "modules", "kernels", "launchers", "steps", "memory")


@dataclass(frozen=True)
class DiffRow:
    """One key compared: ``a``/``b`` are None where the key is absent on that side."""

    name: str  # operator, module, kernel, "step 1", device; "x → y" when aligned
    detail: str  # input shapes, launching operator, step names, where it was aligned
    a: float | None
    b: float | None
    calls_a: float
    calls_b: float
    status: str  # "same" | "changed" | "added" | "removed" | "aligned"
    share_pct: float | None  # of the table's total delta (None when that is 0)
    aligned_under: str = ""  # the common ancestor of an aligned row

    @property
    def delta(self) -> float:
        return (self.b or 0.0) - (self.a or 0.0)

    @property
    def delta_pct(self) -> float | None:
        return 100 * self.delta / self.a if self.a else None


@dataclass(frozen=True)
class DiffTable:
    """One level of the comparison; ``total_*`` is what the rows share out."""

    name: str  # one of TABLES
    title: str
    metric: str  # what A and B hold, in words
    unit: str  # "us" | "bytes"
    total_a: float
    total_b: float
    rows: tuple[DiffRow, ...]
    note: str = ""  # why the table is empty, or a caveat

    @property
    def total_delta(self) -> float:
        return self.total_b - self.total_a

    def row(self, name: str, detail: str | None = None) -> DiffRow | None:
        for row in self.rows:
            if row.name == name and (detail is None or row.detail == detail):
                return row
        return None


@dataclass(frozen=True)
class Verdict:
    """Median step of A against B, with each side's step-to-step spread.

    When both batches are known and differ (and both sides have steps), each
    median is divided by its batch: the verdict, and the gate, compare time
    per sample."""

    basis: str  # "steps" | "trace window" (a side without ProfilerStep spans)
    median_a_us: float  # the median step (or the trace window), not divided by the batch
    median_b_us: float
    steps_a: int
    steps_b: int
    spread_a_pct: float | None  # (max - min) / median of a side's steps; None with one step
    spread_b_pct: float | None
    outcome: str  # "faster" | "slower" | "no change"
    contributors: tuple[DiffRow, ...]  # the operators that moved most
    batch_a: Batch
    batch_b: Batch
    per_sample: bool

    @property
    def compared_a_us(self) -> float:
        """What the verdict compares: A's median step, per sample when :attr:`per_sample`."""
        return self.median_a_us / self.batch_a.size if self.per_sample and self.batch_a.size else self.median_a_us

    @property
    def compared_b_us(self) -> float:
        return self.median_b_us / self.batch_b.size if self.per_sample and self.batch_b.size else self.median_b_us

    @property
    def delta_us(self) -> float:
        return self.compared_b_us - self.compared_a_us

    @property
    def delta_pct(self) -> float:
        return 100 * self.delta_us / self.compared_a_us if self.compared_a_us else 0.0

    @property
    def noise_pct(self) -> float:
        """The larger spread of the two sides (0 when neither has two steps)."""
        return max(self.spread_a_pct or 0.0, self.spread_b_pct or 0.0)

    @property
    def ratio(self) -> float:
        """How many times faster (or slower) B is: always >= 1."""
        small, large = sorted((self.compared_a_us, self.compared_b_us))
        return large / small if small else 1.0


@dataclass(frozen=True)
class Overlap:
    """How much of each side's operator time is in operators both sides run
    (same name, or aligned as a rename): the measure of "the same program"."""

    shared_a_pct: float  # of A's operator time (the ops table's metric)
    shared_b_pct: float

    @property
    def shared_pct(self) -> float:
        """The smaller side's share: one program inside a bigger one is not the same program."""
        return min(self.shared_a_pct, self.shared_b_pct)

    @property
    def different_programs(self) -> bool:
        return self.shared_pct < SAME_PROGRAM_SHARE_PCT


@dataclass(frozen=True)
class Coverage:
    """Whether the operator deltas add up to the step delta.

    They do when operators cover the steps (one thread, no Python frames
    between operators, nothing outside steps); ``covered`` is None when the
    check does not apply (a side without steps, or device time)."""

    operator_delta_us: float
    step_delta_us: float
    covered: bool | None
    reason: str = ""  # why the check does not apply


@dataclass(frozen=True)
class TraceDiff:
    label_a: str
    label_b: str
    verdict: Verdict
    tables: tuple[DiffTable, ...]  # in TABLES order
    notes: tuple[str, ...]  # one line per thing not compared (or compared with a caveat)
    coverage: Coverage
    peak_a_bytes: int | None
    peak_b_bytes: int | None
    overlap: Overlap  # how much of each side is in operators both run

    def table(self, name: str) -> DiffTable:
        for table in self.tables:
            if table.name == name:
                return table
        raise KeyError(name)

    def slower_than(self, threshold_pct: float) -> bool:
        """B's median step (per sample when the batches differ) is more than
        ``threshold_pct`` slower, beyond the noise."""
        return self.verdict.outcome == "slower" and self.verdict.delta_pct > threshold_pct

    def memory_grew_over(self, threshold_pct: float) -> bool:
        """B's memory peak is more than ``threshold_pct`` above A's."""
        if not self.peak_a_bytes or self.peak_b_bytes is None:
            return False
        return 100 * (self.peak_b_bytes - self.peak_a_bytes) / self.peak_a_bytes > threshold_pct

    def regressions(self, count: int = CONTRIBUTORS) -> list[DiffRow]:
        """The operators that grew most (for a failing gate's message)."""
        rows = [r for r in self.table("ops").rows if r.delta > 0]
        return sorted(rows, key=lambda r: -r.delta)[:count]


# ------------------------------------------------------------------ one side

Values = dict[tuple[str, str], list[float]]  # (name, detail) -> [value, calls]


@dataclass(frozen=True)
class _Side:
    models: tuple[TraceModel, ...]  # one per rank
    scale: tuple[float, ...]  # per model: 1 / (ranks x steps when normalising per step x batch per sample)
    samples: int = 1  # what step times are divided by: the batch when comparing per sample

    def collect(self, values_of: Callable[[TraceModel], Values]) -> Values:
        """Per-model values, scaled and summed over ranks (a mean rank)."""
        result: Values = {}
        for model, scale in zip(self.models, self.scale):
            for key, (value, calls) in values_of(model).items():
                cell = result.setdefault(key, [0.0, 0.0])
                cell[0] += value * scale
                cell[1] += calls * scale * self.samples  # calls stay per step: 0.3 calls a sample means nothing
        return result

    def step_durations(self) -> list[float]:
        """Step durations by position, the slowest rank at each."""
        by_position: list[float] = []
        for model in self.models:
            for i, step in enumerate(model.steps):
                if i < len(by_position):
                    by_position[i] = max(by_position[i], step.duration_us)
                else:
                    by_position.append(step.duration_us)
        return by_position


def _side(group: tuple[TraceModel, ...], per_step: bool, samples: int) -> _Side:
    scale = tuple(1 / (len(group) * (len(m.steps) if per_step and m.steps else 1) * samples) for m in group)
    return _Side(group, scale, samples)


def _table_name(name: str) -> str:
    return STEP_WILDCARD if is_step_name(name) else name


# ------------------------------------------------------------------ the diff


def diff_traces(
    a: TraceModel | Sequence[TraceModel],
    b: TraceModel | Sequence[TraceModel],
    *,
    metric: str = "auto",
    label_a: str = "A",
    label_b: str = "B",
) -> TraceDiff:
    """Compare run A with run B (each one model, or one per rank).

    ``metric`` is the time operators, modules and kernels' launchers are
    compared by: ``device`` (self device time), ``cpu`` (self CPU time) or
    ``auto`` (device when both sides have device activity)."""
    group_a = (a,) if isinstance(a, TraceModel) else tuple(a)
    group_b = (b,) if isinstance(b, TraceModel) else tuple(b)
    if not group_a or not group_b:
        raise ValueError("each side of a diff needs at least one trace")
    notes: list[str] = []
    step_counts = (len(group_a[0].steps), len(group_b[0].steps))
    batch_a, batch_b = detect_batch(group_a[0]), detect_batch(group_b[0])
    per_sample = _per_sample(batch_a, batch_b, all(step_counts))
    # Like with like: per step when the step counts differ, and always when comparing per sample
    # (the verdict's per-sample step time is one step's; an operator's must be too).
    per_step = all(step_counts) and (step_counts[0] != step_counts[1] or per_sample)
    if per_step and step_counts[0] != step_counts[1]:
        notes.append(
            f"A recorded {step_counts[0]} steps and B {step_counts[1]}: operator, module and kernel times are per step"
        )
    notes.extend(_batch_notes(batch_a, batch_b, per_sample, all(step_counts)))
    side_a = _side(group_a, per_step, (batch_a.size or 1) if per_sample else 1)
    side_b = _side(group_b, per_step, (batch_b.size or 1) if per_sample else 1)
    device_a = all(m.has_device for m in group_a)
    device_b = all(m.has_device for m in group_b)
    if metric == "auto":
        metric = "device" if device_a and device_b else "cpu"
    if metric == "device" and not (device_a and device_b):
        metric = "cpu"
        notes.append("device time asked for, but a side has no device activity: compared by CPU time")
    notes.extend(_kind_notes(group_a, group_b, device_a, device_b))

    ops = _operator_table(side_a, side_b, metric)
    tables = [
        ops,
        _shape_table(side_a, side_b, metric)
        if not per_sample
        else _not_compared(
            "shapes",
            "Operators by input shape",
            _metric_words(metric),
            "us",
            "the batch changed, so every input shape did (the Operators table compares per sample)",
        ),
        _module_table(side_a, side_b, metric),
        _kernel_table(side_a, side_b, device_a, device_b),
        _launcher_table(side_a, side_b, device_a, device_b),
        _step_table(side_a, side_b),
        _memory_table(side_a, side_b),
    ]
    if per_sample:  # say it in every table's metric (memory peaks are not divided)
        tables = [t if t.name == "memory" else replace(t, metric=f"{t.metric} per sample") for t in tables]
    for table in tables:  # one line per missing thing (kernels and launchers miss the same)
        line = f"{table.title}: {table.note}"
        if table.note.startswith("not compared") and not any(table.note in n for n in notes):
            notes.append(line)
    steps = tables[TABLES.index("steps")]
    verdict = _verdict(side_a, side_b, ops, batch_a, batch_b, per_sample)
    return TraceDiff(
        label_a=label_a,
        label_b=label_b,
        verdict=verdict,
        tables=tuple(tables),
        notes=tuple(notes),
        coverage=_coverage(ops, steps, metric, per_step),
        peak_a_bytes=_peak(group_a),
        peak_b_bytes=_peak(group_b),
        overlap=_overlap(ops),
    )


def _per_sample(batch_a: Batch, batch_b: Batch, both_have_steps: bool) -> bool:
    """Compare per sample when both batches are known and differ, and both sides
    have steps (a trace window may hold any number of batches)."""
    return both_have_steps and bool(batch_a.size and batch_b.size) and batch_a.size != batch_b.size


def _batch_notes(batch_a: Batch, batch_b: Batch, per_sample: bool, both_have_steps: bool) -> list[str]:
    """Where each side's batch was read, and what that means for the comparison."""
    same = batch_a.source == batch_b.source
    sources = f"A and B: {batch_a.source}" if same else f"A: {batch_a.source}; B: {batch_b.source}"
    if per_sample:
        return [
            f"batch {batch_a.size} -> {batch_b.size}: times are per step and per sample, memory peaks are not ({sources})"
        ]
    if batch_a.size is None or batch_b.size is None:
        return [f"batch unknown ({sources}): compared per step, as if the batches were equal"]
    if batch_a.size != batch_b.size and not both_have_steps:
        return [f"batch {batch_a.size} -> {batch_b.size}, but a side has no steps: not compared per sample ({sources})"]
    return []


def _kind_notes(group_a, group_b, device_a: bool, device_b: bool) -> list[str]:
    """One line per way the two traces differ in kind."""
    notes = []
    if device_a != device_b:
        cpu_side, device_side = ("B", "A") if device_a else ("A", "B")
        notes.append(f"{device_side} ran on a device and {cpu_side} is CPU-only: operators are compared by CPU time")
    devices_a = sorted({d for m in group_a for d in m.info.devices})
    devices_b = sorted({d for m in group_b for d in m.info.devices})
    if devices_a and devices_b and devices_a != devices_b:
        notes.append(f"different devices: A on {', '.join(devices_a)}, B on {', '.join(devices_b)}")
    return notes


def _peak(group: Sequence[TraceModel]) -> int | None:
    peaks = [m.peak_memory.peak_bytes for m in group if m.peak_memory is not None]
    return max(peaks) if peaks else None


# ------------------------------------------------------------------ rows


def _rows(
    values_a: Values, values_b: Values, total_delta: float, aligned: list[DiffRow] | None = None
) -> tuple[DiffRow, ...]:
    """Matched rows plus the aligned ones, sorted by absolute delta (then name)."""
    rows = list(aligned or [])
    for key in values_a.keys() | values_b.keys():
        a, b = values_a.get(key), values_b.get(key)
        status = "removed" if b is None else "added" if a is None else "same" if a[0] == b[0] else "changed"
        rows.append(
            DiffRow(
                name=key[0],
                detail=key[1],
                a=a[0] if a else None,
                b=b[0] if b else None,
                calls_a=a[1] if a else 0.0,
                calls_b=b[1] if b else 0.0,
                status=status,
                share_pct=None,
            )
        )
    rows = [_with_share(r, total_delta) for r in rows]
    rows.sort(key=lambda r: (-abs(r.delta), r.name, r.detail))
    return tuple(rows)


def _with_share(row: DiffRow, total_delta: float) -> DiffRow:
    share = 100 * row.delta / total_delta if total_delta else None
    return DiffRow(row.name, row.detail, row.a, row.b, row.calls_a, row.calls_b, row.status, share, row.aligned_under)


def _total(values: Values) -> float:
    return sum(v[0] for v in values.values())


def _table(name: str, title: str, metric: str, unit: str, values_a: Values, values_b: Values) -> DiffTable:
    """A table of keys matched by equality (no alignment)."""
    total_a, total_b = _total(values_a), _total(values_b)
    return DiffTable(name, title, metric, unit, total_a, total_b, _rows(values_a, values_b, total_b - total_a))


def _who(missing: list[str]) -> str:
    """ "A has" / "A and B have"."""
    return f"{' and '.join(missing)} {'has' if len(missing) == 1 else 'have'}"


def _not_compared(name: str, title: str, metric: str, unit: str, why: str) -> DiffTable:
    return DiffTable(name, title, metric, unit, 0.0, 0.0, (), f"not compared: {why}")


# ------------------------------------------------------------------ operators


def _self_column(metric: str) -> str:
    return "self_device_ns" if metric == "device" else "self_ns"


def _metric_words(metric: str) -> str:
    return "self device time" if metric == "device" else "self CPU time"


def _operator_values(metric: str, group_by_shape: bool) -> Callable[[TraceModel], Values]:
    attribute = "self_device_us" if metric == "device" else "self_cpu_us"

    def values(model: TraceModel) -> Values:
        table = model.operators(group_by_shape=group_by_shape)
        return {(s.name, s.input_shapes or ""): [getattr(s, attribute), s.calls] for s in table}

    return values


def _operator_table(side_a: _Side, side_b: _Side, metric: str) -> DiffTable:
    values_a = side_a.collect(_operator_values(metric, False))
    values_b = side_b.collect(_operator_values(metric, False))
    total_a, total_b = _total(values_a), _total(values_b)
    matched = {k[0] for k in values_a.keys() & values_b.keys()}
    only_a = {k[0] for k in values_a.keys() - values_b.keys()}
    only_b = {k[0] for k in values_b.keys() - values_a.keys()}
    column = _self_column(metric)
    placed_a = side_a.collect(_operators_under_matched_ancestor(only_a, matched, column))
    placed_b = side_b.collect(_operators_under_matched_ancestor(only_b, matched, column))
    runtime = _runtime_names(side_a, side_b)
    aligned = _align(values_a, values_b, placed_a, placed_b, lambda name: "runtime" if name in runtime else "op")
    return DiffTable(
        "ops",
        "Operators",
        _metric_words(metric),
        "us",
        total_a,
        total_b,
        _rows(values_a, values_b, total_b - total_a, aligned),
    )


def _shape_table(side_a: _Side, side_b: _Side, metric: str) -> DiffTable:
    values_a = side_a.collect(_operator_values(metric, True))
    values_b = side_b.collect(_operator_values(metric, True))
    return _table("shapes", "Operators by input shape", _metric_words(metric), "us", values_a, values_b)


def _matched_ancestors(model: TraceModel, matched: set[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per call: whether both sides have its name, and its nearest ancestor that does (-1: none)."""
    calls = model.calls
    is_matched = np.isin(calls.column("name_id"), calls.name_codes(lambda n: _table_name(n) in matched))
    return is_matched, nearest_ancestor(calls.column("parent"), is_matched)


def _placed(
    model: TraceModel,
    names: list[str],
    codes: np.ndarray,
    ancestors: np.ndarray,
    times_ns: np.ndarray,
    operator_names: bool = True,
) -> Values:
    """(name, ancestor's name) -> [time, count], for events with name codes
    ``codes`` (into ``names``) under call rows ``ancestors`` (-1: none).  ``operator_names``:
    the events are operators, named as the operator table names them (``ProfilerStep*``);
    device events keep their names as the kernel table has them (a device event may be
    called ``ProfilerStep#3``: a planted trace's kernel was one).

    One ``np.unique`` over (name, ancestor name) pairs: a cross-vendor diff
    of a big trace has a million unmatched launches."""
    calls = model.calls
    width = len(calls.names) + 1
    up_codes = gather(calls.column("name_id"), ancestors, -1)  # safe when no operator at all
    pairs, inverse = np.unique(codes * width + up_codes + 1, return_inverse=True)
    totals = np.bincount(inverse, weights=times_ns, minlength=len(pairs))
    counts = np.bincount(inverse, minlength=len(pairs))
    result: Values = {}
    for pair, total, count in zip(pairs.tolist(), totals.tolist(), counts.tolist()):
        code, up = divmod(pair, width)
        name = _table_name(names[code]) if operator_names else names[code]
        key = (name, _table_name(calls.names[up - 1]) if up else "")
        cell = result.setdefault(key, [0.0, 0.0])  # ProfilerStep#N names meet in one key
        cell[0] += total / 1000
        cell[1] += count
    return result


def _operators_under_matched_ancestor(
    unmatched: set[str], matched: set[str], column: str
) -> Callable[[TraceModel], Values]:
    """Calls of operators one side lacks, by their nearest ancestor both sides have."""

    def values(model: TraceModel) -> Values:
        if not unmatched:
            return {}
        calls = model.calls
        name_id = calls.column("name_id")
        _, above = _matched_ancestors(model, matched)
        rows = np.flatnonzero(np.isin(name_id, calls.name_codes(lambda n: _table_name(n) in unmatched)))
        return _placed(model, calls.names, name_id[rows], above[rows], calls.column(column)[rows])

    return values


def _kernels_under_matched_operator(unmatched: set[str], matched: set[str]) -> Callable[[TraceModel], Values]:
    """Device events one side lacks, by their launcher when both sides have that
    operator, else by the launcher's nearest ancestor both sides have."""

    def values(model: TraceModel) -> Values:
        if not unmatched:
            return {}
        activity = model.activity
        is_matched, above = _matched_ancestors(model, matched)
        codes = [c for c, n in enumerate(activity.names) if n in unmatched]
        rows = np.flatnonzero(np.isin(activity.events.name, codes))
        who = activity.launchers[rows]
        # gather: safe when the side has device events but no operator at all
        ancestors = np.where(gather(is_matched, who, False), who, gather(above, who, -1))
        return _placed(
            model, activity.names, activity.events.name[rows], ancestors, activity.dur_ns[rows], operator_names=False
        )

    return values


def _align(
    values_a: Values, values_b: Values, placed_a: Values, placed_b: Values, kind_of: Callable[[str], str]
) -> list[DiffRow]:
    """Turn names found on one side only into aligned rows where both sides
    have such names of the same kind (operator or runtime call; kernel, memcpy
    or memset) under the same ancestor; take their time out of
    ``values_a``/``values_b`` (which keep what stays removed or added).

    Only a rename is aligned: at most :data:`MAX_ALIGNED_NAMES` names a side,
    under an ancestor that is not a step span (everything of a step is under
    it).  Two unrelated programs would otherwise meet as one row of dozens of
    names under ``ProfilerStep*`` or a ``model_train`` annotation."""

    def groups(placed: Values) -> dict[tuple[str, str], dict[str, list[float]]]:
        result: dict[tuple[str, str], dict[str, list[float]]] = {}
        for (name, up), value in placed.items():
            if up:
                result.setdefault((up, kind_of(name)), {})[name] = value
        return result

    def keys_by_name(values: Values) -> dict[str, tuple[str, str]]:
        """A name's first key in ``values``: one pass, not a scan per aligned name
        (50,000 names aligned under as many ancestors took a minute)."""
        first: dict[str, tuple[str, str]] = {}
        for key in values:
            first.setdefault(key[0], key)
        return first

    groups_a, groups_b = groups(placed_a), groups(placed_b)
    keys_a, keys_b = keys_by_name(values_a), keys_by_name(values_b)
    aligned = []
    for up, kind in sorted(groups_a.keys() & groups_b.keys()):
        mine_a, mine_b = groups_a[(up, kind)], groups_b[(up, kind)]
        if up == STEP_WILDCARD or max(len(mine_a), len(mine_b)) > MAX_ALIGNED_NAMES:
            continue  # a step holds everything; many names are different work: left removed and added
        for names, values, keys in ((mine_a, values_a, keys_a), (mine_b, values_b, keys_b)):
            for name, (time, calls) in names.items():
                key = keys[name]
                values[key][0] -= time
                values[key][1] -= calls
        aligned.append(
            DiffRow(
                name=" + ".join(sorted(mine_a)) + ALIGN_ARROW + " + ".join(sorted(mine_b)),
                detail=f"aligned under {up}",
                a=sum(v[0] for v in mine_a.values()),
                b=sum(v[0] for v in mine_b.values()),
                calls_a=sum(v[1] for v in mine_a.values()),
                calls_b=sum(v[1] for v in mine_b.values()),
                status="aligned",
                share_pct=None,
                aligned_under=up,
            )
        )
    for values in (values_a, values_b):  # names wholly aligned leave no removed/added row
        for key in [k for k, v in values.items() if v[1] <= 1e-9]:
            del values[key]
    return aligned


def _runtime_names(*sides: _Side) -> set[str]:
    """Names of runtime and driver calls (``cudaLaunchKernel``, ``hipLaunchKernel``):
    they align with each other, not with operators."""
    names: set[str] = set()
    for side in sides:
        for model in side.models:
            calls = model.calls
            categories = calls.cpu.category[np.frombuffer(calls.cpu_row, dtype=np.int64)]
            codes = np.unique(calls.column("name_id")[~np.isin(categories, OPERATOR_CATEGORY_CODES)])
            names.update(calls.names[code] for code in codes.tolist())
    return names


# ------------------------------------------------------------------ modules


def _module_values(metric: str, by_direction: bool) -> Callable[[TraceModel], Values]:
    return lambda model: qualified_module_values(model, metric, by_direction)


def _path_values(metric: str) -> Callable[[TraceModel], Values]:
    def values(model: TraceModel) -> Values:
        result: Values = {}
        for node in model.modules.rows():  # (outside modules) too: work moved out of the model shows
            cell = result.setdefault((node.path, ""), [0.0, 0.0])
            cell[0] += sum(module_self_parts(node, metric))
            cell[1] += node.calls
        return result

    return values


def _module_table(side_a: _Side, side_b: _Side, metric: str) -> DiffTable:
    """Modules by qualified name when both sides know them (an eager and a compiled tree
    alike: analysis/compiled_diff.py, which says why a compiled side is compared by total time), else by path."""
    title = "Modules"
    words = f"self {'device' if metric == 'device' else 'CPU'} time, forward and backward"
    missing = [label for label, side in (("A", side_a), ("B", side_b)) if not all(m.modules.roots for m in side.models)]
    if missing:
        return _not_compared(
            "modules", title, words, "us", f"{_who(missing)} no module tree (recorded without with_stack=True)"
        )
    models = [m for side in (side_a, side_b) for m in side.models]
    if not all(knows_qualified_names(m) for m in models):
        return _table(
            "modules", title, words, "us", side_a.collect(_path_values(metric)), side_b.collect(_path_values(metric))
        )
    if not any(is_compiled(m) for m in models):
        return _table(
            "modules",
            title,
            words,
            "us",
            side_a.collect(_module_values(metric, False)),
            side_b.collect(_module_values(metric, False)),
        )
    words = (
        f"total {'device' if metric == 'device' else 'CPU'} time (submodules included), a row per module and direction"
    )
    values_a, values_b = side_a.collect(_module_values(metric, True)), side_b.collect(_module_values(metric, True))
    total_a, total_b = (_total(side.collect(lambda m: tree_total(m, metric))) for side in (side_a, side_b))
    return DiffTable("modules", title, words, "us", total_a, total_b, _rows(values_a, values_b, total_b - total_a))


# ------------------------------------------------------------------ kernels


def _kernel_values(model: TraceModel) -> Values:
    return {(k.name, k.kind): [k.device_total_us, k.calls] for k in model.kernels}


def _launcher_values(model: TraceModel) -> Values:
    """(kernel, launching operator) -> device time and launches."""
    activity = model.activity
    name_id = model.calls.column("name_id")
    launcher_code = gather(name_id, activity.launchers, -1)  # safe when no operator at all
    width = len(activity.names) + 1
    keys = (launcher_code + 1) * width + activity.events.name
    unique, inverse = np.unique(keys, return_inverse=True)
    totals = np.bincount(inverse, weights=activity.dur_ns, minlength=len(unique))
    counts = np.bincount(inverse, minlength=len(unique))
    result: Values = {}
    for key, total, count in zip(unique.tolist(), totals.tolist(), counts.tolist()):
        op, kernel = divmod(key, width)
        who = _table_name(model.calls.names[op - 1]) if op else "(no launcher)"
        result[(activity.names[kernel], who)] = [total / 1000, count]
    return result


def _device_missing(device_a: bool, device_b: bool) -> str:
    missing = [label for label, has in (("A", device_a), ("B", device_b)) if not has]
    return f"{_who(missing)} no device activity (CPU-only)"


def _kernel_table(side_a: _Side, side_b: _Side, device_a: bool, device_b: bool) -> DiffTable:
    title, words = "Kernels", "device time"
    if not (device_a and device_b):
        return _not_compared("kernels", title, words, "us", _device_missing(device_a, device_b))
    values_a, values_b = side_a.collect(_kernel_values), side_b.collect(_kernel_values)
    matched_ops = _common_operator_names(side_a, side_b)
    only_a = {k[0] for k in values_a.keys() - values_b.keys()}
    only_b = {k[0] for k in values_b.keys() - values_a.keys()}
    placed_a = side_a.collect(_kernels_under_matched_operator(only_a, matched_ops))
    placed_b = side_b.collect(_kernels_under_matched_operator(only_b, matched_ops))
    total_a, total_b = _total(values_a), _total(values_b)
    kinds = {name: kind for name, kind in (*values_a, *values_b)}
    aligned = _align(values_a, values_b, placed_a, placed_b, kinds.__getitem__)
    return DiffTable(
        "kernels", title, words, "us", total_a, total_b, _rows(values_a, values_b, total_b - total_a, aligned)
    )


def _common_operator_names(side_a: _Side, side_b: _Side) -> set[str]:
    def names(side: _Side) -> set[str]:
        return {_table_name(s.name) for m in side.models for s in m.operators()}

    return names(side_a) & names(side_b)


def _launcher_table(side_a: _Side, side_b: _Side, device_a: bool, device_b: bool) -> DiffTable:
    title, words = "Kernels by launching operator", "device time"
    if not (device_a and device_b):
        return _not_compared("launchers", title, words, "us", _device_missing(device_a, device_b))
    return _table("launchers", title, words, "us", side_a.collect(_launcher_values), side_b.collect(_launcher_values))


# ------------------------------------------------------------------ steps and memory


def _step_table(side_a: _Side, side_b: _Side) -> DiffTable:
    """Steps matched by position (step numbers differ between runs)."""
    title, words = "Steps", "step duration (slowest rank)"
    missing = [label for label, side in (("A", side_a), ("B", side_b)) if not side.models[0].steps]
    if missing:
        return _not_compared(
            "steps", title, words, "us", f"{_who(missing)} no ProfilerStep spans (recorded without a schedule)"
        )
    durations_a = [d / side_a.samples for d in side_a.step_durations()]
    durations_b = [d / side_b.samples for d in side_b.step_durations()]
    names_a = [s.name for s in side_a.models[0].steps]
    names_b = [s.name for s in side_b.models[0].steps]
    total_a, total_b = sum(durations_a), sum(durations_b)
    rows = []
    for i in range(max(len(durations_a), len(durations_b))):
        a = durations_a[i] if i < len(durations_a) else None
        b = durations_b[i] if i < len(durations_b) else None
        detail = " / ".join(names[i] if i < len(names) else "-" for names in (names_a, names_b))
        status = "removed" if b is None else "added" if a is None else "same" if a == b else "changed"
        row = DiffRow(
            f"step {i + 1}", detail, a, b, 1.0 if a is not None else 0.0, 1.0 if b is not None else 0.0, status, None
        )
        rows.append(_with_share(row, total_b - total_a))
    rows.sort(key=lambda r: (-abs(r.delta), r.name))
    return DiffTable("steps", title, words, "us", total_a, total_b, tuple(rows))


def _memory_values(model: TraceModel) -> Values:
    return {(t.device, ""): [t.peak_bytes, t.allocations] for t in model.memory}


def _memory_table(side_a: _Side, side_b: _Side) -> DiffTable:
    title, words = "Memory", "peak allocated bytes (highest rank)"
    missing = [label for label, side in (("A", side_a), ("B", side_b)) if not any(m.memory for m in side.models)]
    if missing:
        return _not_compared(
            "memory", title, words, "bytes", f"{_who(missing)} no memory records (recorded without profile_memory=True)"
        )

    def peaks(side: _Side) -> Values:
        result: Values = {}
        for model in side.models:
            for key, (peak, allocations) in _memory_values(model).items():
                cell = result.setdefault(key, [0, 0])
                cell[0] = max(cell[0], peak)
                cell[1] = max(cell[1], allocations)
        return result

    values_a, values_b = peaks(side_a), peaks(side_b)
    total_a, total_b = _peak(side_a.models) or 0, _peak(side_b.models) or 0
    note = ""
    if not values_a.keys() & values_b.keys():
        note = "no device in common: peaks are listed side by side"
    return DiffTable(
        "memory", title, words, "bytes", total_a, total_b, _rows(values_a, values_b, total_b - total_a), note
    )


# ------------------------------------------------------------------ verdict


def _spread_pct(durations: list[float]) -> float | None:
    if len(durations) < 2:
        return None
    middle = statistics.median(durations)
    return 100 * (max(durations) - min(durations)) / middle if middle else None


def _verdict(side_a: _Side, side_b: _Side, ops: DiffTable, batch_a: Batch, batch_b: Batch, per_sample: bool) -> Verdict:
    steps_a, steps_b = side_a.step_durations(), side_b.step_durations()
    basis = "steps" if steps_a and steps_b else "trace window"
    if basis == "trace window":  # compare like with like: both whole windows
        steps_a = [max(m.info.duration_us for m in side_a.models)]
        steps_b = [max(m.info.duration_us for m in side_b.models)]
    median_a, median_b = statistics.median(steps_a), statistics.median(steps_b)
    spread_a, spread_b = _spread_pct(steps_a), _spread_pct(steps_b)
    noise = max(spread_a or 0.0, spread_b or 0.0)
    compared_a, compared_b = median_a / side_a.samples, median_b / side_b.samples
    delta = compared_b - compared_a
    pct = 100 * delta / compared_a if compared_a else 0.0
    outcome = "no change" if delta == 0 or abs(pct) <= noise else "faster" if delta < 0 else "slower"
    contributors = tuple(r for r in ops.rows if r.delta)[:CONTRIBUTORS]
    counted = basis == "steps"
    return Verdict(
        basis,
        median_a,
        median_b,
        len(steps_a) if counted else 0,
        len(steps_b) if counted else 0,
        spread_a,
        spread_b,
        outcome,
        contributors,
        batch_a,
        batch_b,
        per_sample,
    )


def _overlap(ops: DiffTable) -> Overlap:
    """Each side's share of operator time in rows both sides have (matched or
    aligned); the steps' own time (gaps between operators) counts on neither side."""

    rows = [r for r in ops.rows if r.name != STEP_WILDCARD]  # a step's own time is no operator's

    def share(side: str) -> float:
        total = sum(getattr(r, side) or 0.0 for r in rows)
        shared = sum(getattr(r, side) or 0.0 for r in rows if r.status not in ("added", "removed"))
        return 100 * shared / total if total else 100.0

    return Overlap(share("a"), share("b"))


def _coverage(ops: DiffTable, steps: DiffTable, metric: str, per_step: bool) -> Coverage:
    """Do the operators' deltas add up to the steps'?  Both per step when the operators are."""
    if not steps.rows:
        return Coverage(ops.total_delta, 0.0, None, "a side has no steps")
    count_a = sum(1 for r in steps.rows if r.a is not None) or 1
    count_b = sum(1 for r in steps.rows if r.b is not None) or 1
    total_a, total_b = (
        (steps.total_a / count_a, steps.total_b / count_b) if per_step else (steps.total_a, steps.total_b)
    )
    op_delta, step_delta = ops.total_delta, total_b - total_a
    if metric == "device":
        return Coverage(op_delta, step_delta, None, "operators are compared by device time, which overlaps CPU time")
    tolerance = COVERAGE_TOLERANCE * max(total_a, total_b)
    return Coverage(op_delta, step_delta, abs(op_delta - step_delta) <= tolerance)


# ------------------------------------------------------------------ loading


def load_side(path: str, select: str | None = None, ranks: str | None = None) -> list[TraceModel]:
    """The models of one side of a diff: the file, the chosen trace of a run
    directory (``select``: a rank or part of a name; default its lowest rank),
    or with ``ranks`` ("all" or "0,2,5") several ranks of a run directory."""
    if ranks is None or not Path(path).is_dir():
        return [load_model(path, select, save_to_cache=True)]
    _, traces = resolve_trace(path)
    if ranks != "all":
        try:
            wanted = {int(part) for part in ranks.split(",")}
        except ValueError:
            raise TraceError(f"--ranks {ranks}", "not a list of ranks", "write all, or ranks like 0,1,3") from None
        held = sorted(t.rank for t in traces if t.rank is not None)
        missing = sorted(wanted.difference(held))
        if missing:  # never a silent average over fewer ranks than asked
            listed = ", ".join(map(str, held)) or "none"
            raise TraceError(
                path,
                f"no trace of rank {', '.join(map(str, missing))} (its ranks: {listed})",
                "pass --ranks from those, or all",
            )
        traces = [t for t in traces if t.rank in wanted]
    return [analyze(load_trace_file(t)) for t in traces]


def side_label(models: Sequence[TraceModel]) -> str:
    """How a side is named: its file, or its run directory and averaged ranks."""
    if len(models) == 1:
        return models[0].info.source
    ranks = ",".join(str(m.info.rank) for m in models)
    return f"{Path(models[0].info.source).parent} (mean of ranks {ranks})"
