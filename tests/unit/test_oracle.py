"""tuiprof's operator and step tables equal an exact plain-Python recomputation (tests/helpers/oracle.py)
on every real trace: operator calls equal, self/total CPU and device time within 1 us, per-step
idle equal to the device window minus the union of all device activity in it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SAMPLES, SHARED_TRACES
from tests.helpers.gpu_trace import lagging_two_steps
from tests.helpers.oracle import compare, recompute, trace_files
from tuiprof.analysis import load_model

TRACES = trace_files(SHARED_TRACES) if SHARED_TRACES.is_dir() else []
TRACES += trace_files(SAMPLES)


def _check(path: Path) -> None:
    worst = compare(load_model(path), recompute(path))
    assert worst["rows"] > 0 and worst["calls"] == 0, worst
    for key in ("self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "step_idle_us"):
        assert worst[key] <= 1.0, (key, worst)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name[:50])
def test_tables_equal_the_exact_recomputation(path: Path) -> None:
    _check(path)


def test_synthetic_gpu_trace_equals_the_recomputation(tmp_path) -> None:
    _check(lagging_two_steps().write(tmp_path / "lagging.json"))
