"""What is special about a compiled run: graph breaks, recompilations, eager modules.

Three sources, the best one wins per fact:

- **the capture's compile log** (:class:`tuiprof.trace.compile_log.CompileLog`,
  saved by ``tuiprof live --compile``, ``run`` and ``profile()``): every graph
  break with the user line it broke at and Dynamo's reason, and every frame
  compilation with the guard that failed when it was a recompilation;
- **the trace's region spans** (any compiled trace): ``Torch-Compiled Region: N/M``
  is a call of frame N's M-th compilation.  Frames are counted, and a frame's
  compilations are the distinct M seen (those that ran in the window).  A
  frame whose region runs inside another frame's region is the code after a
  graph break (Dynamo's resume function) or a function Dynamo could not
  inline and compiled on its own: without a log, those frames are the count
  of graph breaks the trace shows (a break at a frame's very end resumes
  nothing and is not seen);
- **the module tree** (:mod:`tuiprof.analysis.compiled`): a module with a
  python frame of its own ran eagerly (compiled code has none).  The eager
  modules listed are the outermost ones with no compiled region at or below
  them: outside every region (the loss after a compiled model), or inside one
  at a graph break (the region span encloses their frame).

With ``reduce-overhead`` on a GPU, the CUDA-graph replays and the kernels
inside them are counted from the trace's ``cudaGraphLaunch`` calls
(:mod:`tuiprof.analysis.cuda_graphs`).

Pure Python and numpy, no torch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from tuiprof.analysis.arrays import nearest_ancestor
from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.compiled import REGION_PREFIX, is_region_node
from tuiprof.analysis.cuda_graphs import CudaGraphs
from tuiprof.analysis.modules import ModuleNode, ModuleTree
from tuiprof.trace.compile_log import COMPILE_LOG_VERSION, CompileLog
from tuiprof.trace.decode import DecodeReport

_COMPILE_ID = re.compile(r"\[?(?P<frame>.+?)/(?P<compile>\d+)\]?")


@dataclass(frozen=True)
class BreakSite:
    """One place in the user's code where the graph broke, every compilation that broke there."""

    file: str
    line: int
    function: str
    reason: str  # Dynamo's reason, first lines
    compile_ids: tuple[str, ...]  # the compilations that broke here ("0/0", "0/1")


@dataclass(frozen=True)
class CompiledFrame:
    """One Python frame Dynamo compiled (frame N of ``Torch-Compiled Region: N/M``)."""

    frame: str  # "0"
    function: str  # "forward", "torch_dynamo_resume_in_forward_at_9"; "" when only the trace knows it
    file: str
    line: int
    compilations: int  # how many times it was compiled (the log's, else the distinct M in the trace)
    recompile_reasons: tuple[tuple[str, str], ...]  # (compile id, the guard that failed) per recompilation
    region_calls: int  # its region spans in the trace
    nested: bool  # its regions ran inside another frame's region (after a graph break)


@dataclass(frozen=True)
class EagerModule:
    """An outermost module that ran eagerly, with no compiled region at or below it."""

    node: ModuleNode
    at_graph_break: bool  # inside a compiled region's span (a graph break), not outside every region


@dataclass(frozen=True)
class CompiledRun:
    from_capture: bool  # graph breaks and compilations come from the capture's log, not only the trace
    frames: tuple[CompiledFrame, ...]
    graph_breaks: tuple[BreakSite, ...]  # from the log (empty without one: see nested_frames)
    nested_frames: int  # frames whose regions ran inside another's: a graph break each, as the trace shows
    eager_modules: tuple[EagerModule, ...]  # by cost, largest first
    module_us: float  # the module tree's cost (every root), the base of eager shares
    cuda_graphs: CudaGraphs | None = None  # CUDA-graph replays (reduce-overhead on a GPU); None: the trace has none

    @property
    def graph_break_count(self) -> int:
        """Graph breaks: the log's break places, else what the trace's nesting shows."""
        return len(self.graph_breaks) if self.from_capture else self.nested_frames

    @property
    def recompiled(self) -> tuple[CompiledFrame, ...]:
        return tuple(frame for frame in self.frames if frame.compilations > 1)

    def frame(self, frame: str) -> CompiledFrame | None:
        return next((f for f in self.frames if f.frame == frame), None)

    def breaks_in(self, frame: str) -> tuple[BreakSite, ...]:
        return tuple(site for site in self.graph_breaks if any(_frame_of(c) == frame for c in site.compile_ids))


def compiled_run(
    tree: ModuleTree,
    calls: OperatorCalls,
    log: CompileLog | None,
    report: DecodeReport,
    cuda_graphs: CudaGraphs | None = None,
) -> CompiledRun | None:
    """The compiled run's facts, None for a trace with no compiled region and no log."""
    if log is not None and log.version > COMPILE_LOG_VERSION:
        report.note(f"the compile log is version {log.version}, newer than this tuiprof reads; ignored")
        log = None
    traced = _traced_frames(calls)
    if not traced and log is None:
        return None
    frames = _frames(traced, log)
    sites = _break_sites(log) if log is not None else ()
    eager = _eager_modules(tree) if traced else ()
    return CompiledRun(
        from_capture=log is not None,
        frames=frames,
        graph_breaks=sites,
        nested_frames=sum(1 for frame in frames if frame.nested),
        eager_modules=eager,
        module_us=tree.cost_us,
        cuda_graphs=cuda_graphs,
    )


def _frame_of(compile_id: str) -> str:
    match = _COMPILE_ID.fullmatch(compile_id)
    return match["frame"] if match else compile_id


def _traced_frames(calls: OperatorCalls) -> dict[str, tuple[set[int], int, bool]]:
    """Per frame id in the trace's region spans: (its compilation numbers, span count, nested)."""
    codes = calls.name_codes(lambda name: name.startswith(REGION_PREFIX))
    if not codes or not len(calls):
        return {}
    name_id = calls.column("name_id")
    is_region = np.isin(name_id, codes)
    rows = np.flatnonzero(is_region)
    outer = nearest_ancestor(calls.column("parent"), is_region)[rows]
    ids = {code: _COMPILE_ID.fullmatch(calls.names[code][len(REGION_PREFIX) :]) for code in codes}
    frames: dict[str, tuple[set[int], int, bool]] = {}
    for code, outer_row in zip(name_id[rows].tolist(), outer.tolist()):
        match = ids[code]
        if match is None:
            continue
        frame = match["frame"]
        compiles, count, nested = frames.get(frame, (set(), 0, False))
        compiles.add(int(match["compile"]))
        if outer_row >= 0:
            outer_match = ids.get(int(name_id[outer_row]))
            nested = nested or (outer_match is not None and outer_match["frame"] != frame)
        frames[frame] = (compiles, count + 1, nested)
    return frames


def _frames(traced: dict[str, tuple[set[int], int, bool]], log: CompileLog | None) -> tuple[CompiledFrame, ...]:
    logged: dict[str, list] = {}
    for entry in log.compiles if log is not None else ():
        logged.setdefault(_frame_of(entry.compile_id), []).append(entry)
    frames = []
    for frame in sorted(set(traced) | set(logged), key=_frame_order):
        compiles, spans, nested = traced.get(frame, (set(), 0, False))
        entries = logged.get(frame, [])
        first = entries[0] if entries else None
        frames.append(
            CompiledFrame(
                frame=frame,
                function=first.function if first else "",
                file=first.file if first else "",
                line=first.line if first else 0,
                compilations=max(len(entries), len(compiles)),
                recompile_reasons=tuple((e.compile_id, e.recompile_reason) for e in entries if e.recompile_reason),
                region_calls=spans,
                nested=nested,
            )
        )
    return tuple(frames)


def _frame_order(frame: str) -> tuple[int, str]:
    return (int(frame), "") if frame.isdigit() else (1 << 62, frame)


def _break_sites(log: CompileLog) -> tuple[BreakSite, ...]:
    """The log's breaks, one per (file, line, reason), in the order Dynamo took them."""
    sites: dict[tuple[str, int, str], tuple[str, list[str]]] = {}
    for brk in log.graph_breaks:
        _, ids = sites.setdefault((brk.file, brk.line, brk.reason), (brk.function, []))
        ids.append(brk.compile_id)
    return tuple(
        BreakSite(file, line, function, reason, tuple(ids)) for (file, line, reason), (function, ids) in sites.items()
    )


def _eager_modules(tree: ModuleTree) -> tuple[EagerModule, ...]:
    """The outermost eagerly run modules with no region at or below them (module docstring)."""
    framed = {id(node) for node in tree.by_frame.values()}
    holds_region: set[int] = set()
    for node in tree.walk():
        if is_region_node(node):
            up = node.parent
            while up is not None and id(up) not in holds_region:
                holds_region.add(id(up))
                up = up.parent
    found: list[EagerModule] = []
    stack = [(root, False) for root in reversed(tree.roots)]  # iterative: a tree may be 1000 deep
    while stack:
        node, in_region = stack.pop()
        if is_region_node(node):
            in_region = True
        elif id(node) in framed and id(node) not in holds_region:
            found.append(EagerModule(node, at_graph_break=in_region))
            continue
        stack.extend((child, in_region) for child in reversed(node.children))
    return tuple(sorted(found, key=lambda m: m.node.cost_us, reverse=True))
