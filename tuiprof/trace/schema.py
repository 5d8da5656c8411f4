"""Typed shapes of what torch.profiler writes, for msgspec to decode into.

Decoding into these structs (instead of dicts) is what makes big traces cheap:
msgspec skips every field not named here without building it, and the structs
are slotted and untracked by the garbage collector (``gc=False``).  Field names
follow the file (see ``../shared/TRACE_FORMAT.md``); legacy spellings get their
own fields and are merged by the store.
"""

from __future__ import annotations

from typing import Any, Union

import msgspec

# Members whose type differs between writers (ROCm writes "stream": "0x0").
Loose = Union[int, float, str, None]  # noqa: UP007 (a runtime alias msgspec reads)


# Input lists stay undecoded JSON text: building nested lists for every
# operator was 60 % of decoding a big trace, and most are never looked at
# (decode_members() reads them on demand: FLOPs, input shapes, details).
NO_MEMBER = msgspec.Raw(b"")


class EventArgs(msgspec.Struct, gc=False, omit_defaults=True):
    """The ``args`` members some analysis reads; everything else is skipped.

    Each member here costs decode time and 8 bytes per kept event: add one
    only with the code that reads it."""

    # operators
    external_id: int | None = msgspec.field(default=None, name="External id")
    external_id_legacy: int | None = msgspec.field(default=None, name="external id")
    sequence_number: int | None = msgspec.field(default=None, name="Sequence number")
    input_dims: msgspec.Raw = msgspec.field(default=NO_MEMBER, name="Input Dims")
    input_types: msgspec.Raw = msgspec.field(default=NO_MEMBER, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=NO_MEMBER, name="Concrete Inputs")
    # python_function
    python_id: int | None = msgspec.field(default=None, name="Python id")
    python_parent_id: int | None = msgspec.field(default=None, name="Python parent id")
    # device activity
    correlation: int | None = None
    stream: Loose = None
    grid: list[Any] | None = None
    block: list[Any] | None = None
    occupancy_pct: Loose = msgspec.field(default=None, name="est. achieved occupancy %")
    # [memory]
    alloc_bytes: int | None = msgspec.field(default=None, name="Bytes")
    total_allocated: int | None = msgspec.field(default=None, name="Total Allocated")
    total_reserved: int | None = msgspec.field(default=None, name="Total Reserved")
    device_type: int | None = msgspec.field(default=None, name="Device Type")
    device_id: int | None = msgspec.field(default=None, name="Device Id")
    addr: int | None = msgspec.field(default=None, name="Addr")
    # record_param_comms (collectives; analysis/collectives.py)
    collective_name: str | None = msgspec.field(default=None, name="Collective name")
    process_group: Loose = msgspec.field(default=None, name="Process Group Name")
    process_group_id: Loose = msgspec.field(default=None, name="Process Group ID")
    in_nelems: int | None = msgspec.field(default=None, name="In msg nelems")
    out_nelems: int | None = msgspec.field(default=None, name="Out msg nelems")
    group_size: int | None = msgspec.field(default=None, name="Group size")
    dtype: str | None = None


# A missing ts/dur reads as 0, as before.
ZERO = msgspec.Raw(b"0")


class RawEvent(msgspec.Struct, gc=False, omit_defaults=True):
    """One Chrome-trace event as Kineto writes it.

    ``ts`` and ``dur`` stay undecoded text: a float64 cannot hold epoch
    microseconds with three decimals, so :func:`tuiprof.trace.columns.exact_ns`
    converts the text itself to integer nanoseconds."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    tid: int | str = 0
    ts: msgspec.Raw = ZERO
    dur: msgspec.Raw = ZERO
    args: EventArgs | None = None


class TimedEvent(msgspec.Struct, gc=False):
    """A ``[memory]`` record or GPU annotation, kept as a struct (they are few),
    with its times converted (exact integer nanoseconds)."""

    name: str
    tid: int | str
    start_ns: int
    dur_ns: int
    args: EventArgs | None


class DeviceProperties(msgspec.Struct, gc=False):
    """One GPU from ``deviceProperties`` (``computeProperties`` before 2022)."""

    id: int = 0
    name: str = ""
    totalGlobalMem: int = 0
    computeMajor: int = 0
    computeMinor: int = 0
    numSms: int = 0


class DistributedInfo(msgspec.Struct, gc=False):
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None


class TraceHeader(msgspec.Struct, gc=False):
    """Top-level members of a trace document other than its events."""

    schemaVersion: int | None = None
    deviceProperties: list[DeviceProperties] | None = None
    computeProperties: list[DeviceProperties] | None = None
    distributedInfo: DistributedInfo | None = None
    record_shapes: int | None = None
    profile_memory: int | None = None
    with_stack: int | None = None
    with_modules: int | None = None
    with_flops: int | None = None
    baseTimeNanoseconds: int | None = None
    traceName: str | None = None
    displayTimeUnit: str | None = None
    # tuiprof's own member in traces it captured (tuiprof.trace.live), decoded on demand.
    live_facts: msgspec.Raw = msgspec.field(default=msgspec.Raw(), name="tuiprofLive")
    traceEvents: list[RawEvent] = []


EVENT_LIST = list[RawEvent]

_decode_any = msgspec.json.Decoder().decode


def decode_member(raw: msgspec.Raw | bytes) -> list[Any] | None:
    """An undecoded input list (``Input Dims``...) as Python lists; None if absent or broken."""
    if not raw:
        return None
    try:
        value = _decode_any(raw)
    except (msgspec.DecodeError, RecursionError):  # nested ~1,000 deep: not an input list
        return None
    return value if isinstance(value, list) else None


def external_id(args: EventArgs | None) -> int | None:
    """``External id`` under either spelling (lower-case before 2022)."""
    if args is None:
        return None
    return args.external_id if args.external_id is not None else args.external_id_legacy
