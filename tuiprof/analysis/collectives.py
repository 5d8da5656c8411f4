"""Collectives: each rank's communication calls, matched across ranks.

Per rank (:func:`extract_collectives`, run where the trace is analysed): one
:class:`CollectiveRecord` per collective.  On GPU traces the record is the
communication kernel (NCCL/RCCL) on the device, and its arguments come from
the CPU calls that launched it: ``record_param_comms`` (``Collective name``,
``Process Group Name``, ``In/Out msg nelems``, ``Group size``, ``dtype``, when
the trace has them) and the backend's annotation (``nccl:all_reduce`` with the
tensor's ``Input Dims``/``Input type``).  CPU-only traces (gloo) have no
kernels: the record is the backend annotation's span on the backend's thread.

Across ranks (:func:`match_collectives`): the n-th collective of a process
group in a profiler step on one rank is the n-th on every other rank (NCCL and
gloo require every rank to issue a group's collectives in the same order).
Traces without a process group name put everything in one group.

For each matched collective (times on each rank's clock; ranks of one host
share it, across hosts the clocks are only NTP-aligned):

- *arrival*: when the rank's collective started; the last rank to arrive
  holds everybody else up, and the *arrival skew* is last minus first;
- *wait* of a rank: last arrival minus its own arrival;
- *lead* of the last rank: its arrival minus the one before it, what the collective would
  start earlier had it arrived with the others; summed per step, how long it held the run
  up (:meth:`CollectiveMatch.holdups`: the straggler's predicted saving).
- *transfer time*: the shortest duration across ranks (the last arriver's
  collective runs without waiting);
- *algorithm bandwidth* = message bytes / transfer time, and *bus bandwidth*
  = algorithm bandwidth x NCCL's factor for the collective and group size n
  (nccl-tests' PERFORMANCE.md): all-reduce 2(n-1)/n, all-gather and
  reduce-scatter (n-1)/n, all-to-all (n-1)/n, broadcast and reduce 1.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from statistics import median
from typing import NamedTuple

import msgspec
import numpy as np

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.steps import is_communication
from tuiprof.trace.schema import decode_member, external_id
from tuiprof.trace.store import TraceEvents

DEFAULT_GROUP = "default"
_BACKEND_CALL = re.compile(r"^(nccl|rccl|gloo|mpi|ucc|xccl|hccl):([a-z_]+)$")
# Kernel names: ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_AllGather_RING_LL
_KERNEL_KIND = re.compile(r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|AllToAll|Send|Recv)")
_KINDS = {
    "allreduce": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "allgather": "all_gather",
    "_allgather_base": "all_gather",
    "allgather_into_tensor": "all_gather",
    "allgather_into_tensor_coalesced": "all_gather",
    "all_gather_into_tensor": "all_gather",
    "allgather_coalesced": "all_gather",
    "reducescatter": "reduce_scatter",
    "_reduce_scatter_base": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter",
    "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "alltoall": "all_to_all",
    "alltoall_base": "all_to_all",
    "all_to_all": "all_to_all",
    "sendrecv": "send_recv",
    "send": "send_recv",
    "recv": "send_recv",
    "recvanysource": "send_recv",
}
# nccl-tests' bus bandwidth factor per collective, as a function of the group size n.
BUS_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "reduce": lambda n: 1.0,
}
# Collectives in which every rank's result needs every rank's input: no rank can finish
# before the last one has started, so the ranks' spans of one such collective overlap.
# Not broadcast, reduce, send/recv: a root or sender may hand its data over and finish
# before a receiver begins.
OVERLAPPING_KINDS = frozenset({"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "barrier"})
# How far apart the ranks' clocks may be and a collective still match: ranks of one host
# share a clock (dlrm_8ranks' spans overlap by 6 us and more), hosts only as well as NTP
# keeps them (within about a millisecond in one cluster).  A rank's collective that ended
# longer than this before another rank's began is not the same collective.
CLOCK_TOLERANCE_NS = 5_000_000
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "int": 4,
    "int32": 4,
    "unsigned int": 4,
    "double": 8,
    "float64": 8,
    "long": 8,
    "long int": 8,
    "int64": 8,
    "c10::complex<float>": 8,
    "half": 2,
    "float16": 2,
    "c10::half": 2,
    "bfloat16": 2,
    "c10::bfloat16": 2,
    "short": 2,
    "int16": 2,
    "byte": 1,
    "char": 1,
    "bool": 1,
    "unsigned char": 1,
    "signed char": 1,
    "uint8": 1,
    "int8": 1,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}


class CollectiveRecord(msgspec.Struct, frozen=True, array_like=True):
    """One collective as one rank ran it (times in ns on the rank's clock)."""

    group: str
    step: int  # profiler step number, -1 outside every step
    kind: str  # all_reduce, all_gather, reduce_scatter, all_to_all, broadcast, reduce, send_recv, barrier...
    start_ns: int
    dur_ns: int
    size_bytes: int | None
    dtype: str | None
    group_size: int | None


def normal_kind(name: str) -> str:
    """``allreduce``, ``nccl:all_reduce`` or a kernel name -> ``all_reduce`` (etc.)."""
    bare = name.split(":", 1)[-1].strip().lower()
    if bare in _KINDS:
        return _KINDS[bare]
    if bare in BUS_FACTORS or bare == "barrier":
        return bare
    match = _KERNEL_KIND.search(name)
    if match:
        word = match.group(1).lower()
        return _KINDS.get(word, word)
    return bare or "unknown"


def dtype_bytes(dtype: str | None) -> int | None:
    return DTYPE_BYTES.get(dtype.lower()) if dtype else None


def extract_collectives(store: TraceEvents, model: TraceModel) -> list[CollectiveRecord]:
    """This rank's collectives in the order it issued them."""
    calls = model.calls
    comms_args = {external_id(args): args for args in store.comms_records}
    names = calls.names
    rpc_code = next((code for code, name in enumerate(names) if name == "record_param_comms"), -1)
    backend_codes = {code for code, name in enumerate(names) if _BACKEND_CALL.match(name)}
    steps = sorted((s.start_ns, s.end_ns, s.number) for s in model.steps)
    step_starts = [s[0] for s in steps]

    def step_at(time_ns: int) -> int:
        at = int(np.searchsorted(step_starts, time_ns, side="right")) - 1
        return steps[at][2] if at >= 0 and time_ns < steps[at][1] else -1

    def describe(row: int) -> tuple[str, str | None, int | None, int | None, str]:
        """(group, dtype, size, group size, kind) from the call ``row`` and its ancestors."""
        args, annotation = None, -1
        while row >= 0 and (args is None or annotation < 0):
            code = calls.name_id[row]
            if code == rpc_code and args is None:
                args = comms_args.get(calls.external_id[row])
            elif code in backend_codes and annotation < 0:
                annotation = row
            row = calls.parent[row]
        kind = normal_kind(names[calls.name_id[annotation]]) if annotation >= 0 else ""
        group, dtype, size, group_size = DEFAULT_GROUP, None, None, None
        if args is not None and args.collective_name:
            kind = normal_kind(args.collective_name)
            group = str(
                args.process_group if args.process_group is not None else args.process_group_id or DEFAULT_GROUP
            )
            dtype, group_size = args.dtype, args.group_size
            width = dtype_bytes(dtype)
            if width and (args.in_nelems is not None or args.out_nelems is not None):
                size = max(args.in_nelems or 0, args.out_nelems or 0) * width
        if size is None and annotation >= 0:
            dtype, size = _annotation_size(calls, annotation)
            if kind == "all_gather" and size is not None and group_size:
                size *= group_size  # the annotation holds one rank's shard
        return group, dtype, size, group_size, kind

    records = []
    activity = model.activity
    kernel_codes = [c for c in np.unique(activity.events.name).tolist() if is_communication(activity.names[c])]
    kernels = np.flatnonzero(np.isin(activity.events.name, kernel_codes) & (activity.events.kind == 0))
    if len(kernels):
        for index in kernels.tolist():
            launcher = activity.launcher[index]
            group, dtype, size, group_size, kind = (
                describe(launcher) if launcher >= 0 else (DEFAULT_GROUP, None, None, None, "")
            )
            start = int(activity.start_ns[index])
            records.append(
                CollectiveRecord(
                    group,
                    step_at(calls.start_ns[launcher] if launcher >= 0 else start),
                    kind or normal_kind(activity.name(index)),
                    start,
                    int(activity.dur_ns[index]),
                    size,
                    dtype,
                    group_size,
                )
            )
    else:  # CPU collectives (gloo): the backend's span on its own thread
        rows = np.flatnonzero(np.isin(calls.column("name_id"), list(backend_codes)))
        for row in rows.tolist():
            group, dtype, size, group_size, kind = describe(row)
            start = calls.start_ns[row]
            records.append(
                CollectiveRecord(group, step_at(start), kind, start, calls.total_ns[row], size, dtype, group_size)
            )
    records.sort(key=lambda r: r.start_ns)
    return records


def _annotation_size(calls, row: int) -> tuple[str | None, int | None]:
    """dtype and bytes of the first tensor of a backend annotation (``nccl:all_reduce``)."""
    dims_text, types_text, _ = calls.input_texts(row)
    dims, types = decode_member(dims_text), decode_member(types_text)
    if not dims or not types or not isinstance(dims[0], list):
        return None, None
    dtype = types[0] if isinstance(types[0], str) else None
    width = dtype_bytes(dtype)
    if width is None or not all(isinstance(d, int) for d in dims[0]):
        return dtype, None
    return dtype, int(np.prod(dims[0], dtype=np.int64)) * width


# ------------------------------------------------------------------ across ranks


@dataclass(frozen=True)
class MatchedCollective:
    """One collective as all ranks ran it."""

    group: str
    step: int
    index: int  # n-th collective of the group in the step
    kind: str
    size_bytes: int | None
    ranks: tuple[int, ...]
    arrivals_ns: tuple[int, ...]  # per rank in ``ranks``, on the run's common clock
    durations_ns: tuple[int, ...]
    group_size: int

    @property
    def last_rank(self) -> int:
        return self.ranks[int(np.argmax(self.arrivals_ns))]

    @property
    def skew_ns(self) -> int:
        return max(self.arrivals_ns) - min(self.arrivals_ns)

    @property
    def transfer_ns(self) -> int:
        return min(self.durations_ns)

    @property
    def lead_ns(self) -> int:
        """How long after the others the last rank arrived: last arrival minus the one before
        it, what the collective would start earlier had the last rank arrived with the rest."""
        arrivals = sorted(self.arrivals_ns)
        return arrivals[-1] - arrivals[-2] if len(arrivals) > 1 else 0

    def waits_ns(self) -> dict[int, int]:
        last = max(self.arrivals_ns)
        return {rank: last - arrival for rank, arrival in zip(self.ranks, self.arrivals_ns)}

    @property
    def algbw_gbps(self) -> float | None:
        if not self.size_bytes or not self.transfer_ns:
            return None
        return self.size_bytes / self.transfer_ns  # bytes per ns = GB/s

    @property
    def busbw_gbps(self) -> float | None:
        factor = BUS_FACTORS.get(self.kind)
        algbw = self.algbw_gbps
        if factor is None or algbw is None or self.group_size < 2:
            return None
        return algbw * factor(self.group_size)


class Holdups(NamedTuple):
    """How long each rank held the others up, per step (:meth:`CollectiveMatch.holdups`)."""

    by_step: dict[int, dict[int, int]]  # step (-1: outside every step) -> rank -> ns; the ranks that led none absent
    partial: frozenset[int]  # steps that lost a collective: a process group's first in the trace


@dataclass(frozen=True)
class CollectiveMatch:
    collectives: tuple[MatchedCollective, ...]
    problems: tuple[str, ...]  # one line per group whose ranks disagree

    def last_arrivals(self) -> Counter[int]:
        """How often each rank was the last to arrive (collectives with a skew only)."""
        return Counter(c.last_rank for c in self.collectives if c.skew_ns > 0 and len(c.ranks) > 1)

    def holdups(self) -> Holdups:
        """Per profiler step, per rank: how long it held every other rank up, from its leads
        (:attr:`MatchedCollective.lead_ns`: from the one before it to its arrival) at the
        collectives it arrived last at.  A lead that ends before the next one starts was waited
        for (a blocking collective re-synchronises the ranks): such leads add up.  Leads that
        overlap were not (DDP's asynchronous buckets: the others reached the next bucket before
        the late rank reached this one, and a rank 70 ms late is late at every bucket of the
        step): the run of them held the others up by its last lead.  Each process group's first
        collective in the trace is left out, and its step marked partial: the time before it
        began before the trace on some rank (the profiler starts on each rank at its own
        moment), so its lead is not the work the trace shows."""
        leads: dict[int, dict[int, list[tuple[int, int]]]] = {}
        partial: set[int] = set()
        seen: set[str] = set()
        for c in sorted(self.collectives, key=lambda c: min(c.arrivals_ns)):
            if c.group not in seen or len(c.ranks) < 2:
                seen.add(c.group)
                partial.add(c.step)
                continue
            step = leads.setdefault(c.step, {})
            if c.lead_ns > 0:
                last = max(c.arrivals_ns)
                step.setdefault(c.last_rank, []).append((last - c.lead_ns, last))
        held = {step: {rank: waited_ns(spans) for rank, spans in by_rank.items()} for step, by_rank in leads.items()}
        return Holdups(held, frozenset(partial))


def waited_ns(spans: list[tuple[int, int]]) -> int:
    """How long the others waited, from a rank's lead spans ([start, end), in arrival order):
    the sum over the runs of overlapping spans of each run's last span."""
    total, reach, last = 0, None, 0
    for start, end in spans:
        if reach is not None and start >= reach:
            total += last
        reach = end if reach is None or start >= reach else max(reach, end)
        last = end - start
    return total + last


def match_collectives(
    per_rank: dict[int, list[CollectiveRecord]], offsets_ns: dict[int, int] | None = None
) -> CollectiveMatch:
    """Match the ranks' collectives by (process group, step, order in the step).

    ``offsets_ns`` moves a rank's times onto the common clock (traces relative
    to different ``baseTimeNanoseconds``).  A position where ranks disagree on
    the collective's kind, or where one rank's collective of an
    OVERLAPPING_KINDS kind ended more than CLOCK_TOLERANCE_NS before another
    rank's began, ends the matching of that group and step: what follows
    cannot be trusted to be the same collective (a rank's trace missed one),
    and with clocks that far apart arrival skews and last ranks would be the
    clocks' difference, not a straggler.
    """
    offsets_ns = offsets_ns or {}
    queues: dict[tuple[str, int], dict[int, list[CollectiveRecord]]] = defaultdict(dict)
    for rank, records in per_rank.items():
        for record in records:
            queues[(record.group, record.step)].setdefault(rank, []).append(record)
    matched: list[MatchedCollective] = []
    problems: list[str] = []
    for (group, step), by_rank in sorted(queues.items()):
        ranks = sorted(by_rank)
        counts = {rank: len(by_rank[rank]) for rank in ranks}
        where = f"process group {group}" + (f", step {step}" if step >= 0 else "")
        if len(set(counts.values())) > 1:
            text = ", ".join(f"rank {r}: {n}" for r, n in counts.items())
            problems.append(
                f"{where}: ranks recorded different numbers of collectives ({text}); matched up to the fewest"
            )
        for index in range(min(counts.values())):
            records = [by_rank[rank][index] for rank in ranks]
            kinds = Counter(r.kind for r in records)
            if len(kinds) > 1:
                by_kind: dict[str, list[str]] = defaultdict(list)
                for rank, record in zip(ranks, records):
                    by_kind[record.kind].append(str(rank))
                text = "; ".join(
                    f"{kind} on rank{'s' if len(r) > 1 else ''} {', '.join(r)}" for kind, r in by_kind.items()
                )
                problems.append(
                    f"{where}: collective {index + 1} differs ({text}); the rest of this group is not matched"
                )
                break
            arrivals = [r.start_ns + offsets_ns.get(rank, 0) for rank, r in zip(ranks, records)]
            apart = _apart(ranks, records, arrivals) if records[0].kind in OVERLAPPING_KINDS else None
            if apart is not None:
                problems.append(
                    f"{where}: collective {index + 1} ({records[0].kind}) {apart}; the rest of this group is not matched"
                )
                break
            sizes = [r.size_bytes for r in records if r.size_bytes is not None]
            group_size = next((r.group_size for r in records if r.group_size), None) or len(ranks)
            matched.append(
                MatchedCollective(
                    group=group,
                    step=step,
                    index=index,
                    kind=records[0].kind,
                    size_bytes=int(median(sizes)) if sizes else None,
                    ranks=tuple(ranks),
                    arrivals_ns=tuple(arrivals),
                    durations_ns=tuple(r.dur_ns for r in records),
                    group_size=group_size,
                )
            )
    matched.sort(key=lambda c: (c.step, min(c.arrivals_ns)))
    return CollectiveMatch(tuple(matched), tuple(problems))


def _apart(ranks: list[int], records: list[CollectiveRecord], arrivals: list[int]) -> str | None:
    """Why the ranks' spans at one position cannot be one collective (the earliest end
    lies more than CLOCK_TOLERANCE_NS before the latest start), or None."""
    ends = [arrival + record.dur_ns for arrival, record in zip(arrivals, records)]
    first_end, last_start = (
        min(range(len(ranks)), key=ends.__getitem__),
        max(range(len(ranks)), key=arrivals.__getitem__),
    )
    gap_ns = arrivals[last_start] - ends[first_end]
    if gap_ns <= CLOCK_TOLERANCE_NS:
        return None
    return (
        f"does not overlap in time: rank {ranks[first_end]}'s ended {gap_ns / 1e6:.1f} ms before rank {ranks[last_start]}'s began "
        f"(clocks may differ by {CLOCK_TOLERANCE_NS / 1e6:.0f} ms); a rank's trace misses a collective, or the ranks' clocks are that far apart"
    )
