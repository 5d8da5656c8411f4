"""What is special about a compiled run (analysis/compiled_run.py): graph breaks located,
recompilations counted with their reason, eager modules outside the compiled regions.

One capture by ``tuiprof.profile()`` of a tiny model with a ``torch._dynamo.graph_break()``
in its forward, called with two batch sizes (``dynamic=False``: a recompilation), and the
same file with its compile log removed (what the trace alone shows).  Oracles: the test's
own source lines, the calls it made, and the raw JSON's region spans (plain Python).
"""

from __future__ import annotations

import gzip
import inspect
import json

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from tests.helpers.compiled import COMPILED_CPU, REGION, complete_events, encloses
from tuiprof.analysis import load_model
from tuiprof.report.compiled_summary import compiled_lines
from tuiprof.report.details import module_text

BATCHES = (2, 3)  # two shapes, dynamic=False: frame 0 (and its resume frame) compiled twice


class Broken(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)
        self.b = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.a(x)
        torch._dynamo.graph_break()
        return self.b(x).relu()


class Outer(nn.Module):
    """An eager ``pre`` Linear, then the compiled model."""

    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.Linear(8, 8)
        self.body = torch.compile(Broken(), dynamic=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(self.pre(x))


def _break_line() -> int:
    lines, first = inspect.getsourcelines(Broken.forward)
    return first + next(i for i, line in enumerate(lines) if "graph_break()" in line)


@pytest.fixture(scope="module")
def capture(tmp_path_factory):
    """Compiled in the schedule's wait steps (not recorded), both shapes profiled after."""
    import tuiprof

    torch._dynamo.reset()
    torch.manual_seed(0)
    model = Outer()
    path = tmp_path_factory.mktemp("compiled_run") / "broken.json.gz"
    schedule = torch.profiler.schedule(wait=len(BATCHES), warmup=0, active=len(BATCHES))
    with torch.no_grad(), tuiprof.profile(path, schedule=schedule, with_stack=True) as session:
        for batch in BATCHES * 2:
            model(torch.randn(batch, 8))
            session.step()
    return path


def test_graph_break_is_located_with_its_reason(capture) -> None:
    run = load_model(capture).compiled_run
    assert run.from_capture and run.graph_break_count == 1
    (site,) = run.graph_breaks
    assert (site.file, site.line, site.function) == (__file__, _break_line(), "forward")
    assert "graph_break()" in site.reason
    assert len(site.compile_ids) == len(BATCHES)  # each compilation of frame 0 broke there
    lines = compiled_lines(load_model(capture))
    assert f"1 graph break: test_compiled_run.py:{_break_line()} in forward" in "\n".join(lines)


def test_recompilation_counted_with_the_failed_guard(capture) -> None:
    run = load_model(capture).compiled_run
    forward = run.frame("0")
    assert forward.function == "forward" and forward.compilations == len(BATCHES)
    ((compile_id, reason),) = forward.recompile_reasons
    assert compile_id == "0/1" and f"expected {BATCHES[0]}, actual {BATCHES[1]}" in reason
    assert {f.frame for f in run.recompiled} == {"0", "1"}  # the resume frame after the break too
    assert any(line.startswith("recompiled: frame 0 (forward") for line in compiled_lines(load_model(capture)))


def test_region_detail_names_the_break_and_the_recompile(capture) -> None:
    model = load_model(capture)
    region = next(n for n in model.modules.walk() if n.name == "[compiled 0:1]")
    text = module_text(model, region).plain
    assert f"graph break at {__file__}:{_break_line()}" in text
    assert "recompiled 0/1: " in text and "size mismatch" in text


def test_eager_module_outside_the_regions(capture) -> None:
    model = load_model(capture)
    eager = model.compiled_run.eager_modules
    assert [(m.node.name, m.at_graph_break) for m in eager] == [("Linear_0", False)]  # Outer.pre
    assert eager[0].node.parent.name == "Outer_0"


def test_without_compile_log_the_trace_still_counts_breaks_and_recompiles(capture, tmp_path) -> None:
    with gzip.open(capture, "rt") as file:
        document = json.load(file)
    del document["tuiprofLive"]["compile_log"]
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(document))
    run = load_model(bare).compiled_run
    assert not run.from_capture and run.graph_break_count == 1
    regions = {e["name"][len(REGION) :] for e in document["traceEvents"] if e.get("name", "").startswith(REGION)}
    assert regions == {"0/0", "0/1", "1/0", "1/1"}  # oracle: two frames, each compiled twice
    assert {f.frame: f.compilations for f in run.frames} == {"0": 2, "1": 2}
    assert "1 graph break seen in the trace: frame 1 ran inside" in "\n".join(compiled_lines(load_model(bare)))


def test_shipped_trace_without_log_counts_nested_regions() -> None:
    events = complete_events(COMPILED_CPU)
    regions = [e for e in events if e["name"].startswith(REGION)]
    frame = {id(e): e["name"][len(REGION) :].split("/")[0] for e in regions}
    nested = {
        frame[id(r)] for r in regions for outer in regions if encloses(outer, r) and frame[id(outer)] != frame[id(r)]
    }
    modules = [e for e in events if e["name"].startswith("nn.Module: ")]
    eager = [
        m
        for m in modules
        if not any(encloses(m, r) for r in regions)
        and not any(encloses(o, m) and not any(encloses(o, r) for r in regions) for o in modules)
    ]
    run = load_model(COMPILED_CPU).compiled_run
    assert run.graph_break_count == len(nested) == 2
    assert {f.frame for f in run.frames if f.nested} == nested
    assert sorted(m.node.name for m in run.eager_modules) == sorted(
        e["name"].removeprefix("nn.Module: ") for e in eager
    )


def test_eager_modules_rule_on_a_built_tree() -> None:
    """By construction: a module with a frame and no region below is eager (outermost only);
    inside a region node it ran at a graph break; a node without a frame (from the kernel
    map) or one holding a region is not."""
    from tuiprof.analysis.compiled_run import _eager_modules
    from tuiprof.analysis.modules import ModuleNode, ModuleTree

    def node(name, parent=None):
        made = ModuleNode(name, 0, parent=parent, cpu_total_us=10.0)
        if parent is not None:
            parent.children.append(made)
        return made

    net = node("Net_0")
    head = node("Sequential_0", net)
    head_linear = node("Linear_0", head)
    wrapper = node("OptimizedModule_0", net)
    region = node("[compiled 0:0]", wrapper)
    mapped = node("Linear_1", region)  # placed by the kernel map: no frame
    at_break = node("Block_0", region)
    loss = node("CrossEntropyLoss_0")
    framed = [net, head, head_linear, wrapper, at_break, loss]
    tree = ModuleTree([net, loss], {row: n for row, n in enumerate(framed)})
    eager = {(m.node.name, m.at_graph_break) for m in _eager_modules(tree)}
    assert eager == {("Sequential_0", False), ("CrossEntropyLoss_0", False), ("Block_0", True)}
    assert mapped.name not in {m.node.name for m in _eager_modules(tree)}


def test_live_compile_capture_saves_the_graph_break(tmp_path) -> None:
    """``tuiprof live --compile``: the warm-up step's compile log is in the saved trace."""
    from tuiprof.capture.config import CaptureConfig
    from tuiprof.capture.session import profile_training

    torch._dynamo.reset()
    torch.manual_seed(0)
    config = CaptureConfig(
        model="Broken",
        device="cpu",
        batch_size=4,
        input_shape="8",
        num_classes=8,
        wait=0,
        warmup=1,
        active=1,
        compile=True,
    )
    path = tmp_path / "live.json"
    profile_training(config, path, model=Broken())
    run = load_model(path).compiled_run
    (site,) = run.graph_breaks
    assert (site.file, site.line) == (__file__, _break_line())
    assert run.frame("0").compilations == 1 and not run.recompiled
