"""Compiled captures: torch.compile before the profiled window, and each kernel's module.

While Inductor generates a graph's code it calls
``set_kernel_post_grad_provenance_tracing(nodes, kernel_name)`` once per
kernel, in the order the graph's code calls the kernels: fused C++/Triton
kernels with their scheduler nodes, extern kernels (``extern_kernels.mm``,
``aten.convolution_backward``) with their IR node.  :class:`KernelMapRecorder`
wraps that function for the capture and reads, from the FX nodes behind each
kernel, the module they came from: ``nn_module_stack`` for forward nodes,
``fwd_nn_module_stack`` for backward nodes (AOTAutograd copies the forward
node's stack onto the backward nodes that differentiate it, matched by
``seq_nr``), and each node's work (bytes read and written, FLOPs where it
runs) from its metadata, by which a kernel fused across modules is split.
docs/compiled.md says why this source and not the others, and why work.

The recorder needs Inductor to generate code in this process: it turns the
compile caches off while it records (a cache hit generates nothing), and it
turns on ``cpp.enable_kernel_profile`` so each C++ kernel is a profiler
event (``graph_0_cpp_fused_relu_1``) the analysis can time.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any

from tuiprof.capture.compile_log import CompileLogRecorder
from tuiprof.trace.compile_log import CompileLog
from tuiprof.trace.compiled_map import CompiledGraph, CompiledKernel, CompiledMap, CompiledModule

TICK_S = 5.0  # progress while compiling: one line every so often (Inductor on CPU takes a minute)

# Where Inductor's code generators look the provenance function up (imported by name there).
_PROVENANCE_HOMES = ("torch._inductor.debug", "torch._inductor.codegen.cpp", "torch._inductor.codegen.triton")
_PROVENANCE_FUNCTION = "set_kernel_post_grad_provenance_tracing"


def compile_model(model: Any, mode: str, dynamic: bool) -> Any:
    """``torch.compile`` with the capture's options (``default`` is torch's default mode)."""
    import torch

    return torch.compile(model, mode=None if mode == "default" else mode, dynamic=True if dynamic else None)


def warm_up_compiled(
    model: Any,
    step: Callable[[Any], object],
    mode: str,
    dynamic: bool,
    on_tick: Callable[[float], object],
) -> tuple[Any, CompiledMap, float, CompileLog | None]:
    """Compile ``model`` and run one unprofiled ``step`` with it, taking the kernel map
    and Dynamo's graph breaks and compilations.

    torch.compile compiles lazily, at the first forward (and the backward
    graph at the first backward): this step is where compilation happens,
    before the profiler starts, so none of it lands in the profiled window.
    Returns the compiled model, the map, the step's seconds (the compile
    time; one step's own run time is in it) and the compile log.  ``on_tick(elapsed)`` is called
    every TICK_S seconds meanwhile, from another thread.
    """
    compiled = compile_model(model, mode, dynamic)
    recorder = KernelMapRecorder()
    began = time.perf_counter()
    done = threading.Event()

    def tick() -> None:
        while not done.wait(TICK_S):
            on_tick(time.perf_counter() - began)

    ticker = threading.Thread(target=tick, name="tuiprof-compile-progress", daemon=True)
    ticker.start()
    try:
        with recorder.recording():
            step(compiled)
    finally:
        done.set()
        ticker.join()
    return compiled, recorder.compiled_map(), time.perf_counter() - began, recorder.compile_log.taken()


class KernelMapRecorder:
    """Collects the kernel -> module map of every graph Inductor compiles while active.

    ``root``: qualified name of the module that is compiled (paths in the map
    are relative to it; "" for the whole model).
    """

    def __init__(self, root: str = "") -> None:
        self.root = root
        self.modules: list[CompiledModule] = []
        self._module_index: dict[tuple[str, str], int] = {}
        self._graphs: dict[tuple[str, bool], CompiledGraph] = {}
        self.cost_s = 0.0  # time spent in the recorder (compile-time cost of the map)
        self.unread = 0  # kernels the recorder could not read (counted, never raised)
        self._compile_s_before = 0.0
        self.compile_log = CompileLogRecorder()  # graph breaks and (re)compilations, taken in the same window

    @contextmanager
    def recording(self) -> Iterator[KernelMapRecorder]:
        """Wrap Inductor's provenance hook and set the config the map needs, restored after."""
        import importlib

        import torch._functorch.config as functorch_config
        import torch._inductor.config as inductor_config

        homes = []
        for name in _PROVENANCE_HOMES:
            with suppress(ImportError):  # codegen.triton without triton installed
                module = importlib.import_module(name)
                if hasattr(module, _PROVENANCE_FUNCTION):
                    homes.append((module, getattr(module, _PROVENANCE_FUNCTION)))
        original = dict(homes)[importlib.import_module("torch._inductor.debug")]
        wrapped = self._wrap(original)
        settings = [
            (inductor_config.cpp, "enable_kernel_profile", True),
            (inductor_config, "fx_graph_cache", False),
            (functorch_config, "enable_autograd_cache", False),
        ]
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in settings]
        self._compile_s_before = _compile_seconds()
        try:
            for owner, name, value in settings:
                setattr(owner, name, value)
            for module, _ in homes:
                setattr(module, _PROVENANCE_FUNCTION, wrapped)
            with self.compile_log.recording():
                yield self
        finally:
            for module, function in homes:
                setattr(module, _PROVENANCE_FUNCTION, function)
            for owner, name, value in saved:
                setattr(owner, name, value)

    def compiled_map(self) -> CompiledMap:
        return CompiledMap(
            root=self.root,
            modules=list(self.modules),
            graphs=list(self._graphs.values()),
            cost_s=self.cost_s,
            unread=self.unread,
        )

    def taken(self) -> tuple[CompiledMap | None, float | None]:
        """For a script that compiles itself: the map and torch.compile's seconds since
        recording began (Dynamo's own count), or (None, None) when nothing was compiled."""
        if not self._graphs:
            return None, None
        return self.compiled_map(), _compile_seconds() - self._compile_s_before

    def _wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def provenance(node_schedule, kernel_name: str, is_extern: bool = False):
            handle = original(node_schedule, kernel_name, is_extern)
            began = time.perf_counter()
            try:
                self._record(node_schedule, kernel_name, is_extern)
            except Exception:  # the map is a by-product: it never breaks the user's compile
                self.unread += 1
            self.cost_s += time.perf_counter() - began
            return handle

        return provenance

    def _record(self, node_schedule: Any, kernel_name: str, is_extern: bool) -> None:
        import torch._guards
        from torch._inductor.virtualized import V

        graph = V.graph
        compile_id = torch._guards.CompileContext.current_compile_id()
        key = (str(compile_id) if compile_id is not None else "", bool(getattr(graph, "is_backward", False)))
        if key not in self._graphs:
            self._graphs[key] = CompiledGraph(region=key[0], backward=key[1])
        work = _extern_work(node_schedule, kernel_name) if is_extern else _fused_work(node_schedule)
        nodes: dict[int, set[int]] = {}  # module -> ids of its nodes
        moved: dict[int, list[int]] = {}  # module -> [bytes, FLOPs]
        for node, node_bytes, node_flops in work:
            module = self._module_of(node)
            if module is not None:
                nodes.setdefault(module, set()).add(id(node))
                total = moved.setdefault(module, [0, 0])
                total[0] += node_bytes
                total[1] += node_flops
        measured = all(b >= 0 for b, _ in moved.values())  # -1: a node whose size could not be read
        graph_id = getattr(graph, "graph_id", None)
        self._graphs[key].kernels.append(
            CompiledKernel(
                event=event_name(kernel_name, is_extern, graph_id),
                kernel=kernel_name,
                modules=list(nodes),
                nodes=[len(ids) for ids in nodes.values()],
                bytes=[moved[m][0] for m in nodes] if measured else [],
                flops=[moved[m][1] for m in nodes] if measured else [],
            )
        )

    def _module_of(self, node: Any) -> int | None:
        """Index of the innermost module of an FX node (forward or backward), None when it has none."""
        stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
        if not stack:
            return None
        index = None
        for value in stack.values():  # outermost first: every enclosing module gets its class recorded
            path, class_name = _entry(value)
            relative = module_path(path)
            key = (relative, class_name)
            index = self._module_index.get(key)
            if index is None:
                index = self._module_index[key] = len(self.modules)
                self.modules.append(CompiledModule(relative, class_name))
        return index


def _compile_seconds() -> float:
    """Dynamo's running total of compile time in this process (forward and backward graphs)."""
    from torch._dynamo.utils import calculate_time_spent

    return float(calculate_time_spent().get("total_wall_time", 0.0))


def _entry(value: Any) -> tuple[str, str]:
    """An ``nn_module_stack`` value: ``(path, class)``, the class a type or its qualified name."""
    path, cls = value[0], value[1]
    name = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]
    return str(path), name


_FRAME_LOCAL = re.compile(r"""^[LG]\[\s*['"][^'"]+['"]\s*\]""")
_SUBSCRIPT = re.compile(r"""\[\s*['"]?([^'"\]]+)['"]?\s*\]""")
_MODULES_DICT = re.compile(r"""\._modules\[\s*['"]([^'"]+)['"]\s*\]""")


def module_path(path: str) -> str:
    """Dynamo's source text of a module -> its qualified name below the compiled root.

    Dynamo names a module from the compiled frame's local that holds the
    root (``L['self']``; the root itself never appears in the stack):
    ``L['self'].layer1[0].conv1`` -> ``layer1.0.conv1``,
    ``L['self']._modules['fc']`` -> ``fc``.
    """
    relative = _FRAME_LOCAL.sub("", path)
    relative = _MODULES_DICT.sub(r".\1", relative)
    relative = _SUBSCRIPT.sub(r".\1", relative)
    return relative.strip(".")


def _fused_work(node_schedule: Any) -> list[tuple[Any, int, int]]:
    """The FX nodes a fused (C++ or Triton) kernel computes, each once, with their work:
    ``(node, bytes, FLOPs)`` (:func:`_node_work`).

    Constants (a node with no node among its inputs, such as the
    ``full_default`` zero of every ReLU's backward) are left out: the graph
    keeps one for all its uses, with the module of whichever use came first.
    Views (``view``, ``transpose``...) are left out when the kernel computes
    anything else: a Linear's output reshape is inlined into the next
    module's kernel and would pull the Linear into it.
    A kernel made for graph inputs only (the channels-last copy of the
    convolution weights at a graph's start) takes the nodes that read them,
    each with the bytes of the inputs it reads, read and written once by the copy.
    """
    origins = [
        origin for snode in node_schedule for origin in getattr(getattr(snode, "node", None), "origins", ()) or ()
    ]
    computed = _computations(origins)
    work = [node for node in computed if not _is_view(node)] or computed
    if work:
        # A node with a FLOP formula (mm, convolution) runs here only in a template
        # kernel; elsewhere it is among the origins as the reader of a buffer the kernel writes.
        runs_here = any(_call(snode, "is_template") for snode in node_schedule)
        return [(node, *_node_work(node, runs_here)) for node in work]
    # Made by Inductor for graph inputs only (a layout copy of the weights): the nodes that read them.
    copied: list[tuple[Any, int, int]] = []
    for origin in _unique(origin for origin in origins if origin.op == "placeholder"):
        readers = _computations(origin.users)
        size = _value_bytes(origin.meta.get("val"))
        copied.extend((reader, 2 * size // len(readers) if size >= 0 else -1, 0) for reader in readers)
    return copied


def _node_work(node: Any, runs_here: bool) -> tuple[int, int]:
    """What an FX node moves and computes: (bytes of its inputs and outputs, FLOPs).

    The bytes are those the node would read and write if it ran alone; fused,
    some stay in registers, but a module's part of a fused kernel's time is its
    nodes' part of the elements touched (docs/compiled.md, "Work of a node").
    FLOPs are torch's FlopCounterMode formula for the node's operator (none for
    pointwise operators).  ``getitem`` picks an output and does no work; a node
    with a FLOP formula does none where it does not run (``runs_here`` False).
    Bytes are -1 when a size cannot be read without guarding on a symbol.
    """
    import operator

    if node.target is operator.getitem:
        return 0, 0
    formula = _flop_formula(node)
    if formula is not None and not runs_here:
        return 0, 0
    sizes = [_value_bytes(node.meta.get("val"))] + [_value_bytes(i.meta.get("val")) for i in node.all_input_nodes]
    moved = -1 if any(size < 0 for size in sizes) else sum(sizes)
    return moved, _flops(node, formula) if formula is not None else 0


def _flop_formula(node: Any) -> Callable[..., Any] | None:
    from torch.utils.flop_counter import flop_registry

    packet = getattr(node.target, "overloadpacket", None)
    return flop_registry.get(packet) if packet is not None else None


def _flops(node: Any, formula: Callable[..., Any]) -> int:
    """The formula applied to the node's argument shapes (hints where symbolic); 0 if it fails."""
    import torch
    from torch.utils._pytree import tree_map

    def shape_of(value: Any) -> Any:
        if hasattr(value, "meta"):  # an FX node: its value
            value = value.meta.get("val")
        if isinstance(value, torch.Tensor):
            return torch.Size(_hint(d) for d in value.shape)
        return value

    try:
        args, kwargs = tree_map(shape_of, (node.args, node.kwargs))
        return max(0, int(formula(*args, out_val=shape_of(node.meta.get("val")), **kwargs)))
    except Exception:  # a formula that wants more than shapes: the node's bytes still count
        return 0


def _value_bytes(value: Any) -> int:
    """Bytes of an FX node's value (a tensor, or a tuple of them); -1 when a size has no hint."""
    import torch

    if isinstance(value, torch.Tensor):
        try:
            numel = 1
            for dim in value.shape:
                numel *= _hint(dim)
        except Exception:  # a symbol with no hint (or a torch without optimization_hint)
            return -1
        return numel * value.element_size()
    if isinstance(value, (list, tuple)):
        sizes = [_value_bytes(item) for item in value]
        return -1 if any(size < 0 for size in sizes) else sum(sizes)
    return 0


def _hint(dim: Any) -> int:
    """A dimension as an int, without adding a guard (a symbolic one by its hint)."""
    if isinstance(dim, int):
        return dim
    from torch.fx.experimental.symbolic_shapes import optimization_hint

    return int(optimization_hint(dim))


def _call(owner: Any, method: str) -> bool:
    function = getattr(owner, method, None)
    return bool(function()) if callable(function) else False


def _unique(nodes) -> list[Any]:
    seen: dict[int, Any] = {}
    for node in nodes:
        seen.setdefault(id(node), node)
    return list(seen.values())


def _is_view(node: Any) -> bool:
    """A node that only re-indexes its input (``view``, ``transpose``...): fused into a
    kernel it costs nothing, and it often belongs to the module that produced the input."""
    target = node.target
    return bool(getattr(target, "is_view", False)) or getattr(target, "__name__", "").startswith("_unsafe_view")


def _computations(nodes) -> list[Any]:
    """The FX nodes that compute (not constants, not inputs), each once, in order."""
    return _unique(node for node in nodes if node.op == "call_function" and node.all_input_nodes)


def _extern_work(kernel: Any, kernel_name: str) -> list[tuple[Any, int, int]]:
    """The FX node an extern kernel computes, with its work (:func:`_node_work`).

    ``origin_node`` when Inductor knows it; otherwise the origins whose
    target is the kernel's own operator (an extern kernel's origins may also
    name the nodes that were folded into its inputs, such as a batch norm
    before ``convolution_backward``); otherwise all its origins.
    """
    if getattr(kernel, "origin_node", None) is not None:
        nodes = [kernel.origin_node]
    else:
        origins = [o for o in getattr(kernel, "origins", ()) or () if o.op == "call_function"]
        op = _operator_of(kernel_name)
        nodes = [o for o in origins if _operator_of(str(o.target)) == op] or origins
    return [(node, *_node_work(node, runs_here=True)) for node in nodes]


def _operator_of(name: str) -> str:
    """``torch.ops.aten.convolution_backward.default`` / ``aten.convolution_backward.default``
    / ``extern_kernels.mm`` -> ``convolution_backward`` / ``mm``."""
    parts = [p for p in name.split(".") if p not in ("torch", "ops", "default", "extern_kernels")]
    if len(parts) >= 2 and parts[0] in ("aten", "mkldnn", "quantized", "prims"):
        return parts[1]
    return parts[0] if parts else name


def event_name(kernel_name: str, is_extern: bool, graph_id: int | None) -> str:
    """The profiler event that times a kernel's call.

    C++ kernels compiled with ``cpp.enable_kernel_profile`` record
    ``graph_<id>_<kernel>``; an extern kernel shows as the operator it calls
    (``extern_kernels.mm`` -> ``aten::mm``, ``torch.ops.mkldnn._convolution_pointwise.default``
    -> ``mkldnn::_convolution_pointwise``); a Triton kernel under its own name.
    """
    if is_extern:
        parts = [p for p in kernel_name.split(".") if p not in ("torch", "ops", "default")]
        if parts and parts[0] == "extern_kernels":
            return f"aten::{parts[1]}" if len(parts) > 1 else kernel_name
        if len(parts) >= 2:
            return f"{parts[0]}::{parts[1]}"
        return kernel_name
    if kernel_name.startswith("cpp_") and graph_id is not None:
        return f"graph_{graph_id}_{kernel_name}"
    return kernel_name
