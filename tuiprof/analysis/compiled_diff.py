"""Module keys for a diff across compilation: eager against ``torch.compile``, per module.

An eager tree and a compiled one of the same model differ in their paths
(``MLP_0/Linear_0`` against ``OptimizedModule_0/MLP_0/[compiled 0:0]/Linear_0``)
but, from live captures, share the modules' qualified names (``fc1``):
the compiled tree's modules are named from the kernel map with the eager
tree's keys (analysis/compiled_map.py).  So the diff matches modules by
qualified name, and the nodes only a compiled tree has are rows of their own:

- ``OptimizedModule_0`` (torch.compile's wrapper), a region node
  (``[compiled 0:0]``: Dynamo's guards and AOTAutograd's wrappers) and
  ``(compiled, unattributed)`` (the graph's Python between kernels) are keyed
  by the qualified name of their nearest named ancestor and their path below
  it (``model/[compiled 0:0]``), and show as ``added``: what compiling costs
  that the eager run did not have.

When a side is compiled, each module is two rows, forward and backward
(``Linear_0 fwd`` / ``Linear_0 bwd`` in the detail column), so the table says
in which direction compiling helped, and a module's value is its **total**
time, submodules included: a kernel fused across modules lands on their
deepest common module (a block, ``encoder``), so a compiled module's self
time holds its children's fused work and compares with nothing in the eager
tree, while a module's total holds the same work on both sides.  The rows
then nest; each one's share is of the change of the whole tree's time.  The
compiled-only nodes keep their own (self) time: what the wrapper, the guards
and the graph's Python between kernels cost.  Eager against eager keeps one
row per module (self time, forward plus backward).
"""

from __future__ import annotations

from tuiprof.analysis.compiled import is_region_node
from tuiprof.analysis.compiled_map import UNATTRIBUTED
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode

WRAPPER_CLASS = "OptimizedModule"  # torch.compile(module) returns one; it has no qualified name of its own
Values = dict[tuple[str, str], list[float]]  # as analysis/diff.py: (name, detail) -> [value, calls]


def is_compiled_structure(node: ModuleNode) -> bool:
    """A node a compiled tree has and an eager one has not: wrapper, region, unattributed rest."""
    return is_region_node(node) or node.name == UNATTRIBUTED or node.class_name == WRAPPER_CLASS


def knows_qualified_names(model: TraceModel) -> bool:
    """Whether every module of the tree (compiled structure aside) has its qualified name."""
    return all(node.qualified_name for node in model.modules.walk() if not is_compiled_structure(node))


def is_compiled(model: TraceModel) -> bool:
    return model.compiled_run is not None or model.compiled is not None


def module_self_parts(node: ModuleNode, metric: str) -> tuple[float, float]:
    """(forward self time, backward of its own forward ops): children's excluded, so the
    rows of a tree sum to its total."""
    if metric == "device":
        forward, backward = node.self_device_us, node.backward_device_us
        backward -= sum(c.backward_device_us for c in node.children)
    else:
        forward, backward = node.self_cpu_us, node.backward_cpu_us
        backward -= sum(c.backward_cpu_us for c in node.children)
    return forward, backward


def module_key(node: ModuleNode) -> tuple[str, str]:
    """(qualified name, trace key); compiled structure by its nearest named ancestor."""
    if node.qualified_name is not None:
        return node.qualified_name or node.path, node.name
    below = [node.name]
    up = node.parent
    while up is not None and up.qualified_name is None:
        below.append(up.name)
        up = up.parent
    head = [up.qualified_name or up.name] if up is not None else []
    return "/".join(head + below[::-1]), ""


def qualified_module_values(model: TraceModel, metric: str, by_direction: bool) -> Values:
    """Per qualified name: self time (forward plus backward), or with ``by_direction`` a row
    per direction holding the module's total time (module docstring)."""
    result: Values = {}
    for node in model.modules.rows():  # (outside modules) too: work moved out of the model shows
        name, detail = module_key(node)
        if not by_direction or node is model.modules.outside:  # no module: one row, no direction
            parts = [(detail, sum(module_self_parts(node, metric)), node.calls)]
        else:
            forward, backward = (
                module_self_parts(node, metric) if is_compiled_structure(node) else _total_parts(node, metric)
            )
            parts = [(f"{detail} fwd".strip(), forward, node.calls), (f"{detail} bwd".strip(), backward, 0.0)]
        for key_detail, value, calls in parts:
            cell = result.setdefault((name, key_detail), [0.0, 0.0])
            cell[0] += value
            cell[1] += calls
    return result


def tree_total(model: TraceModel, metric: str) -> Values:
    """The whole tree's time, forward and backward, and ``(outside modules)``'s, under one key
    (what the rows' shares are of)."""
    tops = [*model.modules.roots, *([model.modules.outside] if model.modules.outside else [])]
    return {("", ""): [sum(sum(_total_parts(top, metric)) for top in tops), 0.0]}


def _total_parts(node: ModuleNode, metric: str) -> tuple[float, float]:
    if metric == "device":
        return node.device_total_us, node.backward_device_us
    return node.cpu_total_us, node.backward_cpu_us
