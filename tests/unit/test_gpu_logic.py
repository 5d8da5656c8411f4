"""GPU-side numbers on synthetic traces with hand-computed answers (tests/helpers/gpu_trace.py)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import SHARED_TRACES, needs_shared
from tests.helpers.gpu_trace import GpuTrace, lagging_two_steps, launch_bound_step, rocm_marker_steps
from tests.helpers.oracle import _read, covered_ns, recompute, step_device_windows, to_ns
from tuiprof.analysis import load_model
from tuiprof.report.details import step_text
from tuiprof.report.findings import findings
from tuiprof.report.views import TRACE_VIEWS, ViewOptions, build_launch_rows, build_step_rows


@pytest.fixture(scope="module")
def lagging(tmp_path_factory):
    return load_model(lagging_two_steps().write(tmp_path_factory.mktemp("gpu") / "lagging.json"))


def test_steps_by_hand(lagging) -> None:
    """Idle is the window minus everything that ran in it, the previous step's NCCL kernel included."""
    rows = {r["name"]: r for r in build_step_rows(lagging, None)}
    expected = {
        "ProfilerStep#1": dict(
            kernel_us=45.0, memcpy_us=10.0, memset_us=2.0, communication_us=40.0, device_idle_us=58.0
        ),
        "ProfilerStep#2": dict(
            kernel_us=15.0, memcpy_us=0.0, memset_us=0.0, communication_us=40.0, device_idle_us=50.0
        ),
    }
    for name, columns in expected.items():
        assert {key: rows[name][key] for key in columns} == columns, name
    assert rows["ProfilerStep#1"]["idle_pct"] == pytest.approx(100 * 58 / 150)
    assert rows["ProfilerStep#2"]["idle_pct"] == pytest.approx(50.0)
    assert [s.device_window_us for s in lagging.steps] == [150.0, 100.0]


def test_steps_show_the_device_window_the_device_columns_are_measured_in(lagging, resnet_model) -> None:
    """Step 1's device columns (45 + 10 + 2 + 40 us, 58 us idle) add up to its 150 us device
    window, not to its CPU duration: the window stands beside the duration, in the table and
    the detail pane.  A CPU-only trace has no window and no device columns at all."""
    steps = TRACE_VIEWS["steps"]
    keys = [c.key for c in steps.visible_columns(ViewOptions(), lagging)]
    assert keys[:5] == [
        "name",
        "duration_us",
        "device_window_us",
        "device_idle_us",
        "idle_pct",
    ]  # idle stays at 60 cols
    row = build_step_rows(lagging, None)[0]
    assert row["device_window_us"] == 150.0 and row["duration_us"] < row["device_window_us"]
    assert "device window 150.000us: kernels 45.000us" in step_text(lagging.steps[0]).plain
    cpu_keys = [c.key for c in steps.visible_columns(ViewOptions(), resnet_model)]
    assert cpu_keys == ["name", "duration_us", "data_loading_us"]


def test_kernels_by_hand(lagging) -> None:
    table = {k.name: k for k in lagging.kernels}
    expected = {
        # name: (kind, calls, total us, grid, block, occupancy, launcher)
        "gemm_kernel": ("kernel", 1, 40.0, "128x1x1", "256x1x1", 50.0, "aten::addmm"),
        "ncclKernel_AllReduce_RING_LL_Sum_float": ("kernel", 1, 40.0, "2x1x1", "512x1x1", 12.5, "nccl:all_reduce"),
        "Memcpy HtoD (Pageable -> Device)": ("memcpy", 1, 10.0, "", "", None, "aten::copy_"),
        "elementwise_mul": ("kernel", 1, 10.0, "64x1x1", "128x1x1", 25.0, "aten::mul"),
        "elementwise_add": ("kernel", 1, 5.0, "", "", None, "aten::add"),
        "Memset (Device)": ("memset", 1, 2.0, "", "", None, "aten::zero_"),
    }
    assert set(table) == set(expected)
    for name, (kind, calls, total, grid, block, occupancy, launcher) in expected.items():
        k = table[name]
        assert (k.kind, k.calls, k.device_total_us, k.grid, k.block, k.occupancy_pct, k.launcher) == (
            kind,
            calls,
            total,
            grid,
            block,
            occupancy,
            launcher,
        ), name


def test_launch_list_names_each_launcher(lagging) -> None:
    for kernel in lagging.kernels:
        rows = build_launch_rows(lagging, kernel.rows)
        assert [r["launcher"] for r in rows] == [kernel.launcher], kernel.name
    gemm = next(k for k in lagging.kernels if k.name == "gemm_kernel")
    (row,) = build_launch_rows(lagging, gemm.rows)
    assert (row["start_us"], row["duration_us"], row["stream"], row["grid"], row["block"]) == (
        40.0,
        40.0,
        "7",
        "128x1x1",
        "256x1x1",
    )


def test_operator_device_times_by_hand(lagging) -> None:
    ops = {s.name: s for s in lagging.operators()}
    expected = {
        "aten::addmm": 40.0,
        "nccl:all_reduce": 40.0,
        "aten::copy_": 10.0,
        "aten::mul": 10.0,
        "aten::add": 5.0,
        "aten::zero_": 2.0,
    }
    for name, device_us in expected.items():
        assert (ops[name].self_device_us, ops[name].device_total_us) == (device_us, device_us), name
    assert ops["ProfilerStep*"].device_total_us == 107.0 and ops["cudaLaunchKernel"].calls == 4


def _tables(model) -> tuple[dict, dict]:
    return (
        {k.name: (k.launcher, k.device_total_us) for k in model.kernels},
        {s.name: (s.self_device_us, s.device_total_us) for s in model.operators()},
    )


def test_fake_external_ids_are_detected_and_joined_through_launches(tmp_path, lagging) -> None:
    """Launches and device events with External id == correlation (1001...): the ids name
    no operator here, or the wrong one once operators reach that range."""
    trace = GpuTrace(fake_external_ids=True, _next_external=1001)  # operators' ids collide with correlations
    model = load_model(lagging_two_steps(trace).write(tmp_path / "fake.json"))
    assert model.external_ids_ignored and not lagging.external_ids_ignored
    assert _tables(model) == _tables(lagging)


def test_external_id_of_an_operator_not_enclosing_the_launch_is_not_used(tmp_path, lagging) -> None:
    trace = GpuTrace()
    trace.step(1, 0, 100)
    copy = trace.op("aten::copy_", 5, 10)
    addmm = trace.op("aten::addmm", 20, 20)
    trace.launch(addmm, "gemm_kernel", 22, 5, 40, 40, device_external_id=copy)  # names aten::copy_
    model = load_model(trace.write(tmp_path / "wrong.json"))
    assert [k.launcher for k in model.kernels] == ["aten::addmm"]
    ops = {s.name: s for s in model.operators()}
    assert ops["aten::addmm"].self_device_us == 40.0 and ops["aten::copy_"].self_device_us == 0.0


def test_gpu_idle_finding(lagging, tmp_path) -> None:
    found = {f.id: f for f in findings(lagging)}
    assert "gpu-idle" in found and "43 %" in found["gpu-idle"].text  # (58 + 50) / (150 + 100)
    busy = GpuTrace()
    busy.step(1, 0, 100)
    op = busy.op("aten::addmm", 0, 100)
    busy.launch(op, "gemm_kernel", 1, 2, 3, 97)
    assert "gpu-idle" not in {f.id for f in findings(load_model(busy.write(tmp_path / "busy.json")))}


def test_launch_bound_finding(lagging, tmp_path) -> None:
    model = load_model(launch_bound_step().write(tmp_path / "launches.json"))
    found = {f.id: f for f in findings(model)}
    assert (
        "launch-bound" in found and "80 %" in found["launch-bound"].text and "10 launches" in found["launch-bound"].text
    )
    assert "launch-bound" not in {f.id for f in findings(lagging)}


def _windows(model) -> dict[str, tuple[int, int] | None]:
    return {
        s.name: (s.device_window_start_ns, s.device_window_start_ns + round(s.device_window_us * 1000))
        if s.device_window_us
        else None
        for s in model.steps
    }


def test_a_step_window_starts_at_its_first_device_work_when_the_annotation_is_a_marker(tmp_path) -> None:
    """ROCm: the step's gpu_user_annotation is an 18 us marker 2.2 ms into the step's work.
    The window is built here in plain Python over the raw events (tests/helpers/oracle.py) and by
    hand (tests/helpers/gpu_trace.py: [150, 2600) us); every device column is measured in it."""
    path = rocm_marker_steps().write(tmp_path / "rocm.json")
    model = load_model(path)
    expected = step_device_windows(path)
    assert _windows(model) == expected
    low, high = expected["ProfilerStep#1"]
    assert high - low == 2_450_000  # by hand; the annotation alone starts 2.2 ms later
    device = recompute(path).device
    for step in model.steps:
        low, high = expected[step.name]
        assert (step.kernel_us, step.memcpy_us, step.device_idle_us) == (2050.0, 300.0, 100.0), step.name
        assert step.device_idle_us * 1000 == high - low - covered_ns(device, low, high)


@needs_shared
@pytest.mark.parametrize(
    "name",
    [
        "hta__amd_trace__mi250_minitoy_train_ROCm6_2_kineto.json.gz",
        "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz",  # no ProfilerStep: no windows
        "kineto__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
    ],
)
def test_step_windows_on_real_traces_equal_the_plain_python_rule(name) -> None:
    path = SHARED_TRACES / name
    assert _windows(load_model(path)) == step_device_windows(path)


LEGACY_RESNET50 = "kineto__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
LEGACY_KINDS = {"Kernel": "kernel", "Memcpy": "memcpy", "Memset": "memset"}  # 2021 Kineto categories


def _legacy_trace(path):
    """A 2021-format trace (categories Operator/Runtime/Kernel/Memcpy/Memset, 'external id',
    string tids): one step [0, 100) us launching a 10 us memcpy, a 30 us kernel, a 2 us memset."""
    events = [
        {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 7, "tid": "7", "ts": 0, "dur": 100, "args": {}}
    ]
    for number, (op, runtime, cat, name, ts, dur) in enumerate(
        [
            ("aten::copy_", "cudaMemcpyAsync", "Memcpy", "Memcpy HtoD (Pageable -> Device)", 20, 10),
            ("aten::conv2d", "cudaLaunchKernel", "Kernel", "conv_kernel", 40, 30),
            ("aten::zero_", "cudaMemsetAsync", "Memset", "Memset (Device)", 75, 2),
        ]
    ):
        start = 5 + 20 * number
        events += [
            {
                "ph": "X",
                "cat": "Operator",
                "name": op,
                "pid": 7,
                "tid": "7",
                "ts": start,
                "dur": 10,
                "args": {"external id": number + 1},
            },
            {
                "ph": "X",
                "cat": "Runtime",
                "name": runtime,
                "pid": 7,
                "tid": "7",
                "ts": start + 1,
                "dur": 5,
                "args": {"correlation": 100 + number, "external id": number + 1},
            },
            {
                "ph": "X",
                "cat": cat,
                "name": name,
                "pid": 0,
                "tid": "stream 7",
                "ts": ts,
                "dur": dur,
                "args": {"device": 0, "stream": 7, "correlation": 100 + number, "external id": number + 1},
            },
        ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return path


def _raw_device_us(path) -> dict[str, float]:
    """Device time per kind: the plain sum of the raw events' durations (us)."""
    totals = dict.fromkeys(LEGACY_KINDS.values(), 0)
    for event in _read(path):
        if event.get("ph") == "X" and event.get("cat") in LEGACY_KINDS:
            totals[LEGACY_KINDS[event["cat"]]] += event["dur"]
    return {kind: float(total) for kind, total in totals.items()}


def _device_us_by_kind(model) -> dict[str, float]:
    totals = dict.fromkeys(LEGACY_KINDS.values(), 0.0)
    for kernel in model.kernels:
        totals[kernel.kind] += kernel.device_total_us
    return totals


def test_legacy_memcpy_and_memset_categories_are_not_kernels(tmp_path) -> None:
    """Kineto's 2021 categories `Memcpy`/`Memset` are copies and sets: coded as kernels,
    memcpy would read 0 in the Kernels kinds and the Steps view."""
    path = _legacy_trace(tmp_path / "legacy.json")
    model = load_model(path)
    assert _device_us_by_kind(model) == _raw_device_us(path) == {"kernel": 30.0, "memcpy": 10.0, "memset": 2.0}
    (step,) = model.steps
    assert (step.kernel_us, step.memcpy_us, step.memset_us) == (30.0, 10.0, 2.0)


@needs_shared
def test_legacy_resnet50_memcpy_totals_equal_the_raw_events() -> None:
    path = SHARED_TRACES / LEGACY_RESNET50
    model = load_model(path)
    raw = _raw_device_us(path)
    assert raw["memcpy"] > 0 and _device_us_by_kind(model) == pytest.approx(raw, abs=1e-6)
    windows = step_device_windows(path)
    copies = [
        (to_ns(e["ts"]), to_ns(e["ts"]) + to_ns(e["dur"]))
        for e in _read(path)
        if e.get("ph") == "X" and e.get("cat") == "Memcpy"
    ]
    memcpy = {s.name: s.memcpy_us for s in model.steps}
    assert memcpy == {name: covered_ns(copies, *windows[name]) / 1000 for name in memcpy}
    assert any(memcpy.values())
