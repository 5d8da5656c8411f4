#!/usr/bin/env python3
"""Make a large, valid trace by replicating a real one as a longer run.

Every event of the source (python frames, ops, kernels, flows, memory) is
written again per replica with timestamps shifted past the previous replica
and every id that joins events (External id, correlation, flow ids, Python
ids, Ev Idx, ProfilerStep numbers) shifted into a fresh range, so joins stay
within a replica and the result reads like more steps of the same run.

Events are written in Kineto's own layout (one member group per line, two-space
indented objects), so the benchmark reads the same bytes a real
``export_chrome_trace`` file holds.  Timestamps are shifted as decimals, never
through a float: ``ts`` on absolute epoch microseconds with nanosecond
decimals (the ns-resolution shape) keeps every digit of the source's text.

    python scripts/make_big_trace.py --size-mb 1024 --from ../shared/traces/X.json.gz -o /tmp/big.json
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import sys
from decimal import Decimal
from pathlib import Path

import orjson

ID_ARGS = ("External id", "external id", "correlation", "Python id", "Python parent id", "Ev Idx", "Record function id")
STEP = re.compile(r"^ProfilerStep#(\d+)$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, required=True, help="approximate uncompressed size")
    parser.add_argument("--from", dest="source", type=Path, required=True, help="a real trace (.json or .json.gz)")
    parser.add_argument("-o", "--output", type=Path, required=True, help=".json or .json.gz")
    args = parser.parse_args()

    opener = gzip.open if args.source.name.endswith(".gz") else open
    with opener(args.source, "rb") as handle:
        document = json.load(handle, parse_float=Decimal)
    if isinstance(document, list):  # the old autograd profiler's bare array
        document = {"traceEvents": document}
    events = document.pop("traceEvents")
    timed = [e for e in events if e.get("ph") in ("X", "i", "s", "f") and isinstance(e.get("ts"), (int, Decimal))
             and e.get("name") != "Record Window End"]
    start = min(e["ts"] for e in timed)
    end = max(e["ts"] + e.get("dur", 0) for e in timed)
    span = int((end - start) * 101 / 100) + 10  # whole microseconds: integer ts stay integers
    id_span = 1 + max(
        [int(v) for e in events for k, v in (e.get("args") or {}).items() if k in ID_ARGS and isinstance(v, int)]
        + [int(e["id"]) for e in events if isinstance(e.get("id"), int)] + [0]
    )
    step_numbers = [int(m.group(1)) for e in events if (m := STEP.match(str(e.get("name", ""))))]
    step_span = (max(step_numbers) - min(step_numbers) + 1) if step_numbers else 0
    one_copy = sum(len(kineto_text(e)) + 2 for e in events)
    replicas = max(1, round(args.size_mb * 1e6 / one_copy))
    metadata = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]

    out_open = gzip.open if args.output.name.endswith(".gz") else open
    with out_open(args.output, "wb") as out:
        head = orjson.dumps(document, default=float)[:-1]
        out.write(head + (b"," if len(head) > 1 else b"") + b'"traceEvents": [\n')
        first = True
        for event in metadata:
            out.write((b"" if first else b",\n") + kineto_text(event))
            first = False
        for k in range(replicas):
            chunk = []
            for event in body:
                chunk.append(kineto_text(_shift(event, k, span, id_span, step_span)))
            out.write((b"" if first else b",\n") + b",\n".join(chunk))
            first = False
        out.write(b"\n]}\n")
    size = args.output.stat().st_size
    print(f"{args.output}: {replicas} replicas of {len(body)} events, {size / 1e6:.0f} MB on disk", file=sys.stderr)
    return 0


def _member(key: str, value) -> bytes:
    if isinstance(value, Decimal):  # the source's own digits (ts, dur); other floats as floats
        text = format(value, "f") if key in ("ts", "dur") else orjson.dumps(float(value)).decode()
        return orjson.dumps(key) + b": " + text.encode()
    return orjson.dumps(key) + b": " + orjson.dumps(value, default=float)


def kineto_text(event: dict) -> bytes:
    """One event as libkineto's ChromeTraceLogger lays it out."""
    head = b", ".join(_member(k, v) for k, v in event.items() if k != "args")
    text = b"  {\n    " + head
    if "args" in event:
        members = b", ".join(_member(k, v) for k, v in event["args"].items())
        text += b",\n    \"args\": {\n      " + members + b"\n    }"
    return text + b"\n  }"


def _shift(event: dict, k: int, span: int, id_span: int, step_span: int) -> dict:
    if k == 0:
        return event
    shifted = dict(event)
    if isinstance(shifted.get("ts"), (int, Decimal)):
        shifted["ts"] = shifted["ts"] + k * span
    if isinstance(shifted.get("id"), int):
        shifted["id"] = shifted["id"] + k * id_span
    args = shifted.get("args")
    if args:
        args = dict(args)
        for key in ID_ARGS:
            if isinstance(args.get(key), int) and args[key] >= 0:
                args[key] = args[key] + k * id_span
        shifted["args"] = args
    if step_span:
        match = STEP.match(str(shifted.get("name", "")))
        if match:
            shifted["name"] = f"ProfilerStep#{int(match.group(1)) + k * step_span}"
    return shifted


if __name__ == "__main__":
    sys.exit(main())
