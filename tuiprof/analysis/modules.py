"""Module hierarchy from ``nn.Module`` python frames (with_stack traces only).

A frame named ``nn.Module: Conv2d_1`` is one forward call of the second
Conv2d instance (a per-class counter in first-call order).  Its parent module
is found by walking ``Python parent id`` upward past non-module frames
(``_call_impl``, ``forward``).  Calls of the same instance at the same place
in the tree aggregate into one node (resnet's shared ReLU is called twice
per block).

Backward time reaches a module through autograd's ``Sequence number``: the
backward root op (``autograd::engine::evaluate_function: ...``) carries the
sequence number of the forward op that created its node, and that forward op
ran inside the module.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tuiprof.analysis.calls import OperatorCalls
from tuiprof.trace.store import PythonFrames


@dataclass(eq=False)
class ModuleNode:
    """One module instance at one place in the tree, all its calls together.

    Built once by :func:`build_module_tree` and not changed after, except
    that a live capture may fill in ``qualified_name``, ``parameters`` and
    ``output_shape`` (what only a live run knows).
    """

    name: str  # "Conv2d_1"
    path: str  # "ResNet_0/Sequential_0/BasicBlock_0/Conv2d_1"
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
    flops: int = 0
    children: list[ModuleNode] = field(default_factory=list)
    parent: ModuleNode | None = None
    operator_rows: list[int] = field(default_factory=list)  # calls directly inside
    backward_rows: list[int] = field(default_factory=list)  # backward roots of its forward ops
    qualified_name: str | None = None  # "layer1.0.conv1" (live capture)
    parameters: int | None = None  # live capture
    output_shape: str | None = None  # live capture

    @property
    def class_name(self) -> str:
        return self.name.rsplit("_", 1)[0]

    @property
    def label(self) -> str:
        return f"{self.qualified_name} ({self.class_name})" if self.qualified_name else self.name

    @property
    def total_with_backward_us(self) -> float:
        return self.cpu_total_us + self.backward_cpu_us

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

    def walk(self):
        for root in self.roots:
            yield from root.walk()


def build_module_tree(frames: PythonFrames, calls: OperatorCalls) -> ModuleTree:
    modules = frames.modules
    if not modules:
        return ModuleTree([], {})
    row_of_id = {pid: row for row, pid in enumerate(frames.python_id) if pid >= 0}
    nearest_module: dict[int, int] = {}  # frame row -> module frame row above it (-1 none)

    def parent_module(row: int) -> int:
        """Module frame row enclosing frame ``row`` (-1 at the top), memoised."""
        chain = []
        current = row_of_id.get(frames.parent_id[row], -1)
        while current >= 0 and current not in modules and current not in nearest_module:
            chain.append(current)
            current = row_of_id.get(frames.parent_id[current], -1)
        if current >= 0 and current not in modules:
            current = nearest_module[current]
        for visited in chain:
            nearest_module[visited] = current
        return current

    roots: dict[str, ModuleNode] = {}
    nodes: dict[str, ModuleNode] = {}
    by_frame: dict[int, ModuleNode] = {}
    for row in sorted(modules, key=frames.start_ns.__getitem__):
        up = parent_module(row)
        parent_node = by_frame.get(up) if up >= 0 else None
        name = modules[row]
        path = f"{parent_node.path}/{name}" if parent_node else name
        node = nodes.get(path)
        if node is None:
            node = ModuleNode(name, path, parent_node.depth + 1 if parent_node else 0, parent=parent_node)
            nodes[path] = node
            if parent_node:
                parent_node.children.append(node)
            else:
                roots[path] = node
        duration = (frames.end_ns[row] - frames.start_ns[row]) / 1000
        node.calls += 1
        node.cpu_total_us += duration
        node.self_cpu_us += duration
        if parent_node:
            parent_node.self_cpu_us -= duration
        by_frame[row] = node

    _attribute_operators(calls, by_frame)
    for root in roots.values():
        sum_subtree(root, calls)
    tree_roots = sorted(roots.values(), key=lambda n: n.total_with_backward_us, reverse=True)
    return ModuleTree(tree_roots, by_frame)


def _attribute_operators(calls: OperatorCalls, by_frame: dict[int, ModuleNode]) -> None:
    module_of_sequence: dict[int, ModuleNode] = {}
    for row in range(len(calls)):
        frame = calls.module[row]
        if frame < 0:
            continue
        node = by_frame[frame]
        node.operator_rows.append(row)
        args = calls.events[row].args
        if args is not None and args.sequence_number is not None:
            module_of_sequence.setdefault(args.sequence_number, node)
    if not module_of_sequence:
        return
    for row in range(len(calls)):
        if calls.module[row] >= 0:
            continue
        args = calls.events[row].args
        seq = args.sequence_number if args is not None else None
        if seq is None or seq not in module_of_sequence:
            continue
        parent = calls.parent[row]
        parent_args = calls.events[parent].args if parent >= 0 else None
        if parent_args is not None and parent_args.sequence_number == seq:
            continue  # not the root of this backward node
        module_of_sequence[seq].backward_rows.append(row)


def sum_subtree(node: ModuleNode, calls: OperatorCalls) -> None:
    """Fill device time, backward time, memory and FLOPs; sort children by cost."""
    rows = node.operator_rows
    node.self_device_us = sum(calls.self_device_ns[r] for r in rows) / 1000
    node.self_cpu_mem_bytes = sum(calls.self_cpu_mem[r] for r in rows)
    node.backward_cpu_us = sum(map(calls.total_ns.__getitem__, node.backward_rows)) / 1000
    node.backward_device_us = sum(calls.device_total_ns[r] for r in node.backward_rows) / 1000
    node.device_total_us = node.self_device_us
    node.cpu_mem_bytes = node.self_cpu_mem_bytes
    node.flops = sum(calls.flops[r] for r in rows)
    for child in node.children:
        sum_subtree(child, calls)
        node.device_total_us += child.device_total_us
        node.backward_cpu_us += child.backward_cpu_us
        node.backward_device_us += child.backward_device_us
        node.cpu_mem_bytes += child.cpu_mem_bytes
        node.flops += child.flops
    node.children.sort(key=lambda n: n.total_with_backward_us + n.device_total_us, reverse=True)
