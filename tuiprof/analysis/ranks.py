"""Every rank of a distributed run at once: a compact summary per rank, spread and stragglers.

Which rank is slow, and is it compute, data loading or waiting in a
collective?  Answering that needs only a few numbers per rank and step, not
every rank's full model: :func:`summarise_trace` analyses one rank's file and
keeps a :class:`RankSummary` (a plain, versioned msgspec struct: a few KB,
JSON in the ``.tuiprof-summary`` sidecar, pickled from worker processes or
Dask workers).  :func:`summarise_run` makes one per rank, in parallel: one
worker process per core, each analysing whole files (its decode stays in
that process), so only summaries reach this process and its memory does not
grow with the run.

Columns per rank and step (microseconds; device columns are None for CPU-only
traces):

- ``step_us``: the ``ProfilerStep#N`` span on the CPU (the whole trace when
  there are no steps);
- ``compute_us``: union of compute kernels (every kernel but communication);
- ``communication_us``: union of communication kernels (NCCL/RCCL); on
  CPU-only traces the backend's collective spans (``gloo:all_reduce``);
- ``exposed_communication_us``: communication time during which no compute
  kernel ran on any stream (|comm U compute| - |compute|); on CPU-only traces
  the same against the union of CPU operators outside communication;
- ``memcpy_us``, ``memset_us``, ``device_idle_us`` (the step's device window
  with nothing running), ``data_loading_us`` (``enumerate(DataLoader)`` spans);
- ``cpu_bound_us``: device idle time while no data loading ran, i.e. the device
  waited for the CPU to launch work;
- ``peak_memory_bytes``: the highest allocated bytes of the rank's device (CPU
  when it has none), for the whole trace.
"""

from __future__ import annotations

import gc
import math
import os
import pickle
import selectors
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from statistics import median, stdev
from typing import NamedTuple

import msgspec
import numpy as np

from tuiprof.analysis.calls import STEP_PREFIX
from tuiprof.analysis.collectives import (
    CollectiveMatch,
    CollectiveRecord,
    Holdups,
    extract_collectives,
    match_collectives,
)
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.rank_work import MODULE, WorkItem, communication_calls, rank_work
from tuiprof.analysis.steps import WHOLE_TRACE, StepStats, union_ns, whole_trace_step
from tuiprof.errors import TraceError
from tuiprof.trace.decode import DecodeReport
from tuiprof.trace.run import RankFile, RunDirectory, read_sidecar, write_sidecar
from tuiprof.trace.store import TraceEvents

# 2: LoadDamage (a summary of version 1 cannot say its file was damaged); 3: work (rank_work.py);
# 4: a module item's qualified name (WorkItem.name), so a run's ranks all show one kind of name
SUMMARY_VERSION = 4
STEP_COLUMNS = (
    "step_us",
    "compute_us",
    "communication_us",
    "exposed_communication_us",
    "memcpy_us",
    "memset_us",
    "device_idle_us",
    "data_loading_us",
    "cpu_bound_us",
)
# Columns a straggler's reason can name: what a rank spends more on than the others.
CAUSE_COLUMNS = ("compute_us", "data_loading_us", "cpu_bound_us", "memcpy_us", "memset_us")
# A rank is a straggler when it works this much longer per step than the
# others' median: 10 % of the median step, at least 1 ms (step-to-step noise of
# one rank on the shared traces is of that order).
STRAGGLER_SHARE = 0.10
STRAGGLER_MIN_US = 1000.0
# A straggler's work items named as where its extra time went: those above this share of its
# excess work or of the threshold, whichever is larger, at most MAX_ITEMS of them.
ITEM_SHARE = 0.10
MAX_ITEMS = 8
MEDIAN_ERROR = math.sqrt(math.pi / 2)  # a median's standard error over the mean's, for normal noise


class StepSummary(msgspec.Struct, frozen=True):
    name: str
    step_us: float
    compute_us: float | None
    communication_us: float
    exposed_communication_us: float
    memcpy_us: float | None
    memset_us: float | None
    device_idle_us: float | None
    data_loading_us: float
    cpu_bound_us: float | None


class LoadDamage(msgspec.Struct, frozen=True):
    """What loading a rank's file could not read as written: the rank's numbers are partial."""

    truncated: bool  # the event array is not closed: the file ends early
    repaired: int
    skipped: int
    left_out: int  # decoded, but with times no nanosecond count holds
    problems: tuple[str, ...]  # the decoder's one-line notes

    @classmethod
    def of(cls, report: DecodeReport) -> LoadDamage | None:
        if report.intact:
            return None
        return cls(report.truncated, report.repaired, report.skipped, report.damaged, tuple(report.problems))


class RankSummary(msgspec.Struct, frozen=True):
    """What a run view needs of one rank: versioned, plain, a few KB."""

    version: int
    rank: int
    world_size: int | None
    file: str
    size_bytes: int
    has_device: bool
    base_time_ns: int  # baseTimeNanoseconds (0 if absent): puts ranks on one clock
    peak_memory_bytes: int | None
    peak_memory_device: str | None
    steps: tuple[StepSummary, ...]
    collectives: tuple[CollectiveRecord, ...]
    damage: LoadDamage | None = None  # None: every event was read as written
    work: tuple[WorkItem, ...] = ()  # where its step time went, item by item (rank_work.py)

    def mean(self, column: str) -> float | None:
        values = [getattr(s, column) for s in self.steps]
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else None


# ------------------------------------------------------------------ one rank


def summarise_model(store: TraceEvents, model: TraceModel, rank: int, size_bytes: int) -> RankSummary:
    """The summary of one analysed rank."""
    steps = model.steps or [whole_trace_step(model.calls, model.activity)]
    collectives = extract_collectives(store, model)
    if model.has_device:
        rows = tuple(_device_step(s) for s in steps)
        waits = []  # the device waits in a collective, not the CPU
    else:
        rows = tuple(_cpu_step(s, model, collectives) for s in steps)
        waits = [(r.start_ns, r.start_ns + r.dur_ns) for r in collectives]
    peak = model.peak_memory
    info = model.info
    return RankSummary(
        version=SUMMARY_VERSION,
        rank=rank,
        world_size=info.world_size,
        file=info.trace_name,
        size_bytes=size_bytes,
        has_device=model.has_device,
        base_time_ns=store.header.baseTimeNanoseconds or 0,
        peak_memory_bytes=peak.peak_bytes if peak else None,
        peak_memory_device=peak.device if peak else None,
        steps=rows,
        collectives=tuple(collectives),
        damage=LoadDamage.of(store.report),
        work=rank_work(store, model, steps, waits),
    )


def _device_step(step: StepStats) -> StepSummary:
    return StepSummary(
        name=step.name,
        step_us=step.duration_us,
        compute_us=step.kernel_us,
        communication_us=step.communication_us,
        exposed_communication_us=step.exposed_communication_us,
        memcpy_us=step.memcpy_us,
        memset_us=step.memset_us,
        device_idle_us=step.device_idle_us,
        data_loading_us=step.data_loading_us,
        cpu_bound_us=step.cpu_bound_us,
    )


def _cpu_step(step: StepStats, model: TraceModel, collectives: list[CollectiveRecord]) -> StepSummary:
    """A CPU-only rank's step: communication is the backend's spans, compute the CPU operators."""
    start, end = step.start_ns, step.end_ns
    comm = [(max(r.start_ns, start), min(r.start_ns + r.dur_ns, end)) for r in collectives]
    comm = [(a, b) for a, b in comm if b > a]
    busy = _cpu_compute_spans(model, start, end)
    comm_begins = np.array([a for a, _ in comm], dtype=np.int64)
    comm_ends = np.array([b for _, b in comm], dtype=np.int64)
    union = union_ns(np.concatenate((comm_begins, busy[0])), np.concatenate((comm_ends, busy[1])))
    return StepSummary(
        name=step.name,
        step_us=step.duration_us,
        compute_us=None,
        communication_us=union_ns(comm_begins, comm_ends) / 1000,
        exposed_communication_us=(union - union_ns(*busy)) / 1000,
        memcpy_us=None,
        memset_us=None,
        device_idle_us=None,
        data_loading_us=step.data_loading_us,
        cpu_bound_us=None,
    )


def _cpu_compute_spans(model: TraceModel, start: int, end: int) -> tuple[np.ndarray, np.ndarray]:
    """``cpu_op`` calls clipped to [start, end), those of communication and their children left out."""
    calls = model.calls
    category = calls.cpu.category[calls.column("cpu_row")]
    chosen = (category == 0) & ~communication_calls(model)
    begins = np.clip(calls.column("start_ns")[chosen], start, end)
    ends = np.clip(calls.column("end_ns")[chosen], start, end)
    keep = ends > begins
    return begins[keep], ends[keep]


def summarise_trace(rank_file: RankFile) -> RankSummary:
    """Load, analyse and summarise one rank's file (then drop its model)."""
    from tuiprof.analysis.build import analyze
    from tuiprof.trace.load import load_trace_file

    store = load_trace_file(rank_file.trace)
    model = analyze(store)
    return summarise_model(store, model, rank_file.rank, rank_file.trace.size_bytes)


def encode_summary(summary: RankSummary) -> dict:
    return msgspec.to_builtins(summary)


def decode_summary(data: object) -> RankSummary | None:
    """A summary from its plain form; None if it was written by another version."""
    if not isinstance(data, dict) or data.get("version") != SUMMARY_VERSION:
        return None
    try:
        return msgspec.convert(data, RankSummary)
    except msgspec.ValidationError:
        return None


def describes(summary: RankSummary, rank_file: RankFile) -> bool:
    """Whether a summary read back from a sidecar fits the file as its head describes it: the
    same rank, world size, name and size, and times and sizes a trace can give (finite, not
    negative).  A sidecar is untrusted input (trace/run.py, sidecars)."""
    if (summary.rank, summary.file, summary.size_bytes) != (rank_file.rank, rank_file.name, rank_file.trace.size_bytes):
        return False
    if summary.world_size not in (None, rank_file.world_size):
        return False
    numbers: list[float] = [summary.base_time_ns, summary.peak_memory_bytes or 0]
    numbers += [getattr(step, column) or 0 for step in summary.steps for column in STEP_COLUMNS]
    numbers += [value or 0 for c in summary.collectives for value in (c.dur_ns, c.size_bytes, c.group_size)]
    numbers += [item.us for item in summary.work]
    return all(math.isfinite(value) and value >= 0 for value in numbers)


# ------------------------------------------------------------------ the run


@dataclass(frozen=True)
class RunSummary:
    """Every rank's summary, the matched collectives and every problem, one line each."""

    path: Path
    world_size: int
    ranks: tuple[RankSummary, ...]  # ordered by rank
    collectives: CollectiveMatch
    problems: tuple[str, ...]
    from_sidecars: int  # ranks read from sidecars instead of analysed

    def stragglers(self) -> dict[int, Straggler]:
        return find_stragglers(self.ranks, self.collectives)


Progress = Callable[[int, int], None]  # (ranks done, ranks in all)


def summarise_run(
    run: RunDirectory,
    *,
    workers: int | None = None,
    cluster: str | None = None,
    use_sidecars: bool = True,
    progress: Progress | None = None,
) -> RunSummary:
    """Summaries of every rank of ``run``: from sidecars where valid, else analysed in parallel.

    ``cluster`` (a Dask scheduler address, or ``local:N``) runs the analysis on
    Dask workers (:mod:`tuiprof.analysis.cluster`); otherwise up to ``workers``
    local processes (default: one per core).
    """
    if cluster is not None:  # a bad address is refused even when every rank has a sidecar
        from tuiprof.analysis.cluster import parse_cluster

        parse_cluster(cluster)
    summaries: dict[int, RankSummary] = {}
    problems = list(run.problems)
    pending: list[RankFile] = []
    for rank_file in run.ranks:
        cached = read_sidecar(rank_file.path, rank_file.trace.size_bytes, rank_file.mtime_ns) if use_sidecars else None
        summary = decode_summary(cached) if cached is not None else None
        if summary is not None and describes(summary, rank_file):
            summaries[rank_file.rank] = summary
        else:
            pending.append(rank_file)  # no sidecar, or one not to believe: analysed, and its sidecar rewritten
    from_sidecars = len(summaries)
    if pending:
        if cluster is not None:
            from tuiprof.analysis.cluster import summarise_on_cluster

            results, notes = summarise_on_cluster(pending, cluster, progress)
            problems.extend(notes)
        else:
            results = summarise_locally(pending, workers, progress)
        for rank_file, result in zip(pending, results):
            if isinstance(result, RankSummary):
                summaries[rank_file.rank] = result
                if use_sidecars:
                    write_sidecar(rank_file, encode_summary(result))
            else:
                problems.append(f"{result} (rank {rank_file.rank} skipped)")
    if not summaries:
        more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
        raise TraceError(
            str(run.path),
            f"no rank could be read ({problems[0] if problems else 'none'}{more})",
            "pass traces written by torch.profiler",
        )
    ordered = tuple(summaries[rank] for rank in sorted(summaries))
    problems.extend(damage_problem(s, s.damage) for s in ordered if s.damage is not None)
    base = min(s.base_time_ns for s in ordered)
    match = match_collectives(
        {s.rank: list(s.collectives) for s in ordered}, {s.rank: s.base_time_ns - base for s in ordered}
    )
    return RunSummary(run.path, run.world_size, ordered, match, tuple(problems) + match.problems, from_sidecars)


def damage_problem(summary: RankSummary, damage: LoadDamage) -> str:
    """One line for a rank whose file was damaged: its numbers are partial (also when read from a sidecar)."""
    counts = [
        f"{n:,} event{'s' * (n != 1)} {word}"
        for n, word in ((damage.repaired, "repaired"), (damage.skipped, "skipped"), (damage.left_out, "left out"))
        if n
    ]
    what = "; ".join((*damage.problems, *counts))
    return f"{summary.file}: rank {summary.rank} is damaged ({what}): its numbers are partial; copy or export the trace again"


def summarise_one(rank_file: RankFile) -> RankSummary | str:
    """A rank's summary, or its problem as one line (never an exception)."""
    try:
        return summarise_trace(rank_file)
    except TraceError as exc:
        return str(exc)
    except MemoryError:
        return f"{rank_file.path}: out of memory while analysing it; use --cluster or a machine with more memory"


def summarise_locally(
    pending: list[RankFile], workers: int | None, progress: Progress | None
) -> list[RankSummary | str]:
    """Each file in a worker process (this module's ``_serve``), the next file to whichever is free.

    Plain processes over pipes, not ``multiprocessing`` (see
    :mod:`tuiprof.trace.parallel`: a user's unguarded script would be re-run),
    started like the decode workers (``python -I`` with tuiprof's own
    ``sys.path``: nothing planted in the current directory is imported).
    A worker decodes and analyses on its own core (no workers or analysis threads inside workers).  Workers
    are registered with :mod:`tuiprof.cleanup` (killed on SIGTERM, SIGHUP,
    SIGINT and at exit, even in the middle of a file), killed when this
    function ends, and end themselves when this process dies (SIGKILL).
    """
    from tuiprof.analysis.stages import THREADS_ENV
    from tuiprof.cleanup import forget_process, register_process
    from tuiprof.trace.parallel import WORKERS_ENV, usable_cores, worker_command

    count = max(1, min(workers or usable_cores(), len(pending)))
    results: list[RankSummary | str | None] = [None] * len(pending)
    if count == 1:
        for index, rank_file in enumerate(pending):
            results[index] = summarise_one(rank_file)
            if progress:
                progress(index + 1, len(pending))
        return results  # type: ignore[return-value]
    env = dict(os.environ, **{WORKERS_ENV: "1", THREADS_ENV: "1"})  # a process a core: none inside
    command = worker_command(__name__)
    processes: list[subprocess.Popen] = []
    for _ in range(count):
        process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        register_process(process)
        processes.append(process)
    selector = selectors.DefaultSelector()
    queue = list(enumerate(pending))
    busy: dict[int, int] = {}  # process index -> task index
    done = 0

    def give(worker: int) -> None:
        if not queue:
            return
        index, rank_file = queue.pop(0)
        try:
            pickle.dump(rank_file, processes[worker].stdin)  # type: ignore[arg-type]
            processes[worker].stdin.flush()  # type: ignore[union-attr]
            busy[worker] = index
        except OSError:  # the worker is gone: this file is analysed here
            results[index] = summarise_one(rank_file)

    try:
        for worker, process in enumerate(processes):
            selector.register(process.stdout, selectors.EVENT_READ, worker)  # type: ignore[arg-type]
            give(worker)
        while busy:
            for key, _ in selector.select():
                worker = key.data
                index = busy.pop(worker)
                try:
                    answer = pickle.load(processes[worker].stdout)
                except (EOFError, pickle.UnpicklingError):  # died (killed for memory?): try here
                    selector.unregister(key.fileobj)
                    answer = summarise_one(pending[index])
                else:
                    give(worker)
                results[index] = answer
                done += 1
                if progress:
                    progress(done, len(pending))
        for index, rank_file in queue:  # every worker died: the rest here
            results[index] = summarise_one(rank_file)
    finally:
        selector.close()
        for process in processes:  # idle once every answer is in; mid-file when interrupted
            process.kill()
            process.wait()
            forget_process(process)
            for pipe in (process.stdin, process.stdout):
                try:
                    pipe.close()  # type: ignore[union-attr]
                except OSError:
                    pass
    return results  # type: ignore[return-value]


def _serve() -> None:
    """Worker loop: summarise each file asked for, answer with the summary or the problem."""
    from tuiprof.trace.parallel import watch_parent

    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    watch_parent()
    while True:
        try:
            rank_file = pickle.load(requests)
        except EOFError:
            return
        answer = summarise_one(rank_file)
        gc.collect()  # the model is gone: give its memory back before the next file
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


# ------------------------------------------------------------------ spread and stragglers


@dataclass(frozen=True)
class Spread:
    column: str
    minimum: float
    median: float
    maximum: float

    @property
    def max_over_median(self) -> float | None:
        return self.maximum / self.median if self.median else None


def rank_means(summary: RankSummary) -> dict[str, float | None]:
    return {column: summary.mean(column) for column in STEP_COLUMNS}


def spread(ranks: tuple[RankSummary, ...], columns: tuple[str, ...] = STEP_COLUMNS) -> dict[str, Spread]:
    """min, median, max of each column's per-rank mean."""
    result = {}
    for column in columns:
        values = [v for v in (r.mean(column) for r in ranks) if v is not None]
        if values:
            result[column] = Spread(column, min(values), median(values), max(values))
    return result


class WorkExcess(NamedTuple):
    """One item of a straggler's extra time: the item's mean per step on the straggler and
    the median of the other ranks' (0 where a rank has none of it)."""

    kind: str  # rank_work's OPERATOR, KERNEL, MODULE or PYTHON
    label: str
    own_us: float
    others_us: float
    name: str = ""  # a module's qualified name and class, where known (WorkItem.name)

    @property
    def excess_us(self) -> float:
        return self.own_us - self.others_us


@dataclass(frozen=True)
class Straggler:
    """A rank that holds the others up, and the numbers that say why (means per step, us).

    The words are the report's (report/stragglers.py): they state these numbers in
    the terms of the ranks table's columns.
    """

    rank: int
    working_us: float  # Step - Exposed comm: what the rank does between waits
    others_working_us: float  # the median of the other ranks' working time
    cause: str | None  # the CAUSE_COLUMNS column the rank spends most extra time in, when it explains the excess
    cause_excess_us: float  # that column minus the median of the other ranks' (0 without a cause)
    last_arrivals: int  # matched collectives at which the rank arrived last
    collectives: int  # matched collectives in all
    holdup_us: float = 0.0  # its leads at the collectives it arrived last at, median per step (collectives.py)
    saving_us: float = 0.0  # the run_step_us shorter by this had it worked like the others (median per step)
    saving_error_us: float | None = None  # the standard error of saving_us over the steps; None: one step
    steps: int = 0  # the whole steps the saving is measured over (collectives.Holdups)
    items: tuple[WorkExcess, ...] = ()  # where its extra time went, largest first (rank_work.py)

    @property
    def excess_us(self) -> float:
        return self.working_us - self.others_working_us


def run_step_us(ranks: tuple[RankSummary, ...]) -> float:
    """The run's step, what a typical step takes: the median over ranks of each rank's median
    Step.  Every rank's step ends at the same collectives, so they differ only at the window's
    edges; medians, because a capture's last step is longer (the trace being written) and a
    loaded host preempts a step now and then (docs/ranks.md)."""
    medians = [median(s.step_us for s in r.steps) for r in ranks if r.steps]
    return median(medians) if medians else 0.0


def find_stragglers(ranks: tuple[RankSummary, ...], collectives: CollectiveMatch | None = None) -> dict[int, Straggler]:
    """Ranks that hold the others up, by rank, in the order to fix them (the first one first).

    In synchronous training every rank's step ends at the same collectives, so
    a slow rank does not have a longer step: the others wait for it, in
    exposed communication.  What tells it apart is its *working time*, the step
    minus its exposed communication.  A rank whose working time exceeds the
    median of the other ranks' by more than STRAGGLER_SHARE of the median step
    (at least STRAGGLER_MIN_US) is a straggler; so is a rank that arrived last
    at most collectives, whatever its working time.  The cause is the column it
    spends most extra time in, when that excess is over half the threshold.

    Which one first (docs/ranks.md, "One straggler first"): the one whose fix
    shortens the run's step the most.  Per step, that is how long it held the
    others up (its *holdup*: at each collective it arrived last at, its arrival
    minus the one before it), at most its excess work (the others' wait cannot
    be its fault beyond the work it did more: a clock offset between hosts makes
    a rank last without more work); the saving is the median over the steps
    (its standard error: MEDIAN_ERROR x stdev / sqrt(n)).  Ties go to the larger
    excess work.
    """
    if len(ranks) < 2:
        return {}
    means = {r.rank: rank_means(r) for r in ranks}
    working = {rank: (m["step_us"] or 0.0) - (m["exposed_communication_us"] or 0.0) for rank, m in means.items()}
    threshold = max(STRAGGLER_MIN_US, STRAGGLER_SHARE * median(m["step_us"] or 0.0 for m in means.values()))
    last = collectives.last_arrivals() if collectives else {}
    matched = len(collectives.collectives) if collectives else 0
    holdups = collectives.holdups() if collectives else Holdups({}, frozenset())
    result = []
    for rank, own in means.items():
        others_working = median(w for r, w in working.items() if r != rank)
        mostly_last = matched >= 2 and last.get(rank, 0) * 2 > matched
        if working[rank] - others_working <= threshold and not mostly_last:
            continue
        excess = {}
        for column in CAUSE_COLUMNS:
            values = [value for r, m in means.items() if r != rank and (value := m[column]) is not None]
            if (own_value := own[column]) is not None and values:
                excess[column] = own_value - median(values)
        cause = max(excess, key=excess.__getitem__) if excess else None
        if cause is not None and excess[cause] <= threshold / 2:
            cause = None
        held, saved = _saving(rank, ranks, holdups)
        floor = ITEM_SHARE * max(working[rank] - others_working, threshold)
        result.append(
            Straggler(
                rank,
                working[rank],
                others_working,
                cause,
                excess[cause] if cause else 0.0,
                last.get(rank, 0),
                matched,
                held,
                median(saved) if saved else 0.0,
                MEDIAN_ERROR * stdev(saved) / math.sqrt(len(saved)) if len(saved) > 1 else None,
                len(saved),
                _where(rank, ranks, floor),
            )
        )
    result.sort(key=lambda s: (min(s.holdup_us, max(s.excess_us, 0.0)), s.excess_us), reverse=True)
    return {s.rank: s for s in result}


def _saving(rank: int, ranks: tuple[RankSummary, ...], held: Holdups) -> tuple[float, list[float]]:
    """(its holdup, the saving of each step).  The holdup: the median per step over the whole
    steps (``CollectiveMatch.holdups``), over the partial ones where no step is whole (they still
    say who held the run up: one profiled step); the saving of a step: its holdup at most its
    excess work over the others' median, never below 0, whole steps only.  Steps are matched by
    name (collectives outside every step count in a trace without steps: its one step)."""
    work = {r.rank: {s.name: s.step_us - s.exposed_communication_us for s in r.steps} for r in ranks}
    own = work[rank]
    whole: list[tuple[float, float]] = []  # (holdup, excess work) per whole step
    partial: list[float] = []
    for step, leads in held.by_step.items():
        name = f"{STEP_PREFIX}{step}" if step >= 0 else WHOLE_TRACE
        others = [w[name] for r, w in work.items() if r != rank and name in w]
        if name not in own or not others:
            continue
        holdup = leads.get(rank, 0) / 1000
        if step in held.partial:
            partial.append(holdup)
        else:
            whole.append((holdup, own[name] - median(others)))
    holdups = [h for h, _ in whole] or partial
    return (median(holdups) if holdups else 0.0), [max(0.0, min(h, excess)) for h, excess in whole]


def _where(rank: int, ranks: tuple[RankSummary, ...], floor_us: float) -> tuple[WorkExcess, ...]:
    """The rank's work items above the median of the same items on the others by at least
    ``floor_us``, largest first (the module first when within ITEM_SHARE of the largest), at most
    MAX_ITEMS; of the modules only the deepest that holds half the largest module excess (a
    module's time holds its submodules')."""
    others = [{(i.kind, i.label): i.us for i in r.work} for r in ranks if r.rank != rank]
    own = next(r for r in ranks if r.rank == rank).work
    found = [
        WorkExcess(i.kind, i.label, i.us, median(o.get((i.kind, i.label), 0.0) for o in others), i.name) for i in own
    ]
    found = [f for f in found if f.excess_us >= floor_us]
    modules = [f for f in found if f.kind == MODULE]
    if modules:
        largest = max(f.excess_us for f in modules)
        deepest = max(
            (f for f in modules if 2 * f.excess_us >= largest), key=lambda f: (f.label.count("/"), f.excess_us)
        )
        found = [f for f in found if f.kind != MODULE or f is deepest]
    found.sort(key=lambda f: -f.excess_us)
    # the module first when it holds about as much as the largest item: it says where in the code
    module = next((f for f in found if f.kind == MODULE), None)
    if module is not None and module.excess_us >= (1 - ITEM_SHARE) * found[0].excess_us:
        found = [module, *(f for f in found if f is not module)]
    return tuple(found[:MAX_ITEMS])
