"""Live capture on CPU with tiny batches (each test well under a minute).

CUDA tests run when CUDA is present and skip cleanly otherwise.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import ROOT, key_averages_mismatches  # noqa: E402
from tuiprof.analysis import load_model  # noqa: E402
from tuiprof.analysis.live import apply_live_facts  # noqa: E402
from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.session import profile_training  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(scope="module")
def live_resnet(tmp_path_factory):
    trace = tmp_path_factory.mktemp("live") / "resnet18.pt.trace.json.gz"
    config = CaptureConfig(model="resnet18", device="cpu", batch_size=2, wait=0, warmup=1, active=1)
    result = profile_training(config, trace, want_key_averages=True)
    model = apply_live_facts(load_model(trace), result.facts)
    return result, model


def test_live_module_tree_has_qualified_names(live_resnet) -> None:
    _, model = live_resnet
    names = {node.qualified_name for node in model.modules.walk()}
    assert {"model", "layer1", "layer1.0", "layer1.0.conv1", "layer4.1.bn2", "fc", "loss"} <= names
    conv1 = next(n for n in model.modules.walk() if n.qualified_name == "conv1")
    assert conv1.parameters == 64 * 3 * 7 * 7 and conv1.output_shape == "2x64x16x16"


def test_live_flops_are_torchs(live_resnet) -> None:
    result, model = live_resnet
    by_name = {r["name"]: r["flops"] for r in result.key_averages if r["input_shapes"] is None}
    ours = {s.name: s.flops for s in model.operators()}
    for name in ("aten::conv2d", "aten::addmm"):
        assert by_name[name] > 0 and ours[name] == by_name[name]
    assert model.flops_source.startswith("measured")


@pytest.mark.parametrize("by_shape", [False, True], ids=["by-name", "by-shape"])
def test_live_tables_match_key_averages(live_resnet, by_shape: bool) -> None:
    result, model = live_resnet
    assert not key_averages_mismatches(model, result.key_averages, by_shape)


def _tuiprof(*args: str, **kwargs) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tuiprof", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        **kwargs,
    )


def test_run_profiles_the_example_script(tmp_path) -> None:
    trace = tmp_path / "run.json.gz"
    proc = _tuiprof("run", "--no-tui", "--save", str(trace), "examples/train_resnet18_cifar.py", "--batch-size", "4", "--samples", "64")
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert "ResNet_0/Sequential_" in out and "aten::convolution_backward" in out
    model = load_model(trace)
    assert model.steps and model.modules.roots[0].name == "ResNet_0"


def test_sigint_keeps_what_was_captured(tmp_path) -> None:
    trace = tmp_path / "interrupted.json.gz"
    proc = _tuiprof(
        "live", "resnet18", "--no-tui", "--device", "cpu", "--batch-size", "2", "--wait", "0", "--warmup", "1",
        "--active", "500", "--save", str(trace),
    )
    deadline = time.time() + 180
    seen = ""
    while time.time() < deadline:
        line = proc.stderr.readline()
        seen += line
        if "active" in line:
            break
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=180)
    assert proc.returncode == 130, seen + err
    assert "Traceback" not in err
    model = load_model(trace)
    assert model.operators() and model.steps


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_without_cuda_is_one_line_exit_2() -> None:
    proc = _tuiprof("live", "resnet18", "--device", "cuda", "--no-tui")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.strip().count("\n") == 0 and "CUDA" in err and "Traceback" not in err


def test_bad_model_name_is_one_line_exit_2() -> None:
    proc = _tuiprof("live", "resnet1800", "--no-tui", "--device", "cpu")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "resnet1800" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if line.startswith("tuiprof: resnet1800")]) == 1


def test_profile_context_manager_writes_a_loadable_trace(tmp_path) -> None:
    import tuiprof

    path = tmp_path / "api.json.gz"
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU())
    with tuiprof.profile(path, schedule=torch.profiler.schedule(wait=0, warmup=1, active=2)) as p:
        for _ in range(3):
            model(torch.randn(4, 16)).sum().backward()
            p.step()
    loaded = load_model(path)
    assert loaded.steps and any(s.name == "aten::addmm" and s.flops for s in loaded.operators())
    assert [n.name for n in loaded.modules.roots] == ["Sequential_0"]


@needs_cuda
def test_live_on_cuda_records_kernels(tmp_path) -> None:
    trace = tmp_path / "cuda.pt.trace.json.gz"
    config = CaptureConfig(model="resnet18", device="cuda", batch_size=8, wait=0, warmup=1, active=1)
    result = profile_training(config, trace, want_key_averages=True)
    model = apply_live_facts(load_model(trace), result.facts)
    assert model.kernels and model.has_device
    conv = next(s for s in model.operators() if s.name == "aten::conv2d")
    assert conv.device_total_us > 0
    assert any(t.device.startswith("CUDA") for t in model.memory)


def test_recomputed_flops_equal_torch_for_every_formula(tmp_path) -> None:
    """conv2d with stride/padding/dilation/groups, mm, addmm, bmm, baddbmm, mul, add."""
    from torch.nn import functional as F
    from torch.profiler import ProfilerActivity, profile

    from tuiprof.capture.session import torch_flops

    x = torch.randn(2, 8, 17, 19)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, with_flops=True) as prof:
        F.conv2d(x, torch.randn(16, 4, 3, 5), stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2)
        F.conv2d(x, torch.randn(8, 8, 1, 1))
        torch.mm(torch.randn(5, 7), torch.randn(7, 3))
        torch.addmm(torch.randn(3), torch.randn(5, 7), torch.randn(7, 3))
        torch.bmm(torch.randn(4, 5, 7), torch.randn(4, 7, 3))
        torch.baddbmm(torch.randn(4, 5, 3), torch.randn(4, 5, 7), torch.randn(4, 7, 3))
        torch.mul(torch.randn(6, 7), torch.randn(6, 7))
        torch.add(torch.randn(6, 7), torch.randn(6, 7))
    path = tmp_path / "formulas.json"
    prof.export_chrome_trace(str(path))
    expected = torch_flops(prof)
    model = load_model(path)
    seen = set()
    calls = model.calls
    for row, ext in enumerate(calls.external_id):
        if ext in expected:
            seen.add(calls.name(row))
            assert calls.flops[row] == expected[ext], calls.name(row)
    assert {"aten::conv2d", "aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::mul", "aten::add"} <= seen
