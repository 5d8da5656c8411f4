"""A trace profiled without profile_memory=True shows its memory columns as unknown
(``--``, JSON null, an empty CSV cell), never as ``0 B``; a trace that recorded memory
keeps its numbers, 0 B included."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.helpers.raw_events import cpu_memory_event
from tuiprof import cli

MEMORY_KEYS = ("cpu_mem_bytes", "self_cpu_mem_bytes", "device_mem_bytes", "self_device_mem_bytes")


def _trace(tmp_path, memory: bool):
    """A module around one operator; with ``memory``, one 64-byte allocation inside it."""
    events = [
        {
            "ph": "X",
            "cat": "python_function",
            "name": "nn.Module: Net_0",
            "pid": 1,
            "tid": 1,
            "ts": 90,
            "dur": 40,
            "args": {"Python id": 1, "Python parent id": 0},
        },
        {"ph": "X", "cat": "cpu_op", "name": "aten::empty", "pid": 1, "tid": 1, "ts": 100, "dur": 10, "args": {}},
    ]
    if memory:
        events.append(cpu_memory_event(105, 64, 64, addr=1))
    path = tmp_path / ("memory.json" if memory else "no_memory.json")
    path.write_text(json.dumps({"traceEvents": events, **({"profile_memory": 1} if memory else {})}))
    return str(path)


def _summary(capsys, *args: str) -> str:
    assert cli.main(["summary", *args]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("view", ["operators", "modules"])
def test_unrecorded_memory_is_unknown_in_every_format(tmp_path, capsys, view) -> None:
    path = _trace(tmp_path, memory=False)
    rows = json.loads(_summary(capsys, path, "--view", view, "--format", "json"))
    assert rows and all(row[key] is None for row in rows for key in MEMORY_KEYS if key in row)
    assert any(key in rows[0] for key in MEMORY_KEYS)
    table = list(csv.DictReader(io.StringIO(_summary(capsys, path, "--view", view, "--format", "csv"))))
    assert all(row[key] == "" for row in table for key in MEMORY_KEYS if key in row)
    text = _summary(capsys, path, "--view", view)
    assert "0 B" not in text and "--" in text


def test_recorded_memory_keeps_its_numbers(tmp_path, capsys) -> None:
    path = _trace(tmp_path, memory=True)
    rows = {row["name"]: row for row in json.loads(_summary(capsys, path, "--format", "json"))}
    assert rows["aten::empty"]["self_cpu_mem_bytes"] == 64
    assert rows["aten::empty"]["device_mem_bytes"] == 0  # recorded: none on the device is a real 0


def test_detail_panes_say_unknown_not_zero(tmp_path) -> None:
    from tuiprof.analysis import load_model
    from tuiprof.report.details import module_text, operator_text

    model = load_model(_trace(tmp_path, memory=False))
    operator = next(s for s in model.operators() if s.name == "aten::empty")
    module = model.modules.roots[0]
    for text in (operator_text(model, operator).plain, module_text(model, module).plain):
        assert "mem --" in text and "0 B" not in text
    recorded = load_model(_trace(tmp_path, memory=True))
    operator = next(s for s in recorded.operators() if s.name == "aten::empty")
    assert "mem CPU 64B" in operator_text(recorded, operator).plain
