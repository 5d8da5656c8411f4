"""``tuiprof diff eager.json compiled.json``: modules matched by qualified name across
compilation, a row per module and direction with the module's total time (analysis/compiled_diff.py).

Two live captures of the same tiny MLP (the compiled one takes seconds on CPU).  Oracles:
the module facts the captures saved (qualified names) and each tree's own nodes, looked
up by qualified name by hand; the diff's alignment is what is under test.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
from torch import nn

from tests.helpers.compiled import module_node
from tuiprof import cli
from tuiprof.analysis import load_model
from tuiprof.analysis.diff import diff_traces
from tuiprof.analysis.modules import OUTSIDE_MODULES
from tuiprof.capture.config import CaptureConfig
from tuiprof.capture.session import profile_training

QUALIFIED = ("model", "fc1", "act", "fc2", "loss")


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    folder = tmp_path_factory.mktemp("diff_compiled")
    paths = []
    for compile in (False, True):
        torch.manual_seed(0)
        path = folder / f"mlp-{'compiled' if compile else 'eager'}.json"
        config = CaptureConfig(
            model="MLP", device="cpu", batch_size=4, input_shape="16", wait=0, warmup=1, active=1, compile=compile
        )
        result = profile_training(config, path, model=MLP())
        assert result.facts.modules  # qualified names saved (the oracle below reads them)
        paths.append(path)
    return paths


def test_modules_match_by_qualified_name_forward_and_backward(traces) -> None:
    eager, compiled = (load_model(p) for p in traces)
    assert (
        module_node(eager, "fc1").path != module_node(compiled, "fc1").path
    )  # paths differ: MLP_0/... vs OptimizedModule_0/...
    table = diff_traces(eager, compiled).table("modules")
    for qualified in QUALIFIED:
        a_node, b_node = module_node(eager, qualified), module_node(compiled, qualified)
        forward = next(r for r in table.rows if r.name == qualified and r.detail.endswith("fwd"))
        assert forward.status in ("changed", "same")
        assert forward.a == pytest.approx(a_node.cpu_total_us) and forward.b == pytest.approx(b_node.cpu_total_us)
        backward = next(r for r in table.rows if r.name == qualified and r.detail.endswith("bwd"))
        assert backward.a == pytest.approx(a_node.backward_cpu_us) and backward.b == pytest.approx(
            b_node.backward_cpu_us
        )
    assert not [r for r in table.rows if r.status == "removed"]  # every eager module found in the compiled run


def test_compiled_only_nodes_are_added_rows_with_their_own_time(traces) -> None:
    eager, compiled = (load_model(p) for p in traces)
    table = diff_traces(eager, compiled).table("modules")
    region = next(
        n for n in compiled.modules.walk() if n.name.startswith("[compiled ")
    )  # frame id: the process's count
    added = {r.name for r in table.rows if r.status == "added"}
    assert added == {"OptimizedModule_0", f"model/{region.name}", f"model/{region.name}/(compiled, unattributed)"}
    assert table.row(f"model/{region.name}", "fwd").b == pytest.approx(region.self_cpu_us)
    for model, total in ((eager, table.total_a), (compiled, table.total_b)):  # shares are of the whole tree's change
        outside = model.modules.outside  # and of the work outside modules, a row of its own
        assert outside is not None and table.row(OUTSIDE_MODULES) is not None
        tree = sum(root.cpu_total_us + root.backward_cpu_us for root in model.modules.roots)
        assert total == pytest.approx(tree + outside.cpu_total_us)


def test_diff_command_prints_the_modules_by_qualified_name(traces, capsys) -> None:
    # every row: the table keeps 10 by absolute change, and a small backward row's rank is the timing's
    # (under pytest-xdist Linear_1 bwd fell out of the 10)
    code = cli.main(["diff", str(traces[0]), str(traces[1]), "--view", "modules", "--limit", "100"])
    out = capsys.readouterr().out
    assert code in (0, 1) and "model/[compiled " in out and "Linear_1 bwd" in out
