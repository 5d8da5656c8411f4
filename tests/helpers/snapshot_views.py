"""The views the snapshot tests (and the tests that read the header's tabs) draw: the
registry as the screens were drawn.

A view added to tui/views' EXPLORER_VIEWS later adds a tab to every header; pinning the
list here keeps these screens as they are (the new view's own tests draw it), so adding a
view changes no other test (docs/views.md)."""

from __future__ import annotations

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

SNAPSHOT_VIEWS = (
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
