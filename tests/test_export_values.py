"""Data formats write times exactly (whole nanoseconds inside: at most three decimals of a
microsecond, no float noise such as ``336237.57300000003``)."""

from __future__ import annotations

import csv
import gzip
import io
import json
from decimal import Decimal

from tests.conftest import SAMPLES
from tuiprof import cli

SAMPLE = SAMPLES / "resnet18_cpu.pt.trace.json.gz"


def _raw_totals() -> dict[str, Decimal]:
    """Each operator's CPU total recomputed from the file's decimal ``dur`` text (torch's
    merge of an only child with its parent's name left aside: checked on names it never hits)."""
    events = json.loads(gzip.decompress(SAMPLE.read_bytes()), parse_float=Decimal)["traceEvents"]
    totals: dict[str, Decimal] = {}
    for event in events:
        if event.get("ph") == "X" and event.get("cat") == "cpu_op":
            totals[event["name"]] = totals.get(event["name"], Decimal(0)) + Decimal(event["dur"])
    return totals


def test_csv_and_json_times_are_exact_decimals(capsys) -> None:
    raw = _raw_totals()
    assert cli.main(["summary", str(SAMPLE), "--format", "csv"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert cli.main(["summary", str(SAMPLE), "--format", "json"]) == 0
    data = {row["name"]: row for row in json.loads(capsys.readouterr().out, parse_float=Decimal)}
    checked = 0
    for row in rows:
        for key, text in row.items():
            if key.endswith("_us") and text:
                assert -Decimal(text).as_tuple().exponent <= 3, (row["name"], key, text)  # to the nanosecond
        name = row["name"]
        if name in ("aten::mkldnn_convolution", "aten::convolution_backward", "aten::add_"):
            assert Decimal(row["cpu_total_us"]) == raw[name], name  # exact: the file's own decimals, summed
            assert data[name]["cpu_total_us"] == raw[name], name
            checked += 1
    assert checked == 3
    assert all(-Decimal(str(v)).as_tuple().exponent <= 3 for r in data.values() for k, v in r.items() if k.endswith("_us") and v is not None)
