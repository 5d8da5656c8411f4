"""Events -> model: the one function every source ends in."""

from __future__ import annotations

import gc
import os
from functools import partial

from tuiprof.analysis.calls import DeviceActivity, OperatorCalls, build_calls
from tuiprof.analysis.compiled import add_compiled_regions
from tuiprof.analysis.compiled_map import CompiledAttribution, attach_compiled
from tuiprof.analysis.compiled_run import CompiledRun, compiled_run
from tuiprof.analysis.cuda_graphs import cuda_graph_replays
from tuiprof.analysis.kernels import aggregate_kernels
from tuiprof.analysis.live import TORCH_FLOPS, name_modules, torch_flops_column
from tuiprof.analysis.memory import build_memory_timelines
from tuiprof.analysis.memory_categories import CategorisedMemory, categorised_memory, with_stacks
from tuiprof.analysis.model import RECOMPUTED_FLOPS, TABLE_BY_NAME, TraceInfo, TraceModel
from tuiprof.analysis.modules import ModuleNodes, ModuleTree, build_module_tree, module_nodes
from tuiprof.analysis.operators import aggregate_operators
from tuiprof.analysis.reuse import (
    keep_calls,
    keep_module_tree,
    keep_steps,
    reused_calls,
    reused_module_tree,
    reused_steps,
)
from tuiprof.analysis.stages import side_by_side
from tuiprof.analysis.steps import StepStats, build_steps
from tuiprof.trace import TraceEvents, load_trace
from tuiprof.trace.cache import save_in_background
from tuiprof.trace.live import LiveFacts, MemoryCategories, decode_live_facts, decode_memory_categories
from tuiprof.trace.load import ProgressCallback


def analyze(store: TraceEvents, live: LiveFacts | None = None) -> TraceModel:
    """Compute every table of the model from a loaded trace.

    ``live``: what the capture that made the trace knew (torch's FLOPs,
    qualified module names...); by default the facts a capture saved in the
    trace, if any.  The model is complete when returned and only read after.
    """
    if live is None:
        live = decode_live_facts(store.header.live_facts, store.report)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # millions of small objects, no cycles: the collector only costs time
    try:
        reused = reused_calls(store)  # a reopen: what the first open derived (analysis/reuse.py)
        nodes = None
        if reused is None:
            # The module tree's nodes need only the frames: built beside the calls, whose
            # nesting's sorts leave the GIL to the nodes' Python loop.
            (calls, activity, unattributed), nodes = side_by_side(
                partial(build_calls, store), partial(module_nodes, store)
            )
            keep_calls(store, calls, activity, unattributed)
        else:
            calls, activity, unattributed = reused
        if calls.flops_damaged:
            store.report.note(
                f"{calls.flops_damaged} calls with Input Dims no FLOPs formula can use (absurd sizes, stride 0): no FLOPs for them"
            )
        flops_source = RECOMPUTED_FLOPS
        if live is not None and live.flops_by_external_id:
            calls.flops = torch_flops_column(calls, live)
            flops_source = TORCH_FLOPS
        saved_categories = decode_memory_categories(live, store.report)
        # What a first open derived is read back before the stages start: checking it may drop
        # store.derived's entries, which no stage may see happen under it.
        tree = reused_module_tree(store, calls) if reused else None
        kept_steps = reused_steps(store, calls) if reused else None
        # Independent stages side by side (analysis/stages.py); the module tree's chain is one
        # stage, as its steps change the tree and write the report's notes in this order.
        (modules, compiled, run), info, kernels, steps, memory, memory_categories, operators = side_by_side(
            partial(_module_stages, store, calls, activity, live, tree, nodes),
            partial(_trace_info, store, calls, activity),
            partial(aggregate_kernels, activity, calls),
            partial(_steps, kept_steps, calls, activity, store.gpu_annotations),
            partial(build_memory_timelines, store, calls),
            partial(_categorised_memory, saved_categories, store),
            partial(aggregate_operators, calls, unattributed=unattributed),
        )
        if kept_steps is None:
            keep_steps(store, steps)
        model = TraceModel(
            info=info,
            report=store.report,
            calls=calls,
            activity=activity,
            unattributed=unattributed,
            modules=modules,
            kernels=kernels,
            steps=steps,
            memory=memory,
            flops_source=flops_source,
            log_lines=tuple(live.log_lines) if live is not None else (),
            compiled=compiled,
            compiled_run=run,
            memory_categories=memory_categories,
            memory_categories_problem=saved_categories.problem if saved_categories else "",
            live_batch_size=live.batch_size if live is not None else None,
            _tables={TABLE_BY_NAME: operators},
        )
        return model
    finally:
        if gc_was_enabled:
            gc.enable()


def load_model(
    path: str | os.PathLike[str],
    select: str | None = None,
    progress: ProgressCallback | None = None,
    save_to_cache: bool = False,
) -> TraceModel:
    """Open a trace file or run directory and analyse it; ``save_to_cache``: then hand the
    decoded store to the cache's writer thread (:mod:`tuiprof.trace.cache`)."""
    store = load_trace(path, select, progress)
    model = analyze(store)
    if save_to_cache:
        save_in_background(store)
    return model


def _module_stages(
    store: TraceEvents,
    calls: OperatorCalls,
    activity: DeviceActivity,
    live: LiveFacts | None,
    tree: ModuleTree | None,
    nodes: ModuleNodes | None,
) -> tuple[ModuleTree, CompiledAttribution | None, CompiledRun | None]:
    """The module tree (``tree``: the one a first open derived, else built from ``nodes``, the
    first open's, and handed to the cache) with its compiled regions and live names, then what
    is placed in it: the compiled graphs' kernels and the compiled run (graph breaks, CUDA
    graph replays)."""
    if tree is None:
        # A repair noted meanwhile, by this build (its nodes' repairs are noted here) or a stage
        # beside it, keeps the tree out of the cache: reopening must say the same notes
        # (analysis/reuse.py).
        repairs_before = (store.report.repaired, len(store.report.problems))
        tree = build_module_tree(store, calls, nodes)
        keep_module_tree(store, tree, repairs_before)
    modules = add_compiled_regions(tree, calls, store.frames)
    if live is not None:
        name_modules(modules, live)
    compiled = attach_compiled(modules, calls, activity, live, store.report) if live is not None else None
    run = compiled_run(
        modules,
        calls,
        live.compile_log if live is not None else None,
        store.report,
        cuda_graph_replays(store, calls, activity, modules),
    )
    return modules, compiled, run


def _steps(
    kept: list[StepStats] | None, calls: OperatorCalls, activity: DeviceActivity, annotations
) -> list[StepStats]:
    """The step rows: those a first open derived, else built."""
    return kept if kept is not None else build_steps(calls, activity, annotations)


def _categorised_memory(saved: MemoryCategories | None, store: TraceEvents) -> tuple[CategorisedMemory, ...]:
    """torch's memory categories of each device a capture saved, with the stacks at the peak."""
    return tuple(
        with_stacks(memory, store) for memory in categorised_memory(saved, store.header.baseTimeNanoseconds or 0)
    )


def _trace_info(store: TraceEvents, calls: OperatorCalls, activity: DeviceActivity) -> TraceInfo:
    header = store.header
    starts = [calls.start_ns[0]] if len(calls) else []
    ends = [int(calls.column("end_ns").max())] if len(calls) else []
    if len(activity):
        starts.append(int(activity.start_ns.min()))
        ends.append(int((activity.start_ns + activity.dur_ns).max()))
    dist = header.distributedInfo
    return TraceInfo(
        source=store.source,
        trace_name=os.path.basename(store.source),
        devices=tuple(d.name for d in store.devices),
        rank=dist.rank if dist else None,
        world_size=dist.world_size if dist else None,
        record_shapes=store.recorded_shapes,
        profile_memory=store.recorded_memory,
        with_stack=store.recorded_stacks,
        event_count=store.event_count,
        uncompressed_bytes=store.uncompressed_bytes,
        duration_us=(max(ends) - min(starts)) / 1000 if starts else 0.0,
    )
