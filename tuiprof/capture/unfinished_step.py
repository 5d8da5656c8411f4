"""Leave a step that did not finish out of a saved trace.

When a capture stops inside a step (Ctrl-C, an exception, the end of a
``tuiprof.profile()`` block or of a script after its last ``step()``), torch
still writes that step: ``ProfilerStep#N`` with part of a forward and no
backward.  Counted as a step it makes the mean step short, FLOPs per step
wrong and a diff gate fooled.  The rule for ``live``, ``run`` and
``tuiprof.profile()`` alike: the unfinished step is dropped from the trace,
so every table and mean sees only finished steps.

The unfinished step is always the last one recorded, so dropping it is a cut
in time on the host: every host event that begins at or after the step's
start goes (operators, annotations, Python frames, memory events, flows).
Device work cannot be cut by time (it runs behind the host): a kernel, copy
or set goes with the launch it belongs to (its ``correlation``), a device
annotation with its host annotation (its ``External id``), a flow's device
end with its launch.  Host spans that began earlier (the script's outer
Python frames) are kept.
"""

from __future__ import annotations

from typing import Any

Event = dict[str, Any]


def drop_unfinished_step(events: list[Event], step: int, host_pid: int) -> list[Event] | None:
    """``events`` without ``ProfilerStep#step`` and everything it began; None when that step is not there.

    ``host_pid``: the process that recorded the trace (its host events carry it;
    device events carry a device number).
    """
    name = f"ProfilerStep#{step}"
    start = next(
        (float(e["ts"]) for e in events if e.get("name") == name and e.get("pid") == host_pid and "ts" in e), None
    )
    if start is None:
        return None

    def dropped_on_host(event: Event) -> bool:
        return event.get("ph") != "M" and "ts" in event and float(event["ts"]) >= start

    correlations: set[Any] = set()
    external_ids: set[Any] = set()
    for event in events:
        if event.get("pid") == host_pid and dropped_on_host(event):
            args = event.get("args") or {}
            if "correlation" in args:
                correlations.add(args["correlation"])
            if "External id" in args:
                external_ids.add(args["External id"])
            if event.get("cat") == "ac2g":
                correlations.add(event.get("id"))
    return [
        event
        for event in events
        if not (
            dropped_on_host(event)
            if event.get("pid") == host_pid
            else _launched_from(event, correlations, external_ids)
        )
    ]


def _launched_from(event: Event, correlations: set[Any], external_ids: set[Any]) -> bool:
    """Whether a device event belongs to dropped host work."""
    if event.get("ph") in ("s", "t", "f"):
        return event.get("id") in correlations
    args = event.get("args") or {}
    if "correlation" in args:
        return args["correlation"] in correlations
    return args.get("External id") in external_ids
