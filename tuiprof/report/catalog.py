"""Every view name in one home: what ``summary --view`` accepts, and what the explorer's
views are called.

The names are the keys of report/views.py's ``TRACE_VIEWS`` (the tables of one trace) and
``RUN_VIEWS`` (every rank of a run directory), plus the Overview's findings and a watch
folder's captures.  The CLI reads
its ``--view`` choices from :func:`summary_view_names`, so a new table is one line in one of those
registries and nothing else.  The explorer's registry (tui/views: ``EXPLORER_VIEWS``) maps
onto these names: an explorer view whose ``view_id`` is a name here shows that view (same
title); a table with no view of its own is shown inside one that names it in its
``summary_views`` (the memory-* tables: the Memory view); the other explorer views (overview,
timeline, log) have no table to print.
tests/cli/test_catalog.py checks that the CLI, this module and the explorer agree.
"""

from __future__ import annotations

from tuiprof.report.views import RUN_VIEWS, TRACE_VIEWS

# The Overview's findings, one a line (report/findings.py: FINDINGS_VIEW, named from here).
FINDINGS = "findings"
# A watch folder's captures (tuiprof run --watch DIR; report/watch.py), not a trace's table.
WATCH = "watch"
# An allocator snapshot's peak, segments and OOMs (report/snapshot.py); a snapshot is told by
# its content, so the name only makes the choice explicit (and refuses anything else).
SNAPSHOT = "snapshot"


def trace_view_names() -> tuple[str, ...]:
    """The views of one trace: its tables and the findings (read at call time, so a table added
    to ``TRACE_VIEWS`` is a view of every kind that prints a trace's)."""
    return (*TRACE_VIEWS, FINDINGS)


def summary_view_names() -> tuple[str, ...]:
    """What ``summary --view NAME`` accepts: the tables of one trace, the findings, the tables
    of every rank of a run, a watch folder's captures, an allocator snapshot; in that order
    (--help lists them so).
    Light to import: the CLI's --help reads it."""
    return (*trace_view_names(), *RUN_VIEWS, WATCH, SNAPSHOT)


# Older spellings still accepted on the command line (``ops``: the operators view's name
# until the explorer's name won); not listed in --help.
ALIASES: dict[str, str] = {"ops": "operators"}


def view_name(name: str) -> str:
    """``name`` as the registries spell it (an alias resolved; anything else unchanged)."""
    return ALIASES.get(name, name)


def is_run_view(name: str) -> bool:
    """Whether ``summary --view name`` reads every rank of a run directory (not one trace)."""
    return view_name(name) in RUN_VIEWS


# What ``diff --view NAME`` prints, each name to the tables of analysis/diff.py (``TABLES``) it
# prints: every table after the verdict (``all``), the verdict alone, or one table, named as
# ``summary`` names it (``ops`` is the alias of ``operators`` here too); ``shapes`` (operators
# by input shapes) and ``launchers`` (kernels by the operator that launched them) are tables
# only a diff has.  Literal table names: the parser reads this without loading the analysis
# (tests/cli/test_catalog.py checks them against ``TABLES``).
DIFF_ALL, DIFF_VERDICT = "all", "verdict"
DIFF_VIEWS: dict[str, tuple[str, ...]] = {
    DIFF_ALL: ("ops", "shapes", "modules", "kernels", "launchers", "steps", "memory"),
    DIFF_VERDICT: (),
    "operators": ("ops",),
    "shapes": ("shapes",),
    "modules": ("modules",),
    "kernels": ("kernels",),
    "launchers": ("launchers",),
    "steps": ("steps",),
    "memory": ("memory",),
}
