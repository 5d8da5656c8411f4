"""A compiled model's kernels placed in the module tree, from the map its capture saved.

In a compiled run the profiler sees only the module that was compiled: every
kernel runs inside one ``## Call CompiledFxGraph ##`` call per graph and
region.  A capture by tuiprof saved which module owns each kernel
(:class:`tuiprof.trace.compiled_map.CompiledMap`); this module puts that
back into the tree, below the compiled module, with the eager tree's
qualified names.  The rules (docs/compiled.md):

- A graph call is identified by its region (the ``Torch-Compiled Region: N/M``
  it runs in; for a backward graph, the region of the ``CompiledFunction``
  whose ``Sequence number`` its ``CompiledFunctionBackward`` carries) and
  direction.  Its direct operator children are matched, in order, to the
  map's kernels of that graph by event name (a kernel the trace lacks is
  skipped, an event the map lacks stays unmatched).  So are, on a GPU, the
  device kernels launched by the graph call itself (Triton's driver launches
  with no operator around them: ``triton_poi_fused_add_0`` on the device), by
  their own names, in device order.
- A kernel whose nodes belong to one module goes to that module; a kernel
  fused across modules goes to their deepest common module, and when that is
  the compiled module itself it is split between the compiled module's
  direct parts it fused, in proportion to their nodes' work: bytes moved and
  FLOPs (:func:`kernel_work`, :func:`kernel_targets`).
  Every module a fused kernel computes is a row and lists the kernel in
  ``fused_kernels`` (kernel, the modules it fused, where its time went).  A kernel with no module
  stays the compiled module's own.  Its time, device time and FLOPs (with
  everything below it) move there, forward or backward by its graph; its
  calls (operator details, ``operator_rows``) go to its largest share.
- What the matched kernels leave of a graph call's time (the wrapper's
  Python, unmatched operators) is its own child, ``(compiled, unattributed)``.
- The compiled module keeps its totals; its self time loses what moved.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection
from dataclasses import dataclass, field

import numpy as np

from tuiprof.analysis.arrays import group_rows, nearest_ancestor
from tuiprof.analysis.calls import DeviceActivity, OperatorCalls
from tuiprof.analysis.modules import MAX_MODULE_DEPTH, ModuleNode, ModuleTree
from tuiprof.trace.compiled_map import COMPILED_MAP_VERSION, CompiledGraph, CompiledKernel, CompiledMap
from tuiprof.trace.decode import DecodeReport
from tuiprof.trace.live import LiveFacts

GRAPH_CALL_PREFIX = "## Call CompiledFxGraph"
REGION_PREFIX = "Torch-Compiled Region: "
FORWARD_FUNCTION = "CompiledFunction"
BACKWARD_FUNCTION = "CompiledFunctionBackward"
UNATTRIBUTED = "(compiled, unattributed)"


@dataclass
class CompiledAttribution:
    """How much of the compiled graphs' time the map placed, forward and backward.

    Times are on the side the module rows rank by (the device when the graphs
    ran device work, else the CPU), in nanoseconds.
    """

    compile_s: float | None = None
    graph_ns: list[int] = field(default_factory=lambda: [0, 0])  # [forward, backward]
    below_root_ns: list[int] = field(default_factory=lambda: [0, 0])  # kernels placed below the compiled module
    root_ns: list[int] = field(
        default_factory=lambda: [0, 0]
    )  # kernels (or split shares) left to the compiled module itself
    on_device: bool = False
    kernels_missing: int = 0  # kernels of graphs that ran which no profiled call matched
    graph_calls_unmapped: int = 0  # graph calls the map has no graph for

    def share_below_root(self, backward: int | None = None) -> float | None:
        """Share of graph time attributed below the compiled module (None: no graph ran)."""
        sides = (0, 1) if backward is None else (backward,)
        total = sum(self.graph_ns[i] for i in sides)
        return sum(self.below_root_ns[i] for i in sides) / total if total else None


def attach_compiled(
    tree: ModuleTree, calls: OperatorCalls, activity: DeviceActivity, facts: LiveFacts, report: DecodeReport
) -> CompiledAttribution | None:
    """Place the compiled graphs' kernels in ``tree`` (built and totalled), per the map in ``facts``."""
    cmap = facts.compiled
    if cmap is None:
        return CompiledAttribution(compile_s=facts.compile_s) if facts.compile_s is not None else None
    if cmap.version > COMPILED_MAP_VERSION:
        report.note(f"the compiled-kernel map is version {cmap.version}, newer than this tuiprof reads; ignored")
        return CompiledAttribution(compile_s=facts.compile_s)
    return _Placer(tree, calls, activity, facts, cmap, report).place()


class _Placer:
    """One pass over the graph calls; numbers are booked per node, then written once."""

    def __init__(
        self,
        tree: ModuleTree,
        calls: OperatorCalls,
        activity: DeviceActivity,
        facts: LiveFacts,
        cmap: CompiledMap,
        report: DecodeReport,
    ) -> None:
        self.tree, self.calls, self.activity, self.cmap, self.report = tree, calls, activity, cmap, report
        self.graphs = {(g.region, g.backward): g for g in cmap.graphs}
        self.key_of = {f.qualified_name: key for key, f in facts.modules.items()}
        self.module_facts = facts.modules
        self.class_of = {m.path: m.class_name for m in cmap.modules}
        self.parent = calls.column("parent")
        self.result = CompiledAttribution(compile_s=facts.compile_s)
        self.synthetic: dict[tuple[int, str], ModuleNode] = {}  # (id of compiled node, path) -> node
        self.synthetic_root: ModuleNode | None = None
        self.cut = False  # a module path deeper than MAX_MODULE_DEPTH was placed at the cut (noted once)
        self.moved: dict[
            int, tuple[ModuleNode, bool]
        ] = {}  # call row -> (node, backward): it and its subtree count there
        self.booked: dict[tuple[int, bool], list[int]] = {}  # (id(node), backward) -> own [cpu ns, device ns, FLOPs]
        self.graph_calls_seen: dict[int, int] = {}  # id(node) -> forward graph calls it got time from

    def place(self) -> CompiledAttribution:
        calls = self.calls
        name_id = calls.column("name_id")
        codes = calls.name_codes(lambda name: name.startswith(GRAPH_CALL_PREFIX))
        graph_rows = np.flatnonzero(np.isin(name_id, np.array(codes, dtype=np.int64)))
        if not len(graph_rows):
            return self.result
        self.result.on_device = bool(calls.column("device_total_ns")[graph_rows].sum() > 0)
        keys, groups = group_rows(self.parent)
        children = dict(zip(keys, groups))
        forward_by_sequence = self._forward_functions()
        launched_by = self._launched_by(graph_rows)
        matched_kernels: dict[tuple[str, bool], set[int]] = {}
        for row in graph_rows.tolist():
            key = self._graph_key(row, forward_by_sequence)
            graph = self.graphs.get(key) if key else None
            kids = children.get(row, np.empty(0, dtype=np.int64)).tolist()
            launched = launched_by.get(row, [])
            if key is None or graph is None:
                self.result.graph_calls_unmapped += 1
                pairs, device_pairs = [], []
            else:
                pairs = _match(kids, [calls.names[c] for c in name_id[kids].tolist()], graph)
                device_pairs = _match(launched, [self.activity.name(e) for e in launched], graph)
                matched_kernels.setdefault(key, set()).update(k for _, k in pairs + device_pairs)
            self._place_call(row, self._compiled_node(row), graph, pairs, device_pairs, backward=bool(key and key[1]))
        self.result.kernels_missing = sum(
            len(self.graphs[key].kernels) - len(done) for key, done in matched_kernels.items()
        )
        if self.result.kernels_missing:
            self.report.note(
                f"{self.result.kernels_missing} kernels of the saved compiled-kernel map ran in no profiled graph call "
                f"(a map from another run?); the graphs' time they would hold is in {UNATTRIBUTED}"
            )
        if self.cmap.unread:
            self.report.note(
                f"the capture could not read {self.cmap.unread} compiled kernels: their time is in {UNATTRIBUTED}"
            )
        if self.result.graph_calls_unmapped:
            self.report.note(
                f"{self.result.graph_calls_unmapped} compiled graph calls have no graph in the saved compiled-kernel map: "
                f"their time is in {UNATTRIBUTED}"
            )
        self._write()
        return self.result

    # -- which graph, and which module the call counts in ----------------------------------

    def _launched_by(self, graph_rows: np.ndarray) -> dict[int, list[int]]:
        """Graph call row -> the device events it launched itself (no operator between:
        Triton's driver launches), in device start order."""
        launcher = self.activity.launchers
        if not len(launcher):
            return {}
        events = np.flatnonzero(np.isin(launcher, graph_rows))
        events = events[np.lexsort((self.activity.start_ns[events], launcher[events]))]
        launched: dict[int, list[int]] = {}
        for event, row in zip(events.tolist(), launcher[events].tolist()):
            launched.setdefault(row, []).append(event)
        return launched

    def _forward_functions(self) -> dict[int, int]:
        """Sequence number -> the ``CompiledFunction`` call carrying it (the forward of a backward graph)."""
        codes = self.calls.name_codes(lambda name: name == FORWARD_FUNCTION)
        rows = np.flatnonzero(np.isin(self.calls.column("name_id"), np.array(codes, dtype=np.int64)))
        sequence = self.calls.column("sequence_number")
        return {int(sequence[r]): int(r) for r in rows[::-1].tolist() if sequence[r] >= 0}

    def _ancestor(self, row: int, wanted) -> int:
        while row >= 0:
            if wanted(self.calls.name(row)):
                return row
            row = int(self.parent[row])
        return -1

    def _graph_key(self, row: int, forward_by_sequence: dict[int, int]) -> tuple[str, bool] | None:
        backward = self._ancestor(row, lambda name: name == BACKWARD_FUNCTION)
        start = row
        if backward >= 0:
            start = forward_by_sequence.get(int(self.calls.column("sequence_number")[backward]), -1)
        region = self._ancestor(start, lambda name: name.startswith(REGION_PREFIX))
        if region < 0:
            return None
        return self.calls.name(region)[len(REGION_PREFIX) :], backward >= 0

    def _compiled_node(self, row: int) -> ModuleNode:
        """The module a graph call counts in (its module frame; for a backward graph,
        the module of its forward), else one root node for compiled code outside modules."""
        charged = self.tree.charged_module(row)
        if charged is not None:
            return charged[0]
        if self.synthetic_root is None:
            self.synthetic_root = ModuleNode(self.cmap.root or "(compiled)", 0)
            self.tree.roots.append(self.synthetic_root)
        return self.synthetic_root

    # -- booking -------------------------------------------------------------------------------

    def _place_call(
        self,
        row: int,
        owner: ModuleNode,
        graph: CompiledGraph | None,
        pairs: list[tuple[int, int]],
        device_pairs: list[tuple[int, int]],
        backward: bool,
    ) -> None:
        """Book a graph call's matched kernels (operator children ``pairs``, device events it
        launched itself ``device_pairs``) in their modules, and the rest as unattributed."""
        side = int(backward)
        self.result.graph_ns[side] += self._cost(row)
        rest = self._values(row)
        touched: set[int] = set()
        for kid, index in pairs:
            values = self._values(kid)
            rest = [a - b for a, b in zip(rest, values)]
            holder = self._place_kernel(owner, graph.kernels[index], values, self._cost(kid), backward, touched)  # type: ignore[union-attr]
            if holder is not None:  # the call's rows (and the operator details) go to its largest share
                self.moved[kid] = (holder, backward)
        for event, index in device_pairs:
            device_ns = int(self.activity.dur_ns[event])
            values = [0, device_ns, 0]
            rest = [a - b for a, b in zip(rest, values)]
            self._place_kernel(owner, graph.kernels[index], values, device_ns, backward, touched)  # type: ignore[union-attr]
        unattributed = self._node(owner, UNATTRIBUTED)
        self._book(unattributed, backward, rest)
        self.moved[row] = (unattributed, backward)
        if not backward:
            for key in touched | {id(unattributed)}:
                self.graph_calls_seen[key] = self.graph_calls_seen.get(key, 0) + 1

    def _place_kernel(
        self, owner: ModuleNode, kernel: CompiledKernel, values: list[int], cost: int, backward: bool, touched: set[int]
    ) -> ModuleNode | None:
        """Book one kernel call's ``values`` ([cpu, device ns, FLOPs]) in its modules, by the rules;
        returns the node that got its largest share (None: the compiled module kept it)."""
        side = int(backward)
        weights: dict[str, float] = {}
        for module, work in zip(kernel.modules, kernel_work(kernel)):
            path = self.cmap.modules[module].path
            weights[path] = weights.get(path, 0.0) + work
            if path:  # every module the kernel computes is a row (and ran), also one fused into an ancestor's kernel
                touched.add(id(self._node(owner, path)))
        holder, held = None, 0.0
        targets = kernel_targets(weights, self.class_of)
        if not targets:  # no module: the compiled module's own
            self.result.root_ns[side] += cost
        if len(weights) > 1:  # each module it fused lists it, with where its time went
            fused = (kernel.kernel, tuple(sorted(weights)), tuple(path or "(compiled module)" for path, _ in targets))
            for path in weights:
                listing = self._node(owner, path).fused_kernels if path else owner.fused_kernels
                if fused not in listing:
                    listing.append(fused)
        for path, share in targets:
            if not path:  # the compiled module's own: it keeps the time as self time
                self.result.root_ns[side] += round(cost * share)
                continue
            node = self._node(owner, path)
            self.result.below_root_ns[side] += round(cost * share)
            self._book(node, backward, [round(value * share) for value in values])
            if share > held:
                holder, held = node, share
            up: ModuleNode | None = node
            while up is not owner and up is not None:
                touched.add(id(up))
                up = up.parent
        return holder

    def _cost(self, row: int) -> int:
        return int(self.calls.column("device_total_ns" if self.result.on_device else "total_ns")[row])

    def _values(self, row: int) -> list[int]:
        calls = self.calls
        return [int(calls.column(c)[row]) for c in ("total_ns", "device_total_ns", "counted_flops_total")]

    def _book(self, node: ModuleNode, backward: bool, values: list[int]) -> None:
        own = self.booked.setdefault((id(node), backward), [0, 0, 0])
        for i, value in enumerate(values):
            own[i] += value

    def _node(self, owner: ModuleNode, path: str) -> ModuleNode:
        """The node for ``path`` below ``owner``, made with its missing ancestors, outermost
        first (a loop: a saved map may nest modules deeper than Python's recursion limit)."""
        chain = []  # path and its enclosing modules not made yet, innermost first
        head = path
        while head and (id(owner), head) not in self.synthetic:
            chain.append(head)
            head = "" if head == UNATTRIBUTED else self._enclosing_path(head)
        node = self.synthetic[id(owner), head] if head else owner
        for missing in reversed(chain):
            if node.depth >= MAX_MODULE_DEPTH:  # deeper modules count in the one at the cut, as in eager
                if not self.cut:
                    self.report.note(
                        f"compiled-kernel map: modules deeper than {MAX_MODULE_DEPTH:,} levels count in the module at the cut"
                    )
                self.cut = True
                self.synthetic[id(owner), missing] = node
                continue
            node = self._made(owner, node, missing)
        return node

    def _made(self, owner: ModuleNode, parent: ModuleNode, path: str) -> ModuleNode:
        """A new node for ``path`` below ``parent`` (its enclosing module's node, or ``owner``)."""
        if path == UNATTRIBUTED:
            node = ModuleNode(UNATTRIBUTED, owner.depth + 1, parent=owner)
        else:
            qualified = ".".join(p for p in (self.cmap.root, path) if p)
            name = self.key_of.get(qualified) or self._fresh_name(self.class_of.get(path, "Module"))
            node = ModuleNode(name, parent.depth + 1, parent=parent, qualified_name=qualified)
            known = self.module_facts.get(name)
            if known is not None:
                node.parameters, node.output_shape = known.parameters, known.output_shape
        node.parent.children.append(node)  # type: ignore[union-attr]
        self.synthetic[id(owner), path] = node
        return node

    def _enclosing_path(self, path: str) -> str:
        """The nearest enclosing module that ran: a container that is only indexed
        (``encoder.layers``, a ModuleList) is in no module stack, and no node, as in eager."""
        head = path.rpartition(".")[0]
        while head and head not in self.class_of:
            head = head.rpartition(".")[0]
        return head

    def _fresh_name(self, class_name: str) -> str:
        """``Class_k`` for a module no capture named: k counts this class's nodes made so far."""
        taken = sum(1 for node in self.synthetic.values() if node.class_name == class_name)
        return f"{class_name}_{taken}"

    # -- writing -------------------------------------------------------------------------------

    def _write(self) -> None:
        tree = self.tree
        old_nodes = tree.frame_index()[1]
        synthetic = list(self.synthetic.values())
        made = {id(node) for node in synthetic}
        for node in synthetic:
            forward = self.booked.get((id(node), False), [0, 0, 0])
            backward = self.booked.get((id(node), True), [0, 0, 0])
            node.cpu_total_us = node.self_cpu_us = forward[0] / 1000
            node.device_total_us = node.self_device_us = forward[1] / 1000
            node.flops = forward[2]
            node.backward_cpu_us, node.backward_device_us, node.backward_flops = (
                backward[0] / 1000,
                backward[1] / 1000,
                backward[2],
            )
            node.calls = self.graph_calls_seen.get(id(node), 0)
        for node in sorted(synthetic, key=lambda n: -n.depth):  # children before parents
            parent = node.parent
            if parent is not None and id(parent) in made or parent is self.synthetic_root:
                for attr in (
                    "cpu_total_us",
                    "device_total_us",
                    "flops",
                    "backward_cpu_us",
                    "backward_device_us",
                    "backward_flops",
                ):
                    setattr(parent, attr, getattr(parent, attr) + getattr(node, attr))
            elif parent is not None:  # a compiled module keeps its totals: the time was in it already
                parent.self_cpu_us -= node.cpu_total_us
                parent.self_device_us -= node.device_total_us
        self._move_rows(old_nodes)
        for node in tree.walk():
            node.children.sort(key=lambda n: n.cost_us, reverse=True)
        tree.roots.sort(key=lambda n: n.cost_us, reverse=True)
        tree._cost_us = None

    def _move_rows(self, old_nodes: list[ModuleNode]) -> None:
        """Each call under a moved call counts in the nearest moved call's node: forward
        calls join its ``operator_rows``, and operator details name it (``charged_node``)."""
        tree, n = self.tree, len(self.calls)
        moved_rows = np.array(sorted(self.moved), dtype=np.int64)
        is_moved = np.zeros(n, dtype=bool)
        is_moved[moved_rows] = True
        holder = np.where(is_moved, np.arange(n), nearest_ancestor(self.parent, is_moved))
        rows = np.flatnonzero(holder >= 0)
        holders = holder[rows].tolist()
        tree._frame_index = None
        new_nodes = tree.frame_index()[1]
        position = {id(node): i for i, node in enumerate(new_nodes)}
        remap = np.array([position[id(node)] for node in old_nodes] + [-1], dtype=np.int64)
        charged = remap[tree.charged_node] if len(tree.charged_node) else np.full(n, -1, dtype=np.int64)
        taken = set(rows.tolist())
        for node in old_nodes:
            if node.operator_rows:
                node.operator_rows = [r for r in node.operator_rows if r not in taken]
        for row, moved in zip(rows.tolist(), holders):
            node, backward = self.moved[moved]
            charged[row] = position[id(node)]
            if not backward:
                node.operator_rows.append(row)
        tree.charged_node = charged


def _match(kids: list[int], names: list[str], graph: CompiledGraph) -> list[tuple[int, int]]:
    """Graph-call children -> the map's kernels, in order: each child takes the first
    kernel at or after the last match with its event name (a kernel the trace lacks
    is passed over; a child no kernel names is left)."""
    positions: dict[str, list[int]] = {}
    for index, kernel in enumerate(graph.kernels):
        positions.setdefault(kernel.event, []).append(index)
    pairs = []
    cursor = 0
    for kid, name in zip(kids, names):
        candidates = positions.get(name)
        if not candidates:
            continue
        at = bisect_left(candidates, cursor)
        if at < len(candidates):
            pairs.append((kid, candidates[at]))
            cursor = candidates[at] + 1
    return pairs


FLOPS_PER_BYTE = 12.0  # a node's FLOPs count as FLOPs / this many bytes: the measured balance (docs/compiled.md)


def kernel_work(kernel: CompiledKernel) -> list[float]:
    """The work of each of a kernel's modules (parallel to ``kernel.modules``), in bytes.

    The bytes its nodes read and write, plus their FLOPs (those that run in it: an
    extern or template kernel's convolution or matmul) at :data:`FLOPS_PER_BYTE`, so a
    module's part of the kernel's time is its part of ``bytes / bandwidth + FLOPs /
    FLOP rate``.  A map without bytes (an older capture), or a kernel whose nodes move
    nothing measurable, falls back to the nodes each module holds.
    """
    work = [size + flops / FLOPS_PER_BYTE for size, flops in zip(kernel.bytes, kernel.flops)]
    return work if sum(work) > 0 else [float(count) for count in kernel.nodes]


def kernel_targets(weights: dict[str, float], modules: Collection[str]) -> list[tuple[str, float]]:
    """Where a kernel's time goes, given the work of its nodes per module path: (path, share) pairs.

    All to the deepest module (of ``modules``, those that ran) that contains every one of its modules; when
    that is the compiled module itself (a fusion across its direct parts, such
    as a stem's bn1 + relu + maxpool, or ``layers.0`` + ``layers.1`` of a
    ModuleList, which never ran itself), split between those direct parts in
    proportion to their work (:func:`kernel_work`; "" is the compiled module's own
    nodes), leaving out parts with none.  No module at all: [] (the compiled module keeps it).
    """
    paths = [path for path in weights if path]
    if not paths:
        return []
    common = _common_module(list(weights))
    while common and common not in modules:  # a container only indexed (a ModuleList) ran no code
        common = common.rpartition(".")[0]
    if common:
        return [(common, 1.0)]
    tops: dict[str, float] = {}
    for path, work in weights.items():
        top = _outermost(path, modules)
        tops[top] = tops.get(top, 0.0) + work
    total = sum(tops.values())
    if not total > 0:  # no work measured anywhere: equal parts
        return [(top, 1 / len(tops)) for top in tops]
    return [(top, work / total) for top, work in tops.items() if work > 0]


def _outermost(path: str, modules: Collection[str]) -> str:
    """The outermost module that ran and holds ``path`` (``layers.0`` for ``layers.0.norm1``
    when ``layers`` is a ModuleList, only indexed); ``path`` itself when none did."""
    parts = path.split(".")
    for end in range(1, len(parts)):
        head = ".".join(parts[:end])
        if head in modules:
            return head
    return path


def _common_module(paths: list[str]) -> str:
    """The deepest module containing all ``paths`` ("" is the compiled module itself)."""
    if not paths:
        return ""
    split = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for parts in zip(*split):
        if any(part != parts[0] for part in parts):
            break
        common.append(parts[0])
    return ".".join(common)
