"""Decoded events, sorted by kind: what every analysis reads.

The dominant kinds (operators, runtime launches, python frames) are columns
(:mod:`tuiprof.trace.columns`), and so are device events: names and threads
are codes into one table each; ``[memory]`` records are columns too.  The
few GPU annotations stay typed structs.  Chunks decoded apart (in worker processes) are merged here, in
file order, into those global tables.  Legacy category names are mapped by
the columns' category codes, so nothing downstream knows about them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from tuiprof.trace.columns import (
    DEVICE_KINDS,
    AllocatorColumns,
    ChunkColumns,
    CpuEvents,
    DeviceEvents,
    FrameColumns,
)
from tuiprof.trace.decode import DecodeReport
from tuiprof.trace.memory import MemoryRecords, memory_records
from tuiprof.trace.schema import DeviceProperties, EventArgs, TimedEvent, TraceHeader

SHAPES_PROBE = 5000  # operators looked at for Input Dims when the header has no record_shapes


@dataclass
class TraceEvents:
    """Everything the analysis layer needs from one trace file.

    ``cpu`` holds operators before runtime launches, each in file order (the
    order torch's own nesting sees them in); ``device`` kernels, then memcpys,
    then memsets.  ``threads`` holds each thread id
    as written (``25738``, or a string such as ``"stream 7"``; legacy
    ``"25738"`` is read as the number).
    """

    source: str
    header: TraceHeader
    report: DecodeReport
    names: list[str] = field(default_factory=list)
    threads: list[int | str] = field(default_factory=list)
    cpu: CpuEvents = field(default_factory=CpuEvents.empty)
    frames: FrameColumns = field(default_factory=FrameColumns.empty)
    device: DeviceEvents = field(default_factory=DeviceEvents.empty)
    inputs: bytes = b""
    gpu_annotations: list[TimedEvent] = field(default_factory=list)
    memory: AllocatorColumns = field(default_factory=AllocatorColumns.empty)  # [memory] events
    comms_records: list[EventArgs] = field(default_factory=list)  # record_param_comms arguments (collectives)
    other_events: int = 0
    event_count: int = 0
    uncompressed_bytes: int = 0
    cache_key: str | None = None  # set when decoded and cacheable: trace/cache.py saves it under this
    cache_entry: str | None = None  # the key of the cache entry it was read back from (trace/cache.py)
    # What the analysis derived from these columns, kept in the same cache entry so a reopen
    # need not derive it again (analysis/reuse.py fills and checks it; trace/cache.py only
    # stores it): named one-dimensional int64 or float64 arrays, and integer facts.
    derived: dict[str, np.ndarray] = field(default_factory=dict)
    derived_facts: dict[str, int] = field(default_factory=dict)

    @cached_property
    def memory_records(self) -> MemoryRecords:
        """The ``[memory]`` records as columns (trace/memory.py settles the format's quirks)."""
        return memory_records(self.memory)

    # What the profiler recorded: the header's switches, or what the events show
    # (files before 2022 write no switches).
    @property
    def recorded_shapes(self) -> bool:
        return bool(self.header.record_shapes) or bool((self.cpu.dims_len[:SHAPES_PROBE] > 0).any())

    @property
    def recorded_memory(self) -> bool:
        return bool(self.header.profile_memory) or bool(self.memory)

    @property
    def recorded_stacks(self) -> bool:
        return bool(self.header.with_stack) or len(self.frames) > 0

    @property
    def devices(self) -> list[DeviceProperties]:
        return self.header.deviceProperties or self.header.computeProperties or []

    def module_names(self) -> dict[int, str]:
        """Frame row -> module name (``Conv2d_1``) for the ``nn.Module`` frames."""
        rows = np.flatnonzero(self.frames.module >= 0)
        names = self.names
        return {int(row): names[code] for row, code in zip(rows.tolist(), self.frames.module[rows].tolist())}


class StoreBuilder:
    """Merges decoded chunks, in file order, into one :class:`TraceEvents`."""

    def __init__(self, store: TraceEvents) -> None:
        self.store = store
        self._names: dict[str, int] = {}
        self._threads: dict[int | str, int] = {}
        self._operators: list[CpuEvents] = []
        self._launches: list[CpuEvents] = []
        self._frames: list[FrameColumns] = []
        self._memory: list[AllocatorColumns] = []
        self._device: list[list[DeviceEvents]] = [[] for _ in DEVICE_KINDS]  # per kind, in file order
        self._inputs: list[bytes] = []
        self._input_offset = 0

    def add(self, chunk: ChunkColumns) -> None:
        store = self.store
        store.event_count += chunk.event_count
        store.report.count_damaged(chunk.damaged)
        store.other_events += chunk.other_events
        name_map = self._codes(self._names, chunk.names, store.names)
        thread_map = self._codes(self._threads, [as_thread_id(t) for t in chunk.threads], store.threads)
        cpu, frames = chunk.cpu, chunk.frames
        if len(cpu):
            cpu.name = name_map[cpu.name]
            cpu.thread = thread_map[cpu.thread]
            for at in (cpu.dims_at, cpu.types_at, cpu.concrete_at):
                at += self._input_offset
            self._operators.append(cpu.take(slice(0, chunk.operator_count)))
            self._launches.append(cpu.take(slice(chunk.operator_count, None)))
            self._inputs.append(chunk.inputs)
            self._input_offset += len(chunk.inputs)
        if len(frames):
            frames.thread = thread_map[frames.thread]
            frames.name = name_map[frames.name]
            modules = frames.module >= 0
            frames.module[modules] = name_map[frames.module[modules]]
            self._frames.append(frames)
        device = chunk.device
        if len(device):
            for column in (device.name, device.stream, device.grid, device.block):
                known = column >= 0
                column[known] = name_map[column[known]]
            for kind, parts in enumerate(self._device):
                parts.append(device.take(np.flatnonzero(device.kind == kind)))
        store.gpu_annotations.extend(chunk.gpu_annotations)
        self._memory.append(chunk.memory)
        store.comms_records.extend(chunk.comms_records)

    def finish(self) -> TraceEvents:
        store = self.store
        store.cpu = CpuEvents.concat(self._operators + self._launches)  # each in file order
        store.frames = FrameColumns.concat(self._frames)
        store.device = DeviceEvents.concat([part for parts in self._device for part in parts])
        store.memory = AllocatorColumns.concat(self._memory)
        store.inputs = b"".join(self._inputs)
        self._operators, self._launches, self._frames, self._inputs, self._memory = [], [], [], [], []
        self._device = [[] for _ in DEVICE_KINDS]
        return store

    @staticmethod
    def _codes(index: dict, local: list, table: list) -> np.ndarray:
        """Global code of each chunk-local table entry (new entries appended)."""
        codes = []
        for value in local:
            code = index.get(value)
            if code is None:
                code = index[value] = len(table)
                table.append(value)
            codes.append(code)
        return np.array(codes, dtype=np.int64)


def as_thread_id(value: int | str) -> int | str:
    """Thread and process ids: legacy files write ``"25738"`` for ``25738``."""
    if isinstance(value, str) and value.isdecimal():  # what int() reads (not "\u00b2")
        return int(value)
    return value
