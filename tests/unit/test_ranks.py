"""Every rank at once: exposed communication, collectives matched across ranks, stragglers,
run directories with problems, sidecars and the Dask path, on synthetic traces with
hand-computed answers (times in whole microseconds) and on the shared 8-rank run."""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED_TRACES, needs_shared
from tests.helpers.ranks import COMPUTE_STREAMS, TraceBuilder, two_rank_run
from tuiprof.analysis.collectives import CollectiveRecord, match_collectives
from tuiprof.analysis.ranks import (
    Straggler,
    WorkExcess,
    decode_summary,
    encode_summary,
    find_stragglers,
    summarise_run,
)
from tuiprof.report.stragglers import straggler_cause, straggler_sentence
from tuiprof.report.views import build_rank_rows
from tuiprof.trace.run import open_run, sidecar_path

DLRM = SHARED_TRACES / "dlrm_8ranks"


def one_rank_summary(tmp_path: Path, builder: TraceBuilder):
    builder.write(tmp_path)
    run = summarise_run(open_run(tmp_path), workers=1, use_sidecars=False)
    (summary,) = run.ranks
    (step,) = summary.steps
    return step


# ------------------------------------------------------------------ exposed communication


@pytest.mark.parametrize(
    ("comm", "exposed"),
    [((2000, 4000), 0), ((4000, 8000), 3000), ((6000, 9000), 3000)],
    ids=["fully-hidden", "partly-hidden", "not-hidden"],
)
def test_exposed_communication_is_what_no_compute_kernel_hides(tmp_path, comm, exposed):
    builder = TraceBuilder(0, 1)
    builder.compute(1000, 5000)
    builder.all_reduce(*comm)
    step = one_rank_summary(tmp_path, builder)
    assert step.compute_us == 4000
    assert step.communication_us == comm[1] - comm[0]
    assert step.exposed_communication_us == exposed


def test_exposed_communication_on_random_streams_matches_a_microsecond_count(tmp_path):
    rng = random.Random(14)
    for case in range(12):
        builder = TraceBuilder(0, 1)
        compute, comm = [], []
        for _ in range(rng.randint(0, 6)):
            start = rng.randint(0, 19_000)
            span = (start, start + rng.randint(1, 3000))
            compute.append(span)
            builder.compute(*span, stream=rng.choice(COMPUTE_STREAMS), at=rng.randint(0, 19_900))
        for _ in range(rng.randint(1, 4)):
            start = rng.randint(0, 19_000)
            span = (start, start + rng.randint(1, 3000))
            comm.append(span)
            builder.all_reduce(*span, at=rng.randint(0, 19_900))
        busy = {t for a, b in compute for t in range(a, b)}
        talking = {t for a, b in comm for t in range(a, b)}
        step = one_rank_summary(tmp_path / str(case), builder)
        assert step.compute_us == len(busy), case
        assert step.communication_us == len(talking), case
        assert step.exposed_communication_us == len(talking - busy), case


# ------------------------------------------------------------------ collectives across ranks


def loading(own_us: float, others_us: float) -> WorkExcess:
    """The data loading span's time on a straggler and the others' median: where its extra time went."""
    return WorkExcess("operator", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", own_us, others_us)


def test_a_collective_one_rank_enters_5_ms_late(tmp_path):
    run = summarise_run(open_run(two_rank_run(tmp_path)), workers=1, use_sidecars=False)
    (matched,) = run.collectives.collectives
    assert matched.kind == "all_reduce" and matched.group == "0" and matched.ranks == (0, 1)
    assert matched.last_rank == 1
    assert matched.skew_ns == 5_000_000
    assert matched.transfer_ns == 1_000_000
    assert matched.waits_ns() == {0: 5_000_000, 1: 0}
    assert matched.size_bytes == 262144 * 4
    assert matched.algbw_gbps == pytest.approx(1.048576)  # bytes per ns
    assert matched.busbw_gbps == pytest.approx(1.048576 * 2 * (2 - 1) / 2)
    assert run.collectives.last_arrivals() == {1: 1}
    # rank 0: 20 ms step, 6 ms waiting -> works 14 ms; rank 1 works 19 ms; its extra time: the
    # data loading span (6 ms against rank 0's 1 ms); no holdup counts: the trace's first collective
    assert run.stragglers() == {
        1: Straggler(1, 19_000, 14_000, "data_loading_us", 5000, 1, 1, items=(loading(6000, 1000),))
    }


def test_a_straggler_with_the_shorter_step_is_told_by_its_work_not_its_step(tmp_path):
    """Rank 1 loads data 11 ms longer but its step is the shorter one (17 vs 20 ms): rank 0
    waits 11 ms in the all-reduce.  Works: rank 0 20 - 11 = 9 ms, rank 1 17 - 1 = 16 ms."""
    zero = TraceBuilder(0, 2, step_us=(0, 20_000))
    zero.data_loading(0, 1000)
    zero.compute(1000, 5000, at=1000)
    zero.all_reduce(5000, 16_000, at=4900)
    zero.write(tmp_path)
    one = TraceBuilder(1, 2, step_us=(0, 17_000))
    one.data_loading(0, 12_000)
    one.compute(12_000, 15_000, at=12_000)
    one.all_reduce(15_000, 16_000, at=14_900)
    one.write(tmp_path)
    run = summarise_run(open_run(tmp_path), workers=1, use_sidecars=False)
    assert [r.mean("step_us") for r in run.ranks] == [20_000, 17_000]
    (straggler,) = run.stragglers().values()
    assert straggler == Straggler(1, 16_000, 9000, "data_loading_us", 11_000, 1, 1, items=(loading(12_000, 1000),))
    assert straggler_cause(straggler) == "Data load +11.0 ms"
    assert straggler_sentence(straggler) == (
        "rank 1: 7.0 ms more work per step than the other ranks (Step - Exposed comm: 16.0 ms; their median 9.0 ms), "
        "Data load 11.0 ms above theirs, last to arrive at 1 of 1 collectives; the others wait for it, in Exposed comm"
    )
    (row,) = [r for r in build_rank_rows(run) if r["straggler"]]
    assert (row["rank"], row["straggler"], row["straggler_reason"]) == (
        1,
        straggler_cause(straggler),
        straggler_sentence(straggler),
    )


def test_a_rank_last_at_most_collectives_without_more_work_says_so():
    straggler = Straggler(7, 9600, 9800, None, 0.0, 5, 8)
    assert straggler_cause(straggler) == "last at 5 of 8"
    assert straggler_sentence(straggler) == (
        "rank 7: last to arrive at 5 of 8 collectives, although it does no more work per step than the other ranks "
        "(Step - Exposed comm: 9.6 ms; their median 9.8 ms); the others wait for it, in Exposed comm"
    )


def test_arrival_skew_waits_and_last_rank_on_random_arrivals():
    rng = random.Random(5)
    for _ in range(50):
        ranks = rng.randint(2, 6)
        arrivals = [rng.randint(0, 10_000) for _ in range(ranks)]
        last = max(arrivals)
        durations = [last - a + rng.randint(1, 500) for a in arrivals]
        records = {
            r: [CollectiveRecord("pg", 3, "all_gather", arrivals[r], durations[r], 4096, "Float", ranks)]
            for r in range(ranks)
        }
        (matched,) = match_collectives(records).collectives
        assert matched.skew_ns == last - min(arrivals)
        assert matched.arrivals_ns[matched.ranks.index(matched.last_rank)] == last
        assert matched.transfer_ns == min(durations)
        assert matched.waits_ns() == {r: last - arrivals[r] for r in range(ranks)}
        assert matched.busbw_gbps == pytest.approx(4096 / min(durations) * (ranks - 1) / ranks)


def test_collectives_match_by_group_and_order_and_stop_where_ranks_disagree():
    def records(kinds: list[str], group: str = "0") -> list[CollectiveRecord]:
        return [CollectiveRecord(group, 1, kind, 1000 * i, 10, None, None, None) for i, kind in enumerate(kinds)]

    match = match_collectives(
        {
            0: records(["all_reduce", "broadcast", "all_reduce"]) + records(["all_to_all"], "1"),
            1: records(["all_reduce", "all_gather", "all_reduce"]) + records(["all_to_all"], "1"),
        }
    )
    assert [(c.group, c.kind) for c in match.collectives] == [("0", "all_reduce"), ("1", "all_to_all")]
    assert match.problems == (
        "process group 0, step 1: collective 2 differs (broadcast on rank 0; all_gather on rank 1); "
        "the rest of this group is not matched",
    )


def test_collectives_that_do_not_overlap_in_time_are_not_matched(tmp_path):
    """Rank 1's trace misses the step's first all-reduce: by order, rank 0's first (1-2 ms)
    would meet rank 1's only one (118-120 ms), which began 116 ms after rank 0's ended.
    No rank can finish an all-reduce before every rank has begun it: not the same one."""
    zero = TraceBuilder(0, 2, step_us=(0, 200_000))
    zero.all_reduce(1000, 2000, at=900)
    zero.all_reduce(118_000, 120_000, at=117_900)
    zero.write(tmp_path)
    one = TraceBuilder(1, 2, step_us=(0, 200_000))
    one.all_reduce(118_000, 120_000, at=117_900)
    one.write(tmp_path)
    run = summarise_run(open_run(tmp_path), workers=1, use_sidecars=False)
    assert run.collectives.collectives == ()
    assert run.collectives.last_arrivals() == {} and run.stragglers() == {}
    assert run.problems[-1] == (
        "process group 0, step 1: collective 1 (all_reduce) does not overlap in time: rank 0's ended 116.0 ms before "
        "rank 1's began (clocks may differ by 5 ms); a rank's trace misses a collective, or the ranks' clocks are that far apart; "
        "the rest of this group is not matched"
    )


def test_collectives_a_few_ms_apart_match_as_clocks_of_two_hosts_may_be(tmp_path):
    """Rank 0's all-reduce ended 3 ms before rank 1's began: within the clock tolerance (5 ms),
    so matched, and the skew shows it."""
    for rank, (start, end) in enumerate([(10_000, 12_000), (15_000, 16_000)]):
        builder = TraceBuilder(rank, 2)
        builder.all_reduce(start, end, at=start - 100)
        builder.write(tmp_path)
    run = summarise_run(open_run(tmp_path), workers=1, use_sidecars=False)
    (matched,) = run.collectives.collectives
    assert matched.skew_ns == 5_000_000 and matched.last_rank == 1 and run.problems == ()


def test_a_broadcast_root_may_finish_before_the_others_begin():
    records = {
        0: [CollectiveRecord("0", 1, "broadcast", 0, 1000, 64, "Float", 2)],
        1: [CollectiveRecord("0", 1, "broadcast", 50_000_000, 1000, 64, "Float", 2)],
    }
    match = match_collectives(records)
    assert len(match.collectives) == 1 and match.problems == ()
    too_far = {
        rank: [CollectiveRecord("0", 1, "all_gather", r.start_ns, r.dur_ns, 64, "Float", 2) for r in rs]
        for rank, rs in records.items()
    }
    assert match_collectives(too_far).collectives == ()


# ------------------------------------------------------------------ run directories with problems


def test_a_directory_with_every_kind_of_problem_opens_the_rest_one_line_each(tmp_path):
    for rank in (0, 1, 3):  # rank 2 missing
        builder = TraceBuilder(rank, 4)
        builder.compute(1000, 2000)
        builder.write(tmp_path)
    later = TraceBuilder(1, 4)
    later.write(tmp_path, "host_1.1700000009999.pt.trace.json")  # rank 1 again, a later window
    other = TraceBuilder(0, 2)
    other.write(tmp_path, "other_0.1700000000000.pt.trace.json")  # another run (world size 2)
    (tmp_path / "broken.pt.trace.json.gz").write_bytes(gzip.compress(b'{"traceEvents": [')[:-8])  # truncated gzip
    (tmp_path / "host_3.1700000000003.pt.trace.json").write_text(
        '{"distributedInfo": {"rank": 3, "world_size": 4}, "traceEvents": ['
    )
    # ^ overwrites rank 3 with a truncated document: corrupt after its head
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(tmp_path), "--view", "ranks", "--format", "csv"],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert all(line.startswith("tuiprof: ") for line in lines)
    assert "Traceback" not in result.stderr
    joined = "\n".join(lines)
    assert "host_1.1700000009999.pt.trace.json: rank 1 again (a later profiling window" in joined
    assert "other_0.1700000000000.pt.trace.json: world size 2, the run has 4; another run, not mixed in" in joined
    assert "rank 2 of world size 4 have no trace file" in joined
    assert sum("broken.pt.trace.json.gz" in line for line in lines) == 1
    assert sum("host_3.1700000000003.pt.trace.json" in line and "rank 3 skipped" in line for line in lines) == 1
    rows = result.stdout.strip().splitlines()[1:]
    assert [row.split(",")[0] for row in rows] == ["0", "1"]


# ------------------------------------------------------------------ sidecars and the summary format


def test_summaries_round_trip_and_other_versions_are_ignored(tmp_path):
    run = summarise_run(open_run(two_rank_run(tmp_path)), workers=1, use_sidecars=False)
    for summary in run.ranks:
        plain = json.loads(json.dumps(encode_summary(summary)))
        assert decode_summary(plain) == summary
        assert decode_summary({**plain, "version": plain["version"] + 1}) is None


def test_reopen_reads_only_sidecars_and_a_changed_trace_is_analysed_again(tmp_path):
    directory = two_rank_run(tmp_path)
    first = summarise_run(open_run(directory), workers=2)
    assert first.from_sidecars == 0
    assert all(sidecar_path(f.path).exists() for f in open_run(directory).ranks)
    again = summarise_run(open_run(directory))
    assert again.from_sidecars == 2 and again.ranks == first.ranks
    trace = open_run(directory).file_of(1).path
    os.utime(trace, ns=(time.time_ns(), time.time_ns() + 10**9))
    changed = summarise_run(open_run(directory))
    assert changed.from_sidecars == 1 and changed.ranks == first.ranks


@needs_shared
def test_reopening_8_ranks_from_sidecars_takes_under_a_second(tmp_path):
    copy = tmp_path / "dlrm"
    shutil.copytree(DLRM, copy)
    os.chmod(copy, 0o755)
    fresh = summarise_run(open_run(copy))
    started = time.perf_counter()
    reopened = summarise_run(open_run(copy))
    assert time.perf_counter() - started < 1.0
    assert reopened.from_sidecars == 8 and reopened.ranks == fresh.ranks


def _sidecars_in(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob("*.tuiprof-summary")) if folder.exists() else []


def test_read_only_folders_get_their_sidecars_in_the_cache(tmp_path, monkeypatch):
    """Never written into a folder without write permission (even as root): into $XDG_CACHE_HOME/tuiprof."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    directory = two_rank_run(tmp_path / "run")
    os.chmod(directory, 0o555)
    try:
        first = summarise_run(open_run(directory), workers=1)
        assert _sidecars_in(directory) == [] and len(_sidecars_in(cache / "tuiprof")) == 2
        again = summarise_run(open_run(directory))
        assert again.from_sidecars == 2 and again.ranks == first.ranks
    finally:
        os.chmod(directory, 0o755)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder away needs root")
def test_a_folder_of_another_user_gets_no_sidecar(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    directory = two_rank_run(tmp_path / "run")
    os.chown(directory, 4321, 4321)  # writable by its owner, who is not us
    summarise_run(open_run(directory), workers=1)
    assert _sidecars_in(directory) == [] and len(_sidecars_in(cache)) == 2


def test_no_sidecars_reads_and_writes_none(tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    directory = two_rank_run(tmp_path / "run")
    env = dict(os.environ, XDG_CACHE_HOME=str(cache))
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(directory), "--view", "ranks", "--no-sidecars"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert result.returncode == 0 and "Ranks" in result.stdout, result.stderr
    assert _sidecars_in(directory) == [] and _sidecars_in(cache) == []
    summarise_run(open_run(directory), workers=1)  # on: written next to the traces
    assert len(_sidecars_in(directory)) == 2
    monkeypatch.setenv("TUIPROF_NO_SIDECARS", "1")
    assert summarise_run(open_run(directory), workers=1).from_sidecars == 0  # off: not read either


# ------------------------------------------------------------------ the shared 8-rank run


@needs_shared
def test_dlrm_8_ranks_every_rank_and_every_collective(tmp_path):
    run = summarise_run(open_run(DLRM), use_sidecars=False)
    assert [r.rank for r in run.ranks] == list(range(8)) and run.problems == ()
    kinds = [c.kind for c in run.collectives.collectives]
    assert kinds == ["all_to_all"] * 4 + ["all_reduce", "all_to_all", "all_reduce", "all_reduce"]
    assert all(len(c.ranks) == 8 for c in run.collectives.collectives)
    first = run.collectives.collectives[0]
    assert first.size_bytes == 6144 * 4  # nccl:all_to_all Input Dims [[6144]] float
    assert sum(run.collectives.last_arrivals().values()) == 8
    assert 7 in run.stragglers()  # last to arrive at 5 of the 8 collectives


@needs_shared
def test_summary_ranks_json_and_collectives_csv_on_dlrm():
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    ranks = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(DLRM), "--view", "ranks", "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert ranks.returncode == 0 and ranks.stderr == ""
    rows = json.loads(ranks.stdout)
    assert [r["rank"] for r in rows] == list(range(8))
    assert rows[7]["straggler"] and rows[7]["straggler_reason"].startswith("rank 7: ")
    collectives = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(DLRM), "--view", "collectives", "--format", "csv"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert collectives.returncode == 0
    assert collectives.stdout.splitlines()[0].startswith("step,group,index,kind,size_bytes")
    assert len(collectives.stdout.splitlines()) == 9


# ------------------------------------------------------------------ Dask


def test_cluster_local_2_gives_the_local_results(tmp_path):
    pytest.importorskip("dask.distributed")
    directory = two_rank_run(tmp_path / "run")
    if DLRM.is_dir():
        shutil.copytree(DLRM, tmp_path / "dlrm")
        directory = tmp_path / "dlrm"
    local = summarise_run(open_run(directory), workers=1, use_sidecars=False)
    clustered = summarise_run(open_run(directory), cluster="local:2", use_sidecars=False)
    assert clustered.ranks == local.ranks
    assert clustered.collectives == local.collectives
    assert clustered.stragglers() == local.stragglers()


def test_dask_is_imported_only_with_cluster(tmp_path):
    directory = two_rank_run(tmp_path)
    code = (
        "import sys; from tuiprof.cli import main; "
        f"main(['summary', {str(directory)!r}, '--view', 'ranks', '--format', 'json']); "
        "assert 'dask' not in sys.modules and 'distributed' not in sys.modules, 'dask imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_find_stragglers_needs_two_ranks():
    assert find_stragglers(()) == {}


def test_ranks_of_workers_that_die_are_summarised_here(tmp_path, monkeypatch):
    directory = two_rank_run(tmp_path)
    expected = summarise_run(open_run(directory), workers=1, use_sidecars=False)
    monkeypatch.setattr(sys, "executable", shutil.which("true"))  # every worker exits at once
    survived = summarise_run(open_run(directory), workers=2, use_sidecars=False)
    assert survived.ranks == expected.ranks and survived.problems == ()
