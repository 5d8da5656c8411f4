"""Decoded events, sorted by kind: what every analysis reads.

The store keeps typed structs for the kinds analysis needs (operators, device
activity, runtime launches, memory events, module calls) and reduces the
dominant kind, ``python_function`` frames, to what the module tree needs: the
module calls themselves and a parent map for the other frames.  Legacy
category names are mapped here so nothing downstream knows about them.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass, field

from tuiprof.trace.decode import DecodeReport
from tuiprof.trace.schema import DeviceProperties, EventArgs, RawEvent, TraceHeader

OPERATOR_CATS = frozenset({"cpu_op", "Operator", "user_annotation"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime"})
KERNEL_CATS = frozenset({"kernel", "Kernel"})
MEMCPY_CATS = frozenset({"gpu_memcpy", "Memcpy"})
MEMSET_CATS = frozenset({"gpu_memset", "Memset"})
DEVICE_CATS = KERNEL_CATS | MEMCPY_CATS | MEMSET_CATS
MODULE_PREFIX = "nn.Module: "
MEMORY_NAME = "[memory]"
_EMPTY_ARGS = EventArgs()


@dataclass
class PythonFrames:
    """Every ``python_function`` event, column by column (they dominate big traces).

    Times are integer nanoseconds as written (``round(ts * 1000)``); a
    missing parent is -1.  ``modules`` maps a frame's row to its module name
    (``"Conv2d_1"``) for the frames that are ``nn.Module`` forward calls.
    """

    tid: list[int | str] = field(default_factory=list)
    start_ns: array = field(default_factory=lambda: array("q"))
    end_ns: array = field(default_factory=lambda: array("q"))
    python_id: array = field(default_factory=lambda: array("q"))
    parent_id: array = field(default_factory=lambda: array("q"))
    modules: dict[int, str] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.start_ns)


@dataclass
class TraceEvents:
    """Everything the analysis layer needs from one trace file."""

    source: str
    header: TraceHeader
    report: DecodeReport
    operators: list[RawEvent] = field(default_factory=list)
    kernels: list[RawEvent] = field(default_factory=list)
    memcpys: list[RawEvent] = field(default_factory=list)
    memsets: list[RawEvent] = field(default_factory=list)
    runtime: list[RawEvent] = field(default_factory=list)
    memory: list[RawEvent] = field(default_factory=list)
    gpu_annotations: list[RawEvent] = field(default_factory=list)
    python: PythonFrames = field(default_factory=PythonFrames)
    thread_names: dict[tuple[int | str, int | str], str] = field(default_factory=dict)
    process_names: dict[int | str, str] = field(default_factory=dict)
    other_events: int = 0
    event_count: int = 0
    uncompressed_bytes: int = 0
    _names: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def devices(self) -> list[DeviceProperties]:
        return self.header.deviceProperties or self.header.computeProperties or []

    @property
    def has_device_activity(self) -> bool:
        return bool(self.kernels or self.memcpys or self.memsets)

    def add_batch(self, batch: list[RawEvent]) -> None:
        """Sort one decoded batch into the store (the hot loop of loading)."""
        self.event_count += len(batch)
        names = self._names
        operators, kernels, memory = self.operators, self.kernels, self.memory
        py = self.python
        py_tid, py_start, py_end, py_id, py_parent = py.tid, py.start_ns, py.end_ns, py.python_id, py.parent_id
        for event in batch:
            cat = event.cat
            name = event.name
            if cat == "python_function":
                args = event.args or _EMPTY_ARGS
                if name.startswith(MODULE_PREFIX):
                    py.modules[len(py_start)] = sys.intern(name[len(MODULE_PREFIX) :])
                start = round(event.ts * 1000)
                py_tid.append(_as_id(event.tid))
                py_start.append(start)
                py_end.append(start + round(event.dur * 1000))
                py_id.append(-1 if args.python_id is None else args.python_id)
                py_parent.append(-1 if args.python_parent_id is None else args.python_parent_id)
                continue
            interned = names.get(name)
            if interned is None:
                interned = names.setdefault(name, sys.intern(name) if len(name) < 200 else name)
            event.name = interned
            if name == MEMORY_NAME:
                event.tid = _as_id(event.tid)
                memory.append(event)
            elif event.ph != "X":
                if event.ph == "M":
                    self._add_metadata(event)
                else:
                    self.other_events += 1
            elif cat in OPERATOR_CATS:
                event.tid = _as_id(event.tid)
                operators.append(event)
            elif cat in KERNEL_CATS:
                kernels.append(event)
            elif cat in RUNTIME_CATS:
                event.tid = _as_id(event.tid)
                self.runtime.append(event)
            elif cat in MEMCPY_CATS:
                self.memcpys.append(event)
            elif cat in MEMSET_CATS:
                self.memsets.append(event)
            elif cat == "gpu_user_annotation":
                self.gpu_annotations.append(event)
            else:
                self.other_events += 1

    def _add_metadata(self, event: RawEvent) -> None:
        label = event.args.label if event.args else None
        if label is None:
            return
        if event.name == "thread_name":
            self.thread_names[(_as_id(event.pid), _as_id(event.tid))] = label
        elif event.name == "process_name":
            self.process_names[_as_id(event.pid)] = label


def _as_id(value: int | str) -> int | str:
    """Thread and process ids: legacy files write ``"25738"`` for ``25738``."""
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return value


def external_id(args: EventArgs | None) -> int | None:
    """``External id`` under either spelling (lower-case before 2022)."""
    if args is None:
        return None
    return args.external_id if args.external_id is not None else args.external_id_legacy
