"""A watch folder: what ``tuiprof run --watch DIR`` writes as a job runs (``DIR/watch.jsonl``,
the step-time history, and the traces it captured; docs/watch.md).

Before a run directory in ``KINDS``: it is a directory too, and may hold captures.  Its
captures are traces: each is opened, compared and drawn as one (the explorer does it from
the list; ``summary --view watch`` names their paths).
"""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING

from tuiprof.kinds.base import DIFF, EXPLORER, READING, SUMMARY, TIMELINE, Kind
from tuiprof.report.catalog import WATCH

if TYPE_CHECKING:
    from tuiprof.tui.table_app import TableApp


def summary(path: str, args: Namespace) -> int:
    """The captures of the watch folder at ``path``, against the healthy median."""
    from tuiprof.analysis.watch import summarise_watch
    from tuiprof.report.watch import print_watch_summary
    from tuiprof.trace.watch import read_history

    return print_watch_summary(summarise_watch(read_history(path)), args.format, args.limit, args.wide)


def explorer(path: str, args: Namespace) -> int:
    from tuiprof.tui.watch_app import run_watch_explorer

    return run_watch_explorer(path)


def apps() -> tuple[type[TableApp], ...]:
    """Its own (the captures it opens are traces: the trace kind's apps)."""
    from tuiprof.tui.watch_app import WatchApp

    return (WatchApp,)


def _is_watch_directory(path: str) -> bool:
    from tuiprof.trace.watch import is_watch_directory

    return path != "" and is_watch_directory(path)


KIND = Kind(
    name="watch",
    title="a watch folder",
    help="a watch folder (tuiprof run --watch DIR)",
    detect=_is_watch_directory,
    options={
        SUMMARY: (*READING, "limit", "format", "wide"),  # the captures in the order they were taken: no --sort
        EXPLORER: READING,  # it opens captures and their diffs
    },
    summary=summary,
    explorer=explorer,
    views=lambda: (WATCH,),
    apps=apps,
    without={
        DIFF: "its captures are traces: tuiprof diff {path}/A {path}/B (summary --view watch lists them; "
        "d in tuiprof open {path} compares one with the healthy capture)",
        TIMELINE: "its captures are traces: tuiprof timeline {path}/CAPTURE (summary --view watch lists them)",
    },
)
