"""Qualified module names for captures that never held the model (``tuiprof run``, ``tuiprof.profile()``).

A with_stack trace names each module call ``nn.Module: Block_2``: torch's Python tracer numbers
the instances of each class (the class object, shown by its ``__name__``) in the order their
first calls start within the recorded window.  ``tuiprof live`` builds the model itself and names
the instances from one unprofiled forward (:func:`tuiprof.capture.session.describe_modules`).  A
script's model is only met when the script calls it, so while the capture runs, global forward
hooks (:class:`ModuleNames`) note every module called: one called with no module on the call
stack is a root, and each root's ``named_modules()`` gives the qualified names.  No extra forward
is run.

Which trace name is which module is read, not replayed: torch's own event tree
(``kineto_results.experimental_event_tree()``, the results the trace is written from) gives, for
every ``nn.Module: Class_k`` call, the address of the module object (``self_ptr``, its
``id()``).  The hooks hold every module they meet until the capture ends, so no address is reused
meanwhile.  A trace name gets facts only when its calls are one module the hooks met, of the
class the name says; so a module called only in some steps, or first called in the middle of
the window, is named right, and a name that cannot be proven (two classes with one
``__name__``, a module the hooks never saw) keeps its trace name, with one line on stderr.
A module called inside a model without being one of its submodules (``nn.ReLU()(x)`` in a
forward) has no qualified name and keeps its trace name, silently.

Roots are named as ``tuiprof live`` names its model and loss:

- a loss module (``torch.nn.modules.loss._Loss``) called outside the model: ``loss``;
- any other root: ``model`` when it is the only one, else the name the script called it
  through (a local variable, an attribute of the caller's ``self``, a global: ``teacher``),
  else ``model``, made unique (``model2``);
- submodules: by their own qualified names (``blocks.2``) below the one such root that has
  any; when several have (two models), each root's prefixed by its name (``teacher.blocks.2``);
- a wrapper holding the model as its only child ``module`` (DistributedDataParallel,
  DataParallel) or ``_orig_mod`` (torch.compile's OptimizedModule): the wrapper is the root
  (``model``), the wrapped model ``model.module``, and the submodules drop the ``module.``
  prefix (``blocks.2``, what the script wrote as ``net.blocks[2]``): the same names as a run of
  the bare model, so such runs compare by name.

Cost: two Python calls per module call (and every module call takes ``_call_impl``'s slower
path with hooks in place); measured in ``docs/bench-log/run-module-names.md``.  The hooks see
calls from every thread on one shared stack: a model called from two Python threads at once
could name a module called inside the other thread's model a root.  Under ``torch.compile`` the
hooks do nothing while Dynamo traces (the compiled code then runs no module call, and the
profiler sees none).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.nn.modules.loss import _Loss

from tuiprof.trace.live import ModuleFacts

MODULE_PREFIX = "nn.Module: "
WRAPPED = ("module", "_orig_mod")  # the one child a wrapper holds the model as (DDP, DataParallel, torch.compile)
_TORCH_MODULE_FILE = sys.modules[nn.Module.__module__].__file__
_is_compiling = getattr(torch.compiler, "is_compiling", None) or torch._utils.is_compiling


class ModuleNames:
    """Global forward hooks that meet the modules a capture calls; :meth:`facts` names the trace's.

    ``with names.hooked():`` around the capture; :meth:`facts` after a window was recorded, with
    the profiler that recorded it.
    """

    def __init__(self) -> None:
        self.met: dict[int, nn.Module] = {}  # id -> module, held: no address is reused while hooked
        self.shapes: dict[int, str] = {}  # id -> output shape of its first call that returned
        self.roots: dict[int, str] = {}  # id -> the name the caller held it by ('' if none), first call first
        self.stack: list[nn.Module] = []  # modules whose forward is running
        self.handles: list[Any] = []

    @contextmanager
    def hooked(self, on: bool = True) -> Iterator[ModuleNames]:
        """The hooks in place for the block (``on``: a trace without stacks names no module)."""
        if on:
            self.handles = [
                nn.modules.module.register_module_forward_pre_hook(self._before),
                nn.modules.module.register_module_forward_hook(self._after, always_call=True),
            ]
        try:
            yield self
        finally:
            self.unhook()

    def unhook(self) -> None:
        """Remove the hooks (the capture ended); what they met stays for :meth:`facts`."""
        for handle in self.handles:
            handle.remove()
        self.handles = []
        self.stack.clear()

    def _before(self, module: nn.Module, args: Any) -> None:
        if _is_compiling():
            return
        key = id(module)
        if key not in self.met:
            self.met[key] = module
        if not self.stack and key not in self.roots:
            self.roots[key] = _called_as(module)
        self.stack.append(module)

    def _after(self, module: nn.Module, args: Any, output: Any) -> None:
        if _is_compiling():
            return
        stack = self.stack
        if stack and stack[-1] is module:
            stack.pop()
        elif module in stack:  # a call whose exit the hooks missed (another hook raised): unwind to it
            del stack[len(stack) - 1 - stack[::-1].index(module) :]
        key = id(module)
        if output is not None and key not in self.shapes:
            self.shapes[key] = shape_text(output)

    def facts(self, prof: Any) -> tuple[dict[str, ModuleFacts], str]:
        """Facts keyed by the trace's module names (``Block_2``), each proven by torch's
        ``self_ptr``; and one line saying which names could not be (empty when none)."""
        calls = module_calls(prof)
        qualified = self.qualified_names()
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
            "not one module tuiprof's hooks met, of that class"
        )

    def qualified_names(self) -> dict[int, str]:
        """id -> qualified name of every module below a root (the module docstring's rules)."""
        roots = [self.met[key] for key in self.roots]
        models = [root for root in roots if not isinstance(root, _Loss)]
        trees = [root for root in models if next(root.children(), None) is not None]
        losses = len(roots) - len(models)
        taken: set[str] = set()
        names: dict[int, str] = {}
        for root in roots:
            if isinstance(root, _Loss):
                base = "loss" if losses == 1 else self.roots[id(root)] or "loss"
            else:
                base = "model" if len(models) == 1 else self.roots[id(root)] or "model"
            name = _unique(base, taken)
            for qualified, module in _below(root, name, prefixed=not (len(trees) == 1 and trees[0] is root)):
                names.setdefault(id(module), qualified)
        return names


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


def module_calls(prof: Any) -> dict[str, set[int]]:
    """Each ``nn.Module: Class_k`` name of the profiler's last window -> the addresses
    (``id()``) of the module objects its calls were made on (one, unless two classes share
    a name).  From the event tree torch writes the trace from: about 1.5 us an event."""
    results = prof.profiler.kineto_results if prof.profiler is not None else None
    assert results is not None, "read once the profiler has stopped"
    calls: dict[str, set[int]] = {}
    pending = list(results.experimental_event_tree())
    while pending:
        node = pending.pop()
        pending.extend(node.children)
        module = getattr(node.extra_fields, "module", None)
        if module is not None and node.name.startswith(MODULE_PREFIX):
            calls.setdefault(node.name[len(MODULE_PREFIX) :], set()).add(module.self_ptr)
    return calls


def shape_text(output: Any) -> str:
    """``128x64x8x8``: the shape of a module's output (its first tensor), '' when none."""
    if isinstance(output, torch.Tensor):
        return "x".join(str(d) for d in output.shape)
    if isinstance(output, (tuple, list)) and output and isinstance(output[0], torch.Tensor):
        return shape_text(output[0])
    return ""
