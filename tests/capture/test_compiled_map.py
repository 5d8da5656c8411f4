"""Compiled captures (torch.compile, Inductor on CPU): the kernel -> module map
and the module tree built from it (docs/compiled.md).

One compiled capture of a small conv-bn-relu CNN with a 2-layer MLP head is
shared by the tests (compiling takes seconds); the oracles are the trace's
raw events, the map as plain JSON, an eager capture of the same model and
torch's FlopCounterMode.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tests.conftest import ROOT  # noqa: E402
from tests.helpers.compiled import module_node
from tuiprof.analysis import analyze  # noqa: E402
from tuiprof.analysis.compiled_map import FLOPS_PER_BYTE  # noqa: E402
from tuiprof.capture.compiled import module_path  # noqa: E402
from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.session import profile_training  # noqa: E402
from tuiprof.report.compiled_summary import compiled_lines  # noqa: E402
from tuiprof.report.details import module_text  # noqa: E402
from tuiprof.report.units import format_us_short  # noqa: E402
from tuiprof.trace import load_trace  # noqa: E402

BATCH, SHAPE = 4, "3x8x8"


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 7, padding=3)  # 14 times the stem conv's weight: the copy's split shows
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class ConvNet(nn.Module):
    """A conv-bn-relu stem at the top level, a conv-bn-relu block, a 2-layer MLP head.

    Inductor copies the convolutions' weights (and the input) to channels-last in one
    kernel at the graph's start, fused across ``conv`` and ``block.conv``: split by the
    bytes each reads, not equally."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        self.block = Block()
        self.head = nn.Sequential(nn.Linear(8 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.block(self.relu(self.bn(self.conv(x)))).flatten(1))


def _capture(tmp_path_factory, compile: bool):
    torch.manual_seed(0)
    trace = tmp_path_factory.mktemp("compiled") / f"convnet-{'compiled' if compile else 'eager'}.json"
    config = CaptureConfig(
        model="ConvNet", device="cpu", batch_size=BATCH, input_shape=SHAPE, wait=0, warmup=1, active=1, compile=compile
    )
    result = profile_training(config, trace, model=ConvNet())
    return result, analyze(load_trace(trace), result.facts)


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    return _capture(tmp_path_factory, compile=True)


@pytest.fixture(scope="module")
def eager(tmp_path_factory):
    return _capture(tmp_path_factory, compile=False)


def _raw(result) -> dict:
    with open(result.trace_path) as file:
        return json.load(file)


def _names(model) -> set[str]:
    return {n.qualified_name for n in model.modules.walk() if n.qualified_name}


def test_compilation_happens_before_the_profiled_window(compiled) -> None:
    result, _ = compiled
    raw = _raw(result)
    names = {e.get("name", "") for e in raw["traceEvents"]}
    assert any(n.startswith("## Call CompiledFxGraph") for n in names)  # the compiled graphs ran in the window
    assert not [n for n in names if "dynamo_timed" in n or "compile_fx" in n or "call_user_compiler" in n]
    assert raw["tuiprofLive"]["compile_s"] > 0


def test_compiled_tree_has_the_eager_tree_module_set(compiled, eager) -> None:
    _, compiled_model = compiled
    _, eager_model = eager
    assert _names(compiled_model) == _names(eager_model)
    for qualified in ("conv", "block.conv", "head.0", "head.2"):  # forward and backward, as eager
        node = module_node(compiled_model, qualified)
        assert node.cpu_total_us > 0 and node.backward_cpu_us > 0, qualified
        assert module_node(eager_model, qualified).name == node.name  # Class_k keys as the eager tree's


def _forward_kernel_times(result) -> list[tuple[dict[str, float], int]]:
    """Per forward kernel call in the trace: (work per module path, duration in ns), from the raw JSON.

    Work as docs/compiled.md defines it: bytes + FLOPs / FLOPS_PER_BYTE, or node counts
    for a kernel saved without bytes."""
    raw = _raw(result)
    cmap = raw["tuiprofLive"]["compiled"]
    forward = [g for g in cmap["graphs"] if not g["backward"]]
    assert len(forward) == 1
    by_event = {}
    for event, _kernel, modules, nodes, *work in forward[0]["kernels"]:
        if event.startswith("graph_"):  # the fused C++ kernels
            sizes, flops = work if work and any(work[0]) else ([0] * len(nodes), [0] * len(nodes))
            measured = [b + f / FLOPS_PER_BYTE for b, f in zip(sizes, flops)]
            weights: dict[str, float] = {}
            for module, value in zip(modules, measured if sum(measured) else nodes):
                path = cmap["modules"][module][0]
                weights[path] = weights.get(path, 0) + value
            by_event[event] = weights
    return [
        (by_event[e["name"]], round(float(e["dur"]) * 1000))
        for e in raw["traceEvents"]
        if e.get("ph") == "X" and e.get("name") in by_event
    ]


def _expected_own_ns(calls: list[tuple[dict[str, float], int]]) -> dict[str, float]:
    """The rules of docs/compiled.md, recomputed: a kernel's time to the deepest module
    holding all its modules; when that is the root, split between the root's parts by work."""
    own: dict[str, float] = {}
    for weights, ns in calls:
        common = os.path.commonprefix([path.split(".") for path in weights])
        if common:
            own[".".join(common)] = own.get(".".join(common), 0) + ns
            continue
        total = sum(weights.values())
        for path, work in weights.items():
            top = path.split(".")[0]
            own[top] = own.get(top, 0) + ns * work / total
    return own


def test_fused_conv_bn_relu_goes_to_the_deepest_common_module(compiled) -> None:
    """block's bn + relu run as one C++ kernel: block holds its time and lists what it fused;
    the top-level bn + relu kernel (common module: the root) is split between them by nodes."""
    result, model = compiled
    calls = _forward_kernel_times(result)
    assert any(set(w) == {"block.bn", "block.relu"} for w, _ in calls), calls
    assert any(set(w) == {"bn", "relu"} for w, _ in calls), calls
    expected = _expected_own_ns(calls)
    for qualified in ("block", "bn", "relu"):  # their own forward time is fused kernels only (convs are extern)
        assert module_node(model, qualified).self_cpu_us == pytest.approx(expected[qualified] / 1000, abs=0.01), (
            qualified
        )
    assert ("block",) in [
        holders
        for _, modules, holders in module_node(model, "block.bn").fused_kernels
        if set(modules) == {"block.bn", "block.relu"}
    ]
    assert ("bn", "relu") in [
        holders for _, modules, holders in module_node(model, "relu").fused_kernels if set(modules) == {"bn", "relu"}
    ]
    detail = module_text(model, module_node(model, "block.relu")).plain  # the detail pane of a module fused away
    assert "block.bn, block.relu -> time in block" in detail


def test_weight_copy_is_split_by_the_bytes_each_convolution_reads(compiled) -> None:
    """The channels-last copy of the weights (and input) is one kernel across ``conv`` and
    ``block.conv``: the map saves the bytes each reads and writes, and the time is split so
    (block.conv 76 %, where a split by FX nodes gave 50 %)."""
    result, model = compiled
    raw = _raw(result)
    cmap = raw["tuiprofLive"]["compiled"]
    forward = next(g for g in cmap["graphs"] if not g["backward"])
    paths = [path for path, _ in cmap["modules"]]
    copy = next(k for k in forward["kernels"] if {paths[i] for i in k[2]} == {"conv", "block.conv"})
    event, _, modules, nodes, sizes, flops = copy
    net = ConvNet()
    expected = {  # read and written once each, 4 bytes a float
        "conv": 2 * 4 * (net.conv.weight.numel() + BATCH * 3 * 8 * 8),
        "block.conv": 2 * 4 * net.block.conv.weight.numel(),
    }
    assert {paths[m]: b for m, b in zip(modules, sizes)} == expected
    assert nodes == [1, 1] and flops == [0, 0]
    ns = sum(round(float(e["dur"]) * 1000) for e in raw["traceEvents"] if e.get("name") == event)
    share = expected["block.conv"] / sum(expected.values())
    assert share > 0.75
    calls = [(weights, ns) for weights, ns in _forward_kernel_times(result) if set(weights) != {"conv", "block.conv"}]
    others = _expected_own_ns(calls)  # the block's other fused kernels (bn + relu) are its own
    assert module_node(model, "block").self_cpu_us * 1000 == pytest.approx(others["block"] + ns * share, abs=10)


def test_unattributed_time_is_its_own_row(compiled) -> None:
    _, model = compiled
    rest = next(n for n in model.modules.walk() if n.name == "(compiled, unattributed)")
    assert rest.parent is not None and rest.parent.children  # beside the modules, under the compiled region
    assert rest.cpu_total_us > 0 and rest.backward_cpu_us > 0
    assert 0 < model.compiled.share_below_root() < 1  # the rest is shown, not hidden


def test_flops_per_module_equal_flop_counter_mode(compiled) -> None:
    """Forward + backward FLOPs of each conv and linear module, as FlopCounterMode counts
    the same eager model for one training step (one profiled step here)."""
    from torch.utils.flop_counter import FlopCounterMode

    _, model = compiled
    net = ConvNet()
    counter = FlopCounterMode(display=False)
    inputs = torch.randn(BATCH, 3, 8, 8)
    with counter:
        nn.functional.cross_entropy(net(inputs), torch.randint(0, 10, (BATCH,))).backward()
    counts = counter.get_flop_counts()
    for qualified in ("conv", "block.conv", "head.0", "head.2"):
        expected = sum(counts[f"ConvNet.{qualified}"].values())
        node = module_node(model, qualified)
        assert node.flops + node.backward_flops == expected, qualified


def _tree(model) -> list[tuple]:
    return [
        (n.path, n.qualified_name, round(n.cpu_total_us, 3), round(n.backward_cpu_us, 3), n.flops, n.backward_flops)
        for n in model.modules.walk()
    ]


BLOCKED_TORCH = """
import json, sys
sys.modules["torch"] = None  # any import of torch fails
from tuiprof.analysis import load_model
model = load_model(sys.argv[1])
tree = [(n.path, n.qualified_name, round(n.cpu_total_us, 3), round(n.backward_cpu_us, 3), n.flops, n.backward_flops)
        for n in model.modules.walk()]
print(json.dumps({"tree": tree, "problems": model.report.problems}))
"""


def test_saved_trace_reopens_without_torch_to_the_same_tree(compiled) -> None:
    result, model = compiled
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKED_TORCH, str(result.trace_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    reopened = json.loads(proc.stdout)
    assert [tuple(row) for row in reopened["tree"]] == _tree(model)
    assert any(row[1] == "block.conv" for row in reopened["tree"])
    assert reopened["problems"] == []


def test_map_naming_kernels_absent_from_the_trace_is_counted_on_stderr(compiled, tmp_path) -> None:
    result, _ = compiled
    raw = _raw(result)
    forward = next(g for g in raw["tuiprofLive"]["compiled"]["graphs"] if not g["backward"])
    for i, kernel in enumerate(forward["kernels"][:3]):
        kernel[0] = f"no_such_kernel_{i}"
    path = tmp_path / "renamed.json.gz"
    with gzip.open(path, "wt") as file:
        json.dump(raw, file)
    proc = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), "--view", "modules"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert "3 kernels of the saved compiled-kernel map ran in no profiled graph call" in proc.stderr
    assert "Traceback" not in proc.stderr and "(compiled, unattributed)" in proc.stdout


def test_compile_time_is_shown_beside_the_step_time(compiled) -> None:
    result, model = compiled
    lines = compiled_lines(model)
    assert (
        lines[0].startswith(f"compile {format_us_short(result.facts.compile_s * 1e6)} vs ")
        and "per profiled step" in lines[0]
    )
    assert "below the compiled one" in lines[1]


@pytest.mark.parametrize(
    "source,expected",
    [
        ("L['self'].layer1[0].conv1", "layer1.0.conv1"),
        ("L['self'].layer1.0.conv1", "layer1.0.conv1"),
        ("L['self']._modules['fc']", "fc"),
        ("L['model'].encoder.layers[1]", "encoder.layers.1"),
        ("L['self'].head", "head"),
    ],
)
def test_dynamo_module_sources_become_qualified_names(source: str, expected: str) -> None:
    assert module_path(source) == expected


SCRIPT = textwrap.dedent(
    """
    import torch
    from torch import nn

    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    step = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(8):
        loss = step(torch.randn(8, 16)).sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    """
)


def test_run_maps_a_script_that_compiles_itself(tmp_path) -> None:
    script = tmp_path / "train_compiled.py"
    script.write_text(SCRIPT)
    trace = tmp_path / "run.json.gz"
    proc = subprocess.run(
        [sys.executable, "-m", "tuiprof", "run", "--no-tui", "--save", str(trace), str(script)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    with gzip.open(trace, "rt") as file:
        live = json.load(file)["tuiprofLive"]
    assert live["compile_s"] > 0 and live["compiled"]["graphs"]
    model = analyze(load_trace(trace))
    assert {"0", "2"} <= _names(model)  # the two Linear layers, below the compiled Sequential
    # forward and backward kernels both placed below the compiled module (their share of the graph
    # calls' time is no test here: on a model this small the calls' overhead moves with the load)
    assert model.compiled.below_root_ns[0] > 0 and model.compiled.below_root_ns[1] > 0


@pytest.mark.parametrize(
    "weights,expected",
    [
        ({"layer1.0.bn1": 20, "layer1.0.relu": 1}, [("layer1.0", 1.0)]),  # deepest common module
        ({"layer1.0.conv1": 1}, [("layer1.0.conv1", 1.0)]),  # one module
        (
            {"bn1": 20, "relu": 1, "maxpool": 3},
            [("bn1", 20 / 24), ("relu", 1 / 24), ("maxpool", 3 / 24)],
        ),  # at the root: split
        ({"": 1, "fc": 3}, [("", 0.25), ("fc", 0.75)]),  # the compiled module's own nodes keep their share
        ({"encoder.layers.0.norm1": 4, "encoder.layers.1.norm1": 4}, [("encoder", 1.0)]),  # a ModuleList ran no code
        ({"": 2}, []),  # no module below the root: the compiled module's own
    ],
)
def test_kernel_targets_follow_the_written_rules(weights: dict[str, int], expected: list) -> None:
    from tuiprof.analysis.compiled_map import kernel_targets

    ran = {
        "layer1.0",
        "layer1.0.bn1",
        "layer1.0.relu",
        "layer1.0.conv1",
        "bn1",
        "relu",
        "maxpool",
        "fc",
        "encoder",
        "encoder.layers.0",
        "encoder.layers.1",
        "encoder.layers.0.norm1",
        "encoder.layers.1.norm1",
    }
    assert kernel_targets(weights, ran) == pytest.approx(expected) if expected else kernel_targets(weights, ran) == []


def test_profile_maps_a_block_that_compiles(tmp_path) -> None:
    """``tuiprof.profile()``: a model compiled inside the block gets its map and compile time
    (inference only: one graph keeps the test short; ``run`` above covers the backward)."""
    import tuiprof

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 2))
    step = torch.compile(model)
    path = tmp_path / "block.json.gz"
    with torch.no_grad(), tuiprof.profile(path, schedule=torch.profiler.schedule(wait=1, warmup=0, active=1)) as p:
        for _ in range(2):
            step(torch.randn(4, 16))
            p.step()
    with gzip.open(path, "rt") as file:
        live = json.load(file)["tuiprofLive"]
    assert live["compile_s"] > 0 and [g["backward"] for g in live["compiled"]["graphs"]] == [False]
    assert {"0", "2"} <= _names(analyze(load_trace(path)))
