"""The analysis on several threads (analysis/stages.py, issue 29 item 2): independent
stages run at once, and the model is the serial one, array for array."""

from __future__ import annotations

import dataclasses
import math
import subprocess
import sys
import threading
from array import array
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT, SAMPLES, SHARED_TRACES, needs_shared
from tests.helpers.ranks import two_rank_run
from tuiprof.analysis import build, calls, ranks
from tuiprof.analysis.build import analyze
from tuiprof.analysis.modules import ModuleNode
from tuiprof.trace.load import load_trace
from tuiprof.trace.run import open_run

THREADS_ENV = "TUIPROF_ANALYSIS_THREADS"  # tuiprof.analysis.stages.THREADS_ENV


def _assert_same(serial, parallel, path: str, seen: set[tuple[int, int]]) -> None:
    """Every value reachable from ``serial`` equals the one at the same place in ``parallel``:
    arrays element for element (and dtype), floats exactly, objects field by field."""
    assert type(serial) is type(parallel), path
    if isinstance(serial, np.ndarray):
        equal_nan = serial.dtype.kind in "fc"  # NaN: no value recorded (occupancy)
        assert serial.dtype == parallel.dtype and np.array_equal(serial, parallel, equal_nan=equal_nan), path
        return
    if isinstance(serial, array):
        assert serial.typecode == parallel.typecode and serial == parallel, path
        return
    if isinstance(serial, float):
        assert serial == parallel or (math.isnan(serial) and math.isnan(parallel)), path
        return
    if serial is None or isinstance(serial, (int, str, bytes, bool)):
        assert serial == parallel, path
        return
    if (id(serial), id(parallel)) in seen:
        return
    seen.add((id(serial), id(parallel)))
    if isinstance(serial, dict):
        assert list(serial) == list(parallel), path
        for key in serial:
            _assert_same(serial[key], parallel[key], f"{path}[{key!r}]", seen)
    elif isinstance(serial, (list, tuple)):
        assert len(serial) == len(parallel), path
        for index, (one, other) in enumerate(zip(serial, parallel)):
            _assert_same(one, other, f"{path}[{index}]", seen)
    elif hasattr(serial, "__array__"):  # arrays.RowView
        _assert_same(np.asarray(serial), np.asarray(parallel), path, seen)
    else:
        members = [f.name for f in dataclasses.fields(serial)] if dataclasses.is_dataclass(serial) else []
        members += [name for name in getattr(serial, "__slots__", ()) if name not in members]
        members += [name for name in vars(serial) if name not in members] if hasattr(serial, "__dict__") else []
        assert members, f"{path}: nothing to compare in a {type(serial).__name__}"
        for name in members:
            if isinstance(serial, ModuleNode) and name == "parent":
                continue  # reached from the parent's side
            _assert_same(getattr(serial, name), getattr(parallel, name), f"{path}.{name}", seen)


def _models(path: Path, monkeypatch) -> tuple:
    """The model of ``path`` analysed on one thread, then on four (each from its own load),
    and how many parts the four-thread nesting had."""
    parts: list[int] = []
    nest_rows = calls._nest_rows

    def counted(*args):
        parts.append(len(args[0]))
        return nest_rows(*args)

    monkeypatch.setattr(calls, "_nest_rows", counted)
    models = []
    for threads in ("1", "4"):
        monkeypatch.setenv(THREADS_ENV, threads)
        models.append(analyze(load_trace(path)))
    return (*models, len(parts))


TRACES = [SAMPLES / name for name in sorted(p.name for p in SAMPLES.glob("*.pt.trace.json.gz"))]
SHARED = [
    "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz",  # GPU, with_stack, two threads
    "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",  # GPU, ns times
    "hta__with_gpu_user_annotation__step_based_trace_2543932.json.gz",  # steps from GPU annotations
    "tracelens__torch_compile_triton__trace.json.gz",  # compiled regions in the module tree
]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_parallel_analysis_gives_the_serial_model_on_samples(path: Path, monkeypatch) -> None:
    serial, parallel, parts = _models(path, monkeypatch)  # one thread, cut through the frames over it all
    assert len(serial.calls) and serial.total_self_cpu_us > 0 and parts > 1
    _assert_same(serial, parallel, "model", set())


@needs_shared
@pytest.mark.parametrize("name", SHARED)
def test_parallel_analysis_gives_the_serial_model_on_real_traces(name: str, monkeypatch) -> None:
    serial, parallel, parts = _models(SHARED_TRACES / name, monkeypatch)
    assert parts > 1 or name.startswith("tracelens__torch_compile")  # that one is a few events on one thread
    _assert_same(serial, parallel, "model", set())


def test_parallel_analysis_gives_the_serial_model_cut_in_time(tmp_path, monkeypatch) -> None:
    """Two runs of the sample back to back (``make_big_trace.py``): its one thread is cut in
    time (between them or through the frames) and nested in slices; still the serial model."""
    trace = tmp_path / "two-runs.json"
    made = subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "make_big_trace.py"),
            "--size-mb",
            "7",
            "--from",
            str(TRACES[1]),
            "-o",
            str(trace),
        ],
        capture_output=True,
        text=True,
    )
    assert made.returncode == 0 and "2 replicas" in made.stderr, made.stderr
    serial, parallel, parts = _models(trace, monkeypatch)
    assert parts >= 2
    _assert_same(serial, parallel, "model", set())


def test_model_comparison_sees_a_changed_value(monkeypatch) -> None:
    """The oracle above can fail: one changed self time, one module's total, are found."""
    serial, parallel, _ = _models(SAMPLES / "resnet18_cpu.pt.trace.json.gz", monkeypatch)
    parallel.calls.self_ns[5] += 1
    with pytest.raises(AssertionError, match=r"model\.calls\.self_ns"):
        _assert_same(serial, parallel, "model", set())
    parallel.calls.self_ns[5] -= 1
    node = list(parallel.modules.walk())[-1]
    node.cpu_total_us += 1e-9
    with pytest.raises(AssertionError, match="cpu_total_us"):
        _assert_same(serial, parallel, "model", set())


def test_independent_stages_run_at_the_same_time(monkeypatch) -> None:
    """The kernel, step and memory tables wait for each other at a barrier: analysed one
    after the other (before issue 29 item 2) the first would wait alone until it timed out."""
    monkeypatch.setenv(THREADS_ENV, "3")
    barrier = threading.Barrier(3, timeout=10)
    for name in ("aggregate_kernels", "build_steps", "build_memory_timelines"):
        stage = getattr(build, name)

        def meeting(*args, stage=stage, **kwargs):
            barrier.wait()
            return stage(*args, **kwargs)

        monkeypatch.setattr(build, name, meeting)
    model = analyze(load_trace(SAMPLES / "resnet18_cpu.pt.trace.json.gz"))
    assert model.steps and model.memory


def test_one_thread_runs_every_stage_on_the_caller(monkeypatch) -> None:
    """On one core no thread is started: every stage runs on the thread that called analyze."""
    monkeypatch.setenv(THREADS_ENV, "1")
    seen: set[str] = set()
    stage = build.aggregate_kernels

    def recording(*args, **kwargs):
        seen.add(threading.current_thread().name)
        return stage(*args, **kwargs)

    monkeypatch.setattr(build, "aggregate_kernels", recording)
    before = threading.active_count()
    analyze(load_trace(SAMPLES / "resnet18_cpu.pt.trace.json.gz"))
    assert seen == {threading.current_thread().name}
    assert threading.active_count() == before


def test_rank_workers_analyse_on_one_thread(tmp_path, monkeypatch) -> None:
    """A run's rank workers are a process a core: none starts analysis threads of its own
    (N workers x N threads would oversubscribe the cores)."""
    environments: list[dict] = []
    real_popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        environments.append(kwargs.get("env") or {})
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(ranks.subprocess, "Popen", recording_popen)
    run = ranks.summarise_run(open_run(two_rank_run(tmp_path)), workers=2, use_sidecars=False)
    assert len(run.ranks) == 2 and len(environments) == 2
    assert all(env.get(THREADS_ENV) == "1" for env in environments)
