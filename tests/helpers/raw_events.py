"""Plain-Python reads of a trace's raw JSON events, for oracles that never use tuiprof's engine
(tests/unit/test_backward_attribution.py, tests/unit/test_operator_modules.py)."""

from __future__ import annotations

SLACK_US = 0.002  # timestamps are written with three decimals


def inside(event: dict, around: dict) -> bool:
    """``around`` holds ``event`` in time on the same thread (within the timestamps' rounding)."""
    start, end = float(event["ts"]), float(event["ts"]) + float(event["dur"])
    return (
        around is not event
        and around["tid"] == event["tid"]
        and float(around["ts"]) <= start + SLACK_US
        and end <= float(around["ts"]) + float(around["dur"]) + SLACK_US
    )


def innermost(event: dict, candidates: list[dict]) -> dict | None:
    """The shortest of ``candidates`` that holds ``event``, if any."""
    return min((c for c in candidates if inside(event, c)), key=lambda c: float(c["dur"]), default=None)


def cpu_memory_event(ts: float, size: int, total: int, addr: int) -> dict:
    """A CPU ``[memory]`` record as Kineto writes it: ``size`` bytes at ``addr``, ``total`` allocated after it."""
    return {
        "ph": "i",
        "cat": "cpu_instant_event",
        "name": "[memory]",
        "pid": 1,
        "tid": 1,
        "ts": ts,
        "s": "t",
        "args": {
            "Bytes": size,
            "Addr": addr,
            "Total Allocated": total,
            "Total Reserved": 0,
            "Device Type": 0,
            "Device Id": -1,
        },
    }
