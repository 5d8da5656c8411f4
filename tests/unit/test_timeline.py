"""The Timeline on a synthetic GPU trace with hand-computed answers, on real traces,
and as ``tuiprof timeline`` prints it (text and JSON)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

from tests.conftest import ROOT, SHARED_TRACES, needs_shared
from tests.helpers.cli import tuiprof
from tests.helpers.timeline import EVIL, H100, complete_event, synthetic_events
from tuiprof.analysis import analyze
from tuiprof.analysis.timeline import CallTarget, DeviceTarget, TimelineTarget, WindowTarget, build_timeline
from tuiprof.report.timeline import LABEL_WIDTH, render_json, render_text
from tuiprof.trace import load_trace


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    path = tmp_path_factory.mktemp("timeline") / "synthetic.pt.trace.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": synthetic_events()}))
    store = load_trace(path)
    model = analyze(store)
    return path, model, build_timeline(model, store)


US = 1000  # ns


def test_lanes_and_their_order(synthetic) -> None:
    _, _, timeline = synthetic
    assert [lane.key for lane in timeline.lanes] == [
        "step",
        "phase",
        "cpu/10/0",
        "cpu/10/1",
        "cpu/10/2",
        "cpu/11/0",
        "cpu/11/1",
        "gpu/7",
        "gpu/9",
        "memory/CUDA:0",
        "idle",
    ]
    assert (timeline.begin_ns, timeline.end_ns) == (100 * US, 1000 * US)
    assert [(s.name, s.number, s.start_ns, s.end_ns) for s in timeline.steps] == [
        ("ProfilerStep#1", 1, 100 * US, 1000 * US)
    ]


def _spans(timeline, key: str) -> list[tuple[str, int, int]]:
    index = timeline.lane(key).intervals
    return [
        (timeline.names[n], s // US, e // US)
        for n, s, e in zip(index.names, index.starts.tolist(), index.ends.tolist())
    ]


def test_depth_lanes_leave_steps_out(synthetic) -> None:
    _, _, timeline = synthetic
    assert _spans(timeline, "cpu/10/0") == [
        ("aten::conv2d", 150, 350),
        (EVIL, 400, 500),
        ("Optimizer.step#SGD.step", 600, 900),
    ]
    assert _spans(timeline, "cpu/10/1") == [
        ("aten::convolution", 160, 310),
        ("cudaLaunchKernel", 410, 415),
        ("aten::mul_", 650, 700),
    ]
    assert _spans(timeline, "cpu/10/2") == [("cudaLaunchKernel", 170, 180), ("cudaMemcpyAsync", 655, 660)]


def test_phases(synthetic) -> None:
    _, _, timeline = synthetic
    assert _spans(timeline, "phase") == [("forward", 100, 520), ("backward", 520, 580), ("optimizer", 600, 900)]


def test_gpu_kinds_tell_collectives_and_copies(synthetic) -> None:
    _, _, timeline = synthetic
    assert timeline.lane("gpu/7").intervals.kinds.tolist() == [0, 0, 1]  # kernel, kernel, memcpy
    assert timeline.lane("gpu/9").intervals.kinds.tolist() == [3]  # communication


def test_idle_gaps_are_the_window_minus_all_device_activity(synthetic) -> None:
    _, model, timeline = synthetic
    assert _spans(timeline, "idle") == [("idle", 100, 200), ("idle", 600, 700), ("idle", 720, 1000)]
    assert timeline.idle.intervals.busy_ns / US == 480 == model.steps[0].device_idle_us


def test_busy_fraction_per_column(synthetic) -> None:
    _, _, timeline = synthetic
    frames = {f.lane.key: f for f in timeline.frame(100 * US, 1100 * US, 10, timeline.lanes)}  # cells of 100 us
    assert frames["gpu/7"].busy.tolist() == [0, 1, 1, 1, 0.5, 0, 0.2, 0, 0, 0]
    assert frames["gpu/9"].busy.tolist() == [0, 0, 0, 0, 0.7, 0, 0, 0, 0, 0]
    assert frames["idle"].busy.tolist() == [1, 0, 0, 0, 0, 1, 0.8, 1, 1, 0]
    assert frames["cpu/10/0"].busy.tolist() == [0.5, 1, 0.5, 1, 0, 1, 1, 1, 0, 0]
    assert frames["memory/CUDA:0"].values.tolist() == [1000, 1000, 1000, 1500, 1500, 1500, 1500, 1500, 0, 0]
    names = timeline.names
    dominant = frames["gpu/7"].dominant.tolist()
    index = timeline.lane("gpu/7").intervals
    assert [names[index.names[r]] if r >= 0 else None for r in dominant] == [
        None,
        "conv_kernel",
        "conv_kernel",
        "conv_kernel",
        "add_kernel",
        None,
        "Memcpy HtoD (Pageable -> Device)",
        None,
        None,
        None,
    ]


def test_cursor_navigation_and_gaps(synthetic) -> None:
    _, _, timeline = synthetic
    gpu = timeline.lane("gpu/7")
    assert timeline.slice_at(gpu, 250 * US).name == "conv_kernel"
    assert timeline.slice_at(gpu, 600 * US) is None
    assert timeline.next_slice(gpu, 250 * US).name == "add_kernel"
    assert timeline.next_slice(gpu, 250 * US, forward=False).name == "conv_kernel"
    gap = timeline.next_idle_gap(100 * US, min_ns=150 * US)
    assert (gap.start_ns, gap.end_ns) == (720 * US, 1000 * US)
    assert timeline.next_idle_gap(800 * US, min_ns=150 * US, forward=False).start_ns == 720 * US
    assert timeline.next_idle_gap(720 * US, min_ns=150 * US) is None


def test_detail_links_launches_and_kernels(synthetic) -> None:
    _, _, timeline = synthetic
    kernel = timeline.slice_at(timeline.lane("gpu/7"), 250 * US)
    detail = timeline.detail(kernel)
    assert ("launched by", "aten::convolution") in detail.facts
    assert [(s.lane.key, s.name) for s in detail.links] == [("cpu/10/1", "aten::convolution")]
    back = timeline.detail(detail.links[0])
    assert [(s.lane.key, s.name) for s in back.links] == [("gpu/7", "conv_kernel")]
    assert ("inside", "aten::conv2d") in back.facts


def test_range_statistics(synthetic) -> None:
    _, _, timeline = synthetic
    stats = timeline.range_stats(400 * US, 600 * US)
    busy = {lane.key: share for lane, share in stats.busy}
    assert busy["gpu/7"] == 0.75 and busy["gpu/9"] == 0.35 and busy["idle"] == 0
    assert sorted(s.name for s in stats.operators) == sorted(
        [EVIL, "cudaLaunchKernel", "autograd::engine::evaluate_function: AddBackward0"]
    )
    assert {k.name: k.calls for k in stats.kernels} == {"add_kernel": 1, "ncclKernel_AllReduce_RING": 1}


def test_text_output(synthetic) -> None:
    path = synthetic[0]
    result = tuiprof("timeline", str(path), "--width", "10", "--to", "1000", "--lanes", "gpu,idle,memory")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "synthetic.pt.trace.json  0.000ms to 1.000ms, 10 columns of 100us"  # one unit: the ruler's
    assert lines[1].split() == ["0ms", "0.5ms"]
    assert lines[2] == " " * (LABEL_WIDTH + 1) + "┬────┬────"
    assert lines[3:7] == [
        "stream 7".ljust(LABEL_WIDTH) + "  ███▄ ▂",
        "stream 9".ljust(LABEL_WIDTH) + "     ▆",
        "memory CUDA:0".ljust(LABEL_WIDTH) + " ▆▆▆█████",
        "device idle".ljust(LABEL_WIDTH) + " █    █▇██",
    ]
    # idle 480 us over the step's 900 us device window (not over the 1000 us shown)
    assert "peak 1.5KiB" in result.stdout and "device idle 53.33% of the steps' device windows here" in result.stdout


@pytest.mark.parametrize("width", [120, 80, 60, 50, 40, 30, 24])
def test_the_status_line_fits_its_width_and_never_cuts_a_number(synthetic, width) -> None:
    """At 60 columns the line (68 cells with the idle lane) wrapped and pushed the last lane
    off the canvas.  Fitted, it drops the cell size, then cuts the lane's name, then drops
    the cursor's time: a number is there whole or not at all."""
    from tuiprof.report.timeline import window_text

    _, _, timeline = synthetic
    idle = timeline.idle
    line = window_text(timeline, 100 * US, 1000 * US, 42, 700 * US, idle, width).plain
    assert len(line) <= width, line
    assert line.startswith("0.000us to 900.000us")  # the window, always
    cell, cursor = "cell 21.4us", "cursor 600.000us"  # 900 us in 42 columns, 3 digits; 700 us from the start at 100
    for number in (cell, cursor):
        head = number.split()[0]
        assert number in line or head not in line, line
    if width >= 80:
        assert line.endswith(f"{cell} · {cursor} · device idle")
    if width >= 60:
        assert line.endswith(f"{cursor} · device idle")


def test_launched_span_is_the_device_work_of_a_call_and_the_calls_inside_it(tmp_path) -> None:
    """aten::linear [10, 40) launches through aten::addmm (GEMM at [600, 680)) and a bias add
    of its own ([700, 705)); a call on another thread at the same time launches [650, 900),
    which is not linear's; aten::relu [50, 60) launches nothing."""
    from tests.helpers.gpu_trace import EPOCH_US, GpuTrace

    trace = GpuTrace()
    trace.step(1, 0, 1000)
    linear = trace.op("aten::linear", 10, 30)
    addmm = trace.op("aten::addmm", 12, 20)
    trace.launch(addmm, "gemm_kernel", 14, 5, 600, 80)
    trace.launch(linear, "bias_kernel", 35, 2, 700, 5)
    other = trace.op("aten::mul", 15, 10, tid=99)
    trace.launch(other, "mul_kernel", 16, 2, 650, 250, tid=99, stream=8)
    trace.op("aten::relu", 50, 10)
    model = analyze(load_trace(trace.write(tmp_path / "launches.pt.trace.json")))
    timeline = build_timeline(model)
    row = {model.calls.name(r): r for r in range(len(model.calls))}
    at = EPOCH_US * US
    assert timeline.launched_span(row["aten::linear"]) == (at + 600 * US, at + 705 * US)
    assert timeline.launched_span(row["aten::addmm"]) == (at + 600 * US, at + 680 * US)
    assert timeline.launched_span(row["aten::relu"]) is None


def test_names_in_boxes_and_escaped(synthetic) -> None:
    path = synthetic[0]
    result = tuiprof(
        "timeline", str(path), "--width", "40", "--from", "300", "--to", "400", "--lanes", "cpu", "--depth", "1"
    )
    # --from/--to count from the trace's first event (100 us): 400-500 us, where EVIL fills all 40 columns
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout
    line = next(line for line in result.stdout.splitlines() if line.startswith("thread 10"))
    cells = line[LABEL_WIDTH + 1 :]
    shown = "aten::add_\\x1b[2J"
    assert cells == "[" + shown + "─" * (40 - 2 - len(shown)) + "]"
    assert line.startswith("thread 10 +2")


def test_json_output(synthetic) -> None:
    path = synthetic[0]
    result = tuiprof(
        "timeline", str(path), "--format", "json", "--width", "5", "--from", "0", "--to", "500", "--lanes", "gpu,step"
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["from_us"], data["to_us"], data["columns"], data["cell_us"]) == (0, 500, 5, 100)  # 100-600 us
    lanes = {lane["key"]: lane for lane in data["lanes"]}
    assert lanes["gpu/7"]["busy"] == [0, 1, 1, 1, 0.5]
    assert lanes["gpu/7"]["events"] == [None, "conv_kernel", "conv_kernel", "conv_kernel", "add_kernel"]
    assert lanes["phase"]["events"] == ["forward", "forward", "forward", "forward", "backward"]
    assert lanes["gpu/9"]["events"] == [None, None, None, None, "ncclKernel_AllReduce_RING"]


def test_a_device_never_idle_has_an_empty_idle_lane(tmp_path) -> None:
    """No steps: the window is the device's span, all busy; the lane is empty, not an error."""
    path = tmp_path / "busy.json"
    events = [
        complete_event("kernel", "ncclKernel_AllReduce", 100, 50, tid=0, pid=0),
        complete_event("cpu_op", "record_param_comms", 200, 100),
    ]
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    result = tuiprof("timeline", str(path), "--width", "8", "--lanes", "gpu,idle")
    assert result.returncode == 0, result.stderr
    assert [line.rstrip() for line in result.stdout.splitlines()[3:5]] == [
        "stream ?".ljust(LABEL_WIDTH) + " ██",
        "device idle",
    ]
    assert "device idle 0.00% of the device's span here (no steps)" in result.stdout


@pytest.mark.parametrize(
    "args",
    [
        ("--step", "7"),
        ("--from", "500", "--to", "100"),
        ("--lanes", "cpu,disk"),
        ("--width", "0"),
        ("--from", "nan"),
        ("--depth", "0"),
        ("--from", "0", "--to", "0.001", "--width", "10"),
    ],
)
def test_bad_options_are_one_line_and_exit_2(synthetic, args) -> None:
    result = tuiprof("timeline", str(synthetic[0]), *args)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("tuiprof: "), result.stderr


def test_timeline_imports_neither_torch_nor_textual(synthetic) -> None:
    code = (
        "import sys; sys.argv = ['tuiprof', 'timeline', %r, '--width', '20'];"
        "from tuiprof.cli import main; rc = main();"
        "print('HEAVY', sorted(m for m in ('torch', 'torchvision', 'textual') if m in sys.modules))"
    ) % str(synthetic[0])
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr


MI300 = SHARED_TRACES / "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz"


@pytest.fixture(scope="module")
def h100():
    if not H100.exists():
        pytest.skip("../shared/traces not present")
    store = load_trace(H100)
    model = analyze(store)
    return model, build_timeline(model, store)


@needs_shared
def test_h100_idle_lane_equals_the_steps_view(h100) -> None:
    model, timeline = h100
    (step,) = model.steps
    assert timeline.idle.intervals.busy_ns / 1000 == pytest.approx(step.device_idle_us, abs=1e-3)
    window = timeline.steps[0]
    # Over the step's whole window, the idle lane's busy fraction is the idle share of that window.
    (frame,) = timeline.frame(window.start_ns, window.end_ns, 1, [timeline.idle])
    assert frame.busy[0] * (window.end_ns - window.start_ns) / 1000 == pytest.approx(step.device_idle_us, abs=1e-3)


@needs_shared
def test_h100_frame_matches_brute_force_and_renders(h100) -> None:
    """Every lane at 200 columns against a plain-Python union of its intervals."""
    _, timeline = h100
    columns = 200
    edges = timeline.edges(timeline.begin_ns, timeline.end_ns, columns)
    for frame in timeline.frame(timeline.begin_ns, timeline.end_ns, columns, timeline.lanes):
        index = frame.lane.intervals
        if index is None:
            continue
        spans = list(zip(index.starts.tolist(), index.ends.tolist()))
        for column in range(0, columns, 17):
            a, b = int(edges[column]), int(edges[column + 1])
            covered = np.zeros(b - a, dtype=bool)
            for s, e in spans:
                if e > a and s < b:
                    covered[max(s, a) - a : min(e, b) - a] = True
            assert frame.busy[column] == pytest.approx(covered.mean(), abs=1e-12), (frame.lane.key, column)
    lanes = timeline.select()
    data = render_json(timeline, timeline.begin_ns, timeline.end_ns, columns, lanes)
    assert [lane["key"] for lane in data["lanes"]] == [lane.key for lane in lanes]
    text = render_text(timeline, timeline.begin_ns, timeline.end_ns, columns, lanes)
    assert "[ProfilerStep#6" in text and "stream 7" in text and "device idle" in text


@needs_shared
def test_mi300_timeline_without_steps() -> None:
    result = tuiprof("timeline", str(MI300), "--width", "120", "--lanes", "gpu,idle")
    assert result.returncode == 0, result.stderr
    assert "stream" in result.stdout and "device idle" in result.stdout


def _idle_shares(path, model, timeline) -> dict[str, str]:
    """The idle share as each place prints it, whole trace and per step."""
    from tuiprof.report.findings import findings
    from tuiprof.report.timeline import range_text

    lanes = timeline.select(["idle"])

    def legend(text: str) -> str:
        return next(line for line in text.splitlines() if line.startswith("device idle ") and "%" in line)

    shares = {"timeline": legend(render_text(timeline, timeline.begin_ns, timeline.end_ns, 10, lanes))}
    shares["range"] = range_text(timeline, timeline.range_stats(timeline.begin_ns, timeline.end_ns)).plain.splitlines()[
        2
    ]
    shares["finding"] = next(f.text for f in findings(model) if f.id == "gpu-idle")
    for step in timeline.steps:
        shares[step.name] = legend(render_text(timeline, step.start_ns, step.end_ns, 10, lanes, step=step.name))
    return shares


def _expected_idle(path) -> tuple[float, dict[str, float]]:
    """Idle % by docs/columns.md's definition in plain Python over the raw events: per step, its
    device window (tests/helpers/oracle.py) minus the union of all device activity, over the window;
    over all steps, the sum of their idle over the sum of their windows."""
    from tests.helpers.oracle import covered_ns, recompute, step_device_windows

    device = recompute(path).device
    windows = {name: w for name, w in step_device_windows(path).items() if w}
    idle = {name: high - low - covered_ns(device, low, high) for name, (low, high) in windows.items()}
    total = 100 * sum(idle.values()) / sum(high - low for low, high in windows.values())
    return total, {name: 100 * idle[name] / (high - low) for name, (low, high) in windows.items()}


def _assert_one_idle_share(path, model, timeline, by_hand: dict[str, float] | None = None) -> None:
    from tuiprof.report.views import build_step_rows

    total, per_step = _expected_idle(path)
    if by_hand is not None:
        assert {"all": round(total, 6), **{k: round(v, 6) for k, v in per_step.items()}} == by_hand
    shares = _idle_shares(path, model, timeline)
    assert shares["timeline"] == f"device idle {total:.2f}% of the steps' device windows here"
    assert shares["range"] == shares["timeline"]
    assert f"GPU idle {total:.0f} % of the steps' device windows" in shares["finding"]
    rows = {row["name"]: row["idle_pct"] for row in build_step_rows(model, None)}
    for name, pct in per_step.items():
        assert rows[name] == pytest.approx(pct, abs=1e-9)
        assert shares[name] == f"device idle {pct:.2f}% of {name}'s device window"


def test_idle_share_is_the_same_in_timeline_findings_and_steps(tmp_path) -> None:
    """Item 7 of issue 24: one idle share.  Lagging two steps (tests/helpers/gpu_trace.py): step 1's
    window [0, 150) us holds 58 us idle, step 2's [100, 200) 50 us: 38.67 % and 50 %, and
    (58 + 50) / (150 + 100) = 43.2 % over both, in the timeline's legend and range detail,
    the Overview's finding and the Steps rows alike (not 49 % of the 200 us shown)."""
    from tests.helpers.gpu_trace import lagging_two_steps

    path = lagging_two_steps().write(tmp_path / "lagging.json")
    store = load_trace(path)
    model = analyze(store)
    _assert_one_idle_share(
        path,
        model,
        build_timeline(model, store),
        {"all": 43.2, "ProfilerStep#1": round(100 * 58 / 150, 6), "ProfilerStep#2": 50.0},
    )


@needs_shared
def test_h100_idle_share_is_the_same_in_timeline_findings_and_steps(h100) -> None:
    model, timeline = h100
    _assert_one_idle_share(H100, model, timeline)


def _sync_and_loading_gap():
    """One step [0, 3400) us; the device runs gemm [40, 1000) and add [3200, 3300), idle
    [1000, 3200) in between while the main thread loads data, runs Python and syncs::

        enumerate(DataLoader)#...__next__ [1000, 1800)  > aten::stack [1100, 1400)
        (no operator)                      [1800, 1900)
        aten::item [1900, 3100) > aten::_local_scalar_dense [1910, 3090) > cudaStreamSynchronize [1930, 3080)
        (no operator)                      [3100, 3150)
        aten::add  [3150, 3200)            launches the add kernel that ends the gap
      thread 4243: autograd::engine::evaluate_function: MmBackward0 [2000, 2300)

    In the gap: aten::item 1200 us (sync), the DataLoader 800 (data loading: its
    stack child counts under it), MmBackward0 300, no operator 150 on the main thread
    (Python; the thread that launched the kernel ending the gap), aten::add 50."""
    from tests.helpers.gpu_trace import GpuTrace

    trace = GpuTrace()
    trace.step(1, 0, 3400)
    mm = trace.op("aten::mm", 10, 30)
    trace.launch(mm, "gemm", 15, 5, 40, 960)
    trace.op("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 1000, 800)
    trace.op("aten::stack", 1100, 300)
    trace.op("aten::item", 1900, 1200)
    trace.op("aten::_local_scalar_dense", 1910, 1180)
    trace.op("cudaStreamSynchronize", 1930, 1150)
    add = trace.op("aten::add", 3150, 50)
    trace.launch(add, "add_kernel", 3160, 5, 3200, 100)
    trace.op("autograd::engine::evaluate_function: MmBackward0", 2000, 300, tid=4243)
    return trace


def test_an_idle_gap_says_what_the_cpu_did(tmp_path) -> None:
    from tuiprof.analysis.gap_activity import GapActivity
    from tuiprof.report.timeline import slice_text

    path = _sync_and_loading_gap().write(tmp_path / "gap.json")
    store = load_trace(path)
    model = analyze(store)
    timeline = build_timeline(model, store)
    gap = timeline.longest_idle_gap(timeline.begin_ns, timeline.end_ns)
    epoch = timeline.begin_ns  # the step starts at 0
    assert (gap.start_ns - epoch, gap.end_ns - epoch) == (1000 * US, 3200 * US)
    assert timeline.detail(gap).cpu == [
        GapActivity("aten::item", 1200 * US, "sync"),
        GapActivity("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", 800 * US, "data loading"),
        GapActivity("autograd::engine::evaluate_function: MmBackward0", 300 * US),
        GapActivity("no operator", 150 * US, "Python"),
        GapActivity("aten::add", 50 * US),
    ]
    assert slice_text(timeline, timeline.detail(gap)).plain.splitlines()[2] == (
        "CPU: aten::item 1.20ms (sync) · enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__ 800us (data loading)"
        " · autograd::engine::evaluate_function: MmBackward0 300us · +2 more"
    )
    result = tuiprof("timeline", str(path), "--width", "43", "--lanes", "gpu,idle")  # 60 characters
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-4:] == [
        "longest idle gap 2.2ms at 1.000ms, CPU in it:",
        "   1.20ms sync         aten::item",
        "    800us data loading enumerate(DataLoad…oaderIter.__next__",  # names cut by the one rule (report.names)
        "    300us              …::evaluate_function: MmBackward0",
    ]
    assert all(len(line) <= 60 for line in result.stdout.splitlines())


def test_timeline_targets_are_frozen_values_told_apart_by_their_type() -> None:
    """What ``T`` hands the Timeline (issue 28 item 5): a call row, a device event index or a
    step's window, each a frozen value named by its fields, not a tuple read by position."""
    call = CallTarget(3)
    assert call == CallTarget(row=3) and hash(call) == hash(CallTarget(3))
    assert call != DeviceTarget(3)  # a call row and a device event index are different targets
    assert WindowTarget(10, 20) == WindowTarget(start_ns=10, end_ns=20) != WindowTarget(10, 21)
    assert all(isinstance(t, TimelineTarget) for t in (call, DeviceTarget(5), WindowTarget(10, 20)))
    assert not isinstance(("call", 3), TimelineTarget)
    with pytest.raises(FrozenInstanceError):
        call.row = 4  # type: ignore[misc]
    match WindowTarget(10, 20):
        case WindowTarget(start, end):
            assert (start, end) == (10, 20)
