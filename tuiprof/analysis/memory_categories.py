"""torch's memory categories over time, replayed from what a capture saved.

The replay follows torch's ``MemoryProfileTimeline._coalesce_timeline`` (the
code behind ``export_memory_timeline``) so the numbers are torch's: changes
are taken in the saved order, grouped by the microsecond ``int(t / 1000)`` of
their profiler-clock time (tensors that existed before the capture form the
first group), and the state after each group is one point of the curve.
The peak is the first point with the highest total.  This is the peak of the
tensors torch can see, which can differ a little from the allocator's peak
(``Total Allocated`` of the ``[memory]`` events, the plain Memory curve).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tuiprof.analysis.python_stack import Stack, python_stacks
from tuiprof.trace.live import DeviceMemoryCategories, MemoryCategories
from tuiprof.trace.store import TraceEvents


@dataclass(frozen=True)
class LiveTensor:
    """One tensor (or untied allocation) live at the peak, in one category."""

    bytes: int
    category: str
    operator: str  # the outermost "::" operator that allocated it, "" when unknown
    module: str  # the trace's module name ("Conv2d_1"), "" outside every module
    tensor_id: int  # torch's tensor id, -1 for memory with no tensor
    made_ns: int  # when it was allocated, on the trace's clock; -1: before the capture
    row: int = -1  # its row in CategorisedMemory.changes (MemoryChanges.tensor)
    stack: Stack = ()  # the Python stack it was allocated in, outermost first (analysis/python_stack.py)


@dataclass(frozen=True)
class MemoryChanges:
    """torch's timeline change by change, so a what-if can replay it with a remedy applied
    (analysis/memory_what_ifs.py): the curve's point ``p`` is the state after change
    ``last_of_point[p]``.  A new version of a tensor is two changes of its row at one time:
    its bytes out of the old version's category, then into the new one's."""

    time_ns: np.ndarray  # int64 per change, on the trace's clock; -1: a tensor from before the capture
    bytes: np.ndarray  # int64 per change, signed
    category: np.ndarray  # int64 per change: index into CategorisedMemory.categories
    tensor: np.ndarray  # int64 per change: the tensor's row
    last_of_point: np.ndarray  # int64 per point of the curve: its last change
    # per tensor row: the trace's name of its module ("" none): a parameter's owner (torch's guesses
    # have none), else the module whose forward made it (capture/memory_categories.py)
    tensor_module: tuple[str, ...]


@dataclass(frozen=True)
class CategorisedMemory:
    """One device's memory by category over time (torch's categorisation)."""

    device: str  # "CPU", "CUDA:0" (the plain Memory curve's labels)
    categories: tuple[str, ...]  # column order of ``bytes``
    times_ns: np.ndarray  # int64 per point, on the trace's clock (ts x 1000)
    bytes: np.ndarray  # int64 (points, categories): bytes live after each point
    peak_index: int
    live_at_peak: tuple[LiveTensor, ...]  # largest first
    changes: MemoryChanges

    @property
    def is_cpu(self) -> bool:
        return self.device == "CPU"

    @property
    def peak_ns(self) -> int:
        return int(self.times_ns[self.peak_index])

    @property
    def peak_bytes(self) -> int:
        return int(self.bytes[self.peak_index].sum())

    @property
    def peak_by_category(self) -> dict[str, int]:
        return dict(zip(self.categories, self.bytes[self.peak_index].tolist()))

    @property
    def before_trace_bytes(self) -> int:
        """Bytes live at the peak of tensors that existed before the capture (parameters,
        optimizer state): torch counts them, the allocator's events never saw them allocated."""
        return sum(t.bytes for t in self.live_at_peak if t.made_ns < 0)


def categorised_memory(saved: MemoryCategories | None, base_time_ns: int) -> list[CategorisedMemory]:
    """Every device of a saved categorisation; ``base_time_ns`` is the trace's
    ``baseTimeNanoseconds`` (0 when absent), which puts the profiler's clock on the trace's."""
    if saved is None:
        return []
    return [memory for device in saved.devices if (memory := _replay(device, base_time_ns)) is not None]


def with_stacks(memory: CategorisedMemory, store: TraceEvents) -> CategorisedMemory:
    """``memory`` with the Python stack of each tensor live at its peak.  The categories
    do not save a thread: a tensor's is the one of the allocator record made at the same
    nanosecond with the same bytes (the capture writes both from one allocation)."""
    records = store.memory_records
    thread_at: dict[tuple[int, int], int | str] = {}
    for row in np.flatnonzero(records.bytes > 0).tolist():
        thread_at.setdefault((int(records.start_ns[row]), int(records.bytes[row])), records.tids[row])
    found: list[tuple[int, int | str]] = []
    for index, tensor in enumerate(memory.live_at_peak):
        tid = thread_at.get((tensor.made_ns, tensor.bytes)) if tensor.made_ns >= 0 else None
        if tid is not None:
            found.append((index, tid))
    queries = [(tid, memory.live_at_peak[index].made_ns) for index, tid in found]
    tensors = list(memory.live_at_peak)
    for (index, _), stack in zip(found, python_stacks(store.frames, store.names, store.threads, queries)):
        tensors[index] = replace(tensors[index], stack=stack)
    return replace(memory, live_at_peak=tuple(tensors))


def _replay(saved: DeviceMemoryCategories, base_time_ns: int) -> CategorisedMemory | None:
    changes = len(saved.bytes)
    if not changes:
        return None
    delta = np.array(saved.delta_ns, dtype=np.int64)
    delta[: saved.preexisting] = 0
    absolute = saved.first_ns + np.cumsum(delta)
    # torch's microsecond: int(t / 1000) in Python (true division, then truncation), kept exact here.
    buckets = [-1] * saved.preexisting + [int(t / 1000) for t in absolute[saved.preexisting :].tolist()]
    bucket = np.array(buckets, dtype=np.int64)
    last_of_point = np.flatnonzero(np.append(bucket[1:] != bucket[:-1], True))
    sizes = np.array(saved.bytes, dtype=np.int64)
    codes = np.array(saved.category, dtype=np.int64)
    categories = tuple(saved.categories)
    running = np.zeros((changes, len(categories)), dtype=np.int64)
    running[np.arange(changes), codes] = sizes
    np.cumsum(running, axis=0, out=running)
    states = running[last_of_point]
    peak = int(np.argmax(states.sum(axis=1)))
    times = absolute[last_of_point] - base_time_ns
    made = absolute - base_time_ns
    made[: saved.preexisting] = -1
    if saved.preexisting and bucket[last_of_point[0]] == -1 and len(times) > 1:
        times[0] = times[1]  # tensors from before the capture: shown at its start, as torch does
    return CategorisedMemory(
        device=_label(saved.device),
        categories=categories,
        times_ns=times,
        bytes=states,
        peak_index=peak,
        live_at_peak=_live_tensors(saved, codes, sizes, int(last_of_point[peak]) + 1, made),
        changes=MemoryChanges(
            time_ns=made,
            bytes=sizes,
            category=codes,
            tensor=np.array(saved.tensor, dtype=np.int64),
            last_of_point=last_of_point,
            tensor_module=tuple(saved.modules[m] if m >= 0 else "" for m in saved.tensor_module),
        ),
    )


def _live_tensors(
    saved: DeviceMemoryCategories, codes: np.ndarray, sizes: np.ndarray, upto: int, change_ns: np.ndarray
) -> tuple[LiveTensor, ...]:
    """What the first ``upto`` changes leave live, per tensor and category."""
    count = len(saved.categories)
    tensor_of_change = np.array(saved.tensor[:upto], dtype=np.int64)
    first_change = np.full(len(saved.tensor_id), -1, dtype=np.int64)
    first_change[tensor_of_change[::-1]] = np.arange(upto)[::-1]  # the earliest change of each tensor wins
    slots = tensor_of_change * count + codes[:upto]
    unique, inverse = np.unique(slots, return_inverse=True)
    live = np.zeros(len(unique), dtype=np.int64)
    np.add.at(live, inverse, sizes[:upto])
    order = np.argsort(-live, kind="stable")
    tensors = []
    for slot, size in zip(unique[order].tolist(), live[order].tolist()):
        if size <= 0:
            break
        tensor, code = divmod(slot, count)
        operator, module = saved.tensor_operator[tensor], saved.tensor_module[tensor]
        tensors.append(
            LiveTensor(
                bytes=size,
                category=saved.categories[code],
                operator=saved.operators[operator] if operator >= 0 else "",
                module=saved.modules[module] if module >= 0 else "",
                tensor_id=saved.tensor_id[tensor],
                made_ns=int(change_ns[first_change[tensor]]),
                row=tensor,
            )
        )
    return tuple(tensors)


def _label(torch_device: str) -> str:
    """torch's ``cpu``/``cuda:0`` as the allocator curve names them (``CPU``, ``CUDA:0``)."""
    kind, _, index = torch_device.partition(":")
    return kind.upper() if kind == "cpu" else f"{kind.upper()}:{index or 0}"
