"""torch's categorisation of every tensor of a capture, computed in-process after it.

``torch.profiler._memory_profiler.MemoryProfileTimeline`` (the class behind
``prof.export_memory_timeline``) sorts each tensor version into parameter,
optimizer state, input, temporary, activation, gradient or autograd detail
from the profiler's own event tree: it needs the profiler object (and
``record_shapes``, ``profile_memory``, ``with_stack``), not the JSON.  Here
its timeline is copied, change by change, into plain columns
(:class:`tuiprof.trace.live.DeviceMemoryCategories`) saved in the trace, so
``tuiprof open`` shows it later without torch.  It runs in the profiler's
``on_trace_ready``, after the recorded steps: it costs the user's loop time
once, never a profiled step's.

Who owns a tensor (decided here, shown by the Memory view):

- a parameter, its gradient and its optimizer state: the module whose
  ``named_parameters(recurse=False)`` holds the parameter (torch's Python
  tracer records them at every module call and at ``optimizer.step``); a
  parameter of a module that never runs its own forward (MultiheadAttention's
  ``out_proj``) goes, when the capture knows the model (``tuiprof live``), to
  the closest module above it that ran, else to none;
- a tensor torch calls a parameter or optimizer state that no module holds as
  one (its data-flow guess: a BatchNorm output at times): no module, so a
  module's parameter bytes are exactly its parameters (the category total
  stays torch's);
- any other tensor: the innermost module (``nn.Module: Conv2d_1``) around
  the allocation, none for allocations outside every module's forward (the
  backward pass, the loss written as a function);
- its operator: the outermost ``::`` operator around the allocation
  (``aten::conv2d``, ``autograd::engine::evaluate_function: ...``), else the
  innermost one, so record_function spans (``ProfilerStep#3``) do not name
  every tensor.
"""

from __future__ import annotations

from collections import defaultdict, deque
from itertools import count
from typing import Any

import msgspec
import torch
from torch._C._profiler import _EventType
from torch.profiler._memory_profiler import Action, Category, MemoryProfileTimeline, TensorKey

from tuiprof.trace.live import (
    CATEGORY_NAMES,
    NO_CATEGORIES,
    DeviceMemoryCategories,
    MemoryCategories,
    encode_memory_categories,
)

_CODE = {category: CATEGORY_NAMES.index(category.name.lower()) for category in Category}
UNKNOWN = CATEGORY_NAMES.index("unknown")
MODULE_PREFIX = "nn.Module: "


def categorise_memory(
    prof: Any, model: Any = None, module_keys: dict[str, str] | None = None, unfinished_step: int | None = None
) -> MemoryCategories:
    """torch's categorised memory timeline of ``prof`` (a stopped ``torch.profiler.profile``),
    one entry per device; ``problem`` says why there is none.  ``model`` and ``module_keys``
    (qualified name -> the trace's module name), when known, place the parameters of
    modules that never ran their own forward.  ``unfinished_step``: the step the capture
    leaves out of the trace (capture/unfinished_step.py); its changes are left out too."""
    missing = [name for name in ("record_shapes", "profile_memory", "with_stack") if not getattr(prof, name, False)]
    if missing:
        return MemoryCategories(problem=f"categories need {', '.join(missing)}=True")
    try:
        memory_profile = prof._memory_profile()
        timeline = MemoryProfileTimeline(memory_profile)
        owners = _Owners(memory_profile._op_tree, _closest_ran(model, module_keys or {}))
        cut = owners.step_starts.get(f"ProfilerStep#{unfinished_step}") if unfinished_step is not None else None
        return MemoryCategories(devices=[_device(timeline, owners, device, cut) for device in _devices(timeline)])
    except Exception as exc:  # torch's categoriser is private and asserts: the trace must survive it
        return MemoryCategories(problem=f"torch's memory categorisation failed ({type(exc).__name__}: {exc})")


def _devices(timeline: MemoryProfileTimeline) -> list[torch.device]:
    return list(dict.fromkeys(key.device for _, _, (key, _), _ in timeline.timeline))


class _Owners:
    """The operator and module of every allocation, and the module owning each parameter's tensors."""

    def __init__(self, op_tree: Any, fallback: dict[int, str]) -> None:
        self.fallback = fallback  # parameter storage address -> module name, for modules that never ran
        self.operators: dict[str, int] = {}
        self.modules: dict[str, int] = {}
        self.by_key: dict[TensorKey, tuple[int, int]] = {}  # tensor storage -> (operator, module) of its allocation
        # Allocations without a tensor (torch's "unknown"), found the way torch's timeline lists
        # them: (time, bytes, whether it allocates) -> (serial, (operator, module)) in dfs order;
        # a free and its allocation share the serial, so the replay pairs them.
        self.unknown: dict[tuple[int, int, bool], deque[tuple[int, tuple[int, int]]]] = defaultdict(deque)
        self.module_of_tensor: dict[int, int] = {}  # tensor id -> module, for parameters, gradients, optimizer state
        self.step_starts: dict[str, int] = {}  # "ProfilerStep#3" -> its start, on the profiler's clock
        live_unknown: dict[tuple[int, torch.device], tuple[int, tuple[int, int]]] = {}
        serials = count()
        for event in op_tree.dfs():
            kind, fields = event.typed
            if kind == _EventType.PyCall:
                self._note_parameters(event, fields)
            elif kind == _EventType.TorchOp and event.name.startswith("ProfilerStep#"):
                self.step_starts[event.name] = event.start_time_ns
            elif kind == _EventType.Allocation:
                where = self._where(event)
                key = TensorKey.from_allocation(fields)
                size = fields.alloc_size
                if key is not None:
                    if size > 0:
                        self.by_key[key] = where
                    continue
                slot = (fields.ptr, fields.device)
                if size > 0:  # a new allocation, or torch's INCREMENT_VERSION of a live one
                    owner = live_unknown.get(slot) or (next(serials), where)
                    live_unknown[slot] = owner
                    self.unknown[(event.start_time_ns, size, True)].append(owner)
                else:
                    freed = live_unknown.pop(slot, None)
                    if freed is None:  # freed without being allocated: torch adds a PREEXISTING twin
                        freed = (next(serials), where)
                        self.unknown[(-1, -size, True)].append(freed)
                    self.unknown[(event.start_time_ns, -size, False)].append(freed)

    def _note_parameters(self, event: Any, fields: Any) -> None:
        if fields.module is not None:
            module = self._index(self.modules, event.name.removeprefix(MODULE_PREFIX))
            for _, parameter, gradient in fields.module.parameters:
                for tensor in (parameter, gradient):
                    key = TensorKey.from_tensor(tensor)
                    if key is not None:
                        self.module_of_tensor.setdefault(key.id, module)
        if fields.optimizer is not None:
            for parameter, gradient, state in fields.optimizer.parameters:
                key = TensorKey.from_tensor(parameter)
                if key is None:
                    continue
                owner = self.module_of_tensor.get(key.id)
                if owner is None and parameter.storage_data_ptr in self.fallback:
                    owner = self._index(self.modules, self.fallback[parameter.storage_data_ptr])
                    self.module_of_tensor[key.id] = owner
                if owner is None:
                    continue
                for tensor in (gradient, *(t for _, t in state)):
                    other = TensorKey.from_tensor(tensor)
                    if other is not None:
                        self.module_of_tensor.setdefault(other.id, owner)

    def _where(self, event: Any) -> tuple[int, int]:
        """(operator, module) indices of an allocation from its ancestors (-1: none)."""
        module = operator = innermost = None
        parent = event.parent
        while parent is not None:
            kind, fields = parent.typed
            if kind == _EventType.PyCall and fields.module is not None and module is None:
                module = parent.name.removeprefix(MODULE_PREFIX)
            elif kind == _EventType.TorchOp:
                innermost = innermost or parent.name
                if "::" in parent.name and module is None:
                    operator = parent.name  # the outermost so far, inside the innermost module
            parent = parent.parent
        operator = operator or innermost
        return (
            self._index(self.operators, operator) if operator else -1,
            self._index(self.modules, module) if module else -1,
        )

    @staticmethod
    def _index(table: dict[str, int], name: str) -> int:
        return table.setdefault(name, len(table))


def _closest_ran(model: Any, module_keys: dict[str, str]) -> dict[int, str]:
    """Storage address of each parameter of a module that never ran -> the trace's name
    of the closest module above it that did ({} without a model)."""
    if model is None:
        return {}
    found: dict[int, str] = {}
    for qualified, module in model.named_modules():
        if (qualified or "model") in module_keys:
            continue
        parts = qualified.split(".")
        while parts and ".".join(parts[:-1]) not in module_keys and parts[:-1]:
            parts.pop()
        above = module_keys.get(".".join(parts[:-1]) or "model")
        if above is not None:
            for parameter in module.parameters(recurse=False):
                found[parameter.untyped_storage().data_ptr()] = above
    return found


def _device(
    timeline: MemoryProfileTimeline, owners: _Owners, device: torch.device, cut_ns: int | None
) -> DeviceMemoryCategories:
    tensor_rows: dict[Any, int] = {}
    tensor_id: list[int] = []
    tensor_operator: list[int] = []
    tensor_module: list[int] = []

    def row_for(slot: Any, torch_id: int, where: tuple[int, int]) -> int:
        row = tensor_rows.get(slot)
        if row is None:
            row = tensor_rows[slot] = len(tensor_id)
            tensor_id.append(torch_id)
            tensor_operator.append(where[0])
            tensor_module.append(owners.module_of_tensor.get(torch_id, where[1]) if torch_id >= 0 else where[1])
        return row

    delta_ns: list[int] = []
    sizes: list[int] = []
    codes: list[int] = []
    rows: list[int] = []
    preexisting = 0
    previous = first = None

    def add(time: int, size: int, code: int, row: int) -> None:
        nonlocal previous, first, preexisting
        if time < 0:
            preexisting += 1
            delta_ns.append(0)
        else:
            if first is None:
                first = previous = time
            delta_ns.append(time - previous)
            previous = time
        sizes.append(size)
        codes.append(code)
        rows.append(row)

    for time, action, (key, version), size in timeline.timeline:
        if key.device != device or (cut_ns is not None and time >= cut_ns):
            continue
        if isinstance(key, TensorKey):
            row = row_for(key, key.id, owners.by_key.get(key, (-1, -1)))
        else:  # memory torch could not tie to a tensor: one row per allocation
            queue = owners.unknown.get((time, size, action != Action.DESTROY))
            serial, where = queue.popleft() if queue else (("unmatched", len(tensor_id)), (-1, -1))
            row = row_for(("unknown", serial), -1, where)
        if action in (Action.PREEXISTING, Action.CREATE):
            add(time, size, _code(timeline, key, version), row)
        elif action == Action.INCREMENT_VERSION:
            add(time, -size, _code(timeline, key, version), row)
            add(time, size, _code(timeline, key, version + 1), row)
        else:  # DESTROY
            add(time, -size, _code(timeline, key, version), row)
    owned_kinds = {CATEGORY_NAMES.index("parameter"), CATEGORY_NAMES.index("optimizer_state")}
    for row, code in zip(rows, codes):
        if code in owned_kinds and tensor_id[row] not in owners.module_of_tensor:
            tensor_module[row] = -1  # torch's guess, not a parameter (or its state) of any module
    return DeviceMemoryCategories(
        device=str(device),
        categories=list(CATEGORY_NAMES),
        first_ns=first or 0,
        preexisting=preexisting,
        delta_ns=delta_ns,
        bytes=sizes,
        category=codes,
        tensor=rows,
        tensor_id=tensor_id,
        tensor_operator=tensor_operator,
        tensor_module=tensor_module,
        operators=list(owners.operators),
        modules=list(owners.modules),
    )


def _code(timeline: MemoryProfileTimeline, key: Any, version: int) -> int:
    """The category code of one tensor version, as torch's ``_coalesce_timeline`` looks it up."""
    if not isinstance(key, TensorKey):
        return UNKNOWN
    return _CODE.get(timeline.categories.get(key, version), UNKNOWN)


def memory_categories_member(
    prof: Any, model: Any = None, module_keys: dict[str, str] | None = None, unfinished_step: int | None = None
) -> msgspec.Raw:
    """What :attr:`LiveFacts.memory_categories` holds for a capture: null without profile_memory."""
    if not getattr(prof, "profile_memory", False):
        return NO_CATEGORIES
    return encode_memory_categories(categorise_memory(prof, model, module_keys, unfinished_step))
