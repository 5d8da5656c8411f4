#!/usr/bin/env python3
"""Per-event cost of reading trace events: tuiprof's decode against readers that write columns natively.

Issue 16 asked whether a library that reads JSON into columns (pyarrow,
DuckDB) should replace msgspec + ``columns_from_events``.  This times, on the
same spans of each trace given, in one run:

- ``tuiprof``: msgspec into ``RawEvent`` structs, then ``columns_from_events``
  (what a decode worker does), and the two parts apart;
- ``msgspec floor``: msgspec decoding only ``ph`` (every other member
  skipped): what scanning the JSON costs, the least any msgspec schema costs;
- ``pyarrow``: ``pyarrow.json.read_json`` with an explicit schema (the spans
  rewritten as one object per line first, timed apart);
- ``duckdb``: ``read_json`` of the same rewritten spans from a file, 1 and 2
  threads, ``ts``/``dur`` as ``DECIMAL(25,3)`` (exact nanoseconds); and of the
  spans as Kineto writes them (``format='array'``: multi-line objects, no
  rewrite), 1 and 2 threads.

pyarrow and DuckDB are optional (``pip install pyarrow duckdb``; not tuiprof
dependencies); a reader that is not installed, or that refuses the trace, is
reported as such.

    python scripts/bench_json_readers.py TRACE.json [TRACE.json ...] [--spans 3]
"""

from __future__ import annotations

import argparse
import io
import mmap
import os
import sys
import tempfile
import time
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tuiprof.trace.columns import columns_from_events  # noqa: E402
from tuiprof.trace.decode import DecodeReport, decode_text, plan_document  # noqa: E402


class _OnlyPh(msgspec.Struct, gc=False):
    ph: str = ""


_floor = msgspec.json.Decoder(list[_OnlyPh]).decode


def _best(run, rounds: int = 3) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _one_object_per_line(span: bytes) -> bytes:
    """Kineto writes an event over several lines and separates events by ``},\\n  {``:
    newlines cannot be inside JSON strings, so all become spaces, then each separator a newline."""
    return span.replace(b"\n", b" ").replace(b"},   {", b"} \n  {")


def _pyarrow(lines: bytes):
    import pyarrow as pa
    import pyarrow.json as pj

    exact = pa.decimal128(25, 3)
    args = pa.struct([("External id", pa.int64()), ("correlation", pa.int64()), ("Python id", pa.int64())])
    schema = pa.schema(
        [
            ("ph", pa.string()),
            ("cat", pa.string()),
            ("name", pa.string()),
            ("tid", pa.int64()),
            ("ts", exact),
            ("dur", exact),
            ("args", args),
        ]
    )
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
    return lambda: pj.read_json(io.BytesIO(lines), parse_options=options)


def _duckdb(path: str, threads: int, layout: str):
    import duckdb

    connection = duckdb.connect()
    connection.execute(f"SET threads={threads}")
    query = (
        f"select ph, cat, name, tid, ts, dur, args from read_json('{path}', format='{layout}', "
        "columns={ph: 'VARCHAR', cat: 'VARCHAR', name: 'VARCHAR', tid: 'VARCHAR', ts: 'DECIMAL(25,3)', "
        "dur: 'DECIMAL(25,3)', args: 'STRUCT(\"External id\" BIGINT, correlation BIGINT, \"Input Dims\" JSON)'})"
    )
    return lambda: connection.sql(query).to_arrow_table()


def bench(path: Path, spans: int) -> None:
    with open(path, "rb") as handle:
        data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    plan = list(plan_document(data, DecodeReport()).spans)
    chosen = plan[1 : 1 + spans] if len(plan) > spans else plan
    texts = [bytearray(b"[" + data[start:end] + b"]") for start, end in chosen]
    events = sum(len(decode_text(text, DecodeReport())) for text in texts)
    decoded = [decode_text(text, DecodeReport()) for text in texts]
    per_event = lambda seconds: seconds / events * 1e6  # noqa: E731
    msgspec_s = _best(lambda: [decode_text(text, DecodeReport()) for text in texts])
    columns_s = _best(lambda: [columns_from_events(chunk) for chunk in decoded])
    ours = msgspec_s + columns_s
    rows = [
        ("tuiprof (msgspec + columns)", ours),
        ("  msgspec into RawEvent", msgspec_s),
        ("  columns_from_events", columns_s),
        ("msgspec floor (ph only)", _best(lambda: [_floor(t) for t in texts])),
    ]
    joined = data[chosen[0][0] : chosen[-1][1]]  # consecutive spans: the separators between them too
    rewrite = _best(lambda: _one_object_per_line(joined))
    lines = _one_object_per_line(joined)
    rows.append(("rewrite to one object per line", rewrite))
    try:
        rows.append(("pyarrow read_json", _best(_pyarrow(lines))))
    except ImportError:
        rows.append(("pyarrow read_json: not installed", None))
    except Exception as exc:  # noqa: BLE001 - what the reader says is the result
        rows.append((f"pyarrow read_json refuses it: {str(exc).splitlines()[0][:90]}", None))
    layouts = (("newline_delimited", "rewritten", lines), ("array", "as written", b"[" + joined + b"]"))
    try:
        import duckdb  # noqa: F401 - only to say so when it is missing
    except ImportError:
        layouts = ()
        rows.append(("duckdb: not installed", None))
    for layout, label, text in layouts:
        with tempfile.NamedTemporaryFile(suffix=".json") as copy:
            copy.write(text)
            copy.flush()
            for threads in (1, 2):
                try:
                    rows.append((f"duckdb {label}, {threads} thread(s)", _best(_duckdb(copy.name, threads, layout))))
                except Exception as exc:  # noqa: BLE001 - what the reader says is the result
                    rows.append((f"duckdb ({label}) refuses it: {str(exc).splitlines()[0][:80]}", None))
                    break
    print(f"{path.name}: {events:,} events in {len(chosen)} spans, {len(joined) / events:.0f} bytes an event")
    for label, seconds in rows:
        if seconds is None:
            print(f"  {label}")
        else:
            print(f"  {label:<34} {per_event(seconds):6.2f} us/event  {seconds / ours:5.2f}x tuiprof's time")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("traces", nargs="+", type=Path, help="plain .json traces (make them with make_big_trace.py)")
    parser.add_argument("--spans", type=int, default=3, help="16 MB spans timed per trace (default 3)")
    args = parser.parse_args()
    print(f"pid {os.getpid()}, best of 3 per reader, all in this run")
    for path in args.traces:
        bench(path, args.spans)
    return 0


if __name__ == "__main__":
    sys.exit(main())
