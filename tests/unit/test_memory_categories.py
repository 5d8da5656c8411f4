"""What fills memory at the peak (issue 25): torch's categories saved by a capture,
replayed without torch, broken down by module; and what a file without them supports.

The oracles: torch's own MemoryProfileTimeline on the very profile a capture saved
(its ``_coalesce_timeline``, the code behind ``export_memory_timeline``); the models'
own parameters; hand-counted saved tensors of a Linear + ReLU chain; synthetic files
whose answers are known by construction.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from tests.conftest import ROOT
from tests.helpers.gpu_trace import GpuTrace
from tests.helpers.memory_categories import CODE, device_categories
from tuiprof.analysis import load_model
from tuiprof.analysis.memory_categories import categorised_memory
from tuiprof.trace.decode import DecodeReport
from tuiprof.trace.live import (
    CATEGORY_NAMES,
    LiveFacts,
    MemoryCategories,
    decode_live_facts,
    decode_memory_categories,
)

SHIPPED = ROOT / "tests" / "data" / "mlp_memory_categories.pt.trace.json.gz"


# ------------------------------------------------------------------ the replay, by construction (no torch)


def test_replay_takes_the_state_after_each_microsecond_and_the_first_highest_point() -> None:
    """A parameter from before the capture (100), an activation made (50) and freed, a gradient
    (70) made and a temporary (1,000) made and freed inside one microsecond: torch's coalescing
    never sees the temporary; the peak is 100 + 50 + 70 = 220, first reached at 12.000 us."""
    device = device_categories(
        [
            (-1, 100, "parameter", 0),
            (10_000_000, 50, "activation", 1),
            (10_000_100, 1000, "temporary", 2),  # one microsecond: +1000 then -1000
            (10_000_900, -1000, "temporary", 2),
            (12_000_000, 70, "gradient", 3),
            (13_000_000, -50, "activation", 1),
            (14_000_000, 50, "activation", 4),
        ],
        preexisting=1,
    )
    [memory] = categorised_memory(MemoryCategories(devices=[device]), base_time_ns=9_000_000)
    assert memory.peak_bytes == 220
    assert memory.peak_ns == 12_000_000 - 9_000_000  # on the trace's clock
    assert memory.peak_by_category == {
        **dict.fromkeys(CATEGORY_NAMES, 0),
        "parameter": 100,
        "activation": 50,
        "gradient": 70,
    }
    live = {(t.category, t.bytes, t.module, t.made_ns) for t in memory.live_at_peak}
    assert live == {
        ("parameter", 100, "Linear_0", -1),
        ("activation", 50, "", 1_000_000),
        ("gradient", 70, "", 3_000_000),
    }


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda d: d.update(category=[99] * len(d["category"])), "category code out of range"),
        (lambda d: d.update(bytes=d["bytes"][:-1]), "different lengths"),
        (lambda d: d.update(tensor=[10**6] * len(d["tensor"])), "tensor index out of range"),
        (lambda d: d.update(categories=["parameter", "weights"]), "unknown category name"),
        (lambda d: d.update(delta_ns=[-5] * len(d["delta_ns"])), "time going backwards"),
        # found by scripts/fuzz.py --surface diff (issue 42): OverflowError in the replay, exit 1
        (lambda d: d.update(bytes=[2**64] * len(d["bytes"])), "bytes past 2**52"),
        (lambda d: d.update(bytes=[-(2**60)] * len(d["bytes"])), "bytes past 2**52"),
        (lambda d: d.update(delta_ns=[2**63] * len(d["delta_ns"])), "a time past 2**62 ns"),
        (lambda d: d.update(first_ns=-(2**70)), "a time past 2**62 ns"),
    ],
)
def test_damaged_categories_are_noted_and_ignored(damage, says) -> None:
    document = msgspec.json.decode(
        msgspec.json.encode(MemoryCategories(devices=[device_categories([(10_000_000, 8, "input", 0)])]))
    )
    damage(document["devices"][0])
    facts = LiveFacts(memory_categories=msgspec.Raw(msgspec.json.encode(document)))
    report = DecodeReport()
    assert decode_memory_categories(facts, report) is None
    assert any(says in problem for problem in report.problems)


def test_newer_categories_are_ignored_and_the_rest_of_the_trace_loads(tmp_path) -> None:
    document = json.loads(gzip.decompress(SHIPPED.read_bytes()))
    document["tuiprofLive"]["memory_categories"]["version"] = 99
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(document))
    model = load_model(path)
    assert model.memory_categories == () and any("newer" in p for p in model.report.problems)
    assert model.modules.roots and model.memory  # the trace itself is whole


# ------------------------------------------------------------------ the shipped capture (no torch)


def test_shipped_capture_reopens_with_its_categories() -> None:
    """The MLP capture (scripts/make_memory_category_trace.py): the breakdown needs no torch,
    and blocks.0, whose ReLU output (batch 256 x 512 floats) is kept for backward, holds the most activations."""
    model = load_model(SHIPPED)
    breakdown = model.memory_breakdown
    assert breakdown.memory is not None and not model.report.problems
    assert breakdown.peak_bytes == sum(size for _, size in breakdown.by_category)
    assert breakdown.most_activations.label == "blocks.0 (Sequential)"
    assert breakdown.most_activations.bytes["activation"] == 256 * 512 * 4
    parameters = 128 * 512 + 512 + 512 * 256 + 256 + 256 * 10 + 10
    assert breakdown.memory.peak_by_category["parameter"] == 4 * parameters
    assert breakdown.memory.peak_by_category["optimizer_state"] == 4 * parameters  # one momentum buffer each


def test_summary_memory_categories_json() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(SHIPPED), "--view", "memory-categories", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    rows = json.loads(run.stdout)
    assert [r["category"] for r in rows] == sorted(
        CATEGORY_NAMES, key=lambda c: -next(r["bytes_at_peak"] for r in rows if r["category"] == c)
    )
    assert {r["category"] for r in rows} == set(CATEGORY_NAMES)
    assert sum(r["share"] for r in rows) == pytest.approx(100, abs=0.01)  # shares as exported (rounded)
    assert all(r["step"] == rows[0]["step"] and r["step"].endswith("of step 1") for r in rows)
    modules = json.loads(
        subprocess.run(
            [sys.executable, "-m", "tuiprof", "summary", str(SHIPPED), "--view", "memory-modules", "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        ).stdout
    )
    head = next(r for r in modules if r["module"].strip() == "head (Linear)")
    assert head["parameter_bytes"] == 4 * (256 * 10 + 10)


# ------------------------------------------------------------------ files without categories (item 5)


def _allocator_only(path: Path) -> Path:
    """Allocations at known places: 1,000 B in Linear_0's aten::linear, 3,000 B in ReLU_0's
    aten::relu, 500 B there freed again, 2,000 B in aten::mul outside every module (the peak,
    6,000 B), then the linear's freed.  Live at the peak: 3,000 + 2,000 + 1,000."""
    trace = GpuTrace()
    trace.step(1, 0, 100)
    net = trace.module("Net_0", 1, 75)
    trace.module("Linear_0", 10, 30, parent=net)
    trace.op("aten::linear", 11, 28)
    trace.memory(15, 1000, 1000, addr=0x1000)
    trace.module("ReLU_0", 50, 20, parent=net)
    trace.op("aten::relu", 51, 18)
    trace.memory(55, 3000, 4000, addr=0x2000)
    trace.memory(60, 500, 4500, addr=0x3000)
    trace.memory(65, -500, 4000, addr=0x3000)
    trace.op("aten::mul", 80, 10)
    trace.memory(85, 2000, 6000, addr=0x4000)
    trace.memory(95, -1000, 5000, addr=0x1000)
    return trace.write(path)


def test_file_without_categories_gives_allocations_live_at_the_peak_by_operator_and_module(tmp_path) -> None:
    path = _allocator_only(tmp_path / "allocator.json")
    run = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--view", "memory-categories", "--format", "json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert "need a tuiprof capture" in run.stderr
    rows = [(r["operator"], r["module"], r["bytes"], r["count"]) for r in json.loads(run.stdout)]
    assert rows == [
        ("aten::relu", "ReLU_0", 3000, 1),
        ("aten::mul", "", 2000, 1),
        ("aten::linear", "Linear_0", 1000, 1),
    ]
    modules = load_model(path).memory_breakdown.modules
    assert {(m.label, m.total) for m in modules} == {("Net_0", 4000), ("Linear_0", 1000), ("ReLU_0", 3000)}


# ------------------------------------------------------------------ captures, against torch (needs torch)


def _capture(tmp_path, monkeypatch, model_name: str, batch: int, shape: str, active: int, device: str = "cpu"):
    """A live capture (tuiprof's loop, SGD with momentum, one warmup and ``active`` steps) and
    torch's own per-category bytes at the peak computed on the same profiler object."""
    torch = pytest.importorskip("torch")
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    from tuiprof.capture import session
    from tuiprof.capture.config import CaptureConfig

    torch_peak: dict[str, int] = {}
    original = session.memory_categories_member

    def with_torch_oracle(prof, *args):
        member = original(prof, *args)
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline(
            "cuda:0" if device == "cuda" else "cpu"
        )
        totals = [sum(point[1:]) for point in sizes]
        peak = sizes[totals.index(max(totals))]  # the first highest point, as numpy's argmax
        torch_peak.update(zip(CATEGORY_NAMES, peak[1:]))  # torch's column order is CATEGORY_NAMES'
        return member

    monkeypatch.setattr(session, "memory_categories_member", with_torch_oracle)
    torch.manual_seed(0)
    config = CaptureConfig(
        model=model_name,
        device=device,
        batch_size=batch,
        input_shape=shape,
        wait=1,
        warmup=1,
        active=active,
        with_flops=False,
    )
    path = tmp_path / f"{batch}.pt.trace.json.gz"
    built = session.build_model(model_name, config.num_classes)
    result = session.profile_training(config, path, model=built)
    return load_model(result.trace_path), torch_peak, built


@pytest.mark.parametrize(
    ("model_name", "shape", "batch", "active"),
    [
        ("resnet18", "3x32x32", 2, 1),
        # tuiprof live's window: there torch takes a BatchNorm output for a parameter (no module's, so none's)
        ("resnet18", "3x32x32", 4, 3),
        ("tuiprof.capture.models:tiny_transformer", "32x64", 2, 1),
        ("tuiprof.capture.models:tiny_transformer", "32x64", 4, 3),
    ],
)
def test_categories_at_the_peak_equal_torchs(tmp_path, monkeypatch, model_name, shape, batch, active) -> None:
    model, torch_peak, built = _capture(tmp_path, monkeypatch, model_name, batch, shape, active)
    [memory] = model.memory_categories
    assert memory.peak_by_category == torch_peak
    parameters = sum(p.numel() * p.element_size() for p in built.parameters())
    assert memory.peak_by_category["optimizer_state"] == parameters  # SGD's momentum buffers
    # Parameters by module: each module's own (and its submodules') exactly, the model's all of them.
    breakdown = model.memory_breakdown
    for row in breakdown.modules:
        if row.node is None or row.node.qualified_name in (None, "loss"):
            continue
        module = built if row.node.qualified_name == "model" else built.get_submodule(row.node.qualified_name)
        assert row.bytes.get("parameter", 0) == sum(p.numel() * p.element_size() for p in module.parameters()), (
            row.label
        )
    root = next(row for row in breakdown.modules if row.node is not None and row.node.qualified_name == "model")
    assert root.bytes["parameter"] == parameters


def test_categories_on_cuda_equal_torchs(tmp_path, monkeypatch) -> None:
    """The same oracle on the GPU: the device's categories, torch's for ``cuda:0``."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    model, torch_peak, built = _capture(tmp_path, monkeypatch, "resnet18", 8, "3x32x32", 1, device="cuda")
    memory = model.categorised_peak
    assert memory.device == "CUDA:0" and memory.peak_by_category == torch_peak
    assert memory.peak_by_category["optimizer_state"] == sum(p.numel() * p.element_size() for p in built.parameters())


def test_activation_bytes_per_module_are_the_saved_tensors(tmp_path) -> None:
    """Linear(16, 256) ReLU Linear(256, 256) ReLU Linear(256, 4), batch 1024, forward and
    backward only: each ReLU's output (1024 x 256 floats) is what its layer and the next Linear
    save for backward; a Linear's output is consumed by its ReLU and kept by nothing.  Weights
    are small next to the batch, so the peak is early in backward (ReLU_1's gradient made while
    both ReLU outputs are live); nothing else is an activation of a layer."""
    torch = pytest.importorskip("torch")
    from torch import nn

    import tuiprof

    torch.manual_seed(0)
    chain = nn.Sequential(nn.Linear(16, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 4))
    inputs, targets = torch.randn(1024, 16), torch.randint(0, 4, (1024,))
    path = tmp_path / "chain.json.gz"
    with tuiprof.profile(path, with_flops=False):
        nn.functional.cross_entropy(chain(inputs), targets).backward()
    breakdown = load_model(path).memory_breakdown
    activations = {
        row.label: row.bytes.get("activation", 0) for row in breakdown.modules if row.bytes.get("activation")
    }
    # labelled by their qualified names (tuiprof.profile() knows them): ReLU_0 and ReLU_1 are chain[1] and chain[3]
    assert activations == {
        "model (Sequential)": 2 * 1024 * 256 * 4,
        "1 (ReLU)": 1024 * 256 * 4,
        "3 (ReLU)": 1024 * 256 * 4,
    }
    assert breakdown.most_activations.label in ("1 (ReLU)", "3 (ReLU)")  # equal bytes: either


# ------------------------------------------------------------------ the explorer


async def test_memory_view_walks_from_the_peak_to_the_module_holding_the_most_activations() -> None:
    """The Overview says what the peak is made of; the Memory view opens on it with the
    module holding the most activations selected (blocks.0: its ReLU keeps 256 x 512 floats),
    and its what-ifs checkpoint that module (a bound, not a prediction: checkpointing is not replayed)."""
    from tests.helpers.tui import loaded, plain_text
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.sources import FileSource
    from tuiprof.tui.widgets.row_table import RowTable

    app = ExplorerApp(FileSource(str(SHIPPED)))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        overview = plain_text(app.query_one("#overview-body").content)
        assert "in backward of step 1" in overview and "blocks.0 (Sequential) holds the most activations" in overview
        await pilot.press("5")
        await pilot.pause()
        assert "peak" in plain_text(app.query_one("#memory-chart").content) and "backward of step 1" in plain_text(
            app.query_one("#memory-chart").content
        )
        table = app.query_one("#memory-ops", RowTable)
        assert table.current_row.item.label == "blocks.0 (Sequential)"
        assert table.current_row["activation_bytes"] == 256 * 512 * 4
        assert table.scroll_offset.y <= table.cursor < table.scroll_offset.y + table.size.height - 1  # in view
        detail = plain_text(app.query_one("#memory-detail").content)
        assert "Holds the most activations" in detail and "512.00 KiB" in detail
        await pilot.press("m", "m")  # allocations, then the what-ifs
        await pilot.pause()
        remedies = {row["remedy"]: row for row in table.rows}
        checkpoint = remedies["Activation checkpointing"]
        assert "blocks.0 (Sequential)" in checkpoint["how"] and "at most its 512.00 KiB" in checkpoint["how"]
        assert checkpoint["saves_bytes"] is None


async def test_memory_view_with_categories_leaves_rows_for_its_table_at_60x20() -> None:
    """The stacked curve, its phases and legend, the table's title and the detail pane would
    take every row of a 60x20 terminal, and all but one of 80x24: the detail pane gives its rows
    to the table there (at least 5 rows of it, issue 38), and is back from 30 lines."""
    from tests.helpers.tui import loaded
    from tuiprof.tui.app import ExplorerApp
    from tuiprof.tui.sources import FileSource
    from tuiprof.tui.widgets.row_table import RowTable

    app = ExplorerApp(FileSource(str(SHIPPED)))
    async with app.run_test(size=(60, 20)) as pilot:
        await loaded(pilot)
        await pilot.press("5")
        await pilot.pause()
        assert app.query_one("#memory-ops", RowTable).size.height >= 5
        assert not app.query_one("#memory-detail").display
        await pilot.resize_terminal(80, 24)
        await pilot.pause()
        assert app.query_one("#memory-ops", RowTable).size.height >= 5 + 1  # the header and 5 rows
        await pilot.resize_terminal(80, 30)
        await pilot.pause()
        assert app.query_one("#memory-detail").display
        assert app.query_one("#memory-ops", RowTable).size.height >= 5 + 1


def test_innermost_calls_at_many_times_equals_the_definition() -> None:
    """The sweep against the definition written out: the latest-starting call on the thread
    whose span holds the time (times inside, between and outside the resnet sample's calls)."""
    import numpy as np

    from tests.conftest import SAMPLES
    from tuiprof.analysis.memory import innermost_calls_at

    calls = load_model(SAMPLES / "resnet18_cpu.pt.trace.json.gz").calls
    starts, ends, threads = calls.column("start_ns"), calls.column("end_ns"), calls.column("thread")
    times = np.random.default_rng(0).integers(int(starts.min()) - 10, int(ends.max()) + 10, 400).tolist()
    queries = [(tid, t) for t in times for tid in calls.threads]
    found = innermost_calls_at(calls, [tid for tid, _ in queries], [t for _, t in queries]).tolist()
    for (tid, t), row in zip(queries, found):
        holding = np.flatnonzero((starts <= t) & (ends >= t) & (threads == calls.threads.index(tid)))
        assert row == (int(holding[-1]) if len(holding) else -1)


def test_a_step_left_out_of_the_trace_is_left_out_of_the_categories(tmp_path) -> None:
    """A block that ends inside a step: the trace drops that step (capture/unfinished_step.py),
    and so do the categories: the 64 MB the unfinished step allocated is not in the peak."""
    torch = pytest.importorskip("torch")
    from torch import nn
    from torch.profiler import schedule

    import tuiprof

    layer = nn.Linear(8, 8)
    path = tmp_path / "cut.json.gz"
    with tuiprof.profile(path, schedule=schedule(wait=0, warmup=1, active=5), with_flops=False) as session:
        for _ in range(3):  # the warmup step, then two recorded ones
            layer(torch.randn(4, 8)).sum().backward()
            session.step()
        unfinished = torch.zeros(16 * 1024 * 1024)  # 64 MB, then the block ends inside step 3
        del unfinished
    model = load_model(path)
    assert len(model.steps) == 2
    [memory] = model.memory_categories
    assert 0 < memory.peak_bytes < 1 << 20


def test_a_tensor_torch_calls_a_parameter_that_no_module_holds_belongs_to_no_module() -> None:
    """torch infers parameters from the data flow and at times takes a BatchNorm output for one
    (seen in a tuiprof live capture of resnet18): it stays in torch's parameter total, under no
    module, while a real parameter keeps its module.  A timeline built by hand."""
    torch = pytest.importorskip("torch")
    from types import SimpleNamespace

    from torch.profiler._memory_profiler import Action, Category, TensorKey, _Storage

    from tuiprof.capture.memory_categories import _device

    cpu = torch.device("cpu")
    weight, output = TensorKey(cpu, 1, _Storage(0x10, 1)), TensorKey(cpu, 2, _Storage(0x20, 2))
    timeline = SimpleNamespace(
        timeline=[(-1, Action.PREEXISTING, (weight, 0), 512), (1000, Action.CREATE, (output, 0), 32768)],
        categories=SimpleNamespace(get=lambda key, version: Category.PARAMETER),
    )
    owners = SimpleNamespace(
        by_key={output: (0, 0)},
        unknown={},
        module_of_tensor={1: 0},
        operators={"aten::batch_norm": 0},
        modules={"BatchNorm2d_6": 0},
    )
    saved = _device(timeline, owners, cpu, None)
    assert saved.tensor_module == [0, -1] and saved.category == [CODE["parameter"]] * 2


@pytest.mark.parametrize(
    ("decode", "raw", "says"),
    [
        (
            decode_live_facts,
            b'{"modules": 5}',
            "the tuiprofLive member (tuiprof's live-capture facts) cannot be read (",
        ),
        (
            decode_live_facts,
            b'{"version": 7}',
            "the tuiprofLive member (tuiprof's live-capture facts): version 7, newer",
        ),
        (
            decode_memory_categories,
            b'{"devices": 5}',
            "the memory categories in the tuiprofLive member cannot be read (",
        ),
        (
            decode_memory_categories,
            b'{"version": 7}',
            "the memory categories in the tuiprofLive member: version 7, newer",
        ),
    ],
)
def test_an_unreadable_or_newer_member_is_noted_and_ignored(decode, raw, says) -> None:
    """Both saved documents are checked alike (one helper, trace/live.py): unreadable or
    written by a newer tuiprof, each is left out with one note that names it."""
    report = DecodeReport()
    given = msgspec.Raw(raw) if decode is decode_live_facts else LiveFacts(memory_categories=msgspec.Raw(raw))
    assert decode(given, report) is None
    assert [problem.startswith(says) and problem.endswith("; ignored") for problem in report.problems] == [True]
