"""Live capture on CPU with tiny batches (each test well under a minute).

CUDA tests run when CUDA is present and skip cleanly otherwise.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.conftest import ROOT, key_averages_mismatches  # noqa: E402
from tuiprof.analysis import analyze, load_model  # noqa: E402
from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.session import profile_training  # noqa: E402
from tuiprof.trace import load_trace  # noqa: E402

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.fixture(scope="module")
def live_resnet(tmp_path_factory):
    trace = tmp_path_factory.mktemp("live") / "resnet18.pt.trace.json.gz"
    config = CaptureConfig(model="resnet18", device="cpu", batch_size=2, wait=0, warmup=1, active=1)
    result = profile_training(config, trace, want_key_averages=True)
    model = analyze(load_trace(trace), result.facts)
    return result, model


def test_live_module_tree_has_qualified_names(live_resnet) -> None:
    _, model = live_resnet
    names = {node.qualified_name for node in model.modules.walk()}
    assert {"model", "layer1", "layer1.0", "layer1.0.conv1", "layer4.1.bn2", "fc", "loss"} <= names
    conv1 = next(n for n in model.modules.walk() if n.qualified_name == "conv1")
    assert conv1.parameters == 64 * 3 * 7 * 7 and conv1.output_shape == "2x64x16x16"


def _module_facts(model) -> dict[str, tuple]:
    return {n.path: (n.qualified_name, n.parameters, n.output_shape, n.flops) for n in model.modules.walk()}


def test_saved_capture_reopens_with_what_the_live_session_knew(live_resnet) -> None:
    """`tuiprof open` of a saved live capture: qualified names, parameters, shapes and torch's FLOPs."""
    result, live = live_resnet
    reopened = load_model(result.trace_path)  # no facts passed: read from the trace's tuiprofLive member
    assert _module_facts(reopened) == _module_facts(live)
    assert any(q == "layer4.0.conv1" for q, *_ in _module_facts(reopened).values())
    assert reopened.flops_source == live.flops_source and reopened.flops_source.startswith("measured")
    assert {s.name: s.flops for s in reopened.operators()} == {s.name: s.flops for s in live.operators()}
    assert not reopened.report.problems


def test_saved_member_is_one_extra_top_level_key(live_resnet) -> None:
    """Other readers see torch's document plus one member they skip by name."""
    import gzip
    import json

    result, _ = live_resnet
    document = json.loads(gzip.decompress(result.trace_path.read_bytes()))
    assert list(document)[-1] == "tuiprofLive" and "traceEvents" in document
    member = document["tuiprofLive"]
    assert member["version"] == 1 and member["modules"]["Conv2d_0"]["qualified_name"] == "conv1"
    assert all(isinstance(v, int) and v > 0 for v in member["flops_by_external_id"].values())


def test_damaged_member_is_noted_and_ignored(live_resnet, tmp_path) -> None:
    import gzip
    import json

    result, _ = live_resnet
    document = json.loads(gzip.decompress(result.trace_path.read_bytes()))
    document["tuiprofLive"] = {"modules": 5}
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(document))
    model = load_model(path)
    assert model.steps and model.operators()
    assert not any(n.qualified_name for n in model.modules.walk())
    assert any("tuiprofLive" in problem for problem in model.report.problems)


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
        [sys.executable, "-m", "tuiprof", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_run_profiles_the_example_script(tmp_path) -> None:
    trace = tmp_path / "run.json.gz"
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = _tuiprof(
        "run",
        "--no-tui",
        "--save",
        str(trace),
        "examples/train_resnet18_cifar.py",
        "--batch-size",
        "4",
        "--samples",
        "64",
        env=_env(TMPDIR=str(scratch)),
    )
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert "ResNet_0/Sequential_" in out and "aten::convolution_backward" in out
    # Progress from the start: before torch is imported, then every optimizer step with its phase.
    progress = [line for line in err.splitlines() if line.startswith("tuiprof: ")]
    assert progress[0].startswith("tuiprof: importing torch")
    for step, phase in ((2, "warmup"), (3, "active"), (5, "active")):
        assert any(f"({step}/5) · {phase}" in line for line in progress), err  # ProfilerStep#N (n/5)
    assert any("writing the trace (5/5 steps run)" in line for line in progress), err  # the last step counted
    assert f"tuiprof: trace saved: {trace}" in err
    model = load_model(trace)
    assert model.steps and model.modules.roots[0].name == "ResNet_0"
    assert model.flops_source.startswith("measured")  # torch's FLOPs, saved in the trace
    assert _scratch_left(scratch) == []


def test_sigint_keeps_what_was_captured(tmp_path) -> None:
    """One Ctrl-C lets the running step finish: every step run in the active phase is in the trace,
    the exit line counts exactly those, and the capture, shown and saved, exits 0."""
    trace = tmp_path / "interrupted.json.gz"
    proc = _tuiprof(
        "live",
        *TINY,
        "--no-tui",
        "--no-stack",
        "--wait",
        "0",
        "--warmup",
        "1",
        "--active",
        "5000",
        "--save",
        str(trace),
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
    assert proc.returncode == 0, seen + err
    assert "Traceback" not in err and "did not finish" not in err
    steps = [
        name
        for name in (e.get("name", "") for e in _raw_trace(trace)["traceEvents"])
        if name.startswith("ProfilerStep#")
    ]
    ran = re.search(
        r"tuiprof: (\d+) steps run in [0-9.]+m?s \(capture\); the trace holds (\d+) \(ProfilerStep#1(?:-#(\d+))?\)",
        err,
    )
    assert ran, err  # one active step on a loaded machine: "(ProfilerStep#1)", no range
    last = int(ran.group(3) or 1)
    assert int(ran.group(2)) == len(steps) == int(ran.group(1)) - 1 == last  # all but the warmup step
    assert steps == [f"ProfilerStep#{n}" for n in range(1, len(steps) + 1)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_requested_without_cuda_is_one_line_exit_2() -> None:
    proc = _tuiprof("live", "resnet18", "--device", "cuda", "--no-tui")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert err.strip().count("\n") == 0 and "CUDA" in err and "Traceback" not in err


def test_misspelled_model_name_suggests_the_model_and_leaves_nothing(tmp_path) -> None:
    proc = _tuiprof("live", "restnet18", "--no-tui", "--device", "cpu", env=_env(TMPDIR=str(tmp_path)))
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in err
    assert [line for line in err.splitlines() if line.startswith("tuiprof: restnet18")] == [
        "tuiprof: restnet18: not a torchvision model; did you mean resnet18?"
    ]
    assert _scratch_left(tmp_path) == []


def test_input_shape_the_model_rejects_is_one_line_exit_2() -> None:
    proc = _tuiprof("live", TINY[0], "--input-shape", "8x16", "--batch-size", "2", "--device", "cpu", "--no-tui")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "Traceback" not in err and "internal error" not in err
    assert any(
        line.startswith(f"tuiprof: {TINY[0]}: the model rejects a batch of 2x8x16 (") and "--input-shape" in line
        for line in err.splitlines()
    ), err


def _env(**extra: str) -> dict[str, str]:
    import os

    return dict(os.environ, **extra)


def _readme_loop(path, steps: int = 8, **kwargs) -> None:
    """The README's example: schedule(wait=1, warmup=1, active=3) over a loop of ``steps`` batches."""
    import tuiprof

    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU())
    with tuiprof.profile(path, schedule=torch.profiler.schedule(wait=1, warmup=1, active=3), **kwargs) as p:
        for _ in range(steps):
            model(torch.randn(32, 64)).sum().backward()
            p.step()


def _step_names(path) -> list[str]:
    return [step.name for step in load_model(path).steps]


def test_profile_keeps_the_first_complete_window(tmp_path) -> None:
    """8 batches with wait 1, warmup 1, active 3: steps 2-4 (the second cycle's partial 7-8 must not replace them)."""
    path = tmp_path / "readme.json.gz"
    _readme_loop(path)
    assert _step_names(path) == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]


def test_profile_keep_last_keeps_the_last_complete_window(tmp_path) -> None:
    path = tmp_path / "last.json.gz"
    _readme_loop(path, steps=12, keep="last")  # complete windows 2-4 and 7-9; 12 is a partial third
    assert _step_names(path) == ["ProfilerStep#7", "ProfilerStep#8", "ProfilerStep#9"]


def test_profile_ended_in_warmup_writes_nothing_and_says_so(tmp_path) -> None:
    path = tmp_path / "short.json.gz"
    with pytest.warns(UserWarning, match="nothing was written"):
        _readme_loop(path, steps=2)
    assert not path.exists()


def test_profile_cut_short_in_the_active_steps_keeps_the_finished_ones(tmp_path) -> None:
    path = tmp_path / "cut.json.gz"
    _readme_loop(path, steps=4)  # steps 2 and 3 active and finished; the last p.step() opened step 4
    assert _step_names(path) == ["ProfilerStep#2", "ProfilerStep#3"]  # the empty step 4 is not a step


# ------------------------------------------------------------------ a step cut short by Ctrl-C
# One rule for profile(), live and run: the step a stop cuts short is not in the trace.  The
# oracle reads the raw JSON: which ProfilerStep ranges are there, and how many forward Linears and
# backward Addmm nodes (2 of each per finished step of the MLP in tests/helpers/interrupting.py).


def _raw_trace(path: Path) -> dict:
    import gzip
    import json

    data = path.read_bytes()
    return json.loads(gzip.decompress(data) if path.name.endswith(".gz") else data)


def _finished_work(path: Path) -> tuple[list[str], int, int]:
    """(ProfilerStep names, aten::linear calls, AddmmBackward0 nodes) in the raw trace."""
    events = _raw_trace(path)["traceEvents"]
    names = [e.get("name", "") for e in events if e.get("ph") == "X"]
    steps = [n for n in names if n.startswith("ProfilerStep#")]
    backward = sum(1 for n in names if n.startswith("autograd::engine::evaluate_function: AddmmBackward0"))
    return steps, names.count("aten::linear"), backward


def _mlp_training(model, optimizer_step) -> None:
    """8 steps of the MLP; ``optimizer_step`` runs after each step's work."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(8):
        model(torch.randn(4, 16)).sum().backward()
        optimizer.step()
        optimizer_step()


def test_profile_leaves_a_step_cut_by_ctrl_c_out_of_the_trace(tmp_path) -> None:
    import tuiprof
    from tests.helpers.interrupting import mlp

    path = tmp_path / "cut.json"
    model = mlp(call=4)  # steps 0-2 finish (wait, warmup, active); step 3 stops after its first Linear
    with pytest.raises(KeyboardInterrupt):
        with tuiprof.profile(path, schedule=torch.profiler.schedule(wait=1, warmup=1, active=5), with_stack=False) as p:
            _mlp_training(model, p.step)
    assert _finished_work(path) == (["ProfilerStep#2"], 2, 2)
    assert p.steps == [2]


def test_live_leaves_a_step_cut_by_ctrl_c_out_of_the_trace(tmp_path) -> None:
    from tests.helpers.interrupting import mlp

    path = tmp_path / "live.json.gz"
    config = CaptureConfig(model="mlp", device="cpu", batch_size=4, input_shape="16", wait=0, warmup=1, active=5)
    batches = iter([(torch.randn(4, 16), torch.randint(0, 10, (4,)))] * 10)
    # forward call 1 names the modules (unprofiled); calls 2-4 are steps 0-2; call 5 cuts step 3
    result = profile_training(config, path, model=mlp(call=5), batches=batches)
    assert result.interrupted and result.steps_done == 3
    assert _finished_work(path) == (["ProfilerStep#1", "ProfilerStep#2"], 4, 4)
    assert result.trace_steps == [1, 2] and result.dropped_step == 3
    model = load_model(path)
    assert [s.name for s in model.steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert sum(s.calls for s in model.operators() if s.name == "aten::linear") == 4


TINY = ("tuiprof.capture.models:tiny_transformer", "--input-shape", "8x64", "--batch-size", "2", "--device", "cpu")


RUN_SCRIPT = """
import torch
from tests.helpers.interrupting import mlp

model = mlp(call=4, signals=1)  # Ctrl-C during step 3's forward: steps 0-2 finished
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
for _ in range(8):
    model(torch.randn(4, 16)).sum().backward()
    optimizer.step()
"""


def test_run_stopped_by_ctrl_c_inside_a_step_drops_it_and_exits_0(tmp_path) -> None:
    """The issue's case: `tuiprof run` stopped during an active step kept that step, half done."""
    script = tmp_path / "train_mlp.py"
    script.write_text(RUN_SCRIPT)
    trace = tmp_path / "run.json.gz"
    proc = _tuiprof(
        "run",
        "--no-tui",
        "--no-stack",
        "--wait",
        "0",
        "--warmup",
        "1",
        "--active",
        "5",
        "--save",
        str(trace),
        str(script),
        env=_env(PYTHONPATH=str(ROOT)),
    )
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err  # shown and saved: not "stopped before there was anything to show"
    assert _finished_work(trace) == (["ProfilerStep#1", "ProfilerStep#2"], 4, 4)
    assert "tuiprof: 3 steps run in " in err
    assert (
        "; the trace holds 2 (ProfilerStep#1-#2)\ntuiprof: ProfilerStep#3 did not finish and was left out of the trace\n"
        in err
    )
    assert "aten::linear" in out and "Traceback" not in err


def test_live_ctrl_c_twice_inside_a_step_drops_it_and_exits_0(tmp_path) -> None:
    """First Ctrl-C: stop after this step; a second one inside the same step aborts it."""
    trace = tmp_path / "new" / "folder" / "live.json.gz"  # --save creates missing folders
    proc = _tuiprof(
        "live",
        "tests.helpers.interrupting:live_mlp",
        "--no-tui",
        "--no-stack",
        "--input-shape",
        "16",
        "--batch-size",
        "4",
        "--device",
        "cpu",
        "--wait",
        "0",
        "--warmup",
        "1",
        "--active",
        "5",
        "--save",
        str(trace),
        env=_env(PYTHONPATH=str(ROOT), INTERRUPT_AT_CALL="5"),  # call 1 names the modules; 2-4 are steps 0-2
    )
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0, err
    assert _finished_work(trace) == (["ProfilerStep#1", "ProfilerStep#2"], 4, 4)
    assert (
        "; the trace holds 2 (ProfilerStep#1-#2)\ntuiprof: ProfilerStep#3 did not finish and was left out of the trace\n"
        in err
    )
    assert "aten::linear" in out and "Traceback" not in err


def _tiny_capture(tmp_path, stop_at: int):
    """A live capture (wait 1, warmup 1, active 3) whose user presses q as step ``stop_at`` (0-based) begins."""
    from tuiprof.capture.live import LiveCapture

    config = CaptureConfig(model=TINY[0], device="cpu", batch_size=2, input_shape="8x64")
    live = LiveCapture(config, tmp_path)
    phases = []

    def on_progress(progress) -> None:
        phases.append(progress.phase)
        if progress.phase != "setup" and progress.step >= stop_at:
            live.stop.set()

    live.capture(on_progress)
    return live, phases


@pytest.mark.parametrize("stop_at,phase", [(0, "wait"), (1, "warmup")])
def test_q_before_the_active_steps_says_nothing_was_recorded(tmp_path, stop_at: int, phase: str) -> None:
    """No empty explorer with false findings: a clear error, exit code 130."""
    from tuiprof.capture.live import NothingCaptured

    live, _ = _tiny_capture(tmp_path, stop_at)
    assert live.result.interrupted and live.result.trace_path is None and not live.trace_path.exists()
    with pytest.raises(NothingCaptured) as caught:
        live.build_model()
    text = str(caught.value)
    assert f"stopped after step {stop_at + 1}/5 ({phase}): nothing was recorded yet" in text
    assert "records steps 3-5" in text and caught.value.exit_code == 130


@pytest.mark.parametrize("stop_at", [2, 3])
def test_q_in_the_active_steps_keeps_the_finished_ones(tmp_path, stop_at: int) -> None:
    """The step running when q is pressed finishes and is kept; no empty step is opened after it."""
    live, _ = _tiny_capture(tmp_path, stop_at)
    model = live.build_model()
    assert [s.name for s in model.steps] == [f"ProfilerStep#{i}" for i in range(2, stop_at + 1)]
    assert all(s.duration_us > 1000 for s in model.steps)  # a real training step, not an empty range
    assert any(n.qualified_name == "encoder" for n in model.modules.walk())


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
    model = analyze(load_trace(trace), result.facts)
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


# ---------------------------------------------------------------- the explorer in a real terminal

_ESCAPES = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07\x1b]*(\x07|\x1b\\)|[()][0-9A-Za-z]|[=>78])")


class Terminal:
    """``tuiprof`` in a pseudo-terminal, as a user runs it; ``text`` is what it drew, escapes removed."""

    def __init__(self, args: tuple[str, ...], tmp_path, columns: int = 80, rows: int = 24) -> None:
        import fcntl
        import os
        import pty
        import struct
        import termios

        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
        env = dict(os.environ, PYTHONPATH=str(ROOT), TERM="xterm-256color", TMPDIR=str(tmp_path), COLUMNS=str(columns))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tuiprof", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        os.close(slave)
        self.raw = b""
        self.started = time.monotonic()
        self.seen: dict[str, float] = {}  # pattern -> seconds after start when first drawn

    @property
    def text(self) -> str:
        return _ESCAPES.sub("", self.raw.decode(errors="replace"))

    def read(self, seconds: float) -> None:
        import os
        import select

        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.master], [], [], 0.1)
            if not ready:
                if self.proc.poll() is not None:
                    return
                continue
            try:
                data = os.read(self.master, 1 << 16)
            except OSError:  # the child closed the terminal
                return
            if not data:
                return
            self.raw += data

    def wait_for(self, pattern: str, timeout: float = 120) -> float:
        """Seconds from start until ``pattern`` (a regex) was drawn."""
        deadline = time.monotonic() + timeout
        while not re.search(pattern, self.text):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.read(0.5)
                if re.search(pattern, self.text):
                    break
                raise AssertionError(f"{pattern!r} never drawn; screen text ends with:\n{self.text[-1500:]}")
            self.read(0.1)
        self.seen.setdefault(pattern, time.monotonic() - self.started)
        return self.seen[pattern]

    def press(self, key: str) -> None:
        import os

        os.write(self.master, key.encode())

    def finish(self, timeout: float = 120) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self.read(0.2)
        self.read(0.5)
        code = self.proc.wait(timeout=5)
        import os

        os.close(self.master)
        return code


def _scratch_left(tmp: Path) -> list[str]:
    """tuiprof's leftovers in a TMPDIR (torch keeps its own caches there: torchinductor_USER)."""
    return [p.name for p in tmp.iterdir() if not p.name.startswith("torchinductor_")]


LIVE_TINY = ("live", *TINY, "--wait", "1", "--warmup", "1", "--active", "3")


def test_live_explorer_shows_progress_during_capture_then_the_trace(tmp_path) -> None:
    """The capture sends fd 2 to its log; the explorer must still draw every stage on the terminal."""
    term = Terminal(LIVE_TINY, tmp_path)
    try:
        torch_at = term.wait_for(r"importing torch")
        building_at = term.wait_for(r"building tuiprof")
        # Progress messages coalesce (a newer one replaces one not yet drawn): on a busy machine a
        # step can pass undrawn, so any step with its phase, time and loss will do, then any active one.
        # The panel's own clock ends the line (it keeps running between reports).
        step_at = term.wait_for(r"ProfilerStep#[0-4] \([1-5]/5\) · (wait|warmup|active)( · loss [0-9.]+)? · [0-9.]+m?s")
        active_at = term.wait_for(r"ProfilerStep#[2-4] \([3-5]/5\) · active( · loss [0-9.]+)? · [0-9.]+m?s")
        explorer_at = term.wait_for(r"Findings")  # the Overview of the loaded trace
        assert re.search(r"ProfilerStep#[1-4] \([2-5]/5\) · (warmup|active) · loss [0-9.]+ · [0-9.]+m?s", term.text)
        assert torch_at < building_at < step_at <= active_at < explorer_at
        term.press("q")
        assert term.finish() == 0
        assert "the trace was not kept (add --save PATH.json.gz to keep it)" in term.text
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert _scratch_left(tmp_path) == []  # the private scratch directory is gone


def test_q_during_warmup_in_the_explorer_says_nothing_was_recorded(tmp_path) -> None:
    # 300 warmup steps of the tiny model take seconds on any machine: q lands in one of them.
    args = ("live", *TINY, "--wait", "1", "--warmup", "300", "--active", "1")
    term = Terminal(args, tmp_path, columns=220)
    try:
        term.wait_for(r"\(\d+/302\) · warmup")  # the screen may skip a fast step
        term.press("q")  # "stopping after this step…" shows until the step ends (too briefly to wait for)
        term.wait_for(
            r"stopped after step \d+/302 \(warmup\): nothing was recorded yet \(the profiler records step 302;"
        )
        assert term.finish() == 130  # the explorer ends by itself: no error page waits for a second q
        assert re.search(
            r"tuiprof: tuiprof\.capture\.models:tiny_transformer: stopped after step \d+/302 \(warmup\)", term.text
        )
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
    assert _scratch_left(tmp_path) == []


@pytest.mark.parametrize(
    ("wait", "warmup", "remedy"),
    [
        (1, 1, "let it run into the active steps, or lower --wait/--warmup"),
        (0, 0, "let it run through its first step"),  # --wait 0 --warmup 0: lowering them is no advice
    ],
)
def test_stopped_before_the_first_step_says_what_would_record(wait: int, warmup: int, remedy: str) -> None:
    from tuiprof.capture.config import CaptureConfig
    from tuiprof.capture.live import NothingCaptured

    error = NothingCaptured(CaptureConfig(wait=wait, warmup=warmup), steps_done=0)
    assert error.problem.startswith("stopped before the first step: nothing was recorded yet")
    assert error.remedy == remedy and error.exit_code == 130


def test_q_during_the_active_steps_in_the_explorer_shows_them_and_exits_0(tmp_path) -> None:
    """Stopped early but shown: exit 0 (130 is for "stopped before there was anything to show")."""
    args = ("live", *TINY, "--no-stack", "--wait", "0", "--warmup", "1", "--active", "300")
    term = Terminal(args, tmp_path, columns=220)
    try:
        term.wait_for(r"\(\d+/301\) · active")
        term.press("q")  # stop after this step and show what was recorded
        term.wait_for(r"Findings")
        term.press("q")
        assert term.finish() == 0
        assert re.search(
            r"tuiprof: \d+ steps run in [0-9.]+m?s \(capture\); the trace holds \d+ \(ProfilerStep#1", term.text
        )
    finally:
        if term.proc.poll() is None:
            term.proc.kill()


# ------------------------------------------------------------------ progress and exit lines (walkthrough #13, #14)


def test_live_progress_names_the_trace_steps_then_says_it_writes_the_trace(tmp_path) -> None:
    """Each active step's progress line names the ProfilerStep#N the trace holds for it (read
    from the file), and after the last step progress says the trace is being written."""
    from tuiprof.capture.live import LiveCapture, describe_progress

    config = CaptureConfig(model=TINY[0], device="cpu", batch_size=2, input_shape="8x64", wait=1, warmup=1, active=3)
    trace = tmp_path / "tiny.json.gz"
    live = LiveCapture(config, tmp_path, trace)
    lines: list[tuple[str, str]] = []
    live.capture(lambda progress: lines.append((progress.phase, describe_progress(progress))))
    in_trace = [e["name"] for e in _raw_trace(trace)["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")]
    active = [
        re.match(r"(ProfilerStep#\d+) \(\d+/5\) · active · ", text).group(1)
        for phase, text in lines
        if phase == "active"
    ]
    assert active == in_trace == ["ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"]
    saving = [text for phase, text in lines if phase == "saving"]
    assert len(saving) == 1 and saving[0].startswith("writing the trace (5/5 steps run)…")
    assert [phase for phase, _ in lines][-2:] == ["saving", "done"] and lines[-1][1].startswith("5/5 steps run · done")


def test_exit_line_counts_the_capture_not_what_follows(tmp_path, monkeypatch, capsys) -> None:
    """The time on the exit line ends when the trace is written: 3 s spent afterwards (in the
    explorer or reading tables) are not in it."""
    from tuiprof import cli
    from tuiprof.capture import commands

    looked = commands._live_without_ui

    def then_looking(live) -> int:
        code = looked(live)
        time.sleep(3)
        return code

    monkeypatch.setattr(commands, "_live_without_ui", then_looking)
    started = time.perf_counter()
    assert cli.main(["live", *TINY, "--no-tui", "--no-stack", "--wait", "0", "--warmup", "1", "--active", "2"]) == 0
    wall = time.perf_counter() - started
    err = capsys.readouterr().err
    ran = re.search(
        r"tuiprof: 3 steps run in ([0-9.]+)(ms|s) \(capture\); the trace holds 2 \(ProfilerStep#1-#2\)", err
    )
    assert ran, err
    seconds = float(ran.group(1)) / (1000 if ran.group(2) == "ms" else 1)
    assert seconds <= wall - 3


def test_exit_line_states_compile_time_apart() -> None:
    from tuiprof.capture.config import describe_steps

    assert describe_steps(5, [2, 3, 4], None, 43.04, 24.1) == [
        "5 steps run in 43.0s (capture, 24.1s of it compiling); the trace holds 3 (ProfilerStep#2-#4)"
    ]


def test_capture_lines_on_a_terminal_fit_80_columns_between_words(monkeypatch) -> None:
    """The longest capture notices (stopped in warm-up, a compiling progress line) on an
    80-column terminal: every line fits, no word is cut, one clock a line."""
    import io

    from tuiprof.capture.config import CaptureProgress
    from tuiprof.capture.live import NothingCaptured, describe_progress
    from tuiprof.report.render import print_notice

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setenv("COLUMNS", "80")
    config = CaptureConfig(model=TINY[0], device="cpu", batch_size=2, input_shape="8x64", wait=1, warmup=300, active=1)
    texts = [
        f"tuiprof: {NothingCaptured(config, 12)}",
        "tuiprof: "
        + describe_progress(CaptureProgress(0, 5, "setup", 22.0, None, "compiling resnet18 (torch.compile)")),
        "tuiprof: " + describe_steps_line(),
    ]
    for text in texts:
        terminal = Tty()
        print_notice(text, terminal)
        lines = terminal.getvalue().splitlines()
        assert max(map(len, lines)) <= 80 and " ".join(line.strip() for line in lines).split() == text.split()
        assert all(len(re.findall(r"\d\.\d+m?s\b", line)) <= 1 for line in lines)


def describe_steps_line() -> str:
    from tuiprof.capture.config import describe_steps

    return describe_steps(300, list(range(1, 300)), None, 123.4, 61.2)[0]
