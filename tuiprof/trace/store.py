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

# Category -> kind of event, 2021 names beside modern ones (TRACE_FORMAT.md).
CATEGORY_KIND = {
    "python_function": "frames",
    "cpu_op": "operators", "user_annotation": "operators", "Operator": "operators",
    "cuda_runtime": "runtime", "cuda_driver": "runtime", "Runtime": "runtime",
    "kernel": "kernels", "Kernel": "kernels",
    "gpu_memcpy": "memcpys", "Memcpy": "memcpys",
    "gpu_memset": "memsets", "Memset": "memsets",
    "gpu_user_annotation": "gpu_annotations",
}
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
    other_events: int = 0
    event_count: int = 0
    uncompressed_bytes: int = 0
    _names: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def devices(self) -> list[DeviceProperties]:
        return self.header.deviceProperties or self.header.computeProperties or []

    def add_batch(self, batch: list[RawEvent]) -> None:
        """Sort one decoded batch into the store (the hot loop of loading).

        One pass routes events by category into lists; the per-kind work
        then runs as comprehensions over each list, which costs about a third
        of doing it event by event.
        """
        self.event_count += len(batch)
        frames: list[RawEvent] = []
        operators: list[RawEvent] = []
        runtime: list[RawEvent] = []
        memory: list[RawEvent] = []
        buckets = {
            "frames": frames, "operators": operators, "runtime": runtime, "kernels": self.kernels,
            "memcpys": self.memcpys, "memsets": self.memsets, "gpu_annotations": self.gpu_annotations,
        }
        routes = {cat: buckets[kind] for cat, kind in CATEGORY_KIND.items()}
        for event in batch:
            if event.name == MEMORY_NAME:
                memory.append(event)
                continue
            if event.ph == "X":
                bucket = routes.get(event.cat)
                if bucket is not None:
                    bucket.append(event)
                    continue
            self.other_events += 1  # flows, metadata, instants: the joins use ids instead
        self._add_frames(frames)
        names = self._names
        for event in operators:
            args = event.args
            if args is not None and args.input_dims:
                # Own copies: a Raw points into the decoded chunk and would keep it alive.
                args.input_dims = args.input_dims.copy()
                args.input_types = args.input_types.copy()
                args.concrete_inputs = args.concrete_inputs.copy()
        for group in (operators, runtime, memory):
            for event in group:
                name = event.name
                event.name = names.get(name) or names.setdefault(name, sys.intern(name) if len(name) < 200 else name)
                if event.tid.__class__ is str:
                    event.tid = _as_id(event.tid)
        self.operators += operators
        self.runtime += runtime
        self.memory += memory

    def _add_frames(self, frames: list[RawEvent]) -> None:
        """Python frames become integer columns; only module calls keep a name."""
        py = self.python
        first = len(py.start_ns)
        starts = [round(e.ts * 1000) for e in frames]
        py.start_ns.extend(starts)
        py.end_ns.extend([s + round(e.dur * 1000) for s, e in zip(starts, frames)])
        py.tid.extend([_as_id(e.tid) if e.tid.__class__ is str else e.tid for e in frames])
        args = [e.args or _EMPTY_ARGS for e in frames]
        py.python_id.extend([-1 if a.python_id is None else a.python_id for a in args])
        py.parent_id.extend([-1 if a.python_parent_id is None else a.python_parent_id for a in args])
        for index, event in enumerate(frames):
            if event.name.startswith(MODULE_PREFIX):
                py.modules[first + index] = sys.intern(event.name[len(MODULE_PREFIX) :])


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
