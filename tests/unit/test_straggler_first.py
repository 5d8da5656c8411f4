"""One straggler named first (docs/ranks.md, "One straggler first"), where its extra time went,
its remedy and its predicted saving, on synthetic CPU (gloo) runs built here with the answer
computed by hand, and on the shared 8-rank DLRM run.

The runs: 4 ranks, steps of 40 ms, two all-reduces a step.  Each rank works 2 ms before each
collective plus its own extra (``EXTRA``, ms); a collective ends 1 ms after the last rank
arrives.  Rank 1 is 10 ms late at the first collective, rank 2 9 ms (so rank 1 leads by 1 ms)
and rank 2 is 6 ms late at the second, rank 3 5.5 ms (rank 2 leads by 0.5 ms).  Work per step
(Step - Exposed comm) is the same for all plus the rank's extras: 10, 15, 5.5 and 0 ms above
rank 0's.  Against the median of the others: rank 1 +4.5 ms, rank 2 +9.5 ms (the most extra
work), rank 3 -4.5 ms.  Fixing rank 2 alone leaves rank 1 10 ms late at the first collective
and rank 3 5.5 ms late at the second: the step shrinks by 0.5 ms.  Fixing rank 1 alone leaves
rank 2 9 ms late: the step shrinks by 1 ms.  So rank 1 is the one to fix first, although rank 2
works more: the old rule (the most extra work first) named rank 2.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import SHARED_TRACES, needs_shared
from tuiprof.analysis.ranks import summarise_run
from tuiprof.report.findings import STEP_TIME, straggler
from tuiprof.trace.run import open_run

STEP_MS, BASE_MS, TRANSFER_MS = 40.0, 2.0, 1.0
EXTRA = {0: (0.0, 0.0), 1: (10.0, 0.0), 2: (9.0, 6.0), 3: (0.0, 5.5)}  # ms late at collective 1 and 2
INJECTED = {1: "aten::linalg_svd", 2: "aten::cholesky", 3: "aten::linalg_qr"}  # the op each rank's extra is


def event(name: str, cat: str, tid: int, start_ms: float, dur_ms: float, **args) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": round(start_ms * 1000, 3),
        "dur": round(dur_ms * 1000, 3),
        **({"args": args} if args else {}),
    }


def write_rank(directory: Path, rank: int, extra: dict[int, tuple[float, ...]], steps: int, sleep: bool = False):
    """One rank's CPU-only trace: steps of STEP_MS; per collective, BASE_MS of aten::addmm, the
    rank's extra (its INJECTED op, or a Python ``time.sleep`` outside operators with ``sleep``),
    then ``gloo:all_reduce`` on the backend's thread until 1 ms after the last rank arrived."""
    events = []
    python_id = 0
    for step in range(steps):
        at = step * STEP_MS
        events.append(event(f"ProfilerStep#{step + 1}", "user_annotation", 1, at, STEP_MS))
        for k in range(len(extra[0])):
            mine = extra[rank][k]
            events.append(event("aten::addmm", "cpu_op", 1, at + 0.01, BASE_MS - 0.02))
            if mine and sleep:
                python_id += 1
                ids = {"Python id": python_id, "Python parent id": None}
                events.append(
                    event("<built-in function sleep>", "python_function", 1, at + BASE_MS + 0.01, mine - 0.02, **ids)
                )
            elif mine:
                events.append(event(INJECTED[rank], "cpu_op", 1, at + BASE_MS + 0.01, mine - 0.02))
            arrival = at + BASE_MS + mine
            end = at + BASE_MS + max(e[k] for e in extra.values()) + TRANSFER_MS
            events.append(event("gloo:all_reduce", "user_annotation", 2, arrival, end - arrival))
            at = end
    document = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "gloo", "rank": rank, "world_size": len(extra)},
        "traceEvents": events,
    }
    path = directory / f"train.rank{rank}.{1700000000000 + rank}.pt.trace.json"
    path.write_text(json.dumps(document))


def synthetic_run(directory: Path, extra=EXTRA, steps: int = 5, sleep: bool = False):
    directory.mkdir(parents=True, exist_ok=True)
    for rank in extra:
        write_rank(directory, rank, extra, steps, sleep)
    return summarise_run(open_run(directory), workers=1, use_sidecars=False)


def test_the_rank_whose_fix_saves_most_is_named_first_not_the_one_with_most_extra_work(tmp_path):
    run = synthetic_run(tmp_path)
    finding = straggler(run)
    assert finding.text.startswith("Straggler rank 1: ")  # was rank 2: the most extra work
    assert "Also rank 2 (" in finding.text and "rank 3" not in finding.text
    assert finding.saving.metric == STEP_TIME and finding.saving.amount == pytest.approx(1000, abs=1)
    assert finding.saving.current == pytest.approx(STEP_MS * 1000)  # every rank's every step is 40 ms
    assert finding.weight == pytest.approx(1000 / (STEP_MS * 1000), rel=1e-3)
    found = run.stragglers()
    assert list(found) == [1, 2]  # rank 3 does less work than the others' median: no straggler
    first, second = found[1], found[2]
    assert second.excess_us == pytest.approx(9500, abs=1) and first.excess_us == pytest.approx(4500, abs=1)
    # the first step's first all-reduce does not count (the time before it began before the trace)
    assert (first.holdup_us, second.holdup_us) == (pytest.approx(1000, abs=1), pytest.approx(500, abs=1))
    assert first.steps == 4 and first.saving_us == pytest.approx(1000, abs=1) and first.saving_error_us == 0


def test_the_cause_chain_names_the_injected_operator(tmp_path):
    run = synthetic_run(tmp_path)
    finding = straggler(run)
    assert "aten::linalg_svd +10.0 ms" in finding.text
    assert finding.remedy.startswith("rank 1: aten::linalg_svd takes 10.0 ms a step more than on the others")
    (item, *_) = run.stragglers()[1].items
    # like with like: rank 1's aten::linalg_svd against the median of the others' (none: 0)
    assert (item.kind, item.label) == ("operator", "aten::linalg_svd")
    assert item.excess_us == pytest.approx(10_000 - 20, abs=1)


def test_a_sleep_outside_operators_is_named_by_its_python_frame(tmp_path):
    extra = {0: (0.0,), 1: (25.0,)}
    run = synthetic_run(tmp_path, extra, sleep=True)
    finding = straggler(run)
    assert "<built-in function sleep> (Python outside operators) +25.0 ms" in finding.text
    assert "outside any operator, in <built-in function sleep>" in finding.remedy
    assert finding.saving.amount == pytest.approx(25_000, abs=1)  # 25 ms late, the only work above rank 0's
    (first,) = run.stragglers().values()
    assert (first.items[0].kind, first.items[0].label) == ("python", "<built-in function sleep>")


def test_too_few_steps_abstain_and_say_why(tmp_path):
    run = synthetic_run(tmp_path, steps=2)  # one whole step: the first holds the trace's first collective
    finding = straggler(run)
    assert finding.text.startswith("Straggler rank 1: ")
    assert finding.saving.amount is None and finding.saving.current == pytest.approx(STEP_MS * 1000)
    assert finding.saving.why_not.startswith("1 whole profiled step with collectives to compare")


def test_noise_within_the_difference_abstains(tmp_path):
    """Rank 1 late by 10 ms, then 2, 12, 3, 11 ms: the per-step savings disagree by far more than 10 %."""
    write_rank_lates = [10.0, 2.0, 12.0, 3.0, 11.0]
    directory = tmp_path / "noisy"
    directory.mkdir()
    for rank in (0, 1):
        events = []
        for step, late in enumerate(write_rank_lates):
            at = step * STEP_MS
            mine = late if rank == 1 else 0.0
            events.append(event(f"ProfilerStep#{step + 1}", "user_annotation", 1, at, STEP_MS))
            events.append(event("aten::addmm", "cpu_op", 1, at, BASE_MS + mine))
            events.append(
                event("gloo:all_reduce", "user_annotation", 2, at + BASE_MS + mine, late - mine + TRANSFER_MS)
            )
        document = {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2}, "traceEvents": events}
        (directory / f"r{rank}.pt.trace.json").write_text(json.dumps(document))
    finding = straggler(summarise_run(open_run(directory), workers=1, use_sidecars=False))
    assert finding.text.startswith("Straggler rank 1: ") and finding.saving.amount is None
    assert finding.saving.why_not.startswith("the steps disagree: ")


@needs_shared
def test_dlrm_names_rank_7_first_the_others_as_also(tmp_path):
    """Ranks 4 and 5 do the most extra work (cudaStreamSynchronize: waiting), rank 7 arrives last
    at collectives 0-4: fixing rank 7 saves 0.8 ms of collective starts, fixing 5 alone 0.1 ms
    (rank 4 is 52 and 49 us behind it at collectives 5 and 6).  One profiled step: no saving claimed."""
    run_dir = shutil.copytree(
        SHARED_TRACES / "dlrm_8ranks", tmp_path / "run", ignore=shutil.ignore_patterns("*.tuiprof-summary")
    )
    run = summarise_run(open_run(run_dir), workers=1, use_sidecars=False)
    assert list(run.stragglers()) == [7, 5, 4]
    finding = straggler(run)
    assert finding.text.startswith("Straggler rank 7: ") and "Also rank 5 (CPU-bound +2.0 ms), rank 4 (" in finding.text
    assert finding.text.count("rank 5") == 1  # only as "also"
    assert finding.saving.amount is None and "1 whole profiled step" not in finding.saving.why_not
    assert finding.saving.why_not.startswith("0 whole profiled steps")
    assert finding.remedy.startswith("rank 7")


def test_a_slower_kernel_on_a_gpu_rank_is_named_with_its_device(tmp_path):
    """Rank 1's gemm kernel runs 5 ms longer before the all-reduce (GPU ranks, one step): the chain
    names the kernel (its device time against rank 0's), the remedy the rank's device."""
    from tests.helpers.ranks import TraceBuilder

    for rank in (0, 1):
        builder = TraceBuilder(rank, 2)
        builder.compute(1000, 4000 + 5000 * rank)
        builder.all_reduce(4000 + 5000 * rank, 10_000, at=3900)
        builder.write(tmp_path)
    finding = straggler(summarise_run(open_run(tmp_path), workers=1, use_sidecars=False))
    assert finding.text.startswith("Straggler rank 1: ") and "kernel void gemm_kernel<float> +5.0 ms" in finding.text
    assert finding.remedy.startswith("rank 1's device: kernel void gemm_kernel<float> takes 5.0 ms a step more")


# A capture's module facts (tuiprofLive, as tuiprof run saves them): the module by its qualified name.
NAMED = {"Sequential_0": ["model", 0, ""], "Extra_0": ["1", 0, ""]}


@pytest.mark.parametrize(("facts", "shown"), [(None, "Sequential_0/Extra_0"), (NAMED, "1 (Extra)")])
def test_the_cause_chain_names_the_module_of_the_extra_work(tmp_path, facts, shown):
    """Both ranks call Sequential_0 > Extra_0 each step; on rank 1 Extra_0 runs aten::mm for 20 ms
    more.  The chain names the deepest module holding the excess (Extra_0, not its parent), by its
    qualified name where the capture saved one."""
    for rank in (0, 1):
        events, ids = [], iter(range(1, 10_000))
        for step in range(5):
            at = step * STEP_MS
            mine = 20.0 if rank == 1 else 0.0
            outer, inner = next(ids), next(ids)
            events += [
                event(f"ProfilerStep#{step + 1}", "user_annotation", 1, at, STEP_MS),
                event("nn.Module: Sequential_0", "python_function", 1, at, BASE_MS + mine + 1,
                      **{"Python id": outer, "Python parent id": None, "Python module id": 0}),
                event("aten::addmm", "cpu_op", 1, at + 0.01, BASE_MS - 0.02),
                event("nn.Module: Extra_0", "python_function", 1, at + BASE_MS, mine + 1,
                      **{"Python id": inner, "Python parent id": outer, "Python module id": 0}),
                event("aten::mm", "cpu_op", 1, at + BASE_MS + 0.01, mine + 0.98),
                event("gloo:all_reduce", "user_annotation", 2, at + BASE_MS + mine + 1, 20.0 - mine + TRANSFER_MS),
            ]  # fmt: skip
        document = {"distributedInfo": {"backend": "gloo", "rank": rank, "world_size": 2}, "traceEvents": events}
        if facts is not None:
            modules = {key: dict(zip(("qualified_name", "parameters", "output_shape"), v)) for key, v in facts.items()}
            document["tuiprofLive"] = {"version": 1, "modules": modules}
        (tmp_path / f"r{rank}.pt.trace.json").write_text(json.dumps(document))
    finding = straggler(summarise_run(open_run(tmp_path), workers=1, use_sidecars=False))
    assert f"module {shown} +20.0 ms, aten::mm +20.0 ms" in finding.text
    assert finding.remedy.startswith(f"rank 1: module {shown} takes 20.0 ms a step more than on the others")


def _collective(step: int, index: int, arrivals_ms: tuple[float, ...]):
    from tuiprof.analysis.collectives import MatchedCollective

    arrivals = tuple(round(a * 1e6) for a in arrivals_ms)
    return MatchedCollective("0", step, index, "allreduce", 1024, (0, 1, 2), arrivals, (10**5,) * 3, 3)


def test_a_rank_late_at_overlapping_buckets_held_the_others_up_once():
    """DDP's buckets are asynchronous: a rank 70 ms late (10 ms of it behind the next slowest) at
    the first bucket is late at every following one.  The others were held up by its lead at the
    last of them, 11 ms, not 4 x 10 ms and more (the sum: a second straggler's step credited to
    the first).  Blocking collectives' leads follow one another and still add up."""
    from tuiprof.analysis.collectives import CollectiveMatch

    first = _collective(0, 0, (0.0, 0.0, 0.0))  # a group's first collective: partial, left out
    buckets = [_collective(1, k, (100.0 + k, 160.0 + k, 170.0 + 1.0 * (k == 3) + k)) for k in range(4)]
    held = CollectiveMatch((first, *buckets), ()).holdups()
    assert held.by_step[1] == {2: 11 * 10**6}
    blocking = [_collective(1, k, (100.0 * k, 100.0 * k + 5, 100.0 * k + 8)) for k in range(1, 4)]
    assert CollectiveMatch((first, *blocking), ()).holdups().by_step[1] == {2: 9 * 10**6}
