"""The causes the findings name and the savings they predict (analysis/advice.py), on
synthetic traces whose answer is worked out by hand in each test.  The benchmark that
applies each remedy and measures again is benchmarks/diagnosis (docs/advice.md)."""

from __future__ import annotations

import pytest

from tests.helpers.gpu_trace import GpuTrace
from tuiprof.analysis import load_model
from tuiprof.report import findings as F

SINGLE = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
WORKERS = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"
LINEAR = {"Input Dims": [[32, 64], [64, 64], [64]]}


def _loading_trace(path, loader: str, loading_us: float, step_us: float = 100_000.0, steps: int = 3):
    trace = GpuTrace()
    for i in range(steps):
        start = i * step_us
        trace.step(i + 1, start, step_us)
        trace.op(loader, start + 1, loading_us - 2)
        trace.op("aten::mm", start + loading_us, step_us - loading_us - 10, **LINEAR)
    return load_model(trace.write(path))


def test_data_loading_in_the_main_process_predicts_the_step_with_workers(tmp_path) -> None:
    """60 ms of loading (58 ms span + edges) in a 100 ms step: 3 workers (ceil(60/40) + 1) make
    a batch every 20 ms, under the 40 ms of the rest: the step becomes the rest."""
    model = _loading_trace(tmp_path / "t.json", SINGLE, 60_000.0)
    found = F.data_loading(model)
    assert found is not None and found.id == "data-loading" and found.severity == "warning"
    loading = model.steps[0].data_loading_us
    rest = 100_000.0 - loading
    assert "in the main process (num_workers=0)" in found.text
    assert "num_workers=3" in found.remedy and "pin_memory" not in found.remedy  # no device: nothing to pin
    assert found.saving is not None and found.saving.metric == F.STEP_TIME
    assert found.saving.current == pytest.approx(100_000.0)
    assert found.saving.amount == pytest.approx(100_000.0 - max(rest, loading / 3))
    assert found.weight == pytest.approx(loading / 100_000.0)


def test_workers_that_cannot_keep_up_are_named_without_a_predicted_saving(tmp_path) -> None:
    found = F.data_loading(_loading_trace(tmp_path / "t.json", WORKERS, 60_000.0))
    assert found is not None and "waiting on its workers" in found.text
    assert found.saving is not None and found.saving.amount is None
    assert "how many is not in the trace" in found.saving.why_not
    assert "saving not predicted" in found.pointed(F.summary_pointer)


def test_data_loading_outranks_the_facts_and_the_top_operator(tmp_path) -> None:
    """The first line is what to fix: the cause with a share of the step before the top operator
    (a fact with no remedy) however large its share of CPU time."""
    found = F.findings(_loading_trace(tmp_path / "t.json", SINGLE, 60_000.0))
    assert found[0].id == "data-loading"
    assert [f.severity for f in found] == sorted((f.severity for f in found), key=lambda s: s != "warning")


def _blocks_trace(path, extra_us=0.0, python_us=0.0, shapes=(LINEAR,) * 4, steps=2):
    """``steps`` steps of 10 ms; each holds Net_0 > Block_0..3, each Block one 1 ms aten::linear.
    Block_2 also runs ``extra_us`` of aten::mm (extra work) and ``python_us`` in no operator."""
    trace = GpuTrace()
    for i in range(steps):
        start = i * 10_000.0
        trace.step(i + 1, start, 10_000.0)
        net = trace.module("Net_0", start + 15, 4 * 1_030 + extra_us + python_us)  # around its blocks
        at = start + 20
        for b in range(4):
            own_extra = extra_us if b == 2 else 0.0
            own_python = python_us if b == 2 else 0.0
            length = 1_000 + own_extra + own_python + 20
            trace.module(f"Block_{b}", at, length, parent=net)
            trace.op("aten::linear", at + 5, 1_000, **shapes[b])
            if own_extra:
                trace.op("aten::mm", at + 1_010, own_extra, **LINEAR)
            at += length + 10
    return load_model(trace.write(path))


def test_a_module_with_extra_work_is_named_against_its_like_siblings(tmp_path) -> None:
    """Block_2 costs 1,020 + 3,000 us a step against its siblings' 1,020: 3,000 us more,
    all of it aten::mm; removing it saves that (a CPU trace: the step is the CPU's)."""
    model = _blocks_trace(tmp_path / "t.json", extra_us=3_000.0)
    found = F.findings(model)[0]
    assert found.id == "slow-module"
    assert found.text.startswith("Net_0/Block_2 (Block) takes 4.020ms a step, 3.9x the median of its 3 like Blocks")
    assert "most in aten::mm (+3.000ms)" in found.text and "aten::mm" in found.remedy
    assert found.saving is not None and found.saving.amount == pytest.approx(3_000.0)


def test_a_module_in_its_own_python_code_is_named_with_that_time(tmp_path) -> None:
    model = _blocks_trace(tmp_path / "t.json", python_us=4_000.0)
    found = F.findings(model)[0]
    assert found.id == "slow-module"
    assert "4.000ms a step more than theirs is its own Python code, in no operator (40 % of the step)" in found.text
    assert "Python work in Net_0/Block_2's forward" in found.remedy
    assert found.saving is not None and found.saving.amount == pytest.approx(4_000.0)


def test_modules_fed_other_shapes_are_not_compared(tmp_path) -> None:
    """Resnet's layers are Sequentials of BasicBlocks too, of equal FLOPs and very unequal
    costs: a module whose operators see other shapes is not a like sibling."""
    wide = {"Input Dims": [[32, 512], [512, 512], [512]]}
    model = _blocks_trace(tmp_path / "t.json", extra_us=3_000.0, shapes=(LINEAR, LINEAR, wide, LINEAR))
    assert F.slow_module(model) is None


def test_a_module_with_one_like_sibling_is_not_named_slow(tmp_path) -> None:
    """Against one like sibling, which of the two is slow is a guess: the shipped sample's run
    named resnet's layer1.0 at 2.2x layer1.1 ('the median of its 1 like BasicBlock') first.
    Block_2 is alike only to Block_3 here; with three like siblings it is named (above)."""
    wide = {"Input Dims": [[32, 512], [512, 512], [512]]}
    wider = {"Input Dims": [[64, 512], [512, 512], [512]]}
    model = _blocks_trace(tmp_path / "t.json", extra_us=3_000.0, shapes=(wide, wider, LINEAR, LINEAR))
    assert F.slow_module(model) is None


def test_a_sync_in_the_step_names_its_caller_and_the_idle_it_leaves(tmp_path) -> None:
    """Each 1,000 us step: a 300 us kernel, then aten::item syncs (cudaStreamSynchronize
    [20, 320) waits for it), and the next kernel is launched at 500 and runs [520, 920): the
    device idles 200 us after the sync returns.  Without the wait (aten::item's 305 us) the CPU's
    own work is 695 us a step and the device's 700 us: the step becomes 700 us, 300 us saved."""
    trace = GpuTrace()
    for i in range(3):
        s = i * 1_000.0
        trace.step(i + 1, s, 1_000)
        mm = trace.op("aten::mm", s + 5, 10, **LINEAR)
        trace.launch(mm, "gemm_kernel", s + 6, 5, s + 20, 300)
        item = trace.op("aten::item", s + 18, 305)
        trace.op("aten::_local_scalar_dense", s + 19, 303)
        trace.launch(
            item,
            "Memcpy DtoH (Device -> Pageable)",
            s + 19.5,
            1,
            s + 319,
            0.5,
            kind="gpu_memcpy",
            runtime="cudaMemcpyAsync",
        )
        trace._complete("cuda_runtime", "cudaStreamSynchronize", s + 20, 300, 4242, 4242, {"correlation": 9000 + i})
        add = trace.op("aten::add", s + 495, 10)
        trace.launch(add, "add_kernel", s + 500, 5, s + 520, 400)
    model = load_model(trace.write(tmp_path / "t.json"))
    found = F.host_sync(model)
    assert found is not None and found.id == "host-sync"
    assert found.text.startswith("The CPU waits for the GPU 1 times a step (aten::item)")
    assert "the GPU idles 200.000us a step" in found.text
    assert ".item()" in found.remedy
    assert found.saving is not None and found.saving.amount == pytest.approx(300.0)


def test_copies_on_a_cpu_only_trace_say_nothing_of_a_device(tmp_path) -> None:
    trace = GpuTrace()
    trace.step(1, 0, 1_000)
    trace.op("aten::copy_", 10, 500)
    trace.op("aten::mm", 600, 300)
    found = F.copies(load_model(trace.write(tmp_path / "t.json")))
    assert found is not None and "device" not in found.text and "host" not in found.text and not found.remedy


def test_a_saving_within_the_steps_noise_or_from_one_step_is_not_predicted(tmp_path) -> None:
    """Block_2's 800 us of extra work is below the +-1,000 us the steps vary by (10,000 and
    8,000 us): abstained, as with one step, where no noise can be told."""
    trace = GpuTrace()
    for i, length in enumerate((10_000.0, 8_000.0)):
        start = i * 10_000.0
        trace.step(i + 1, start, length)
        net = trace.module("Net_0", start + 15, 4 * 1_030 + 800)
        at = start + 20
        for b in range(4):
            extra = 800.0 if b == 2 else 0.0
            trace.module(f"Block_{b}", at, 1_020 + extra, parent=net)
            trace.op("aten::linear", at + 5, 1_000, **LINEAR)
            if extra:
                trace.op("aten::mm", at + 1_010, extra, **LINEAR)
            at += 1_030 + extra
    found = F.slow_module(load_model(trace.write(tmp_path / "t.json")))
    assert found is not None and found.saving is not None and found.saving.amount is None
    assert found.saving.why_not == "the steps vary by +-1.000ms, more than the saving"
    one = F.slow_module(_blocks_trace(tmp_path / "one.json", extra_us=3_000.0, steps=1))
    assert one is not None and one.saving is not None and one.saving.amount is None
    assert one.saving.why_not == "1 step in the trace: too few to tell the noise"


def test_pageable_copies_block_like_a_sync_and_pinned_memory_is_the_remedy(tmp_path) -> None:
    """Each 1,000 us step copies a batch from pageable memory: aten::copy_ [5, 215) returns once
    its copy [20, 200) is done; the next kernel is launched at 400 and starts at 420: the
    device idles 205 us after the copy returns; the copy itself runs 180 us with no kernel beside
    it.  Pinned, non-blocking and made ahead, the copy overlaps compute: 385 us saved."""
    trace = GpuTrace()
    for i in range(3):
        s = i * 1_000.0
        trace.step(i + 1, s, 1_000)
        copy = trace.op("aten::copy_", s + 5, 210)
        trace.launch(
            copy,
            "Memcpy HtoD (Pageable -> Device)",
            s + 10,
            200,
            s + 20,
            180,
            kind="gpu_memcpy",
            runtime="cudaMemcpyAsync",
        )
        mm = trace.op("aten::mm", s + 395, 10, **LINEAR)
        trace.launch(mm, "gemm_kernel", s + 400, 5, s + 420, 500)
    found = F.copies(load_model(trace.write(tmp_path / "t.json")))
    assert found is not None and found.id == "copies" and found.severity == "warning"
    assert found.text == (
        "1 host-to-device copies a step from pageable memory (aten::copy_) block the CPU until done: 180.000us a "
        "step with no kernel beside them and 205.000us of device idle after them (38 % of the step)."
    )
    assert "pin_memory=True" in found.remedy and "non_blocking=True" in found.remedy
    assert found.saving is not None and found.saving.amount == pytest.approx(180.0 + 205.0)


def test_work_outside_modules_is_named_apart_from_the_optimizer_and_the_loader(tmp_path) -> None:
    """Each 10 ms step: 1 ms of loading, the model (2 ms), 4 x 1 ms of aten::linalg_vector_norm and
    1 x 1.5 ms aten::mul outside it, then the optimizer: 5.5 ms of extra calls a step, and with
    the Python between them (0.1 ms gaps, 0.2 ms before the mul) a 6 ms run, what removing it
    saves; the optimizer and the loader are parts of a step, not extra work."""
    trace = GpuTrace()
    for i in range(2):
        s = i * 10_000.0
        trace.step(i + 1, s, 10_000)
        trace.op(SINGLE, s + 10, 1_000)
        trace.module("Net_0", s + 1_100, 2_000)
        trace.op("aten::linear", s + 1_110, 1_900, **LINEAR)
        for k in range(4):
            trace.op("aten::linalg_vector_norm", s + 3_200 + 1_100 * k, 1_000)
        trace.op("aten::mul", s + 7_700, 1_500)
        trace.op("Optimizer.step#SGD.step", s + 9_300, 600)
    found = F.outside_modules(load_model(trace.write(tmp_path / "t.json")))
    assert found is not None and found.id == "outside-modules"
    assert found.text == (
        "Outside every module (not the optimizer or the loader), 6.000ms a step (60 % of the step), 5.500ms of it "
        "in calls: aten::linalg_vector_norm x4 (4.000ms), aten::mul x1 (1.500ms)."
    )
    assert found.remedy.endswith("aten::linalg_vector_norm")
    assert found.saving is not None and found.saving.amount == pytest.approx(6_000.0)


def test_work_outside_modules_counts_in_the_step_it_ran_in_when_a_frame_straddles_the_step(tmp_path) -> None:
    """``tuiprof run`` ends a step in the optimizer's post hook: Python frames of the loop start
    in one step and end in the next, so by torch's nesting (a partial overlap is no parent) the
    work under them is in no ProfilerStep.  It still counts in the step it ran in, by time:
    3 ms of aten::abs a 10 ms step (the optimizer's 0.7 ms is outside modules too, not extra)."""
    trace = GpuTrace()
    for i in range(3):
        s = i * 10_000.0
        trace.step(i + 1, s, 10_000)
        trace.module("Net_0", s + 100, 2_000)
        trace.op("aten::linear", s + 110, 1_900, **LINEAR)
        frame = {"Python id": 9_000 + i, "Python parent id": None}
        trace._complete("python_function", "train.py(40): log_and_step", s + 2_400, 8_000, 4242, 4242, frame)
        trace.op("aten::abs", s + 2_500, 3_000)
        trace.op("Optimizer.step#SGD.step", s + 9_000, 700)
    model = load_model(trace.write(tmp_path / "t.json"))
    assert model.outside_modules.step_cpu_us[:2] == pytest.approx((3_700.0, 3_700.0))
    found = F.outside_modules(model)
    assert found is not None and found.saving is not None and found.saving.amount == pytest.approx(3_000.0)
