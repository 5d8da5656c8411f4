"""Every real trace in ../shared/traces opens with sensible tables."""

from __future__ import annotations

import pytest

from tests.conftest import SHARED_TRACES, needs_shared, shared_trace_paths
from tuiprof.analysis import load_model

pytestmark = needs_shared


@pytest.mark.parametrize("path", shared_trace_paths(), ids=lambda p: p.name[:60])
def test_trace_opens_with_operators(path) -> None:
    model = load_model(path)
    assert model.report.skipped == 0
    assert model.operators(), "empty operator table"
    if model.info.devices or len(model.activity):
        assert model.kernels, "GPU trace without kernel table"
    for stats in model.operators():
        assert stats.calls > 0
        assert stats.cpu_total_us >= 0
        assert stats.self_cpu_us <= stats.cpu_total_us + 1e-6


def _tree_classes(model, depth_limit: int = 3) -> set[tuple[str, ...]]:
    chains = set()
    for node in model.modules.walk():
        chain = []
        current = node
        while current is not None:
            chain.append(current.class_name)
            current = current.parent
        chains.add(tuple(reversed(chain))[: depth_limit + 1])
    return chains


def test_resnet18_module_tree_shape() -> None:
    model = load_model(SHARED_TRACES / "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz")
    chains = _tree_classes(model)
    for leaf in ("Conv2d", "BatchNorm2d", "ReLU"):
        assert ("ResNet", "Sequential", "BasicBlock", leaf) in chains
    root = model.modules.roots[0]
    assert root.name == "ResNet_0" and root.calls == 5
    assert root.backward_cpu_us > 0 and root.device_total_us > 0 and root.flops > 0


def test_falconsai_module_tree_shape() -> None:
    model = load_model(SHARED_TRACES / "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz")
    root = model.modules.roots[0]
    assert root.class_name == "ViTForImageClassification" or root.class_name == "ViTModel"
    classes = {node.class_name for node in model.modules.walk()}
    assert {"ViTEmbeddings", "ViTLayer", "Linear"} <= classes
    assert root.device_total_us > 0


def test_legacy_resnet50_memory_and_steps() -> None:
    model = load_model(
        SHARED_TRACES / "kineto__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz"
    )
    assert [s.number for s in model.steps] == [5, 6, 7, 8, 9, 10]
    devices = {t.device for t in model.memory}
    assert {"CPU", "CUDA:0"} <= devices
    assert all(s.kernel_us > 0 and s.data_loading_us > 0 for s in model.steps)
    conv = next(k for k in model.kernels if k.launcher)
    assert conv.calls > 0


def test_run_directory_picks_rank_and_lists_all() -> None:
    from tuiprof.trace import resolve_trace

    chosen, every = resolve_trace(SHARED_TRACES / "dlrm_8ranks")
    assert len(every) == 8 and chosen.rank == 0
    chosen, _ = resolve_trace(SHARED_TRACES / "dlrm_8ranks", "5")
    assert chosen.rank == 5 and "worker5" in chosen.name


@pytest.mark.parametrize(
    "name",
    [
        "dlrm_8ranks",  # its kernels' External id is the correlation: joined through the launch
        "kineto__samples__resnet50_num_workers_0__worker0.1623143089861.pt.trace.json.gz",
        "hta__trace_filter__sampled_rank-0.json.gz",
        "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz",
        "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz",
    ],
)
def test_every_device_event_finds_its_launching_operator(name: str) -> None:
    model = load_model(SHARED_TRACES / name)
    launched = sum(1 for row in model.activity.launcher if row >= 0)
    assert launched >= 0.95 * len(model.activity.launcher)
    assert sum(s.self_device_us for s in model.operators()) == pytest.approx(model.total_device_us, rel=0.05)
