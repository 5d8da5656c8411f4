"""The analysis model every view reads: built once per trace, then only read."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import numpy as np

from tuiprof.analysis.calls import DeviceActivity, OperatorCalls, UnattributedMemory
from tuiprof.analysis.compiled import has_inductor_kernels
from tuiprof.analysis.compiled_map import CompiledAttribution
from tuiprof.analysis.compiled_run import CompiledRun
from tuiprof.analysis.kernels import KernelStats
from tuiprof.analysis.memory import MemoryTimeline, PeakFigure
from tuiprof.analysis.memory_categories import CategorisedMemory
from tuiprof.analysis.modules import ModuleNode, ModuleTree
from tuiprof.analysis.operators import OperatorStats, aggregate_operators
from tuiprof.analysis.outside import OutsideModules, outside_modules
from tuiprof.analysis.steps import StepStats
from tuiprof.trace.decode import DecodeReport


@dataclass(frozen=True)
class TraceInfo:
    """What the header says about the run."""

    source: str
    trace_name: str
    devices: tuple[str, ...]  # "NVIDIA H100 80GB HBM3"
    rank: int | None
    world_size: int | None
    record_shapes: bool
    profile_memory: bool
    with_stack: bool
    event_count: int
    uncompressed_bytes: int
    duration_us: float  # first to last CPU or device activity


RECOMPUTED_FLOPS = "recomputed from Input Dims (torch's formulas)"


def table_key(group_by_shape: bool, top_level_only: bool, module: ModuleNode | None) -> tuple:
    """Where :meth:`TraceModel.operators` keeps a grouping's table."""
    return (group_by_shape, top_level_only, module.path if module else None)


TABLE_BY_NAME = table_key(False, False, None)  # the table every view opens with, built by analyze


class BackwardPass(NamedTuple):
    """What :attr:`TraceModel.backward_pass` found: a backward pass ran; FLOPs counted in it."""

    ran: bool
    counted: bool


@dataclass(frozen=True)
class TraceModel:
    """Everything the views show about one trace, built by ``analysis.build.analyze``.

    Frozen: built once, then only read (from the UI thread and workers alike), so every
    field is computed before the constructor.  The operator tables are computed on demand
    into ``_tables`` (a cache, filled in place) and the totals are ``cached_property``."""

    info: TraceInfo
    report: DecodeReport
    calls: OperatorCalls
    activity: DeviceActivity
    unattributed: UnattributedMemory
    modules: ModuleTree
    kernels: list[KernelStats]
    steps: list[StepStats]
    memory: list[MemoryTimeline]
    flops_source: str = RECOMPUTED_FLOPS
    log_lines: tuple[str, ...] = ()  # what the profiler printed, when a capture saved it
    compiled: CompiledAttribution | None = None  # a compiled capture: compile time, share placed in modules
    compiled_run: CompiledRun | None = None  # a compiled trace: graph breaks, recompilations, eager modules
    live_batch_size: int | None = None  # the batch a live capture fed the model, when it saved it
    # torch's memory categories per device, when a tuiprof capture saved them (analysis/memory_categories.py)
    memory_categories: tuple[CategorisedMemory, ...] = ()
    memory_categories_problem: str = ""  # why a capture saved none (torch's categoriser failed...)
    _tables: dict[tuple, list[OperatorStats]] = field(default_factory=dict, repr=False)

    def operators(
        self, *, group_by_shape: bool = False, top_level_only: bool = False, module: ModuleNode | None = None
    ) -> list[OperatorStats]:
        """The operator table, cached per grouping (and per module filter)."""
        key = table_key(group_by_shape, top_level_only, module)
        table = self._tables.get(key)
        if table is None:
            rows = self.modules.operator_rows(module) if module else None
            table = aggregate_operators(
                self.calls,
                rows,
                group_by_shape=group_by_shape,
                top_level_only=top_level_only,
                unattributed=None if module else self.unattributed,
            )
            self._tables[key] = table
        return table

    def has_operator_table(
        self, *, group_by_shape: bool = False, top_level_only: bool = False, module: ModuleNode | None = None
    ) -> bool:
        """Whether :meth:`operators` would answer from its cache."""
        return table_key(group_by_shape, top_level_only, module) in self._tables

    @cached_property
    def has_inductor_kernels(self) -> bool:
        """Whether the trace names Inductor kernels (a compiled model's): the tables then say what they compute."""
        return has_inductor_kernels(self.calls.names)

    @cached_property
    def total_self_cpu_us(self) -> float:
        return sum(self.calls.self_ns) / 1000

    @cached_property
    def total_device_us(self) -> float:
        return int(self.activity.dur_ns.sum()) / 1000

    @cached_property
    def total_flops(self) -> int:
        return sum(self.calls.flops)

    @cached_property
    def step_flops(self) -> int:
        """Training FLOPs of one step, forward and backward (FlopCounterMode's formulas):
        all counted work of the trace over its ProfilerStep count (the whole trace without steps)."""
        return round(int(self.calls.column("counted_flops").sum()) / max(1, len(self.steps)))

    @cached_property
    def outside_modules(self) -> OutsideModules:
        """Time outside every module and the backward (the ``(outside modules)`` node), per
        step and by top call name (analysis/outside.py)."""
        return outside_modules(self.calls, self.modules)

    @cached_property
    def backward_pass(self) -> BackwardPass:
        """Whether the trace ran a backward pass (``autograd::`` calls, ``*Backward*`` nodes,
        ``aten::*_backward*`` operators, or module backward time) and whether any of its calls
        were counted FLOPs: an old trace's ``aten::cudnn_convolution_backward_weight`` has no
        formula, so its step FLOPs are the forward's alone although it trained."""
        codes = self.calls.name_codes(lambda name: name.startswith("autograd::") or "backward" in name.lower())
        backward = np.isin(self.calls.column("name_id"), codes) if codes else np.zeros(len(self.calls), dtype=bool)
        ran = bool(backward.any()) or any(root.backward_cpu_us for root in self.modules.roots)
        counted = bool((self.calls.column("counted_flops")[backward] > 0).any())
        return BackwardPass(ran, counted)

    @property
    def step_flops_per_s(self) -> float | None:
        """Achieved training FLOP/s: :attr:`step_flops` over the mean step time."""
        return self.step_flops / (self.step_time_us / 1e6) if self.step_flops and self.step_time_us else None

    @property
    def flops_damaged(self) -> int:
        """Calls whose Input Dims broke a FLOPs formula (overflowing sizes, stride 0): no FLOPs for them."""
        return self.calls.flops_damaged

    @property
    def external_ids_ignored(self) -> bool:
        """True when the file's External ids were fake (equal to correlation ids) and
        device work was joined through the runtime launches' enclosing operators instead."""
        return self.activity.external_ids_ignored

    @property
    def has_device(self) -> bool:
        return len(self.activity) > 0

    @property
    def peak_memory(self) -> MemoryTimeline | None:
        """The device timeline with the highest peak (a GPU's before the CPU's)."""
        device = [t for t in self.memory if not t.is_cpu]
        pool = device or self.memory
        return max(pool, key=lambda t: t.peak_bytes) if pool else None

    @property
    def categorised_peak(self) -> CategorisedMemory | None:
        """The categorised device with the highest peak (a GPU's before the CPU's), as :attr:`peak_memory`."""
        device = [m for m in self.memory_categories if not m.is_cpu]
        pool = device or self.memory_categories
        return max(pool, key=lambda m: m.peak_bytes) if pool else None

    @property
    def peak_figure(self) -> PeakFigure | None:
        """The memory peak the header, the Overview and the Memory view show, one figure
        everywhere: torch's categorised peak when a capture saved it (every tensor torch
        sees, those from before the trace included), else the allocator's peak."""
        categorised = self.categorised_peak
        if categorised is not None:
            return PeakFigure(
                categorised.device, categorised.peak_bytes, categorised.peak_ns, False, categorised.before_trace_bytes
            )
        timeline = self.peak_memory
        if timeline is None:
            return None
        return PeakFigure(timeline.device, timeline.peak_bytes, timeline.peak_ns, True, timeline.before_trace_bytes)

    @cached_property
    def memory_breakdown(self):
        """What fills memory at the peak (analysis/memory_peak.py), computed when first asked for."""
        from tuiprof.analysis.memory_peak import memory_breakdown  # it reads the whole model: imported late

        return memory_breakdown(self)

    @property
    def step_time_us(self) -> float:
        return sum(s.duration_us for s in self.steps) / len(self.steps) if self.steps else self.info.duration_us
