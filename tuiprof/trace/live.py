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
"""

from __future__ import annotations

import msgspec

from tuiprof.trace.compiled_map import CompiledMap
from tuiprof.trace.decode import DecodeReport

MEMBER = "tuiprofLive"
VERSION = 1


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
    compile_s: float | None = None  # torch.compile's time in the unprofiled warm-up step (None: not compiled by tuiprof)
    compiled: CompiledMap | None = None  # kernel -> module of the compiled graphs (tuiprof.trace.compiled_map)
    batch_size: int | None = None  # the length of the batch fed to the model (a diff compares per sample)


def encode_live_facts(facts: LiveFacts) -> bytes:
    return msgspec.json.encode(facts)


def decode_live_facts(raw: msgspec.Raw | None, report: DecodeReport) -> LiveFacts | None:
    """The saved member, or None when absent; a damaged one is noted and ignored."""
    if not raw:
        return None
    try:
        facts = msgspec.json.decode(raw, type=LiveFacts)
    except msgspec.MsgspecError as exc:
        report.note(f"the {MEMBER} member (tuiprof's live-capture facts) cannot be read ({exc}); ignored")
        return None
    if facts.version > VERSION:
        report.note(f"the {MEMBER} member is version {facts.version}, newer than this tuiprof reads; ignored")
        return None
    return facts
