"""A fused kernel's time split by the work of its nodes, and a damaged map refused
(docs/compiled.md, "Attribution rules"; issue 42 item 3), on synthetic traces whose
answers are worked out by hand: no torch, no compile.

Region 0/0 runs one forward graph call whose C++ kernels (CPU operators under the
call, as ``cpp.enable_kernel_profile`` records them) take, in us:

  graph_0_cpp_fused_0       100  small 1 % of the bytes, big 99 %: split 1 / 99
  graph_0_cpp_fused_relu_1   20  stem.bn + stem.relu: their common module, stem
  graph_0_cpp_fused_mm_2     60  fc: 1,000 B + 400,000 FLOPs, act: 1,000 B
  graph_0_cpp_fused_add_3    40  layers.0.norm 300 B, layers.1.attn 100 B (a ModuleList)
  graph_0_cpp_fused_old_4    30  a kernel saved without bytes: small 2 nodes, big 1
"""

from __future__ import annotations

import copy

import pytest

from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.analysis.compiled_map import FLOPS_PER_BYTE

MODULES = [
    ["small", "Conv2d"],
    ["big", "Conv2d"],
    ["stem", "Stem"],
    ["stem.bn", "BatchNorm2d"],
    ["stem.relu", "ReLU"],
    ["fc", "Linear"],
    ["act", "ReLU"],
    ["layers.0", "EncoderLayer"],
    ["layers.0.norm", "LayerNorm"],
    ["layers.1", "EncoderLayer"],
    ["layers.1.attn", "MultiheadAttention"],
]
SMALL, BIG, STEM, BN, RELU, FC, ACT, LAYER0, NORM, LAYER1, ATTN = range(len(MODULES))
# [event, kernel, module indices, node counts, bytes, FLOPs], as tuiprof/trace/compiled_map.py writes them
KERNELS = [
    ["graph_0_cpp_fused_0", "cpp_fused_0", [SMALL, BIG], [1, 1], [10_000, 990_000], [0, 0]],
    ["graph_0_cpp_fused_relu_1", "cpp_fused_relu_1", [BN, RELU], [14, 1], [300, 100], [0, 0]],
    ["graph_0_cpp_fused_mm_2", "cpp_fused_mm_2", [FC, ACT], [1, 1], [1_000, 1_000], [400_000, 0]],
    ["graph_0_cpp_fused_add_3", "cpp_fused_add_3", [NORM, ATTN], [1, 1], [300, 100], [0, 0]],
    ["graph_0_cpp_fused_old_4", "cpp_fused_old_4", [SMALL, BIG], [2, 1]],  # an older capture: nodes only
]
COMPILED_MAP = {
    "version": 1,
    "root": "",
    "modules": MODULES,
    "graphs": [{"region": "0/0", "backward": False, "kernels": KERNELS}],
}
DURATIONS = [100, 20, 60, 40, 30]


def split_trace(compiled_map: dict) -> GpuTrace:
    trace = GpuTrace()
    trace.step(1, 0, 1000)
    trace.op("Torch-Compiled Region: 0/0", 10, 490)
    trace.op("CompiledFunction", 20, 460, **{"Sequence number": 3})
    trace.op("## Call CompiledFxGraph aaaaaaaaaaaa ##", 30, 440)
    start = 40
    for kernel, duration in zip(KERNELS, DURATIONS):
        trace.op(kernel[0], start, duration)
        start += duration + 5
    trace.members["tuiprofLive"] = {"version": 1, "compiled": compiled_map}
    return trace


def _own_us(model) -> dict[str, float]:
    """Qualified name -> own forward CPU time of the module nodes below the region."""
    return {n.qualified_name: n.self_cpu_us for n in model.modules.walk() if n.qualified_name}


def test_a_fused_kernel_is_split_by_the_work_of_its_nodes(tmp_path) -> None:
    model = load_model(split_trace(COMPILED_MAP).write(tmp_path / "split.json"))
    own = _own_us(model)
    assert own["small"] == pytest.approx(1 + 30 * 2 / 3)  # 1 % of cpp_fused_0; 2 of 3 nodes of the old kernel
    assert own["big"] == pytest.approx(99 + 30 / 3)
    assert own["stem"] == pytest.approx(20)  # fused inside one module: its deepest common module, unsplit
    fc_work, act_work = 1_000 + 400_000 / FLOPS_PER_BYTE, 1_000
    ns = 1e-3  # times are booked in whole ns
    assert own["fc"] == pytest.approx(60 * fc_work / (fc_work + act_work), abs=ns)  # FLOPs count, at the balance
    assert own["act"] == pytest.approx(60 * act_work / (fc_work + act_work), abs=ns)
    assert model.report.problems == []


def test_modulelist_items_are_the_parts_a_kernel_is_split_between(tmp_path) -> None:
    """``layers`` only indexes its items: it is in no module stack and no row; a kernel fused
    from ``layers.0`` into ``layers.1`` is split between them, not given to a ``layers`` row."""
    model = load_model(split_trace(COMPILED_MAP).write(tmp_path / "split.json"))
    own = _own_us(model)
    assert "layers" not in own
    assert own["layers.0"] == pytest.approx(40 * 0.75) and own["layers.1"] == pytest.approx(40 * 0.25)
    assert {n.qualified_name for n in model.modules.walk() if n.class_name == "Module"} == set()


def _damaged(mutate) -> dict:
    damaged = copy.deepcopy(COMPILED_MAP)
    mutate(damaged["graphs"][0]["kernels"])
    return damaged


DAMAGE = {
    "index past the end": lambda k: k[0][2].__setitem__(1, len(MODULES)),
    "index -1": lambda k: k[0][2].__setitem__(1, -1),
    "node counts of 0": lambda k: k[0][3].__setitem__(slice(None), [0, 0]),
    "node counts of 0, no bytes": lambda k: k[4][3].__setitem__(slice(None), [0, 0]),
    "fewer node counts than modules": lambda k: k[0][3].pop(),
    "negative bytes": lambda k: k[0][4].__setitem__(0, -5),
    "bytes for one module of two": lambda k: k[0][4].pop(),
    "bytes without FLOPs": lambda k: k[0].pop(),
    "bytes past 2^63": lambda k: k[0][4].__setitem__(0, 2**70),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_map_is_noted_and_ignored(tmp_path, damage: str) -> None:
    """Issue 42 item 3: an index past the end raised IndexError, counts of 0 ZeroDivisionError,
    and -1 moved time to the last module; now the map is refused with one note, and the
    graphs' time stays the compiled region's own."""
    model = load_model(split_trace(_damaged(DAMAGE[damage])).write(tmp_path / "damaged.json"))
    assert any("compiled-kernel map" in p and "damaged" in p for p in model.report.problems), model.report.problems
    assert not [n for n in model.modules.walk() if n.qualified_name]  # nothing placed from the map
    region = next(n for n in model.modules.walk() if n.name == "[compiled 0:0]")
    assert region.cpu_total_us == 490


def test_summary_of_a_damaged_map_exits_cleanly(tmp_path, capsys) -> None:
    from tuiprof import cli

    path = split_trace(_damaged(DAMAGE["index past the end"])).write(tmp_path / "damaged.json")
    assert cli.main(["summary", str(path), "--view", "modules"]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "compiled-kernel map" in err and "damaged" in err
