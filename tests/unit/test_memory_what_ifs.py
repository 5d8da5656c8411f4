"""The memory what-ifs replay torch's timeline with the remedy applied (issue 35), rather than
subtract a category at the peak.

The oracles: small timelines whose peak with and without the remedy is worked out by hand in
each docstring (the old subtraction's answer beside it, off by more than 10 %), and one capture
of a tiny model made again with the remedy, its peak measured.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import msgspec
import pytest

from tests.conftest import ROOT
from tests.helpers.gpu_trace import EPOCH_US, GpuTrace
from tests.helpers.memory_categories import device_categories
from tuiprof.analysis import load_model
from tuiprof.analysis.model import TraceModel
from tuiprof.report.findings import PEAK_MEMORY, findings
from tuiprof.report.views import TRACE_VIEWS, ViewOptions
from tuiprof.trace.live import LiveFacts, MemoryCategories, encode_memory_categories

_spec = importlib.util.spec_from_file_location("check_memory_what_ifs", ROOT / "scripts" / "check_memory_what_ifs.py")
check = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["check_memory_what_ifs"] = check  # dataclasses look their module up
_spec.loader.exec_module(check)  # type: ignore[union-attr]

MS = 1_000_000  # ns: the timelines below are written in milliseconds after 10 ms


def _trace(tmp_path, changes, modules: dict[int, str], preexisting: int, spans=(), frames=()) -> TraceModel:
    """A trace of one step (10-30 ms after the epoch) holding the timeline ``changes`` (time in
    ms after 10 ms, -1 before the capture; signed bytes; category; tensor row, each row's
    module named in ``modules``), the calls ``spans`` and the module frames ``frames`` (name,
    start, end in ms after 10 ms, parent index), as a capture saves them."""
    trace = GpuTrace()
    trace.step(1, 10_000, 20_000)
    for name, start, end in spans:
        trace.op(name, 10_000 + 1000 * start, 1000 * (end - start))
    ids: list[int] = []
    for name, start, end, parent in frames:
        ids.append(
            trace.module(name, 10_000 + 1000 * start, 1000 * (end - start), ids[parent] if parent >= 0 else None)
        )
    absolute = [(-1 if t < 0 else 10_000_000 + round(t * MS), b, c, r) for t, b, c, r in changes]
    device = device_categories(absolute, preexisting)
    device.first_ns += EPOCH_US * 1000  # the profiler's clock: the trace's us x 1000
    names = sorted(set(modules.values()))
    device.modules = names
    device.tensor_module = [names.index(modules[row]) if row in modules else -1 for row in range(len(device.tensor_id))]
    facts = LiveFacts(memory_categories=encode_memory_categories(MemoryCategories(devices=[device])))
    trace.members["tuiprofLive"] = msgspec.json.decode(msgspec.json.encode(facts))
    return load_model(trace.write(tmp_path / "what-ifs.json"))


def _what_if(model: TraceModel, remedy: str) -> dict:
    """The memory-what-ifs row of ``remedy`` (summary --view memory-what-ifs --format json)."""
    rows = {row["remedy"]: row for row in TRACE_VIEWS["memory-what-ifs"].build(model, ViewOptions())}
    return rows[remedy]


# ------------------------------------------------------------------ gradients set to None

# P: a parameter (100 B), G its gradient kept between steps (set_to_none=False), zeroed in place
# at zero_grad (11 ms), A an activation (300 B, 12-16 ms), T the gradient backward computes (100 B,
# 13-13.6 ms), added into G at 13.5 ms, B a backward buffer (50 B, 14-15 ms).
KEPT = [
    (-1, 100, "parameter", 0),
    (-1, 100, "gradient", 1),
    (1, -100, "gradient", 1),  # zero_grad: a new version of G
    (1, 100, "gradient", 1),
    (2, 300, "activation", 2),
    (3, 100, "autograd_detail", 3),
    (3.5, -100, "gradient", 1),  # AccumulateGrad's add_: a new version of G
    (3.5, 100, "gradient", 1),
    (3.6, -100, "autograd_detail", 3),
    (4, 50, "autograd_detail", 4),
    (5, -50, "autograd_detail", 4),
    (6, -300, "activation", 2),
]
ZERO_GRAD = [("Optimizer.zero_grad#SGD.zero_grad", 0.5, 1.5)]
LINEAR = {0: "Linear_0", 1: "Linear_0"}


def test_gradients_freed_at_zero_grad_move_the_peak_into_the_backward(tmp_path) -> None:
    """Kept: 200 before, 500 at 12, 600 at 13 (A + T + P + G: the peak), 500 at 13.6, 550 at 14.
    Set to None: G freed at 11 (100), 400 at 12, 500 at 13 (T is the new G), 500 at 13.5 (the
    add_ and T's free are gone: T is kept as the gradient), 550 at 14: the peak, in the backward.
    The old subtraction (the gradients at the peak made before its step) said 600 - 100 = 500;
    adding G back at the add_ without knowing T would say 600 at 13.5."""
    model = _trace(tmp_path, KEPT, LINEAR, 2, ZERO_GRAD)
    assert model.categorised_peak.peak_bytes == 600
    row = _what_if(model, "Gradients to None")
    assert (row["saves_bytes"], row["peak_after_bytes"]) == (50, 550)


def test_gradients_already_set_to_none_change_nothing(tmp_path) -> None:
    """zero_grad(set_to_none=True): G is freed at zero_grad and made in backward; nothing is
    zeroed in place, the replay is the timeline itself."""
    model = _trace(
        tmp_path,
        [
            (-1, 100, "parameter", 0),
            (-1, 100, "gradient", 1),
            (1, -100, "gradient", 1),  # freed at zero_grad
            (2, 300, "activation", 2),
            (3, 100, "gradient", 3),  # made in backward
            (6, -300, "activation", 2),
        ],
        {0: "Linear_0", 1: "Linear_0", 3: "Linear_0"},
        2,
        ZERO_GRAD,
    )
    row = _what_if(model, "Gradients to None")
    assert (row["saves_bytes"], row["peak_after_bytes"]) == (0, 500)
    assert "no gradient is zeroed in place" in row["how"]


def test_gradients_torch_counts_above_the_parameters_are_said_with_the_bound(tmp_path) -> None:
    """G, made before the capture, is freed at zero_grad where torch does not see it (a tensor
    from before the profiler): at the peak it counts G beside G2, this step's gradient of the
    same parameter: 200 B of gradients for 100 B of parameters.  Said, with the bound."""
    model = _trace(
        tmp_path,
        [
            (-1, 100, "parameter", 0),
            (-1, 100, "gradient", 1),  # never seen freed
            (2, 300, "activation", 2),
            (3, 100, "gradient", 3),
            (6, -300, "activation", 2),
        ],
        {0: "Linear_0", 1: "Linear_0", 3: "Linear_0"},
        2,
        ZERO_GRAD,
    )
    how = _what_if(model, "Gradients to None")["how"]
    assert "torch counts 200 B of gradients at the peak for 100 B of parameters" in how
    assert "more than their own parameters in 1 module" in how and "gradients are at most 100 B" in how


# ------------------------------------------------------------------ optimizer state

# P a parameter, M1 and M2 Adam's state (100 B each, new versions in its step), A an activation
# (150 B, 12-16 ms), in the step (20-21 ms) S (sqrt, which torch calls a parameter) and D (div).
ADAM = [
    (-1, 100, "parameter", 0),
    (-1, 100, "optimizer_state", 1),
    (-1, 100, "optimizer_state", 2),
    (2, 150, "activation", 3),
    (6, -150, "activation", 3),
    (10.1, -100, "optimizer_state", 1),
    (10.1, 100, "optimizer_state", 1),
    (10.2, 100, "parameter", 4),
    (10.3, 100, "activation", 5),
    (10.4, -100, "parameter", 4),
    (10.5, -100, "activation", 5),
]
ADAM_MODULES = {0: "Linear_0", 1: "Linear_0", 2: "Linear_0"}


@pytest.mark.parametrize(
    ("step", "remedy", "after"),
    [
        # a stateless optimizer: its state and its step's tensors gone; the peak moves into the forward
        ("Optimizer.step#Adam.step", "A stateless optimizer", 250),
        ("Optimizer.step#SGD.step", "SGD without momentum", 300),  # its state gone, the step's own tensors stay
    ],
)
def test_optimizer_state_is_replayed_away_with_what_its_step_allocates(tmp_path, step, remedy, after) -> None:
    """With state: 300 before, 450 at 12, 300 at 16, 400 at 20.2, 500 at 20.3 (the peak, in the
    step). The old subtraction (the state at the peak) said 500 - 200 = 300 for Adam.
    Stateless (SGD without momentum instead of Adam): P alone (100), 250 at 12: the peak moves
    into the forward. SGD without momentum: 100, 250 at 12, 200 at 20.2, 300 at 20.3."""
    model = _trace(tmp_path, ADAM, ADAM_MODULES, 3, [(step, 9.5, 11)])
    assert model.categorised_peak.peak_bytes == 500
    assert _what_if(model, remedy)["peak_after_bytes"] == after


# ------------------------------------------------------------------ half the batch

# P: Conv2d_0's weight (64 B), X the batch (400 B, input), both from before the capture; W a
# weight copy the compiled model makes (input, 64 B), A Conv2d_0's output (200 B), Q an output
# torch takes for a parameter (80 B, no module holds it), U a workspace torch ties to no tensor
# (100 B), R one in ReLU_0 of the weight's size (64 B; ReLU_0 holds no weight).
BATCH = [
    (-1, 64, "parameter", 0),
    (-1, 400, "input", 1),
    (2, 64, "input", 2),
    (2, 200, "activation", 3),
    (2.2, 80, "parameter", 4),
    (2.5, 100, "unknown", 5),
    (2.6, 64, "unknown", 6),
    (3, -100, "unknown", 5),
    (6, -64, "input", 2),
    (6, -200, "activation", 3),
    (6, -80, "parameter", 4),
    (6, -64, "unknown", 6),
]
BATCH_MODULES = {0: "Conv2d_0", 2: "Sequential_0", 3: "Conv2d_0", 5: "Conv2d_0", 6: "ReLU_0"}
# Sequential_0 (11.5-13.5 ms) around Conv2d_0 (11.9-12.55 ms) and ReLU_0 (12.55-12.7 ms)
FRAMES = [("Sequential_0", 1.5, 3.5, -1), ("Conv2d_0", 1.9, 2.55, 0), ("ReLU_0", 2.55, 2.7, 0)]


def test_half_the_batch_halves_only_the_tensors_that_grow_with_it(tmp_path) -> None:
    """Now: 464, 728 at 12, 808, 908, 972 at 12.6 (the peak). Halved (X, A, Q, U, R; not P, not
    W): 264, 428 at 12, 468, 518, 550 at 12.6.  The old subtraction halved inputs, activations,
    temporaries and autograd detail at the peak, W among them, U, R and Q not: 972 - 332 = 640."""
    model = _trace(tmp_path, BATCH, BATCH_MODULES, 2, frames=FRAMES)
    assert model.categorised_peak.peak_bytes == 972
    assert _what_if(model, "Half the batch")["peak_after_bytes"] == 550


def test_a_parameter_no_module_holds_makes_every_block_of_its_size_a_copy(tmp_path) -> None:
    """A compiled model captured without it: torch names no module for its weight P, so any
    block of P's size may be a copy of it: R is not halved either (550 + 32)."""
    model = _trace(tmp_path, BATCH, {row: m for row, m in BATCH_MODULES.items() if row}, 2, frames=FRAMES)
    assert _what_if(model, "Half the batch")["peak_after_bytes"] == 582


def _backward(weight: int, other: int) -> list[tuple[float, int, str, int]]:
    """P (``weight`` B) and P2 (``other`` B) with G, P's gradient kept between steps; A (400 B,
    12-16 ms) and A2 (P2's size, 12.5-16 ms) activations; T, P's gradient backward computes
    (13-13.6 ms, added into G at 13.5), B A2's gradient (14-15 ms)."""
    return [
        (-1, weight, "parameter", 0),
        (-1, other, "parameter", 1),
        (-1, weight, "gradient", 2),
        (1, -weight, "gradient", 2),
        (1, weight, "gradient", 2),
        (2, 400, "activation", 3),
        (2.5, other, "activation", 6),
        (3, weight, "autograd_detail", 4),
        (3.5, -weight, "gradient", 2),
        (3.5, weight, "gradient", 2),
        (3.6, -weight, "autograd_detail", 4),
        (4, other, "autograd_detail", 5),
        (5, -other, "autograd_detail", 5),
        (6, -400, "activation", 3),
        (6, -other, "activation", 6),
    ]


@pytest.mark.parametrize(
    ("weight", "other", "now", "after"),
    [
        # 800, 1200 at 12, 1400, 1700 at 13 (the peak), 1400, 1600 at 14. Halved (A, A2, B; not T,
        # added into G): 1000 at 12, 1100, 1400 at 13.  The old subtraction halved T too: 1700 - 450.
        (300, 200, 1700, 1400),
        # 400, 800 at 12, 1000, 1100 at 13, 1000, 1200 at 14 (the peak). Halved (A, A2 and B: B has
        # P2's size, but A2's too: an activation's gradient): 600 at 12, 700, 800 at 13, 700, 800 at 14.
        (100, 200, 1200, 800),
    ],
)
def test_in_backward_a_weights_gradient_stays_and_an_activations_gradient_halves(
    tmp_path, weight, other, now, after
) -> None:
    modules = {0: "Linear_0", 1: "Linear_1", 2: "Linear_0", 3: "Linear_0", 6: "Linear_1"}
    model = _trace(tmp_path, _backward(weight, other), modules, 3, ZERO_GRAD)
    assert model.categorised_peak.peak_bytes == now
    assert _what_if(model, "Half the batch")["peak_after_bytes"] == after


def test_in_a_compiled_backward_a_tensor_of_a_weights_size_no_forward_tensor_has_stays(tmp_path) -> None:
    """B of P2's size with no activation of that size (A2 gone): a weight's gradient a compiled
    backward holds before returning it, not an activation's.  The first case without A2: 800,
    1200 at 12, 1500 at 13, 1200, 1400 at 14; halved (A only): 1000 at 12, 1300 at 13, 1000, 1200."""
    changes = [change for change in _backward(300, 200) if change[3] != 6]
    model = _trace(tmp_path, changes, {0: "Linear_0", 1: "Linear_1", 2: "Linear_0", 3: "Linear_0"}, 3, ZERO_GRAD)
    assert model.categorised_peak.peak_bytes == 1500
    assert _what_if(model, "Half the batch")["peak_after_bytes"] == 1300


# ------------------------------------------------------------------ through a trace: the table and the finding


def test_the_table_and_the_memory_peak_finding_carry_the_replayed_peak(tmp_path) -> None:
    """The Adam timeline above in a trace: the what-if row says the replayed peak (250), and
    the memory-peak finding carries its remedy and saving (250 of 500; a trade, not waste: info)."""
    model = _trace(tmp_path, ADAM, ADAM_MODULES, 3, [("Optimizer.step#Adam.step", 9.5, 11)])
    assert "instead of Adam" in _what_if(model, "A stateless optimizer")["how"]
    finding = next(f for f in findings(model) if f.id == "memory-peak")
    assert finding.remedy == "a stateless optimizer (SGD without momentum) instead of Adam, if the model trains as well"
    assert (finding.saving.metric, finding.saving.current, finding.saving.amount) == (PEAK_MEMORY, 500, 250)
    assert finding.severity == "info" and finding.weight == 0.5


def test_gradients_without_a_zero_grad_in_the_trace_are_not_predicted(tmp_path) -> None:
    """Gradients zeroed by hand (no Optimizer.zero_grad# span): where they would be freed is not
    known, so tuiprof abstains and says why."""
    gradients = _what_if(_trace(tmp_path, KEPT, LINEAR, 2), "Gradients to None")
    assert gradients["saves_bytes"] is None and "no optimizer.zero_grad() in the trace" in gradients["how"]


# ------------------------------------------------------------------ made again: one capture


def _capture(path: Path, *arguments: str) -> TraceModel:
    """One capture of scripts/check_memory_what_ifs.py's small convolutional model (``train``,
    in this process); torch's own peak of the same profile must be the one tuiprof reads."""
    pytest.importorskip("torch")
    check.train([f"out={path}", *arguments])
    model = load_model(path)
    torch_peak = json.loads(path.with_suffix(".torch.json").read_text())["peak_bytes"]
    assert model.categorised_peak.peak_bytes == torch_peak
    return model


def test_half_the_batch_made_again_measures_the_replayed_peak(tmp_path) -> None:
    """Batch 16, then 8: the convolutions' workspaces (memory torch ties to no tensor, a third
    of the peak) halve with the batch; the old subtraction left them whole and predicted about
    a third too much.  About 5 s of CPU (20 s on 2 shared, loaded cores)."""
    predicted = _what_if(_capture(tmp_path / "16.json.gz", "batch=16"), "Half the batch")["peak_after_bytes"]
    measured = _capture(tmp_path / "8.json.gz", "batch=8").categorised_peak.peak_bytes
    assert abs(predicted - measured) <= 0.02 * measured
