"""The explorer's views, in key order: adding a view is a module in this folder and one
line at the end of ``EXPLORER_VIEWS`` (appended, so no other view's key moves).

How any number of views stays reachable and named (docs/views.md): the first ten get the
keys 1-9 and 0; every view is reached with ``<``/``>`` (previous/next view) and from the
views palette (``V``); the header names as many tabs around the current one as fit.
The names are report/catalog.py's: a view named like a summary view shows that view.
"""

from __future__ import annotations

from collections.abc import Sequence

from tuiprof.tui.commands import Viewable, ViewKey
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.views.collectives import CollectivesView
from tuiprof.tui.views.kernels import KernelsView
from tuiprof.tui.views.log import LogView
from tuiprof.tui.views.memory import MemoryView
from tuiprof.tui.views.modules import ModulesView
from tuiprof.tui.views.operators import OperatorsView
from tuiprof.tui.views.overview import OverviewView
from tuiprof.tui.views.ranks import RanksView
from tuiprof.tui.views.steps import StepsView
from tuiprof.tui.views.timeline import TimelineView

EXPLORER_VIEWS: tuple[type[ExplorerView], ...] = (
    OverviewView,
    ModulesView,
    OperatorsView,
    KernelsView,
    MemoryView,
    StepsView,
    TimelineView,
    RanksView,
    CollectivesView,
    LogView,
)
VIEW_KEYS = "1234567890"  # the n-th view's key; views past the tenth have none


def view_keys(views: Sequence[Viewable] = EXPLORER_VIEWS) -> list[ViewKey]:
    """(key, view id, view) for every view (anything with ``view_id`` and ``title``), in
    order; a view past the tenth has key "" (it is reached with < and >, and from the views
    palette, V)."""
    return [(VIEW_KEYS[i] if i < len(VIEW_KEYS) else "", view.view_id, view) for i, view in enumerate(views)]
