"""Facts that several modules need have one helper each (issue 28, item 8): the trace's
time origin, the call that launched each device event, the step wildcard, the byte units."""

from __future__ import annotations

from tests.helpers.gpu_trace import EPOCH_US, GpuTrace
from tuiprof.analysis import load_model
from tuiprof.analysis.calls import OperatorCalls
from tuiprof.report.units import BYTE_UNITS, format_bytes, format_bytes_short


def test_origin_is_the_first_calls_start_and_0_without_calls(tmp_path) -> None:
    trace = GpuTrace()
    trace.op("aten::add", 30.0, 5.0)
    trace.op("aten::mm", 12.5, 10.0)  # written second, starts first
    model = load_model(trace.write(tmp_path / "t.json"))
    assert model.calls.origin_ns == (EPOCH_US + 12) * 1000 + 500
    assert OperatorCalls().origin_ns == 0


def test_launchers_name_the_call_that_launched_each_device_event(tmp_path) -> None:
    trace = GpuTrace()
    mm = trace.op("aten::mm", 10.0, 20.0)
    add = trace.op("aten::add", 40.0, 20.0)
    trace.launch(mm, "gemm", 11.0, 2.0, 50.0, 5.0)
    trace.launch(add, "add_kernel", 41.0, 2.0, 60.0, 5.0)
    model = load_model(trace.write(tmp_path / "t.json"))
    activity = model.activity
    launched_by = {activity.name(i): model.calls.name(int(row)) for i, row in enumerate(activity.launchers)}
    assert launched_by == {"gemm": "aten::mm", "add_kernel": "aten::add"}


def test_one_byte_unit_table_for_long_and_short_sizes() -> None:
    assert [unit for unit, _ in BYTE_UNITS] == ["GiB", "MiB", "KiB"]
    assert (format_bytes(3 << 20), format_bytes_short(3 << 20)) == ("3.00 MiB", "3.0MiB")
    assert (format_bytes(1023), format_bytes_short(1023)) == ("1023 B", "1023B")


def test_the_launcher_column_is_read_as_an_array_in_one_place() -> None:
    """DeviceActivity.launchers is the one reading of the raw ``launcher`` buffer; analysis/diff.py,
    detail.py and timeline.py each had their own ``np.frombuffer`` copy (issue 28 item 8)."""
    from tests.conftest import ROOT

    readers = sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tuiprof").rglob("*.py")
        if "frombuffer(activity.launcher" in path.read_text() or "frombuffer(self.launcher" in path.read_text()
    )
    assert readers == ["tuiprof/analysis/calls.py"]
