"""Walkthrough #4, #5 and #19: one peak, named the same everywhere, the memory from before the
trace said with its number, and charts that start at 0 and mark what their legends say."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import ROOT
from tests.helpers.cli import tuiprof
from tests.helpers.gpu_trace import GpuTrace
from tests.helpers.tui import plain_text
from tuiprof.analysis import load_model
from tuiprof.analysis.memory import MemoryTimeline
from tuiprof.report.findings import findings
from tuiprof.report.header import header_line
from tuiprof.report.memory_chart import CategoryCurve, MemoryCurve
from tuiprof.report.units import format_bytes, format_bytes_short

SHIPPED = ROOT / "tests" / "data" / "mlp_memory_categories.pt.trace.json.gz"
WEIGHTS = 200_000_000  # on the device before the trace began: the allocator's total counts them


def _weights_before(path: Path) -> Path:
    """A device whose allocator already holds WEIGHTS bytes: the trace allocates 3,000 B (live at
    the peak) and 500 B freed again, so its peak is WEIGHTS + 3,000 and 3,000 are explained."""
    trace = GpuTrace()
    trace.step(1, 0, 100)
    trace.op("aten::mm", 10, 20)
    trace.memory(12, 500, WEIGHTS + 500, addr=0x1000)
    trace.memory(14, -500, WEIGHTS, addr=0x1000)
    trace.op("aten::gelu", 40, 20)
    trace.memory(45, 3000, WEIGHTS + 3000, addr=0x2000)
    return trace.write(path)


def _summary(path: Path, view: str, *extra: str) -> subprocess.CompletedProcess:
    return tuiprof("summary", str(path), "--view", view, *extra, check=True)


def test_memory_from_before_the_trace_is_said_with_its_number(tmp_path) -> None:
    path = _weights_before(tmp_path / "weights.json")
    model = load_model(path)
    before = f"{format_bytes(WEIGHTS)} was allocated before the trace began"
    assert any(before in f.text for f in findings(model))
    assert before in _summary(path, "memory-allocations").stdout
    assert "alloc peak" in header_line(model).plain  # the allocator's figure, named as such
    assert sum(a.bytes for a in model.memory_breakdown.allocations) == 3000


def test_the_categorised_peak_is_the_one_shown_and_its_memory_from_before_is_said() -> None:
    """The categorised peak counts tensors from before the capture; the CPU allocator's events
    count only what the trace saw allocated: the difference is the memory from before."""
    model = load_model(SHIPPED)
    categorised, allocator = model.categorised_peak.peak_bytes, model.memory[0].peak_bytes
    assert categorised > allocator
    header = header_line(model).plain
    assert f"peak {format_bytes_short(categorised)} CPU" in header
    assert "alloc peak" not in header
    said = f"{format_bytes(categorised - allocator)} was allocated before the trace began"
    assert any(said in f.text for f in findings(model))
    categories = _summary(SHIPPED, "memory-categories").stdout
    assert said in categories and "Allocator peaks" in _summary(SHIPPED, "memory").stdout


def test_memory_categories_say_the_peak_once_and_categories_in_words() -> None:
    text = _summary(SHIPPED, "memory-categories").stdout
    model = load_model(SHIPPED)
    at_ms = f"{(model.categorised_peak.peak_ns - model.calls.origin_ns) / 1e6:.3f}ms"
    assert text.count(at_ms) == 1  # a title line, not a column repeated on every row
    assert "optimizer state" in text and "optimizer_state" not in text
    rows = json.loads(_summary(SHIPPED, "memory-categories", "--format", "json").stdout)
    assert "optimizer_state" in {r["category"] for r in rows} and all("peak_at_us" in r for r in rows)  # data keys stay


def test_allocator_curve_starts_at_zero_and_marks_its_peak_under_the_highest_column() -> None:
    # 60 points, flat at 100 MB except one spike at point 20: the peak.
    times = tuple(range(0, 60_000, 1000))
    allocated = tuple(300_000_000 if i == 20 else 100_000_000 for i in range(60))
    timeline = MemoryTimeline("CUDA:0", times, allocated, (), allocated[20], times[20], -1, 60, 0)
    lines = plain_text(MemoryCurve(timeline, 0, 4), 80).splitlines()
    chart, axis = lines[:4], lines[4]
    assert chart[-1].split()[0:2] == ["0", "B"]  # the y axis from 0
    top_row = chart[0]
    spike = next(i for i, ch in enumerate(top_row) if ch == "█")
    assert axis[spike] == "▲" and "allocator peak" in lines[5]


def test_the_curves_cells_are_drawn_in_the_legends_colours() -> None:
    """Allocated cells cyan and reserved blue, as the legend says: the chart's lines were dim as a
    whole, so its cells drew in another shade than the legend's (a walkthrough at 80x24)."""
    times = tuple(range(0, 60_000, 1000))
    allocated = tuple(100_000_000 + 1_000_000 * i for i in range(60))
    reserved = tuple(400_000_000 for _ in range(60))
    timeline = MemoryTimeline("CUDA:0", times, allocated, reserved, allocated[-1], times[-1], -1, 60, 0)
    console = Console(width=80, color_system="truecolor")
    lines = console.render_lines(MemoryCurve(timeline, 0, 4), pad=False)
    cells = [segment.style for line in lines[:4] for segment in line if segment.text.strip() in ("█", *"▁▂▃▄▅▆▇")]
    legend = {segment.text.strip(): segment.style for segment in lines[5]}
    colours = {(style.color.name, bool(style.dim)) for style in cells if style and not style.bold}
    assert colours == {("cyan", False), ("blue", False)}
    assert legend["█ allocated"].color.name == "cyan" and legend["█ reserved"].color.name == "blue"


@pytest.mark.parametrize("spike", [0, 59])
def test_a_peak_at_either_end_is_marked_too(spike: int) -> None:
    times = tuple(range(0, 60_000, 1000))
    allocated = tuple(300_000_000 if i == spike else 100_000_000 for i in range(60))
    timeline = MemoryTimeline("CUDA:0", times, allocated, (), allocated[spike], times[spike], -1, 60, 0)
    lines = plain_text(MemoryCurve(timeline, 0, 4), 80).splitlines()
    column = next(i for i, ch in enumerate(lines[0]) if ch == "█")
    assert lines[4][column] == "▲" and lines[4].count("▲") == 1


def test_category_curve_starts_at_zero_and_explains_its_phase_letters() -> None:
    model = load_model(SHIPPED)
    breakdown = model.memory_breakdown
    lines = plain_text(CategoryCurve(breakdown.memory, model.calls.origin_ns, 4, breakdown.phases), 80).splitlines()
    assert lines[3].split()[0:2] == ["0", "B"]
    legend = "\n".join(lines[6:])
    assert "f forward" in legend and "b backward" in legend and "▲ peak" in legend
    assert "optimizer state" in legend and "optim " not in legend


def test_the_memory_view_computes_nothing() -> None:
    """Issue 28 item 8: numbers in analysis/, texts and charts in report/; the view only places them."""
    source = (ROOT / "tuiprof" / "tui" / "views" / "memory.py").read_text()
    for computing in ("model.calls", "model.modules", "model.memory[", "is_cpu", "format_bytes", "replace("):
        assert computing not in source, computing


def test_records_without_addresses_claim_nothing_from_before_the_trace(tmp_path) -> None:
    """Without Addr no allocation pairs with its free: the peak is not 'allocated before the trace'."""
    trace = GpuTrace()
    trace.step(1, 0, 100)
    trace.op("aten::mm", 10, 20)
    trace.memory(12, 4096, 4096)
    trace.events[-1]["args"].pop("Addr")
    model = load_model(trace.write(tmp_path / "no_addr.json"))
    assert model.peak_figure.before_trace_bytes == 0
    assert not any("before the trace" in f.text for f in findings(model))
