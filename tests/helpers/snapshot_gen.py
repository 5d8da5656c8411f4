"""Allocator snapshots in the documented format (``torch.cuda.memory._snapshot``), with their answers.

The keys are those torch/csrc/cuda/Module.cpp writes (its docstring lists fewer): ``time_us``,
``compile_context`` and ``user_metadata`` on every entry, ``device_free`` instead of ``addr`` on an
``oom``, ``frames`` only on entries with a context, ``active_pending_free`` blocks,
``allocator_settings`` and ``external_annotations`` at the top.

The objects are shared as torch's ``_snapshot`` shares them (:class:`TorchFrames`), so the
pickle refers back to frames and stacks as a real one does.

A small first-fit allocator of its own places allocations in segments
(``segment_alloc`` when none fits, ``segment_free`` of empty ones now and
then), frees at random, fails requests past a device capacity (``oom``), and
records, as it goes, what the analysis must find: the peak of live bytes per
device, its time, the bytes by stack there, and for each OOM the request, the
live bytes, CUDA's free bytes and the largest free gap in the segments.  The
end state (``segments`` with ``blocks``) is what is live at the end.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tuiprof.trace.snapshot import Snapshot

MiB = 1 << 20
SEGMENT = 2 * MiB
CAPACITY = 24 * MiB  # per device: a request that would push reserved past it is an oom
BASE = 0x7F0000000000


def library_frame(name: str) -> dict:
    return {
        "filename": "/usr/lib/python3.11/site-packages/torch/nn/functional.py",
        "line": 2000 + len(name),
        "name": name,
    }


def own_frame(line: int, name: str, filename: str = "/home/user/train.py") -> dict:
    return {"filename": filename, "line": line, "name": name}


def make_stacks(fx: bool = True) -> list[list[dict]]:
    """Frames innermost first, as torch writes them: C++ and library frames inside own code."""
    stacks = []
    for layer in range(6):
        frames = [
            {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"},
            library_frame("linear"),
        ]
        frames.append(own_frame(10 + layer, f"layer{layer}_forward", "/home/user/model.py"))
        frames.append(own_frame(100, "main"))
        stacks.append(frames)
    if fx:
        stacks[5][2] = {
            **stacks[5][2],
            "fx_node_op": "call_function",
            "fx_node_name": "addmm_1",
            "fx_original_trace": 'File "/home/user/model.py", line 15, in forward\n    x = self.fc(x)',
        }
    return stacks


MODULE_PY = "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py"


def _called_as_module(forward: dict) -> list[dict]:
    """A forward frame and the two frames nn.Module.__call__ puts outside it (innermost first)."""
    return [
        forward,
        {"filename": MODULE_PY, "line": 1750, "name": "_call_impl"},
        {"filename": MODULE_PY, "line": 1739, "name": "_wrapped_call_impl"},
    ]


def make_module_stacks() -> tuple[list[list[dict]], list[tuple[str, ...]]]:
    """Stacks through nn.Module forwards and each one's module path, written by hand: Net
    (model.py) calls fc1 at line 15 and fc2 at line 16 (both linear.py), and its own forward
    allocates at line 17; a forward not called through module.py (a helper named forward) is no
    module; an FX frame's original trace names the eager forwards; one stack has no module."""
    linear = {
        "filename": "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py",
        "line": 125,
        "name": "forward",
    }
    malloc = [{"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}, library_frame("linear")]
    main = [own_frame(40, "main")]
    net = lambda line: _called_as_module(own_frame(line, "forward", "/home/user/model.py"))  # noqa: E731
    fx = {
        "filename": "/tmp/torchinductor_user/ab/cab.py",
        "line": 9,
        "name": "call",
        "fx_node_op": "call_function",
        "fx_node_name": "addmm",
        "fx_original_trace": 'File "/home/user/model.py", line 16, in forward\n    x = self.fc2(x)\n'
        'File "/usr/lib/python3.11/site-packages/torch/nn/modules/linear.py", line 125, in forward\n    return F.linear(x)',
    }
    stacks = [
        malloc + _called_as_module(linear) + net(15) + main,
        malloc + _called_as_module(linear) + net(16) + main,
        malloc + net(17) + main,
        malloc + [own_frame(5, "forward", "/home/user/helpers.py")] + main,  # called directly: not a module
        malloc + main,
        [fx] + main,
    ]
    paths = [
        ("model.py:15", "linear.py"),
        ("model.py:16", "linear.py"),
        ("model.py",),
        (),
        (),
        ("model.py:16", "linear.py"),
    ]
    return stacks, paths


def make_deep_stacks(levels: int = 6, count: int = 4) -> tuple[list[list[dict]], list[list[str]]]:
    """Stacks as deep as a real model's, innermost first, and each frame's kind written by hand
    ("torch", "own", "library"): native allocator frames and torch's conv.py inside ``levels``
    nested nn.Module forwards of the user's model.py (each called through module.py's two
    frames), a library's frame, then train.py: the user's first frame is 8 frames in."""
    native = [
        ({"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::malloc"}, "torch"),
        (
            {"filename": "/pytorch/aten/src/ATen/native/Convolution.cpp", "line": 1440, "name": "at::_convolution"},
            "torch",
        ),
        ({"filename": "??", "line": 0, "name": "_PyEval_EvalFrameDefault"}, "torch"),
    ]
    conv = "/usr/lib/python3.11/site-packages/torch/nn/modules/conv.py"
    call = [
        ({"filename": MODULE_PY, "line": 1750, "name": "_call_impl"}, "torch"),
        ({"filename": MODULE_PY, "line": 1739, "name": "_wrapped_call_impl"}, "torch"),
    ]
    stacks, kinds = [], []
    for index in range(count):
        frames = native + [
            ({"filename": conv, "line": 456, "name": "_conv_forward"}, "torch"),
            ({"filename": conv, "line": 460, "name": "forward"}, "torch"),
            *call,
        ]
        for level in range(levels):  # innermost level first
            frames += [(own_frame(100 * index + 10 * level, "forward", "/home/user/model.py"), "own"), *call]
        frames += [
            (
                {"filename": "/usr/lib/python3.11/site-packages/accelerate/utils.py", "line": 77, "name": "wrapper"},
                "library",
            ),
            (own_frame(30 + index, "train_step"), "own"),
            (own_frame(90, "main"), "own"),
        ]
        stacks.append([frame for frame, _ in frames])
        kinds.append([kind for _, kind in frames])
    return stacks, kinds


class TorchFrames:
    """Frames and stacks as torch's ``_snapshot`` hands them to the pickler
    (``py_symbolize`` in torch/csrc/profiler/python/combined_traceback.cpp): one dict per distinct
    frame, keys in its order (name, filename, line), shared by every stack that has it (a nested
    module stack holds module.py's ``_call_impl`` frame several times), and one list per captured
    traceback, shared by the entries and the block of that allocation.  The pickler writes each
    once and refers to it after (BINGET / LONG_BINGET), as in a real snapshot."""

    def __init__(self) -> None:
        self.frames: dict[tuple, dict] = {}

    def frame(self, frame: dict) -> dict:
        key = tuple(sorted(frame.items()))
        found = self.frames.get(key)
        if found is None:
            first = {k: frame[k] for k in ("name", "filename", "line") if k in frame}
            found = self.frames[key] = first | frame
        return found

    def stack(self, frames: list[dict]) -> list[dict]:
        """A new traceback's list (its own object) of the shared frame dicts."""
        return [self.frame(f) for f in frames]


@dataclass
class Expected:
    peak_bytes: dict[int, int] = field(default_factory=dict)
    peak_time_us: dict[int, int] = field(default_factory=dict)
    peak_by_stack: dict[int, dict[int, int]] = field(default_factory=dict)  # device -> stack index -> bytes
    ooms: list[dict] = field(default_factory=list)
    live_end: dict[int, int] = field(default_factory=dict)
    curve: dict[int, list[tuple[int, int]]] = field(
        default_factory=dict
    )  # device -> (time_us, live bytes after the entry)
    reserved_end: dict[int, int] = field(default_factory=dict)
    stack_modules: list[tuple[str, ...]] = field(default_factory=list)  # modules=True: each stack's module path
    stacks: list[list[dict]] = field(default_factory=list)  # each stack's frames, innermost first
    frame_kinds: list[list[str]] = field(default_factory=list)  # deep=True: each frame's "torch", "own" or "library"


class _Device:
    def __init__(self, index: int) -> None:
        self.index = index
        self.next_address = BASE + (index << 36)
        self.segments: dict[int, int] = {}  # address -> size
        self.live: dict[int, tuple[int, int, int]] = {}  # address -> (size, requested, stack)
        self.trace: list[dict] = []

    def gaps(self) -> list[tuple[int, int]]:
        found = []
        for start, size in sorted(self.segments.items()):
            cursor = start
            for address in sorted(a for a in self.live if start <= a < start + size):
                if address > cursor:
                    found.append((cursor, address - cursor))
                cursor = address + self.live[address][0]
            if cursor < start + size:
                found.append((cursor, start + size - cursor))
        return found

    @property
    def allocated(self) -> int:
        return sum(size for size, _, _ in self.live.values())

    @property
    def reserved(self) -> int:
        return sum(self.segments.values())


def make_snapshot(
    seed: int = 0,
    devices: int = 2,
    steps: int = 300,
    with_times: bool = True,
    fx: bool = True,
    awaiting: bool = False,
    modules: bool = False,
    time_origin_us: int = 0,
    deep: bool = False,
) -> tuple[dict, Expected]:
    """A snapshot dict and its answers.  ``awaiting``: frees complete some entries after they
    are requested (another stream), the bytes still held in between.  ``modules``: the stacks of
    :func:`make_module_stacks` (``expected.stack_modules`` their paths).  ``time_origin_us``: added
    to every ``time_us`` (real ones are microseconds since the epoch).  ``deep``: the stacks of
    :func:`make_deep_stacks` (``expected.frame_kinds`` each frame's kind)."""
    rng = random.Random(seed)
    stacks = make_stacks(fx)
    expected = Expected()
    if modules:
        stacks, expected.stack_modules = make_module_stacks()
    if deep:
        stacks, expected.frame_kinds = make_deep_stacks()
    expected.stacks = stacks
    state = [_Device(d) for d in range(devices)]
    clock = [0]
    pending: list[tuple[_Device, int]] = []
    symbols = TorchFrames()
    contexts: dict[tuple[int, int], list[dict]] = {}  # (device, address) -> its allocation's traceback

    def entry(
        device: _Device, action: str, address: int, size: int, stack: int | None, frames: list | None = None, **extra
    ) -> None:
        clock[0] += 7
        item = {
            "action": action,
            "addr": address,
            "size": size,
            "stream": 0,
            "compile_context": "N/A",
            "user_metadata": "",
            **extra,
        }
        if action == "oom":  # torch writes device_free where the others have addr
            del item["addr"]
        if stack is not None:  # torch writes frames only for entries recorded with a context
            item["frames"] = symbols.stack(stacks[stack]) if frames is None else frames
        if with_times:
            item["time_us"] = time_origin_us + clock[0]
        device.trace.append(item)
        expected.curve.setdefault(device.index, []).append((clock[0], device.allocated))

    def complete(device: _Device, address: int) -> None:
        size, _, stack = device.live.pop(address)
        entry(device, "free_completed", address, size, stack, contexts.pop((device.index, address)))

    for _ in range(steps):
        device = state[rng.randrange(devices)]
        roll = rng.random()
        if roll < 0.55 or not device.live:
            stack = rng.randrange(len(stacks))
            size = rng.randrange(1, 3 * MiB // 512) * 512
            requested = size - rng.randrange(0, 512)
            context = symbols.stack(stacks[stack])  # the malloc's traceback: its segment_alloc, alloc, frees, block
            fits = [(a, s) for a, s in device.gaps() if s >= size]
            if not fits:
                segment = -(-size // SEGMENT) * SEGMENT
                if device.reserved + segment > CAPACITY:
                    gaps = [s for _, s in device.gaps()]
                    free = CAPACITY - device.reserved
                    expected.ooms.append(
                        {
                            "device": device.index,
                            "requested": size,
                            "allocated": device.allocated,
                            "device_free": free,
                            "largest_free_block": max(gaps, default=0),
                            "reserved": device.reserved,
                        }
                    )
                    entry(device, "oom", 0, size, stack, device_free=free)
                    continue
                address = device.next_address
                device.next_address += segment + SEGMENT  # segments never touch
                device.segments[address] = segment
                entry(device, "segment_alloc", address, segment, stack, context)
                fits = [(address, segment)]
            address = fits[0][0]
            device.live[address] = (size, requested, stack)
            contexts[device.index, address] = context
            entry(device, "alloc", address, size, stack, context)
            if device.allocated > expected.peak_bytes.get(device.index, 0):
                expected.peak_bytes[device.index] = device.allocated
                expected.peak_time_us[device.index] = device.trace[-1].get("time_us", len(device.trace) - 1)
                by_stack: dict[int, int] = {}
                for live_size, _, live_stack in device.live.values():
                    by_stack[live_stack] = by_stack.get(live_stack, 0) + live_size
                expected.peak_by_stack[device.index] = by_stack
            if rng.random() < 0.05:
                entry(device, "annotate", address, size, None, user_metadata=f"tensor {len(device.trace)} [b]x[/b]")
        elif roll < 0.95:
            candidates = [a for a in device.live if (device, a) not in pending]
            if not candidates:
                continue
            address = rng.choice(candidates)
            size, _, stack = device.live[address]
            entry(device, "free_requested", address, size, stack, contexts[device.index, address])
            if awaiting and rng.random() < 0.5:
                pending.append((device, address))
            else:
                complete(device, address)
        elif roll < 0.98:
            for address, size in sorted(device.segments.items()):
                if not any(address <= a < address + size for a in device.live):
                    del device.segments[address]
                    entry(device, "segment_free", address, size, None)
        else:
            entry(device, "snapshot", 0, 0, None)
        if pending and rng.random() < 0.3:
            waiting, address = pending.pop(0)
            complete(waiting, address)
    segments = []
    for device in state:
        expected.live_end[device.index] = device.allocated
        expected.reserved_end[device.index] = device.reserved
        for start, size in sorted(device.segments.items()):
            blocks, cursor = [], start
            for address in sorted(a for a in device.live if start <= a < start + size):
                if address > cursor:
                    blocks.append(
                        {
                            "address": cursor,
                            "size": address - cursor,
                            "requested_size": 0,
                            "state": "inactive",
                            "frames": [],
                        }
                    )
                live_size, requested, stack = device.live[address]
                held = any(d is device and a == address for d, a in pending)
                blocks.append(
                    {
                        "address": address,
                        "size": live_size,
                        "requested_size": requested,
                        "state": "active_pending_free" if held else "active_allocated",
                        "frames": contexts[device.index, address],
                    }
                )
                cursor = address + live_size
            if cursor < start + size:
                blocks.append(
                    {
                        "address": cursor,
                        "size": start + size - cursor,
                        "requested_size": 0,
                        "state": "inactive",
                        "frames": [],
                    }
                )
            segments.append(
                {
                    "device": device.index,
                    "address": start,
                    "total_size": size,
                    "stream": 0,
                    "segment_type": "large",
                    "segment_pool_id": (0, 0),
                    "is_expandable": False,
                    "frames": [],
                    "allocated_size": sum(b["requested_size"] for b in blocks if b["state"] == "active_allocated"),
                    "active_size": sum(b["size"] for b in blocks if b["state"] != "inactive"),
                    "blocks": blocks,
                }
            )
    settings = {
        "PYTORCH_CUDA_ALLOC_CONF": "",
        "max_split_size": -1,
        "garbage_collection_threshold": 0.0,
        "expandable_segments": False,
    }
    return {
        "segments": segments,
        "device_traces": [device.trace for device in state],
        "allocator_settings": settings,
        "external_annotations": [],
    }, expected


def distinct_stacks(count: int) -> dict:
    """A snapshot of ``count`` allocations, each from its own two-frame stack whose inner frame
    is new (every table of stacks, frames and strings grows with ``count``)."""
    main = own_frame(1, "main")
    trace = [
        {
            "action": "alloc",
            "addr": BASE + 512 * i,
            "size": 512,
            "stream": 0,
            "time_us": i,
            "frames": [own_frame(i, f"layer{i}", f"/home/user/layer{i}.py"), main],
        }
        for i in range(count)
    ]
    return {"segments": [], "device_traces": [trace]}


def differences(a: Snapshot, b: Snapshot) -> list[str]:
    """The columns (and fields) in which two decoded snapshots differ: [] when equal."""
    found = []
    for part in ("frames", "stacks", "entries", "segments"):
        for column in dataclasses.fields(getattr(b, part)):
            x, y = getattr(getattr(a, part), column.name), getattr(getattr(b, part), column.name)
            same = x.dtype == y.dtype and np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
            if not same:
                found.append(f"{part}.{column.name}")
    for name in ("device_count", "file_bytes", "source"):
        if getattr(a, name) != getattr(b, name):
            found.append(name)
    return found


def every_action() -> dict:
    """Every action kind (the generator's eight, the two of expandable segments, one unknown), blocks
    without addresses or requested sizes, a frames list shared, an annotation of None."""
    frames = [{"filename": "/home/user/a.py", "line": 3, "name": "f"}]
    actions = [
        "alloc",
        "free_requested",
        "free_completed",
        "segment_alloc",
        "segment_free",
        "oom",
        "snapshot",
        "annotate",
        "segment_map",
        "segment_unmap",
        "future_action",
    ]
    trace = [{"action": a, "addr": 4096 * i, "size": 512, "stream": 0, "frames": frames} for i, a in enumerate(actions)]
    trace[5]["device_free"] = 1 << 20
    del trace[7]["frames"]
    trace.append({"action": "annotate", "addr": 0, "size": 0, "user_metadata": None})
    blocks = [{"size": 512, "state": "active_allocated", "frames": frames}, {"size": 1024, "state": "inactive"}]
    segment = {"device": 1, "address": 1 << 30, "total_size": 1536, "stream": 0, "blocks": blocks}
    return {"segments": [segment], "device_traces": [trace, []]}
