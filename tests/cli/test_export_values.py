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
    assert all(
        -Decimal(str(v)).as_tuple().exponent <= 3
        for r in data.values()
        for k, v in r.items()
        if k.endswith("_us") and v is not None
    )


def test_uncounted_flops_are_empty_not_zero(capsys) -> None:
    """An operator no FLOPs formula covers (relu: elementwise) shows ``--`` on screen, so the
    CSV cell is empty and JSON null, as unrecorded memory is; a convolution keeps its count."""
    assert cli.main(["summary", str(SAMPLE), "--view", "operators", "--format", "csv"]) == 0
    rows = {row["name"]: row for row in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["aten::relu_"]["flops"] == "" and rows["aten::relu_"]["executed_flops"] == ""
    assert int(rows["aten::conv2d"]["flops"]) > 0
    assert cli.main(["summary", str(SAMPLE), "--view", "modules", "--format", "json"]) == 0
    relu = [row for row in json.loads(capsys.readouterr().out) if row["path"].split("/")[-1].startswith("ReLU")]
    assert relu and all(row["flops"] is None for row in relu)


def test_operator_detail_names_the_base_of_its_share(resnet_model) -> None:
    """The detail's share is the operator's CPU total per step over the mean step, not the
    Overview's share of self CPU time: its words say so."""
    from tuiprof.report.details import operator_text

    stats = next(s for s in resnet_model.operators() if s.name == "aten::conv2d")
    text = operator_text(resnet_model, stats).plain
    assert "of step time" not in text and "CPU total" in text and "% of the mean step" in text
