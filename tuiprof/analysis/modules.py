"""Module hierarchy from ``nn.Module`` python frames (with_stack traces only).

A frame named ``nn.Module: Conv2d_1`` is one forward call of the second
Conv2d instance (a per-class counter in first-call order).  Its parent module
is found by walking ``Python parent id`` upward past non-module frames
(``_call_impl``, ``forward``).  Calls of the same instance at the same place
in the tree aggregate into one node (resnet's shared ReLU is called twice
per block).

Backward time reaches a module only through real autograd events: each
``autograd::engine::evaluate_function: ...`` call (on the backward thread, or on
the calling thread for a CPU backward) carries the ``Sequence number`` of the
node it runs, which is that of the forward op that created the node; the
latest call before it with that number is that op (:func:`backward_roots`), and
the module it ran in gets the time of the root and of everything under it.
Any other call carrying a sequence number is no backward work: autograd stamps
every op run with grad mode on with its counter's next value, so tensor work
between ``loss.backward()`` and ``optimizer.step()`` carries the number of the
next step's first node (charging it by number put 876 ms of such work in a
``Linear``'s backward whose real backward took 131 ms, issue 35).

The calls outside every module and outside the backward, on the threads where
modules run (data loading, the optimizer, the loss computed in the loop, work
between backward and step), are the tree's ``outside`` node, ``(outside
modules)`` (:func:`outside_rows`): a node of no tree, so "share of module time"
keeps its meaning; the views show it as a row of its own.

Memory stays linear in the number of frames: a node keeps its parent link,
children are found by (parent, name), and a node's path string is built
only when asked for.  Real models nest a few dozen levels; a tree deeper
than MAX_MODULE_DEPTH (a damaged or hostile trace: 50,000 chained frames) is
cut there, deeper module calls counting in the module at the cut, with a note
in the trace's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from tuiprof.analysis.arrays import ancestors_of, break_cycles, group_rows, id_table, look_up, nearest_ancestor
from tuiprof.analysis.calls import OperatorCalls, is_step_name
from tuiprof.trace.columns import NONE, FrameColumns
from tuiprof.trace.store import TraceEvents

# Real models nest a few dozen levels.  The explorer's tree (Textual's Tree) draws its lines by
# recursion: expanded past about 980 levels it raised RecursionError; 500 leaves it room.
MAX_MODULE_DEPTH = 500
ENGINE_PREFIX = "autograd::engine::evaluate_function: "  # autograd runs each backward node under one
OUTSIDE_MODULES = "(outside modules)"


@dataclass(eq=False)
class ModuleNode:
    """One module instance at one place in the tree, all its calls together.

    Built once by :func:`build_module_tree` and not changed after, except
    that a live capture may fill in ``qualified_name``, ``parameters`` and
    ``output_shape`` (what only a live run knows).
    """

    name: str  # "Conv2d_1"
    depth: int
    calls: int = 0
    cpu_total_us: float = 0.0
    self_cpu_us: float = 0.0
    self_device_us: float = 0.0
    device_total_us: float = 0.0
    backward_cpu_us: float = 0.0
    backward_device_us: float = 0.0
    self_cpu_mem_bytes: int = 0
    cpu_mem_bytes: int = 0
    flops: int = 0  # forward training FLOPs (FlopCounterMode's formulas), submodules included
    backward_flops: int = 0  # FLOPs of the backward ops of its forward ops, submodules included
    children: list[ModuleNode] = field(default_factory=list)
    parent: ModuleNode | None = None
    operator_rows: list[int] = field(default_factory=list)  # calls directly inside
    backward_rows: list[int] = field(default_factory=list)  # backward roots of its forward ops
    qualified_name: str | None = None  # "layer1.0.conv1" (live capture)
    parameters: int | None = None  # live capture
    output_shape: str | None = None  # live capture
    # Compiled runs (analysis/compiled_map.py): the kernels fused across modules that computed
    # part of this one -- (kernel name, the modules it fused, the modules its time went to).
    fused_kernels: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = field(default_factory=list)

    @property
    def path(self) -> str:
        """``ResNet_0/Sequential_0/BasicBlock_0/Conv2d_1``: built on demand (O(depth))."""
        names = []
        node: ModuleNode | None = self
        while node is not None:
            names.append(node.name)
            node = node.parent
        return "/".join(reversed(names))

    @property
    def class_name(self) -> str:
        return self.name.rsplit("_", 1)[0]

    @property
    def label(self) -> str:
        return f"{self.qualified_name} ({self.class_name})" if self.qualified_name else self.name

    @property
    def flops_per_s(self) -> float | None:
        """Forward plus backward FLOPs over forward plus backward time (:attr:`cost_us`)."""
        work = self.flops + self.backward_flops
        return work / (self.cost_us / 1e6) if work and self.cost_us else None

    @property
    def cost_us(self) -> float:
        """What a module costs, the one measure every view ranks and shares by:
        forward plus backward, on the device when that is larger than on the CPU
        (a GPU model's CPU time is mostly launching)."""
        return max(self.cpu_total_us + self.backward_cpu_us, self.device_total_us + self.backward_device_us)

    @property
    def cost_parts_us(self) -> tuple[float, float]:
        """:attr:`cost_us` as (forward, backward), both on the side it was taken from."""
        if self.cpu_total_us + self.backward_cpu_us >= self.device_total_us + self.backward_device_us:
            return self.cpu_total_us, self.backward_cpu_us
        return self.device_total_us, self.backward_device_us

    def walk(self):
        """This node and every descendant, parents first."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))

    def subtree_operator_rows(self) -> list[int]:
        rows: list[int] = []
        for node in self.walk():
            rows.extend(node.operator_rows)
        return rows


@dataclass
class ModuleTree:
    roots: list[ModuleNode]
    by_frame: dict[int, ModuleNode]  # python frame row -> node
    # For every call, the backward root (a node's backward_rows entry) it runs under, else -1.
    backward_owner: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)
    # For every call, the node it counts in: an index into frame_index()'s nodes, -1: none.
    call_owner: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)
    # For every call, the node its time is charged to, as the module rows charge it: its call_owner
    # (the module or compiled region it ran in), else for a backward call the owner of its forward
    # op (through backward_owner); -1: neither.  Operator details name modules by it.
    charged_node: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64), repr=False)
    # The calls outside every module and autograd's backward, as one node in no tree (outside_rows):
    # what the step spent beside the model; charged_node leaves them at -1.
    outside: ModuleNode | None = field(default=None, repr=False)
    _frame_index: tuple[np.ndarray, list[ModuleNode]] | None = field(default=None, repr=False)
    _cost_us: float | None = field(default=None, repr=False)

    def walk(self):
        for root in self.roots:
            yield from root.walk()

    def rows(self):
        """What the Modules views list: every module (:meth:`walk`), then ``outside``, if any."""
        yield from self.walk()
        if self.outside is not None:
            yield self.outside

    @property
    def cost_us(self) -> float:
        """All module time: the roots' costs (kept: every tree row divides by it)."""
        if self._cost_us is None:
            self._cost_us = sum(root.cost_us for root in self.roots)
        return self._cost_us

    def operator_rows(self, node: ModuleNode) -> np.ndarray:
        """Every call the module accounts for: its forward calls (children modules
        included) and the backward calls its forward ops caused (each backward root
        with everything under it), in row order."""
        forward = node.subtree_operator_rows()
        roots = [row for n in node.walk() for row in n.backward_rows]
        if not roots or not len(self.backward_owner):
            return np.array(forward, dtype=np.int64)
        backward = np.flatnonzero(np.isin(self.backward_owner, np.array(roots, dtype=np.int64)))
        return np.union1d(np.array(forward, dtype=np.int64), backward)

    def frame_index(self) -> tuple[np.ndarray, list[ModuleNode]]:
        """Frame row -> index into a node list (-1: no module frame), for numpy look-ups."""
        if self._frame_index is None:
            nodes = list(self.walk())
            position = {id(node): i for i, node in enumerate(nodes)}
            size = max(self.by_frame, default=-1) + 1
            index = np.full(size, -1, dtype=np.int64)
            if size:
                frames = np.fromiter(self.by_frame, dtype=np.int64, count=len(self.by_frame))
                index[frames] = [position[id(node)] for node in self.by_frame.values()]
            self._frame_index = (index, nodes)
        return self._frame_index

    def charged(self, rows: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For calls ``rows``: the node each one's time is charged to (an index into
        :meth:`frame_index`'s nodes, -1: outside modules, see ``charged_node``) and whether
        it is charged through autograd (a backward call, charged to its forward op's module).
        The one answer to "a call's module" for operator details, call rows and the Timeline."""
        rows = np.asarray(rows, dtype=np.int64)
        if not len(self.charged_node):  # no module frames (with_stack=False)
            return np.full(len(rows), -1, dtype=np.int64), np.zeros(len(rows), dtype=bool)
        owners = self.charged_node[rows]
        backward = owners >= 0
        if len(self.call_owner):  # not run inside the module or compiled region it is charged to
            backward &= self.call_owner[rows] < 0
        return owners, backward

    def charged_module(self, row: int) -> tuple[ModuleNode, bool] | None:
        """The module call ``row``'s time is charged to and whether through autograd
        (:meth:`charged`); None: outside modules."""
        owners, backward = self.charged([row])
        return (self.frame_index()[1][int(owners[0])], bool(backward[0])) if owners[0] >= 0 else None


class ModuleNodes(NamedTuple):
    """The module tree's nodes from the frames alone (:func:`module_nodes`), before any call is
    placed in them, and the repairs building them found (looping ids, a cut), for
    :func:`build_module_tree` to note: the report's notes keep their order however the nodes
    were built."""

    tree: ModuleTree
    repaired: int
    notes: tuple[str, ...]


def build_module_tree(store: TraceEvents, calls: OperatorCalls, nodes: ModuleNodes | None = None) -> ModuleTree:
    """The module tree of ``store``'s ``nn.Module`` frames, with ``calls`` placed in it.
    ``nodes``: :func:`module_nodes` already built (beside ``build_calls``, analysis/build.py)."""
    tree, repaired, notes = nodes or module_nodes(store)
    store.report.repaired += repaired
    for note in notes:
        store.report.note(note)
    if not tree.by_frame:
        return tree
    _attribute_operators(calls, tree)
    fill_totals(tree, calls)
    tree.roots.sort(key=lambda n: n.cost_us, reverse=True)
    return tree


def module_nodes(store: TraceEvents) -> ModuleNodes:
    """The nodes of the module tree: one per distinct path of module names, with its calls and
    CPU times; every module frame's node.  Reads only the frames, so it runs while the calls are
    built (a Python loop over the module frames: ~0.4 s at 1 GB of a python-heavy trace, which
    holds the GIL while the nesting's sorts do not)."""
    modules = store.module_names()
    if not modules:
        return ModuleNodes(ModuleTree([], {}), 0, ())
    frames = store.frames
    module_above, loops = module_above_frames(frames)
    notes = [f"Python parent id links that loop ({loops:,}): cut above the earliest frame of each"] if loops else []

    roots: list[ModuleNode] = []
    nodes: dict[tuple[int, str], ModuleNode] = {}  # (id of the parent node or 0, name)
    by_frame: dict[int, ModuleNode] = {}
    cut = 0
    starts, ends = frames.start_ns, frames.end_ns
    rows = np.array(sorted(modules), dtype=np.int64)
    rows = rows[np.argsort(starts[rows], kind="stable")]
    durations = ((ends[rows] - starts[rows]) / 1000).tolist()
    for row, up, duration in zip(rows.tolist(), module_above[rows].tolist(), durations):
        parent_node = by_frame.get(up) if up >= 0 else None
        if parent_node is not None and parent_node.depth + 1 >= MAX_MODULE_DEPTH:
            by_frame[row] = parent_node  # past the cut: its time is already the parent's
            cut += 1
            continue
        name = modules[row]
        key = (id(parent_node) if parent_node else 0, name)
        node = nodes.get(key)
        if node is None:
            node = ModuleNode(name, parent_node.depth + 1 if parent_node else 0, parent=parent_node)
            nodes[key] = node
            if parent_node:
                parent_node.children.append(node)
            else:
                roots.append(node)
        node.calls += 1
        node.cpu_total_us += duration
        node.self_cpu_us += duration
        if parent_node:
            parent_node.self_cpu_us -= duration
        by_frame[row] = node

    if cut:
        notes.append(
            f"module tree deeper than {MAX_MODULE_DEPTH:,} levels: cut there "
            f"({cut:,} deeper module calls count in the module at the cut)"
        )
    return ModuleNodes(ModuleTree(roots, by_frame), loops, tuple(notes))


def module_above_frames(frames: FrameColumns) -> tuple[np.ndarray, int]:
    """For every frame, the nearest ``nn.Module`` frame up its ``Python parent id``
    chain (-1 at the top), and how many loops in those links were cut.

    A repeated Python id means its last frame.  The ids come from the file, so
    their links can loop (2 -> 3 -> 2, or one flipped digit): each loop is cut
    above its earliest frame, which becomes a root (``arrays.break_cycles``)."""
    parent, loops = frame_parents(frames)
    return nearest_ancestor(parent, frames.module >= 0), loops


def frame_parents(frames: FrameColumns) -> tuple[np.ndarray, int]:
    """For every frame, its caller's row by the ``Python parent id`` links (-1 at the top),
    and how many loops in those links were cut (see :func:`module_above_frames`)."""
    parent = look_up(id_table(frames.python_id, NONE, last=True), frames.parent_id, NONE)
    return break_cycles(parent, frames.start_ns)


def _attribute_operators(calls: OperatorCalls, tree: ModuleTree) -> None:
    """Each call to the module it ran in; each backward root to the module of its forward op."""
    node_of_frame, nodes = tree.frame_index()
    module = calls.column("module")
    attribute_calls(calls, tree, np.where(module >= 0, node_of_frame[module], -1), nodes)


def attribute_calls(calls: OperatorCalls, tree: ModuleTree, owner: np.ndarray, nodes: list[ModuleNode]) -> None:
    """Each call to its ``owner`` (an index into ``nodes``, -1: none); each backward root
    to the owner of its forward op (:func:`backward_roots`); the forward thread's calls
    in neither to ``tree.outside``.  Shared with the compiled regions (analysis/compiled.py),
    which own calls no module frame tells."""
    tree.call_owner = owner
    inside = np.flatnonzero(owner >= 0)
    for node, where in zip(*group_rows(owner[inside])):
        nodes[node].operator_rows = inside[where].tolist()  # in start order

    parent = calls.column("parent")
    engine = np.isin(calls.column("name_id"), calls.name_codes(lambda name: name.startswith(ENGINE_PREFIX)))
    backward = engine | (nearest_ancestor(parent, engine) >= 0)  # autograd's backward work
    roots, forward = backward_roots(calls, owner, engine, backward)
    for row, node in zip(roots.tolist(), owner[forward].tolist()):
        nodes[node].backward_rows.append(row)
    is_root = np.zeros(len(calls), dtype=bool)
    is_root[roots] = True
    tree.backward_owner = np.where(is_root, np.arange(len(calls)), nearest_ancestor(parent, is_root))
    root_node = np.full(
        len(calls) + 1, -1, dtype=np.int64
    )  # backward root -> node; index -1 (no root) lands on the extra slot
    root_node[roots] = owner[forward]
    tree.charged_node = np.where(owner >= 0, owner, root_node[tree.backward_owner])
    tree.outside = outside_node(calls, outside_rows(calls, owner, backward))


def backward_roots(
    calls: OperatorCalls, owner: np.ndarray, engine: np.ndarray, backward: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The backward roots charged to a module, and for each the forward call that created
    its autograd node (whose ``owner`` the root's time goes to).

    A root is an ``evaluate_function`` call (``engine``) with a sequence number, outside
    every module (``backward``: those calls and every call under them).  Its creator is
    the latest call before it carrying that number, backward work left out: autograd's
    counter moves on as each node is made, so no later forward call carries it.  The calls
    that ran before the creator with its number (between ``loss.backward()`` and
    ``optimizer.step()`` the counter already holds the next step's first node) are never
    the creator, nor backward work.  A root whose creator ran outside modules, or is not in
    the trace, is charged to none."""
    sequence = calls.column("sequence_number")
    starts = calls.column("start_ns")
    candidates = np.flatnonzero(engine & (owner < 0) & (sequence >= 0))
    pool = np.flatnonzero(~backward & (sequence >= 0))
    none = np.empty(0, dtype=np.int64)
    if not len(candidates) or not len(pool):
        return none, none
    # One sort key (number, then start), each part as its rank: both fit an int64 at any size.
    _, number = np.unique(np.concatenate((sequence[pool], sequence[candidates])), return_inverse=True)
    times, at = np.unique(np.concatenate((starts[pool], starts[candidates])), return_inverse=True)
    key = number.astype(np.int64) * len(times) + at
    order = np.argsort(key[: len(pool)], kind="stable")  # equal keys keep row order: the inner call last
    before = np.searchsorted(key[: len(pool)][order], key[len(pool) :], side="left") - 1
    creator = np.where(before >= 0, pool[order[np.maximum(before, 0)]], -1)
    found = (creator >= 0) & (sequence[np.maximum(creator, 0)] == sequence[candidates])
    found &= owner[np.maximum(creator, 0)] >= 0
    return candidates[found], creator[found]


def outside_rows(calls: OperatorCalls, owner: np.ndarray, backward: np.ndarray) -> np.ndarray:
    """The calls outside modules, in row order (whole subtrees: :func:`outside_node` takes their tops).

    A call is outside modules when it runs on a thread where modules run, in no module
    (``owner`` -1) and is no backward work, and holds no call that is either: a
    ``record_function`` span around the model is a container, not work outside it.  The
    ``ProfilerStep#`` spans are the steps themselves.  Each subtree's top call's time is
    the work's time (what Python did between the calls is in no call)."""
    if not len(calls) or not (owner >= 0).any():
        return np.empty(0, dtype=np.int64)
    threads = calls.column("thread")
    parent = calls.column("parent")
    module_work = (owner >= 0) | backward
    steps = np.isin(calls.column("name_id"), calls.name_codes(is_step_name))
    outside = ~module_work & ~steps & np.isin(threads, np.unique(threads[owner >= 0]))
    outside &= ~ancestors_of(parent, module_work)
    return np.flatnonzero(outside)


def outside_node(calls: OperatorCalls, rows: np.ndarray) -> ModuleNode | None:
    """The ``(outside modules)`` node of :func:`outside_rows`' calls: its calls are the
    subtrees' tops (:func:`outside_tops`), its time theirs; device time, memory and FLOPs
    summed over every call as a module's are.  None when there are none."""
    if not len(rows):
        return None
    tops = outside_tops(calls, rows)
    node = ModuleNode(OUTSIDE_MODULES, 0, calls=len(tops), operator_rows=rows.tolist())
    node.cpu_total_us = node.self_cpu_us = int(calls.column("total_ns")[tops].sum()) / 1000
    node.device_total_us = node.self_device_us = int(calls.column("self_device_ns")[rows].sum()) / 1000
    node.cpu_mem_bytes = node.self_cpu_mem_bytes = int(calls.column("self_cpu_mem")[rows].sum())
    node.flops = int(calls.column("counted_flops")[rows].sum())
    return node


def outside_tops(calls: OperatorCalls, rows: np.ndarray | list[int]) -> np.ndarray:
    """Of the calls ``rows`` (whole subtrees), those whose parent is not one of them."""
    rows = np.asarray(rows, dtype=np.int64)
    inside = np.zeros(len(calls) + 1, dtype=bool)  # index -1 (no parent) lands on the extra slot
    inside[rows] = True
    return rows[~inside[calls.column("parent")[rows]]]


def fill_totals(tree: ModuleTree, calls: OperatorCalls) -> None:
    """Device time, backward time, memory and FLOPs of every node; children sorted by cost."""
    nodes = list(tree.walk())

    def summer(row_lists: list[list[int]]):
        """Exact int64 sums of a column over each node's rows."""
        counts = np.array([len(rows) for rows in row_lists], dtype=np.int64)
        rows = np.array([r for rows in row_lists for r in rows], dtype=np.int64)
        starts = np.concatenate(([0], np.cumsum(counts)[:-1]))

        def per_node(column: str) -> list[int]:
            if not len(rows):
                return [0] * len(nodes)
            sums = np.add.reduceat(np.append(calls.column(column)[rows], 0), starts)
            return np.where(counts > 0, sums, 0).tolist()

        return per_node

    forward = summer([n.operator_rows for n in nodes])
    backward = summer([n.backward_rows for n in nodes])
    self_device, self_mem, flops = forward("self_device_ns"), forward("self_cpu_mem"), forward("counted_flops")
    back_cpu, back_device, back_flops = (
        backward("total_ns"),
        backward("device_total_ns"),
        backward("counted_flops_total"),
    )
    for i, node in enumerate(nodes):
        node.self_device_us = node.device_total_us = self_device[i] / 1000
        node.self_cpu_mem_bytes = node.cpu_mem_bytes = self_mem[i]
        node.flops = flops[i]
        node.backward_flops = back_flops[i]
        node.backward_cpu_us = back_cpu[i] / 1000
        node.backward_device_us = back_device[i] / 1000
    for node in reversed(nodes):  # children before parents
        parent = node.parent
        if parent is not None:
            parent.device_total_us += node.device_total_us
            parent.backward_cpu_us += node.backward_cpu_us
            parent.backward_device_us += node.backward_device_us
            parent.cpu_mem_bytes += node.cpu_mem_bytes
            parent.flops += node.flops
            parent.backward_flops += node.backward_flops
    for node in nodes:
        node.children.sort(key=lambda n: n.cost_us, reverse=True)
