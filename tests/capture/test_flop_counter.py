"""Module FLOPs, forward and backward, equal torch's FlopCounterMode on live captures,
and come back the same when the saved trace is reopened (they are computed from the
trace's Input Dims and Concrete Inputs, not from live-only data)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from tuiprof.analysis import analyze  # noqa: E402
from tuiprof.capture.config import CaptureConfig, parse_shape  # noqa: E402
from tuiprof.capture.models import build_model  # noqa: E402
from tuiprof.capture.session import profile_training  # noqa: E402
from tuiprof.trace import load_trace  # noqa: E402
from tuiprof.trace.live import LiveFacts  # noqa: E402

# The samples' models and input shapes (scripts/make_sample_traces.py), at batch 2 for speed.
CASES = {
    "resnet18": CaptureConfig(model="resnet18", device="cpu", batch_size=2, wait=0, warmup=1, active=1),
    "tiny_transformer": CaptureConfig(
        model="tuiprof.capture.models:tiny_transformer",
        device="cpu",
        batch_size=2,
        input_shape="32x64",
        wait=0,
        warmup=1,
        active=1,
    ),
}


def flop_counter_mode(config: CaptureConfig) -> tuple[dict[str, int], dict[str, int]]:
    """FlopCounterMode's per-module forward and backward FLOPs for one training step,
    keyed by qualified name ("" for the model itself)."""
    model = build_model(config.model, config.num_classes).train()
    inputs = torch.randn(config.batch_size, *parse_shape(config.input_shape))
    targets = torch.zeros(config.batch_size, dtype=torch.long)
    with FlopCounterMode(display=False) as forward:
        model(inputs)
    with FlopCounterMode(display=False) as step:
        torch.nn.functional.cross_entropy(model(inputs), targets).backward()

    def per_module(counter: FlopCounterMode) -> dict[str, int]:
        counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items() if name != "Global"}
        return {name.partition(".")[2]: flops for name, flops in counts.items()}  # "ResNet.layer1" -> "layer1"

    fwd = per_module(forward)
    total = per_module(step)
    return fwd, {name: total[name] - fwd.get(name, 0) for name in total}


@pytest.fixture(scope="module", params=list(CASES))
def capture(request, tmp_path_factory):
    config = CASES[request.param]
    trace = tmp_path_factory.mktemp("flops") / f"{request.param}.pt.trace.json.gz"
    result = profile_training(config, trace)
    return config, trace, analyze(load_trace(trace), result.facts)


def test_module_flops_equal_flop_counter_mode(capture) -> None:
    """Every module's forward and backward FLOPs equal FlopCounterMode's, with one exception
    that is FlopCounterMode's: in a residual block its module tracker keeps the downsample
    branch open in backward while autograd runs the main branch (the branch's output
    gradient is ready long before its input gradient), so it adds the main branch's
    backward (conv1 and conv2 of the block) to ``downsample`` and ``downsample.0`` too,
    counting those FLOPs twice.  There the difference must be exactly that."""
    config, _, model = capture
    forward, backward = flop_counter_mode(config)
    by_name = {n.qualified_name: n for n in model.modules.walk() if n.qualified_name}
    checked = 0
    for name, node in by_name.items():
        if name == "loss":
            continue
        key = "" if name == "model" else name
        expected_backward = backward.get(key, 0)
        if name.endswith((".downsample", ".downsample.0")):
            block = name.split(".downsample")[0]
            expected_backward -= by_name[f"{block}.conv1"].backward_flops + by_name[f"{block}.conv2"].backward_flops
        assert (node.flops, node.backward_flops) == (forward.get(key, 0), expected_backward), name
        checked += bool(node.flops)
    assert checked >= 10
    root = by_name["model"]
    assert root.flops == forward[""] and root.backward_flops == backward[""] > root.flops
    assert model.step_flops == forward[""] + backward[""]  # one active step, all its work inside the model
    assert model.step_flops_per_s == pytest.approx(model.step_flops / (model.steps[0].duration_us / 1e6))


def test_reopened_trace_gives_the_same_flops(capture) -> None:
    _, trace, live = capture
    reopened = analyze(load_trace(trace), LiveFacts())  # the file alone: not even the facts a capture saves in it
    assert [(n.path, n.flops, n.backward_flops) for n in reopened.modules.walk()] == [
        (n.path, n.flops, n.backward_flops) for n in live.modules.walk()
    ]
    assert reopened.step_flops == live.step_flops > 0
