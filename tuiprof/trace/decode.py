"""Bytes of a trace document -> header + spans of whole events -> typed events.

The fast path never builds the whole document: it finds the ``traceEvents``
array and cuts it into spans of whole events at ``}`` ``,`` ``{`` boundaries
(:func:`plan_document`); each span is then decoded by msgspec into
:class:`RawEvent` structs (:func:`decode_span`), in this process or in a
worker, since a span needs nothing but the bytes.

A cut is trusted when the whitespace between the two events holds a newline
(a raw newline can't be inside a JSON string; Kineto writes one there), else
when the event after it decodes on its own.  If a span still fails to decode
(a cut in the wrong place, or the malformations listed in TRACE_FORMAT.md),
it falls back to :func:`salvage_events`, which splits it into single events,
repairs what it can and counts the rest.
"""

from __future__ import annotations

import mmap
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

import msgspec

from tuiprof.errors import TraceError
from tuiprof.trace.schema import EVENT_LIST, RawEvent, TraceHeader

CHUNK_BYTES = 16 << 20
# Between two events: the end of one object, a comma, the start of the next.
_BOUNDARY = re.compile(rb"\}\s*,\s*\{")
_ARRAY_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_SEARCH_WINDOW = 1 << 20
_HEAD_BYTES = 1 << 20  # where the traceEvents key is looked for first

_decode_events = msgspec.json.Decoder(EVENT_LIST).decode
_decode_header = msgspec.json.Decoder(TraceHeader).decode
_decode_event = msgspec.json.Decoder(RawEvent).decode
_decode_event_lax = msgspec.json.Decoder(RawEvent, strict=False).decode
# msgspec raises RecursionError (not a MsgspecError) for JSON nested ~1,000 deep.
DECODE_ERRORS = (msgspec.MsgspecError, RecursionError)


MAX_NOTES, NOTE_CHARS = 20, 1000  # a note names a device or a member of the trace: a 60 MB one is cut


@dataclass
class DecodeReport:
    """What the decoder had to repair or drop, for the user to see."""

    repaired: int = 0
    skipped: int = 0
    damaged: int = 0  # decoded, but a ts or dur not finite, >= 2**62 ns, or a negative dur: left out
    problems: list[str] = field(default_factory=list)
    truncated: bool = False  # the event array is not closed: the file ends early

    @property
    def intact(self) -> bool:
        """Every event read as written: nothing repaired, skipped, left out or cut off."""
        return not (self.repaired or self.skipped or self.damaged or self.problems or self.truncated)

    def note(self, problem: str) -> None:
        problem = problem if len(problem) <= NOTE_CHARS else problem[: NOTE_CHARS - 1] + "…"
        if problem not in self.problems and len(self.problems) < MAX_NOTES:
            self.problems.append(problem)

    def count_damaged(self, events: int) -> None:
        if events:
            self.damaged += events
            self.note(
                "events whose ts or dur is not a finite number, is beyond 2**62 ns, or is a negative duration (left out)"
            )

    def merge(self, other: DecodeReport) -> None:
        self.repaired += other.repaired
        self.skipped += other.skipped
        self.count_damaged(other.damaged)
        self.truncated |= other.truncated
        for problem in other.problems:
            self.note(problem)


# The first byte of a JSON document that is a number, a string, true, false or null.
_JSON_SCALAR_STARTS = b'"-0123456789tfn'
NOT_A_TRACE_FIX = "pass a .json or .json.gz written by torch.profiler"


def not_a_trace(source: str, head: bytes) -> TraceError:
    """The error for a document whose first bytes cannot start a trace (``head``: from
    its first token on).  JSON that is not a trace (``null``, ``"text"``, ``5``, ``[[``)
    is told by what it starts with, so the user sees it is valid but something else."""
    if head[:1] and head[:1] in b"[{" + _JSON_SCALAR_STARTS:
        shown = "".join(c if c.isprintable() else "?" for c in head[:16].decode("utf-8", "replace")).rstrip()
        return TraceError(
            source, f'not a trace: it starts `{shown}`, where a trace starts `{{"` or `[{{`', NOT_A_TRACE_FIX
        )
    return TraceError(source, "this is not JSON", NOT_A_TRACE_FIX)


@dataclass
class DocumentPlan:
    """Where the events of a document are: spans of whole events, in file order.

    ``header`` holds the top-level members (those after the array too);
    ``inline_events`` the events of a small document decoded whole.
    """

    header: TraceHeader
    spans: Iterable[tuple[int, int]]
    inline_events: list[RawEvent] = field(default_factory=list)


def plan_document(buf: bytes | memoryview | mmap.mmap, report: DecodeReport, source: str = "trace") -> DocumentPlan:
    """Find the event array, read the members around it and cut it into spans.

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
        head = bytes(view[: min(size, _HEAD_BYTES)])
        match = _ARRAY_KEY.search(head)
        if match is None and size > len(head):
            match = _ARRAY_KEY.search(bytes(view))
        if match is None:
            header = _decode_small_document(view, source)
            if not header.traceEvents:
                raise TraceError(source, "this JSON has no traceEvents", "pass a trace written by torch.profiler")
            events, header.traceEvents = header.traceEvents, []
            return DocumentPlan(header, [], events)
        body_start = match.end()
        header = _decode_header_prefix(view[:body_start], source, report)
    else:
        raise not_a_trace(source, bytes(view[start : start + 16]))

    return DocumentPlan(header, _plan_to_the_end(view, header, body_start, report))


def _plan_to_the_end(view, header: TraceHeader, pos: int, report: DecodeReport) -> list[tuple[int, int]]:
    """The spans from ``pos`` to the end of the event array; the members after it go into ``header``."""
    end, tail = _split_tail(view, pos, report)
    if tail is not None:
        for name in tail.__struct_fields__:
            value = getattr(tail, name)
            if value is not None and name != "traceEvents" and value != msgspec.Raw():
                setattr(header, name, value)
    return _plan_spans(view, pos, end)


class GrowingDocument(Protocol):
    """A document still being written (a gzip trace being inflated): slices of
    what is there, and a wait for more."""

    def __getitem__(self, part: slice) -> bytes: ...

    def __len__(self) -> int: ...  # the bytes written so far: the size, once complete

    def wait_for(self, size: int) -> tuple[int, bool]: ...  # (bytes there, complete), once >= size or complete


def plan_growing_document(document: GrowingDocument, report: DecodeReport, source: str) -> DocumentPlan | None:
    """A plan whose spans are cut while the document grows, or None when it must be complete first.

    Only the common layout is planned early: an object whose ``traceEvents``
    key is in its first megabyte.  Cuts stay more than ``_TAIL_WINDOW`` before
    the bytes written so far, so a span never reaches the members after the
    array (those are found, as in :func:`plan_document`, once it is complete).
    """
    available, complete = document.wait_for(_HEAD_BYTES)
    head = document[0:_HEAD_BYTES]
    start = _first_non_space(memoryview(head))
    match = _ARRAY_KEY.search(head) if start is not None and head[start : start + 1] == b"{" else None
    if complete or match is None:
        return None
    header = _decode_header_prefix(memoryview(head)[: match.end()], source, report)
    return DocumentPlan(header, _growing_spans(document, header, match.end(), report))


def _growing_spans(
    document: GrowingDocument, header: TraceHeader, pos: int, report: DecodeReport
) -> Iterator[tuple[int, int]]:
    search_from = pos + CHUNK_BYTES
    wanted = search_from + _TAIL_WINDOW + _SEARCH_WINDOW
    while True:
        available, complete = document.wait_for(wanted)
        if complete:
            break
        end = available - _TAIL_WINDOW
        cut = _find_cut(document, search_from, end)
        if cut is None:  # no boundary yet (a huge event): look again from near here once more is there
            search_from = max(search_from, end - _SEARCH_WINDOW)
            wanted = available + _SEARCH_WINDOW
            continue
        yield pos, cut[0]
        pos = cut[1]
        search_from = pos + CHUNK_BYTES
        wanted = search_from + _TAIL_WINDOW + _SEARCH_WINDOW
    yield from _plan_to_the_end(document, header, pos, report)


def _plan_spans(view: memoryview, pos: int, end: int) -> list[tuple[int, int]]:
    spans = []
    while pos < end:
        cut = _find_cut(view, pos + CHUNK_BYTES, end) if pos + CHUNK_BYTES < end else None
        if cut is None:
            spans.append((pos, end))
            break
        close, next_open = cut
        spans.append((pos, close))
        pos = next_open
    return spans


def _find_cut(view: memoryview | GrowingDocument, target: int, end: int) -> tuple[int, int] | None:
    """The first trusted boundary after ``target``: (just after ``}``, at ``{``)."""
    search_from = target
    while search_from < end:
        window = bytes(view[search_from : min(end, search_from + _SEARCH_WINDOW)])
        for match in _BOUNDARY.finditer(window):
            close = search_from + match.start() + 1
            next_open = search_from + match.end() - 1
            if b"\n" in match.group() or _event_decodes_at(view, next_open, end):
                return close, next_open
        if search_from + len(window) >= end:
            return None
        search_from += max(1, len(window) - 64)
    return None


def _event_decodes_at(view: memoryview | GrowingDocument, pos: int, end: int) -> bool:
    """Whether an event object starts at ``pos`` (the next boundary ends it)."""
    window = bytes(view[pos : min(end, pos + _SEARCH_WINDOW)])
    for match in _BOUNDARY.finditer(window):
        try:
            _decode_event(window[: match.start() + 1])
            return True
        except DECODE_ERRORS:
            continue
    return False


def decode_span(view: bytes | memoryview, start: int, end: int, report: DecodeReport) -> list[RawEvent]:
    """The events between two cuts (salvaged one by one if the span is damaged)."""
    text = bytearray(end - start + 2)
    text[0:1] = b"["
    with memoryview(view) as whole:
        text[1:-1] = whole[start:end]
    text[-1:] = b"]"
    return decode_text(text, report)


def decode_text(text: bytearray, report: DecodeReport) -> list[RawEvent]:
    """The events of a span copied between ``[`` and ``]`` (salvaged one by one if damaged)."""
    try:
        return _decode_events(text)
    except DECODE_ERRORS:
        return salvage_events(bytes(text[1:-1]).rstrip().rstrip(b","), report)


def _first_non_space(view: memoryview) -> int | None:
    for i in range(min(len(view), 4096)):
        if view[i] not in b" \t\r\n\xef\xbb\xbf":
            return i
    return None


def _decode_small_document(view: memoryview, source: str) -> TraceHeader:
    try:
        return _decode_header(view)
    except RecursionError:
        raise TraceError(
            source, "JSON nested too deeply to be a trace", "pass a trace written by torch.profiler"
        ) from None
    except msgspec.ValidationError as exc:  # a DecodeError too: caught first
        raise TraceError(
            source, f"JSON that is not a trace ({exc})", "pass a trace written by torch.profiler"
        ) from None
    except msgspec.DecodeError as exc:
        raise TraceError(source, f"not valid JSON ({exc})", "pass a trace written by torch.profiler") from None


def _decode_header_prefix(prefix: memoryview, source: str, report: DecodeReport) -> TraceHeader:
    try:
        return _decode_header(bytes(prefix) + b"]}")
    except DECODE_ERRORS:
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
        except DECODE_ERRORS:
            continue
    stripped = window.rstrip()
    if stripped.endswith(b"]"):  # a bare array
        return window_start + len(stripped) - 1, None
    report.truncated = True
    report.note("the event array is not closed (truncated file?): read what is there")
    return len(view), None


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


# Salvage cuts the damaged text at every event boundary ("pieces") and
# decodes runs of pieces as one array; a run that fails is halved until the
# damaged piece is alone, so undamaged events cost one decode and each damaged
# one a few short ones: linear in the text, whatever the damage.  A piece that
# fails alone may be part of an event whose args hold a list of objects
# (a "}, {" inside it): it is retried joined with the next pieces while its
# braces do not balance, at most MAX_UNIT_PIECES of them; a missing "}" never
# balances, and the damaged piece is then handled alone, so the next event
# starts clean (resynchronisation).
MAX_UNIT_PIECES = 64
BLOCK_PIECES = 64
_SMALL_RUN = 2
_NEXT_EVENT = re.compile(rb",\s*\{")
_MAX_RETRIES = 8
# The repairs are regular expressions over one event; a longer "event" is many
# events run together, which the repairs would scan once per name (quadratic).
_MAX_REPAIR_BYTES = 1 << 20


def salvage_events(data: bytes, report: DecodeReport) -> list[RawEvent]:
    """Decode a damaged run of events, repairing what can be repaired (linear time)."""
    return _Salvage(data, report).run()


class _Salvage:
    def __init__(self, data: bytes, report: DecodeReport) -> None:
        self.data, self.report = data, report
        self.starts: list[int] = [0]
        self.ends: list[int] = []
        for match in _BOUNDARY.finditer(data):
            self.ends.append(match.start() + 1)
            self.starts.append(match.end() - 1)
        self.ends.append(len(data))
        self.events: list[RawEvent] = []
        self.next_piece = 0  # pieces before it are done (a unit may have taken some ahead)

    def run(self) -> list[RawEvent]:
        count = len(self.starts)
        for first in range(0, count, BLOCK_PIECES):
            self._run(first, min(count, first + BLOCK_PIECES))
        return self.events

    def _run(self, first: int, last: int) -> None:
        first = max(first, self.next_piece)
        if first >= last:
            return
        if last - first > _SMALL_RUN:
            try:
                self.events.extend(_decode_events(b"[" + self.data[self.starts[first] : self.ends[last - 1]] + b"]"))
                self.next_piece = last
                return
            except DECODE_ERRORS:
                middle = (first + last) // 2
                self._run(first, middle)
                self._run(middle, last)
                return
        for piece in range(first, last):
            if piece >= self.next_piece:
                self._unit(piece)

    def _unit(self, first: int) -> None:
        """The event starting at piece ``first``: alone, or joined with the next pieces."""
        data, starts, ends = self.data, self.starts, self.ends
        text = data[starts[first] : ends[first]].strip()
        self.next_piece = first + 1
        try:
            self.events.append(_decode_event(text))
            return
        except DECODE_ERRORS:
            pass
        depth, last = text.count(b"{") - text.count(b"}"), first
        while depth > 0 and last + 1 < len(starts) and last - first < MAX_UNIT_PIECES:
            last += 1
            depth += data.count(b"{", starts[last], ends[last]) - data.count(b"}", starts[last], ends[last])
        if depth == 0 and last > first:
            try:
                self.events.append(_decode_event(data[starts[first] : ends[last]]))
                self.next_piece = last + 1
                return
            except DECODE_ERRORS:
                pass
        _salvage_one(text, self.events, self.report)


def _salvage_one(piece: bytes, events: list[RawEvent], report: DecodeReport, depth: int = 0) -> None:
    """Decode one event into ``events``, repairing it if needed, or count it as skipped."""
    if depth > _MAX_RETRIES:
        return
    try:
        events.append(_decode_event(piece))
        return
    except msgspec.ValidationError:
        event = _convert_loosely(piece)
        if event is not None:
            events.append(event)
            report.repaired += 1
            report.note("members of unexpected types (ignored)")
            return
    except DECODE_ERRORS:
        pass
    event = _convert_loosely(_repair(piece)) if len(piece) <= _MAX_REPAIR_BYTES else None
    if event is not None:
        events.append(event)
        report.repaired += 1
        report.note(_describe_damage(piece))
        return
    report.skipped += 1
    report.note("broken JSON (events skipped)")
    # A lost "}" joins an event to the next one: the next may still be whole.
    later = _NEXT_EVENT.search(piece, 1)
    if later is not None:
        _salvage_one(piece[later.end() - 1 :], events, report, depth + 1)


def _convert_loosely(piece: bytes) -> RawEvent | None:
    """An event whose members have unexpected types: keep what fits."""
    try:
        value = msgspec.json.decode(piece)
    except DECODE_ERRORS:
        return None
    if not isinstance(value, dict):
        return None
    try:
        return _decode_event_lax(piece)  # "12" for 12 and the like
    except DECODE_ERRORS:
        value.pop("args", None)
    try:
        return _decode_event_lax(msgspec.json.encode(value))
    except (*DECODE_ERRORS, TypeError, ValueError):
        return None


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
