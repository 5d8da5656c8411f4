"""What a compiled model's trace says without a mapping: regions and fused kernel names.

A trace of a ``torch.compile`` model has no ``nn.Module`` frames inside the
compiled code, and often none at all (profiled without ``with_stack``).  Two
things in it still tell where the time goes, and this module reads both:

**Compiled regions.**  Dynamo, AOTAutograd and Inductor each wrap a compiled
call in a record_function span:

- ``Torch-Compiled Region: N/M``: one call of compiled frame N (its M-th
  compilation), everything the compiled code ran;
- ``CompiledFunction``: AOTAutograd's autograd Function (training), inside
  the region; its backward is ``CompiledFunctionBackward``;
- ``## Call CompiledFxGraph <hash> ##``: Inductor's generated code for one graph.

Each region becomes a node of the module tree (:func:`add_compiled_regions`),
named so that it can never be taken for a module (the tree's paths are split
at ``/``, so torch's ``N/M`` is written ``N:M``):

==========================================  =========================  ================================
span                                        node                       when
==========================================  =========================  ================================
``Torch-Compiled Region: 0/1``              ``[compiled 0:1]``         always
``CompiledFunction``                        ``[compiled function]``    inside no other region span
``## Call CompiledFxGraph f7wuxh2n… ##``    ``[graph f7wuxh2n]``       inside no other region span
``CompiledFunctionBackward``                ``[compiled backward]``    its forward is not in the trace
==========================================  =========================  ================================

A span inside another region span is part of that region's node (a region
holds one ``CompiledFunction`` holding one graph call: three nodes of equal
time would say nothing more), except a ``Torch-Compiled Region`` inside
another one (a graph break: the resumed code is a frame of its own), which
is a child node.  A region node's parent is the innermost of the eager
module frame (with_stack traces) and the region span that enclose it, else
it is a root.  The node holds every call inside its spans (and so the device
time of the kernels they launched, joined as everywhere in tuiprof) except
the calls of an eager module running inside it (at a graph break: they stay
that module's).  Backward time reaches it as it reaches modules: the
``CompiledFunctionBackward`` root carries the sequence number of its
``CompiledFunction``, which ran inside the region.  An eager module frame
inside a region stays under its eager parent (the tree is built from frames
first); its CPU time then counts in the region's total too.

**Fused kernel names.**  Inductor names a kernel after what it computes
(``torch/_inductor/codegen/triton.py``, ``TritonScheduling.define_kernel``;
``codegen/cpp.py``, ``CppScheduling.define_kernel``)::

    "_".join(["triton", category[:3], fused_name, suffix])   # triton_poi_fused_mul_silu_2
    "_".join(["cpp", fused_name, suffix])                     # cpp_fused_add_mean_0

with the category from the kernel's ``@triton_heuristics`` decorator
(``wrapper_benchmark._kernel_category_choices``) and ``fused_name`` from
``utils.get_fused_kernel_name``: ``"fused"`` and the names of the aten ops
the kernel computes (``config.triton.descriptive_names = "original_aten"``,
the default: each op's overload packet, pre-decomposition), joined by
``_``, **sorted and without repeats**.  :func:`decode_kernel_name` undoes
the join.  Op names hold underscores themselves (``_unsafe_view``,
``native_layer_norm``, ``convolution_backward``), so the split uses the aten
op names that hold one (``aten_op_names.txt``, written from torch's
dispatcher by ``scripts/make_aten_op_names.py``) and torch's sorted order:
of all the ways to cut the words, the one with the fewest pairs out of
sorted order wins, then the one whose multi-word pieces are all aten names,
then the one with the fewest pieces.  So ``native_layer_norm`` stays whole
(``native`` > ``layer`` would break the order), and where both readings are
sorted aten ops (``clamp_min`` or ``clamp`` + ``min``; ``index_select``)
the longer name wins: Inductor's lowering of ``clamp_min`` is far more
common than a kernel fusing exactly ``clamp`` and ``min``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from tuiprof.analysis.arrays import gather, nearest_ancestor
from tuiprof.analysis.calls import OperatorCalls
from tuiprof.analysis.modules import ModuleNode, ModuleTree, attribute_calls, fill_totals, module_above_frames
from tuiprof.trace.columns import FrameColumns

# ------------------------------------------------------------------ fused kernel names

# The first three letters of Inductor's Triton kernel categories, and what they mean.
TRITON_KINDS = {
    "poi": "pointwise",
    "red": "reduction",
    "per": "persistent reduction",
    "tem": "template",
    "for": "foreach",
    "spl": "split scan",
    "unk": "Triton",  # a kernel whose source had no single category decorator
}
CPP_KIND = "C++ (CPU)"
# graph_<id>_: the profiler span of a C++ kernel (config.cpp.enable_kernel_profile, codegen/cpp.py)
_KERNEL_NAME = re.compile(r"(?:triton_(?P<kind>[a-z]{3})|(?:graph_\d+_)?cpp)_(?:fused_?(?P<ops>.*?))?_(?P<suffix>\d+)")
_KERNEL_PREFIXES = ("triton_", "cpp_", "graph_")
_MAX_WORDS = 64  # a longer fused name is not split (the search is cubic in words)
_MAX_PIECE_WORDS = 10  # the longest aten name, in words (_amp_foreach_non_finite_check_and_unscale: 8)


@dataclass(frozen=True)
class FusedKernel:
    """An Inductor kernel name read back: what kind of kernel, and the aten ops fused in it."""

    kind: str  # "pointwise", "reduction", ..., "C++ (CPU)"
    ops: tuple[str, ...]  # sorted as torch sorts them; () when descriptive names were off

    @property
    def description(self) -> str:
        """``pointwise: _unsafe_view, mul, silu``."""
        return f"{self.kind}: {', '.join(self.ops)}" if self.ops else self.kind


def decode_kernel_name(name: str) -> FusedKernel | None:
    """The kind and ops of an Inductor kernel (``triton_*``, ``cpp_*``); None for any other name."""
    match = _KERNEL_NAME.fullmatch(name) if name.startswith(_KERNEL_PREFIXES) else None
    if match is None or match["kind"] not in (None, *TRITON_KINDS):
        return None
    if match["kind"] is None and match["ops"] is None:
        return None  # cpp_<something>_0 without "fused": a C++ template, not a fused kernel
    return _fused_kernel(match["kind"], match["ops"] or "")


@cache
def _fused_kernel(kind: str | None, ops: str) -> FusedKernel:
    return FusedKernel(TRITON_KINDS[kind] if kind else CPP_KIND, split_op_names(ops) if ops else ())


def has_inductor_kernels(names: list[str]) -> bool:
    """Whether a trace's name table holds an Inductor kernel name."""
    return any(decode_kernel_name(name) for name in names if name.startswith(_KERNEL_PREFIXES))


def describe_kernel(name: str) -> str:
    """What a kernel computes (``reduction: add, mean, mul, pow, rsqrt``), "" when not Inductor's."""
    decoded = decode_kernel_name(name)
    return decoded.description if decoded else ""


@cache
def _aten_names() -> frozenset[str]:
    lines = (Path(__file__).with_name("aten_op_names.txt")).read_text().splitlines()
    return frozenset(line for line in lines if line and not line.startswith("#"))


def split_op_names(joined: str) -> tuple[str, ...]:
    """``_unsafe_view_add_mean`` -> (``_unsafe_view``, ``add``, ``mean``): see the module docstring."""
    words = joined.split("_")
    if len(words) > _MAX_WORDS:
        return (joined,)
    known = _aten_names()
    n = len(words)

    def piece(i: int, j: int) -> str:
        return "_".join(words[i:j])

    # best[(i, k)]: the cheapest cut of words[:i] whose last piece is words[k:i], as
    # (pairs out of order, words in unlisted multi-word pieces, pieces) and the cut.
    best: dict[tuple[int, int], tuple[tuple[int, int, int], tuple[int, ...]]] = {(0, 0): ((0, 0, 0), ())}
    for i in range(n):
        for k in range(i + 1):
            state = best.get((i, k))
            if state is None:
                continue
            (disorder, unlisted, pieces), cuts = state
            last = piece(k, i) if i else None
            for j in range(i + 1, min(n, i + _MAX_PIECE_WORDS) + 1):
                word = piece(i, j)
                if not word or word.endswith("_") and not word.endswith("__") or word[0].isdigit():
                    continue
                cost = (
                    disorder + (last is not None and last >= word),
                    unlisted + (0 if j - i == 1 or word in known else j - i),
                    pieces + 1,
                )
                if (j, i) not in best or cost < best[j, i][0]:
                    best[j, i] = (cost, (*cuts, j))
    ends = [state for (i, _), state in best.items() if i == n and n]
    if not ends:
        return (joined,)
    cuts = min(ends)[1]
    starts = (0, *cuts[:-1])
    return tuple(piece(i, j) for i, j in zip(starts, cuts))


# ------------------------------------------------------------------ compiled regions

REGION_PREFIX = "Torch-Compiled Region: "
COMPILED_FUNCTION = "CompiledFunction"
COMPILED_BACKWARD = "CompiledFunctionBackward"
GRAPH_CALL = re.compile(r"## Call CompiledFxGraph (\S+) ##")
GRAPH_HASH_CHARS = 8


def region_node_name(span: str) -> str | None:
    """The tree node a region span names (module docstring), None for any other name."""
    if span.startswith(REGION_PREFIX):
        return f"[compiled {span[len(REGION_PREFIX) :].replace('/', ':')}]"
    if span == COMPILED_FUNCTION:
        return "[compiled function]"
    if span == COMPILED_BACKWARD:
        return "[compiled backward]"
    graph = GRAPH_CALL.fullmatch(span)
    if graph:
        return f"[graph {graph[1][:GRAPH_HASH_CHARS]}]"
    return None


def is_region_node(node: ModuleNode) -> bool:
    """Whether a module tree node is a compiled region rather than an ``nn.Module``."""
    return node.name.startswith(("[compiled ", "[graph ")) and node.name.endswith("]")


def add_compiled_regions(tree: ModuleTree, calls: OperatorCalls, frames: FrameColumns) -> ModuleTree:
    """``tree`` with a node per compiled region (module docstring); ``tree`` itself when
    the trace has none.  The module nodes are kept (an eager one that ran inside a
    region moves under it); calls and backward roots are attributed again, and every
    total filled again, with the regions in place."""
    span_names = {code: node_name for code, name in enumerate(calls.names) if (node_name := region_node_name(name))}
    region_codes = list(span_names)
    if not region_codes or not len(calls):
        return tree
    name_id = calls.column("name_id")
    parent = calls.column("parent")
    is_span = np.isin(name_id, region_codes)
    inside_span = nearest_ancestor(parent, is_span) >= 0
    is_dynamo = np.isin(name_id, [c for c in region_codes if calls.names[c].startswith(REGION_PREFIX)])
    is_backward = np.isin(name_id, [c for c in region_codes if calls.names[c] == COMPILED_BACKWARD])
    makes_node = is_span & (is_dynamo | ~inside_span) & ~(is_backward & _forward_in_trace(calls, is_span))
    region_above = nearest_ancestor(parent, makes_node)
    region_of = np.where(makes_node, np.arange(len(calls)), region_above)  # the call's innermost node-making span

    module = calls.column("module")
    starts = calls.column("start_ns")
    # A region holds a call unless the call's module frame began inside the region
    # (an eager module at a graph break: its calls stay its own).
    module_start = gather(frames.start_ns, module, np.iinfo(np.int64).min)
    owned = (region_of >= 0) & (gather(starts, region_of, -1) >= module_start)

    roots = list(tree.roots)
    by_key: dict[tuple[int, str], ModuleNode] = {}
    node_of_span: dict[int, ModuleNode] = {}
    durations = calls.column("total_ns")
    for row in np.flatnonzero(makes_node).tolist():
        outer = int(region_above[row])
        if outer >= 0 and starts[outer] >= module_start[row]:
            up: ModuleNode | None = node_of_span[outer]  # the enclosing region is inside the call's module frame
        else:
            up = tree.by_frame.get(int(module[row]))
        name = span_names[int(name_id[row])]
        node = by_key.get((id(up), name))
        if node is None:
            node = ModuleNode(name, 0, parent=up)
            by_key[id(up), name] = node
            (up.children if up else roots).append(node)
        node_of_span[row] = node
        duration = int(durations[row]) / 1000
        node.calls += 1
        node.cpu_total_us += duration
        node.self_cpu_us += duration
        if up is not None:
            up.self_cpu_us -= duration
    _move_eager_modules(tree, calls, frames, (region_of, owned, module_start), node_of_span, roots)

    result = ModuleTree(roots, tree.by_frame)
    for node in result.walk():
        node.depth = node.parent.depth + 1 if node.parent else 0
    node_of_frame, nodes = result.frame_index()
    position = {id(node): i for i, node in enumerate(nodes)}
    owner = gather(node_of_frame, module, -1)
    span_rows = np.flatnonzero(owned)
    owner[span_rows] = [position[id(node_of_span[s])] for s in region_of[span_rows].tolist()]
    for node in nodes:
        node.operator_rows, node.backward_rows = [], []
    attribute_calls(calls, result, owner, nodes)
    fill_totals(result, calls)
    result.roots.sort(key=lambda n: n.cost_us, reverse=True)
    return result


def _move_eager_modules(
    tree: ModuleTree,
    calls: OperatorCalls,
    frames: FrameColumns,
    regions: tuple[np.ndarray, np.ndarray, np.ndarray],
    node_of_span: dict[int, ModuleNode],
    roots: list[ModuleNode],
) -> None:
    """An eager module that ran inside a region (a graph break) becomes the region's child:
    the outermost module frame that began inside the region span, found from the calls
    inside it, moves with its node (its time leaves its old parent's self time)."""
    region_of, owned, module_start = regions
    starts = calls.column("start_ns")
    module = calls.column("module")
    inner = np.flatnonzero((region_of >= 0) & ~owned)
    if not len(inner):
        return
    above, _ = module_above_frames(frames)  # loops cut and counted by build_module_tree
    pairs = np.unique(np.stack((region_of[inner], module[inner]), axis=1), axis=0)
    moved: set[int] = set()
    for span, frame in pairs.tolist():
        while above[frame] >= 0 and frames.start_ns[above[frame]] > starts[span]:
            frame = int(above[frame])  # still inside the region span
        node, region = tree.by_frame[frame], node_of_span[span]
        if id(node) in moved or node.parent is region or _is_above(node, region):
            continue  # moved already, or a node also called around the region (no cycles)
        moved.add(id(node))
        old = node.parent
        (old.children if old else roots).remove(node)
        if old is not None:
            old.self_cpu_us += node.cpu_total_us
        region.children.append(node)
        region.self_cpu_us -= node.cpu_total_us
        node.parent = region


def _is_above(node: ModuleNode, below: ModuleNode) -> bool:
    up = below.parent
    while up is not None:
        if up is node:
            return True
        up = up.parent
    return False


def _forward_in_trace(calls: OperatorCalls, is_span: np.ndarray) -> np.ndarray:
    """For every call, whether a region span with its sequence number is in the trace
    (a ``CompiledFunctionBackward``'s ``CompiledFunction``)."""
    sequence = calls.column("sequence_number")
    forward = np.isin(calls.column("name_id"), [c for c, n in enumerate(calls.names) if n == COMPILED_FUNCTION])
    known = np.unique(sequence[forward & is_span & (sequence >= 0)])
    return np.isin(sequence, known) & (sequence >= 0)
