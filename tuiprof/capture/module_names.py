"""Qualified module names for captures that never held the model (``tuiprof run``, ``tuiprof.profile()``).

A with_stack trace names each module call ``nn.Module: Block_2``: torch's Python tracer numbers
the instances of each class (the class object, shown by its ``__name__``) in the order their
first calls start within the recorded window.  ``tuiprof live`` builds the model itself and names
the instances from one unprofiled forward (:func:`tuiprof.capture.session.describe_modules`).  A
script's model is only met when the script calls it, so while the capture runs a global forward
pre-hook (:class:`ModuleNames`) meets every module called, and holds it.  No extra forward is run.

Which trace name is which module is read, not replayed: torch's own event tree
(``kineto_results.experimental_event_tree()``, the results the trace is written from) gives, for
every ``nn.Module: Class_k`` call, the address of the module object (``self_ptr``, its ``id()``)
and which calls run inside which.  The hook holds every module it meets until the capture ends,
so no address is reused meanwhile.  A trace name gets facts only when its calls are one module
the hook met, of the class the name says; so a module called only in some steps, or first
called in the middle of the window, is named right, and a name that cannot be proven (two
classes with one ``__name__``, a module the hook never saw) keeps its trace name, with one line
on stderr.  A root is a module called with no module call around it in the tree (on any
thread), unless it is a submodule of another root (a block recomputed in the backward pass by
activation checkpointing); each root's ``named_modules()`` gives the qualified names.  A module
called inside a model without being one of its submodules (``nn.ReLU()(x)`` in a forward) has
no qualified name and keeps its trace name, silently.

Roots are named as ``tuiprof live`` names its model and loss:

- a loss module (``torch.nn.modules.loss._Loss``): ``loss``;
- any other root: ``model`` when it is the only one, else the name the script called it
  through at its first call (a local variable, an attribute of the caller's ``self``, a global:
  ``teacher``), else ``model``, made unique (``model2``);
- submodules: by their own qualified names (``blocks.2``) below the one such root that has
  any; when several have (two models), each root's prefixed by its name (``teacher.blocks.2``);
- a wrapper holding the model as its only child ``module`` (DistributedDataParallel,
  DataParallel) or ``_orig_mod`` (torch.compile's OptimizedModule): the wrapper is the root
  (``model``), the wrapped model ``model.module`` (its attribute), and the submodules drop that
  prefix (``blocks.2``, what the script wrote as ``net.blocks[2]``): the same names as a run of
  the bare model, so such runs compare by name.

Cost: with any global hook, every module call takes ``_call_impl``'s slower path; the hook
itself is a few Python calls for a module already met.  A module met for the first time also
gets a one-shot forward hook of its own, for its output shape.  Measured in
``docs/bench-log/module-names.md`` (``scripts/bench_module_names.py``).  Under
``torch.compile`` the hooks do nothing while Dynamo traces (the compiled code then runs no module
call, and the profiler sees none).
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.nn.modules.loss import _Loss

from tuiprof.trace.live import ModuleFacts

MODULE_PREFIX = "nn.Module: "
COMPILE_WARNING = r"Using `torch\.compile\(module\)` when there are global hooks"
WRAPPED = ("module", "_orig_mod")  # the one child a wrapper holds the model as (DDP, DataParallel, torch.compile)
_TORCH_MODULE_FILE = sys.modules[nn.Module.__module__].__file__
# True only while Dynamo traces (it folds the call); one Python call, also under the profiler's tracer
_is_compiling = getattr(torch.compiler, "is_dynamo_compiling", None) or torch._utils.is_compiling


class ModuleNames:
    """A global forward pre-hook that meets the modules a capture calls; :meth:`facts` names the trace's.

    ``with names.hooked():`` around the capture; :meth:`facts` after a window was recorded, with
    the profiler that recorded it.
    """

    def __init__(self) -> None:
        self.met: dict[int, nn.Module] = {}  # id -> module, held: no address is reused while hooked
        self.called_as: dict[int, str] = {}  # id -> the name its first caller held it by ('' if none)
        self.shapes: dict[int, str] = {}  # id -> output shape of its first call
        self.pending: dict[int, Any] = {}  # id -> its one-shot output hook, until that fires
        self.handle: Any = None

    @contextmanager
    def hooked(self, on: bool = True) -> Iterator[ModuleNames]:
        """The hook in place for the block (``on``: a trace without stacks names no module)."""
        if not on:
            yield self
            return
        _not_compiled(ModuleNames._before, ModuleNames._output, _called_as, shape_text)
        self.handle = nn.modules.module.register_module_forward_pre_hook(self._before)
        try:
            with warnings.catch_warnings():  # the block's warning filters are restored after it
                # torch warns at every torch.compile(module) call while global hooks exist: this
                # one counts its OptimizedModule as a wrapper, and the script never added it
                warnings.filterwarnings("ignore", COMPILE_WARNING, UserWarning)
                yield self
        finally:
            self.unhook()

    def unhook(self) -> None:
        """Remove the hooks (the capture ended); what they met stays for :meth:`facts`."""
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        for handle in self.pending.values():
            handle.remove()
        self.pending.clear()

    def _before(self, module: nn.Module, args: Any) -> None:
        if _is_compiling() or id(module) in self.met:
            return
        key = id(module)
        self.met[key] = module
        self.called_as[key] = _called_as(module)
        self.pending[key] = module.register_forward_hook(self._output)

    def _output(self, module: nn.Module, args: Any, output: Any) -> None:
        """A module's own forward hook, removed at its first call: its output shape."""
        self.shapes[id(module)] = shape_text(output)
        handle = self.pending.pop(id(module), None)
        if handle is not None:
            handle.remove()

    def facts(self, prof: Any) -> tuple[dict[str, ModuleFacts], str]:
        """Facts keyed by the trace's module names (``Block_2``), each proven by torch's
        ``self_ptr``; and one line saying which names could not be (empty when none)."""
        calls, outermost = module_calls(prof)
        qualified = self.qualified_names([key for key in self.met if key in outermost])
        facts: dict[str, ModuleFacts] = {}
        unproven: list[str] = []
        for name, addresses in calls.items():
            module = self.met.get(next(iter(addresses))) if len(addresses) == 1 else None
            if module is None or type(module).__name__ != name.rpartition("_")[0]:
                unproven.append(name)
            elif id(module) in qualified:
                parameters = sum(p.numel() for p in module.parameters())
                facts[name] = ModuleFacts(qualified[id(module)], parameters, self.shapes.get(id(module), ""))
        if not unproven:
            return facts, ""
        shown = ", ".join(sorted(unproven)[:3]) + (", ..." if len(unproven) > 3 else "")
        return facts, (
            f"{len(unproven)} of {len(calls)} module names in the trace keep no qualified name ({shown}): "
            "not one module tuiprof's hook met, of that class"
        )

    def qualified_names(self, outermost: list[int]) -> dict[int, str]:
        """id -> qualified name of every module below a root (the module docstring's rules);
        ``outermost``: the ids of modules called outside every module, first met first."""
        below = {key: {id(m) for m in self.met[key].modules()} - {key} for key in outermost}
        roots = [self.met[key] for key in outermost if not any(key in inside for inside in below.values())]
        models = [root for root in roots if not isinstance(root, _Loss)]
        trees = [root for root in models if next(root.children(), None) is not None]
        losses = len(roots) - len(models)
        taken: set[str] = set()
        names: dict[int, str] = {}
        for root in roots:
            if isinstance(root, _Loss):
                base = "loss" if losses == 1 else self.called_as[id(root)] or "loss"
            else:
                base = "model" if len(models) == 1 else self.called_as[id(root)] or "model"
            name = _unique(base, taken)
            for qualified, module in _below(root, name, prefixed=not (len(trees) == 1 and trees[0] is root)):
                names.setdefault(id(module), qualified)
        return names


def _not_compiled(*functions: Any) -> None:
    """Tell Dynamo never to compile these as frames of their own.

    Dynamo runs ``_call_impl`` eagerly and compiles each function it calls (a compiled
    model's submodules, the hooks) as a new frame: the hooks would become compiled no-ops in
    the compile log, recompiled per module.  Inlined into a traced forward they stay no-ops
    (``is_compiling()``), with no graph break.  torch._dynamo is loaded by then (the
    capture's kernel-map recorder imports Inductor); never imported here for this.
    """
    eval_frame = sys.modules.get("torch._dynamo.eval_frame")
    skip_code = getattr(eval_frame, "skip_code", None)
    if skip_code is not None:
        for function in functions:
            skip_code(function.__code__)


def _below(root: nn.Module, name: str, prefixed: bool) -> Iterator[tuple[str, nn.Module]]:
    """``root`` and its submodules with their qualified names: ``name`` for the root, the
    submodules' own below it (``name.`` before them when ``prefixed``; a wrapper's without ``module.``)."""
    children = list(root.named_children())
    wrapped = children[0] if len(children) == 1 and children[0][0] in WRAPPED else None
    for qualified, module in root.named_modules():
        if module is root:
            yield name, module
        elif wrapped is not None and module is wrapped[1]:
            yield f"{name}.{wrapped[0]}", module
        else:
            own = qualified.split(".", 1)[1] if wrapped is not None else qualified
            yield (f"{name}.{own}" if prefixed else own), module


def _unique(base: str, taken: set[str]) -> str:
    name, n = base, 2
    while name in taken:
        name, n = f"{base}{n}", n + 1
    taken.add(name)
    return name


def _called_as(module: nn.Module) -> str:
    """The name the calling code holds ``module`` by: a local, an attribute of its ``self``,
    a global; '' when none (called from an expression, a list)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename in (_TORCH_MODULE_FILE, __file__):
        frame = frame.f_back  # torch's _call_impl and these hooks
    if frame is None:
        return ""
    owner = frame.f_locals.get("self")
    spaces = [frame.f_locals, getattr(owner, "__dict__", {}), frame.f_globals]
    for space in spaces:
        for name, value in list(space.items()):
            if value is module and name != "self" and name.isidentifier():
                return name
    return ""


def module_calls(prof: Any) -> tuple[dict[str, set[int]], set[int]]:
    """Each ``nn.Module: Class_k`` name of the profiler's last window -> the addresses (``id()``)
    of the module objects its calls were made on (one, unless two classes share a name); and the
    addresses of those called outside every module call.  From the event tree torch writes the
    trace from: about 1.5 us an event."""
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    assert results is not None, "read once the profiler has stopped"
    calls: dict[str, set[int]] = {}
    outermost: set[int] = set()
    pending = [(node, False) for node in results.experimental_event_tree()]
    while pending:
        node, inside = pending.pop()
        name = node.name
        if name.startswith(MODULE_PREFIX):
            module = getattr(node.extra_fields, "module", None)
            if module is not None:
                calls.setdefault(name[len(MODULE_PREFIX) :], set()).add(module.self_ptr)
                if not inside:
                    outermost.add(module.self_ptr)
                inside = True
        pending.extend((child, inside) for child in node.children)
    return calls, outermost


def shape_text(output: Any) -> str:
    """``128x64x8x8``: the shape of a module's output (its first tensor), '' when none."""
    if isinstance(output, torch.Tensor):
        return "x".join(str(d) for d in output.shape)
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return shape_text(output[0])
    return ""
