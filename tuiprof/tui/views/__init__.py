"""The explorer's views, in key order (1, 2, ...): adding a view is a module in
this folder and one line here."""

from __future__ import annotations

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

VIEWS: tuple[type[ExplorerView], ...] = (
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
VIEW_KEYS = "1234567890"


def view_keys() -> list[tuple[str, str, type[ExplorerView]]]:
    """(key, view id, view class) for every registered view; views past the tenth have no
    key ("") and are reached from the header's tabs order and the command palette."""
    return [(VIEW_KEYS[i] if i < len(VIEW_KEYS) else "", view.view_id, view) for i, view in enumerate(VIEWS)]
