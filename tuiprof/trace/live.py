"""What a live capture knew that its trace does not say, saved inside the trace.

A capture (``tuiprof live``/``run``) knows each module instance's qualified
name, parameter count and output shape, torch's own FLOPs per operator call,
the profiler's log lines, (``live``) the batch it fed the model and, for a
compiled model, the compile time and which module owns each kernel
(:mod:`tuiprof.trace.compiled_map`).  They are written into the saved trace as one
extra top-level member, :data:`MEMBER`, the document's last, after
``traceEvents``: Perfetto's JSON tokenizer stops reading at a top-level key
it does not know (one before the events would hide them all), and
HolisticTraceAnalysis (0.5.0: its metadata dict) and the TensorBoard plugin
(0.4.3) read the same events with or without it.  ``tuiprof open`` reads the
member back and shows what the live session showed.

With ``profile_memory`` (and ``record_shapes``, ``with_stack``) the member also
holds torch's categorisation of every tensor (:class:`MemoryCategories`):
computed in-process after the capture by
``torch.profiler._memory_profiler.MemoryProfileTimeline`` (it needs the
profiler object, not the JSON), kept as raw JSON inside the facts and
decoded and validated on its own (:func:`decode_memory_categories`), so a
damaged or newer categorisation loses only itself.
"""

from __future__ import annotations

from typing import TypeVar

import msgspec

from tuiprof.trace.compile_log import CompileLog
from tuiprof.trace.compiled_map import COMPILED_MAP_VERSION, CompiledMap, map_damage
from tuiprof.trace.decode import DecodeReport

MEMBER = "tuiprofLive"
VERSION = 1
MEMORY_CATEGORIES_VERSION = 1
# torch's Category names in lower case, and ``unknown`` for memory torch could not
# tie to a tensor (its None); a file's ``categories`` list says what its codes mean.
NO_CATEGORIES = msgspec.Raw(b"null")  # JSON null: an empty Raw would encode as nothing
CATEGORY_NAMES = (
    "parameter",
    "optimizer_state",
    "input",
    "temporary",
    "activation",
    "gradient",
    "autograd_detail",
    "unknown",
)


class ModuleFacts(msgspec.Struct):
    """One module instance, keyed elsewhere by the trace's name for it (``Conv2d_1``)."""

    qualified_name: str  # "layer1.0.conv1"
    parameters: int
    output_shape: str  # "128x64x8x8", "" when the output is not a tensor


class LiveFacts(msgspec.Struct):
    """Plain data (no torch objects): what the capture hands the analysis."""

    version: int = VERSION
    modules: dict[str, ModuleFacts] = {}  # "Conv2d_1" -> facts
    flops_by_external_id: dict[int, int] = {}  # torch's with_flops count per operator call
    log_lines: list[str] = []  # what the profiler printed on fd 2
    compile_s: float | None = (
        None  # torch.compile's time in the unprofiled warm-up step (None: not compiled by tuiprof)
    )
    compiled: CompiledMap | None = None  # kernel -> module of the compiled graphs (tuiprof.trace.compiled_map)
    compile_log: CompileLog | None = None  # graph breaks and recompilations Dynamo reported (tuiprof.trace.compile_log)
    memory_categories: msgspec.Raw = NO_CATEGORIES  # an encoded MemoryCategories
    batch_size: int | None = None  # the length of the batch fed to the model (a diff compares per sample)


class DeviceMemoryCategories(msgspec.Struct):
    """torch's categorised memory timeline of one device, as columns (compact JSON).

    One entry per change, in the order of torch's ``MemoryProfile.timeline``
    (sorted by time, then action): a creation adds bytes, a destruction
    subtracts them, a new version of a tensor moves its bytes from the old
    version's category to the new one's (two entries at one time).  The first
    ``preexisting`` entries are tensors that existed before the profiler
    started (parameters, the optimizer's state): torch gives them the first
    change's time.  Times are the profiler's clock (the trace's ``ts`` x 1000
    plus its ``baseTimeNanoseconds``), each entry's as ns after the one before.
    """

    device: str  # torch's name: "cpu", "cuda:0"
    categories: list[str]  # what the codes in ``category`` mean (CATEGORY_NAMES when written)
    first_ns: int  # the first timed change, on the profiler's clock
    preexisting: int
    delta_ns: list[int]  # per change: ns after the previous change (0 for preexisting ones)
    bytes: list[int]  # per change, signed
    category: list[int]  # per change: index into ``categories``
    tensor: list[int]  # per change: index into the tensor columns below
    tensor_id: list[int]  # per tensor: torch's tensor id (-1: memory with no tensor)
    tensor_operator: list[int]  # per tensor: index into ``operators`` (-1: none)
    tensor_module: list[int]  # per tensor: index into ``modules`` (-1: none)
    operators: list[str]  # the outermost ``::`` operator that allocated the tensor
    modules: list[str]  # "Conv2d_1": the trace's name of the module (see capture/memory_categories.py)


class MemoryCategories(msgspec.Struct):
    version: int = MEMORY_CATEGORIES_VERSION
    devices: list[DeviceMemoryCategories] = []
    problem: str = ""  # why there are none (torch's categoriser failed), said to the user


def encode_live_facts(facts: LiveFacts) -> bytes:
    return msgspec.json.encode(facts)


def decode_live_facts(raw: msgspec.Raw | None, report: DecodeReport) -> LiveFacts | None:
    """The saved member, or None when absent; a damaged one is noted and ignored, and so
    is a damaged compiled-kernel map alone (its graphs' time is then the compiled module's)."""
    if not raw:
        return None
    facts = _decode_versioned(raw, LiveFacts, VERSION, f"the {MEMBER} member (tuiprof's live-capture facts)", report)
    cmap = facts.compiled if facts is not None else None
    problem = map_damage(cmap) if cmap is not None and cmap.version <= COMPILED_MAP_VERSION else ""
    if problem:
        report.note(f"the compiled-kernel map in the {MEMBER} member is damaged ({problem}); ignored")
        facts.compiled = None  # type: ignore[union-attr]
    return facts


def encode_memory_categories(categories: MemoryCategories) -> msgspec.Raw:
    return msgspec.Raw(msgspec.json.encode(categories))


def decode_memory_categories(facts: LiveFacts | None, report: DecodeReport) -> MemoryCategories | None:
    """The categorisation a capture saved, checked like any input; None when absent,
    newer than this tuiprof, or inconsistent (noted in the report)."""
    if facts is None or bytes(facts.memory_categories) in (b"", b"null"):
        return None
    what = f"the memory categories in the {MEMBER} member"
    categories = _decode_versioned(facts.memory_categories, MemoryCategories, MEMORY_CATEGORIES_VERSION, what, report)
    if categories is None:
        return None
    for device in categories.devices:
        problem = _inconsistency(device)
        if problem:
            report.note(f"the memory categories of {device.device!r} are damaged ({problem}); ignored")
            return None
    return categories


_Versioned = TypeVar("_Versioned", LiveFacts, MemoryCategories)


def _decode_versioned(
    raw: msgspec.Raw, kind: type[_Versioned], newest: int, what: str, report: DecodeReport
) -> _Versioned | None:
    """``raw`` as a ``kind``; None, with one note naming ``what``, when it cannot be read or a
    newer tuiprof wrote it (version above ``newest``): either loses only itself, not the trace."""
    try:
        value = msgspec.json.decode(raw, type=kind)
    except msgspec.MsgspecError as exc:
        report.note(f"{what} cannot be read ({exc}); ignored")
        return None
    if value.version > newest:
        report.note(f"{what}: version {value.version}, newer than this tuiprof reads; ignored")
        return None
    return value


def _inconsistency(device: DeviceMemoryCategories) -> str:
    """What is wrong with one device's columns, '' when nothing."""
    changes = len(device.bytes)
    if not (len(device.delta_ns) == len(device.category) == len(device.tensor) == changes):
        return "per-change columns of different lengths"
    tensors = len(device.tensor_id)
    if not (len(device.tensor_operator) == len(device.tensor_module) == tensors):
        return "per-tensor columns of different lengths"
    if not 0 <= device.preexisting <= changes:
        return f"preexisting {device.preexisting} outside 0..{changes}"
    if any(name not in CATEGORY_NAMES for name in device.categories):
        return "an unknown category name"
    if any(not 0 <= code < len(device.categories) for code in device.category):
        return "a category code out of range"
    if any(not 0 <= index < tensors for index in device.tensor):
        return "a tensor index out of range"
    if any(not -1 <= index < len(device.operators) for index in device.tensor_operator):
        return "an operator index out of range"
    if any(not -1 <= index < len(device.modules) for index in device.tensor_module):
        return "a module index out of range"
    if any(delta < 0 for delta in device.delta_ns):
        return "a time going backwards"
    # Sums of int64 columns (the replay's): within int64 whatever the order, or not a capture's.
    if sum(map(abs, device.bytes)) > MAX_BYTES:
        return "bytes past 2**52 in all"
    if not -MAX_NS < device.first_ns < MAX_NS or sum(device.delta_ns) >= MAX_NS:
        return "a time past 2**62 ns"
    return ""


MAX_BYTES = 2**52  # 4 PiB allocated and freed in one capture: none comes near
MAX_NS = 2**62  # the profiler's clock, and its sum with the changes' deltas, stays within int64
