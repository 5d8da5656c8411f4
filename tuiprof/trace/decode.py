"""Bytes of a trace document -> header + batches of typed events.

The fast path never builds the whole document: it finds the ``traceEvents``
array, cuts it into chunks of whole events at ``}`` ``,`` ``{`` boundaries, and
decodes each chunk with msgspec into :class:`RawEvent` structs.  A cut is
proven by the decode itself: a cut inside a string or a nested object makes
the chunk invalid JSON, and the next candidate boundary is tried.  Each batch
is handed to the caller and dropped, so peak memory is one chunk of structs
plus whatever the caller keeps.

When a chunk cannot be decoded even at a proven boundary (the malformations
listed in TRACE_FORMAT.md), that chunk falls back to :func:`salvage_events`,
which splits it into single events, repairs what it can and counts the rest.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import msgspec

from tuiprof.errors import TraceError
from tuiprof.trace.schema import EVENT_LIST, RawEvent, TraceHeader

CHUNK_BYTES = 16 << 20
# Between two events: the end of one object, a comma, the start of the next.
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')

_decode_events = msgspec.json.Decoder(EVENT_LIST).decode
_decode_header = msgspec.json.Decoder(TraceHeader).decode
_decode_event = msgspec.json.Decoder(RawEvent).decode
_decode_event_lax = msgspec.json.Decoder(RawEvent, strict=False).decode


@dataclass
class DecodeReport:
    """What the decoder had to repair or drop, for the user to see."""

    repaired: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)

    def note(self, problem: str) -> None:
        if problem not in self.problems and len(self.problems) < 20:
            self.problems.append(problem)


ProgressFn = Callable[[int, int], None]


def decode_document(
    buf: bytes | memoryview,
    on_batch: Callable[[list[RawEvent]], None],
    report: DecodeReport,
    progress: ProgressFn | None = None,
    source: str = "trace",
) -> TraceHeader:
    """Decode a whole trace document, streaming its events to ``on_batch``.

    Returns the header (top-level members, with ``traceEvents`` emptied).
    Raises :class:`TraceError` when the bytes are not a trace at all.
    """
    view = memoryview(buf)
    size = len(view)
    start = _first_non_space(view)
    if start is None:
        raise TraceError(source, "the file is empty", "pass a trace written by torch.profiler")
    opener = bytes(view[start : start + 1])
    if opener == b"[":
        header = TraceHeader()
        body_start = start + 1
    elif opener == b"{":
        head = bytes(view[: min(size, 1 << 20)])
        match = _ARRAY_KEY.search(head)
        if match is None and size > len(head):
            match = _ARRAY_KEY.search(bytes(view))
        if match is None:
            header = _decode_small_document(view, source)
            if not header.traceEvents:
                raise TraceError(source, "this JSON has no traceEvents", "pass a trace written by torch.profiler")
            on_batch(header.traceEvents)
            header.traceEvents = []
            return header
        body_start = match.end()
        header = _decode_header_prefix(view[:body_start], source, report)
    else:
        raise TraceError(source, "this is not JSON", "pass a .json or .json.gz written by torch.profiler")

    end, tail = _split_tail(view, body_start, report)
    for batch in _iter_event_chunks(view, body_start, end, report, progress):
        on_batch(batch)
    if tail is not None:
        for name in tail.__struct_fields__:
            value = getattr(tail, name)
            if value is not None and name != "traceEvents":
                setattr(header, name, value)
    if progress:
        progress(size, size)
    return header


def _first_non_space(view: memoryview) -> int | None:
    for i in range(min(len(view), 4096)):
        if view[i] not in b" \t\r\n\xef\xbb\xbf":
            return i
    return None


def _decode_small_document(view: memoryview, source: str) -> TraceHeader:
    try:
        return _decode_header(view)
    except msgspec.DecodeError as exc:
        raise TraceError(source, f"not valid JSON ({exc})", "pass a trace written by torch.profiler") from None
    except msgspec.ValidationError as exc:
        raise TraceError(source, f"JSON that is not a trace ({exc})", "pass a trace written by torch.profiler") from None


def _decode_header_prefix(prefix: memoryview, source: str, report: DecodeReport) -> TraceHeader:
    try:
        return _decode_header(bytes(prefix) + b"]}")
    except msgspec.MsgspecError:
        report.note("top-level metadata before traceEvents could not be read")
        return TraceHeader()


# The end of the event array: the last event's brace, the bracket, then either
# more top-level members (modern Kineto writes traceName, baseTimeNanoseconds,
# INFO logs... there) or the document's closing brace.
_ARRAY_CLOSE = re.compile(rb"\}\s*\](?=\s*,\s*\"|\s*\}\s*$)")
_TAIL_WINDOW = 8 << 20


def _split_tail(view: memoryview, body_start: int, report: DecodeReport) -> tuple[int, TraceHeader | None]:
    """Offset of the ``]`` closing the event array, and the members after it.

    A candidate is accepted only when what follows it decodes as the rest of
    the document, so a bracket inside an event can't end the array early.
    """
    window_start = max(body_start, len(view) - _TAIL_WINDOW)
    window = bytes(view[window_start:])
    for match in _ARRAY_CLOSE.finditer(window):
        rest = window[match.end() :].lstrip()
        end = window_start + match.end() - 1
        if rest.startswith(b"}"):
            return end, None
        try:
            return end, _decode_header(b"{" + rest[1:])
        except msgspec.MsgspecError:
            continue
    stripped = window.rstrip()
    if stripped.endswith(b"]"):  # a bare array
        return window_start + len(stripped) - 1, None
    report.note("the event array is not closed (truncated file?): read what is there")
    return len(view), None


def _iter_event_chunks(
    view: memoryview, pos: int, end: int, report: DecodeReport, progress: ProgressFn | None
) -> Iterator[list[RawEvent]]:
    """Yield decoded batches from the array body between ``pos`` and ``end``."""
    size = len(view)
    while pos < end:
        target = pos + CHUNK_BYTES
        if target >= end:
            yield _decode_chunk(view[pos:end], report)
            pos = end
        else:
            batch, pos = _decode_until_boundary(view, pos, target, end, report)
            yield batch
        if progress:
            progress(pos, size)


def _decode_until_boundary(
    view: memoryview, pos: int, target: int, end: int, report: DecodeReport
) -> tuple[list[RawEvent], int]:
    """Decode events from ``pos`` up to the first proven boundary after ``target``."""
    search_from = target
    for _ in range(64):
        window = bytes(view[search_from : min(end, search_from + (1 << 20))])
        match = _BOUNDARY.search(window)
        if match is None:
            if search_from + len(window) >= end:
                break
            search_from += max(1, len(window) - 64)
            continue
        cut = search_from + match.start() + 1  # just after the closing brace
        try:
            batch = _decode_events(b"[" + bytes(view[pos:cut]) + b"]")
        except msgspec.MsgspecError:
            search_from = cut
            continue
        next_pos = search_from + match.end() - 1  # at the opening brace
        return batch, next_pos
    # No clean cut found: take everything to the end through the slow path.
    return _decode_chunk(view[pos:end], report), end


def _decode_chunk(chunk: memoryview, report: DecodeReport) -> list[RawEvent]:
    data = bytes(chunk).rstrip().rstrip(b",")
    try:
        return _decode_events(b"[" + data + b"]")
    except msgspec.MsgspecError:
        return salvage_events(data, report)


# ---------------------------------------------------------------- salvage

_NA = re.compile(rb"(?<=[:\[,\s])N/A(?=[\s,\]}])")
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f]")
# A "name": "..." member whose value holds unescaped quotes (with_stack frames).
_NAME_MEMBER = re.compile(rb'("name"\s*:\s*")(.*?)("\s*,\s*"(?:pid|ph|cat|tid|ts|dur|args|s|id)")', re.S)
_BACKSLASH = re.compile(rb'\\(?!["\\/bfnrtu])')


def _repair(text: bytes) -> bytes:
    text = _NA.sub(b"null", text)
    text = _CONTROL.sub(b" ", text)
    text = _BACKSLASH.sub(rb"\\\\", text)
    text = _NAME_MEMBER.sub(lambda m: m.group(1) + re.sub(rb'(?<!\\)"', rb'\\"', m.group(2)) + m.group(3), text)
    return text.decode("utf-8", errors="replace").encode("utf-8")


def salvage_events(data: bytes, report: DecodeReport) -> list[RawEvent]:
    """Decode a damaged run of events one by one, repairing what can be repaired."""
    events: list[RawEvent] = []
    pieces = _split_events(data)
    for piece in pieces:
        try:
            events.append(_decode_event(piece))
            continue
        except msgspec.ValidationError:
            event = _convert_loosely(piece)
            if event is not None:
                events.append(event)
                report.repaired += 1
                report.note("members of unexpected types (ignored)")
                continue
        except msgspec.DecodeError:
            pass
        repaired = _repair(piece)
        event = _convert_loosely(repaired)
        if event is not None:
            events.append(event)
            report.repaired += 1
        else:
            report.skipped += 1
        report.note(_describe_damage(piece))
    return events


def _convert_loosely(piece: bytes) -> RawEvent | None:
    """An event whose members have unexpected types: keep what fits."""
    try:
        value = msgspec.json.decode(piece)
    except msgspec.DecodeError:
        return None
    if not isinstance(value, dict):
        return None
    try:
        return _decode_event_lax(piece)  # "12" for 12 and the like
    except msgspec.ValidationError:
        value.pop("args", None)
    try:
        return _decode_event_lax(msgspec.json.encode(value))
    except msgspec.ValidationError:
        return None


def _split_events(data: bytes) -> list[bytes]:
    """Cut a run of events at every boundary that leaves balanced braces."""
    pieces: list[bytes] = []
    start = 0
    depth_ok = 0
    for match in _BOUNDARY.finditer(data):
        cut = match.start() + 1
        candidate = data[start:cut]
        if candidate.count(b"{") - candidate.count(b"}") == depth_ok:
            pieces.append(candidate.strip())
            start = match.end() - 1
    last = data[start:].strip()
    if last:
        pieces.append(last)
    return pieces


def _describe_damage(piece: bytes) -> str:
    if _NA.search(piece):
        return "bare N/A tokens (read as null)"
    if _CONTROL.search(piece):
        return "control characters in strings"
    try:
        piece.decode("utf-8")
    except UnicodeDecodeError:
        return "invalid UTF-8 (replaced)"
    if _BACKSLASH.search(piece):
        return "unescaped backslashes (Windows paths)"
    return "unescaped quotes in event names"
