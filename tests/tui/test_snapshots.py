"""Screens at 80x24 and 120x40 on the resnet18 sample (Textual pinned exactly).

Update after an intended change with ``pytest tests/tui/test_snapshots.py --snapshot-update``
and look at the SVGs in tests/tui/__snapshots__/.
"""

from __future__ import annotations

import pytest

from tests.conftest import DATA, SAMPLES, make_watch_folder
from tests.helpers.snapshot_views import SNAPSHOT_VIEWS
from tests.helpers.tui import loaded
from tuiprof.trace.watch import HistoryReader
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.watch_app import WatchApp

RESNET = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
H100 = str(DATA / "h100_vit_inference.json.gz")  # a real GPU trace (tests/data/README.md)


@pytest.mark.parametrize(
    ("size", "keys"),
    [
        ((80, 24), ["2"]),  # Modules
        ((80, 24), ["3"]),  # Operators
        ((120, 40), ["1"]),  # Overview
        ((120, 40), ["2", "down", "space"]),  # Modules, layer4 expanded
        ((120, 40), ["5"]),  # Memory
    ],
    ids=["modules-80x24", "operators-80x24", "overview-120x40", "modules-120x40", "memory-120x40"],
)
def test_screens(snap_compare, size, keys) -> None:
    app = ExplorerApp(FileSource(RESNET), views=SNAPSHOT_VIEWS)
    assert snap_compare(app, terminal_size=size, press=keys, run_before=loaded)


@pytest.mark.parametrize(
    ("size", "keys"),
    [
        ((80, 24), []),  # Overview: the first screen
        ((120, 40), []),
        ((120, 40), ["2"]),  # Modules
        ((120, 40), ["3"]),  # Operators (by self device time)
        ((120, 40), ["4"]),  # Kernels
        ((120, 40), ["5"]),  # Memory (CUDA)
        ((120, 40), ["6"]),  # Steps (device breakdown)
    ],
    ids=[
        "overview-80x24",
        "overview-120x40",
        "modules-120x40",
        "operators-120x40",
        "kernels-120x40",
        "memory-120x40",
        "steps-120x40",
    ],
)
def test_gpu_screens(snap_compare, size, keys) -> None:
    app = ExplorerApp(FileSource(H100), views=SNAPSHOT_VIEWS)
    assert snap_compare(app, terminal_size=size, press=keys, run_before=loaded)


COMPILED = str(DATA / "compiled_mlp_cpu.json.gz")  # scripts/make_compiled_trace.py


@pytest.mark.parametrize(
    ("size", "keys"),
    [
        (
            (80, 24),
            ["2", "down", "space", "down", "space", "down", "space", "down", "space"],
        ),  # Modules: the regions unfolded
        ((120, 40), ["3", "/", "c", "p", "p", "enter"]),  # Operators: the C++ kernels, what the first computes
    ],
    ids=["modules-80x24", "operators-120x40"],
)
def test_compiled_screens(snap_compare, size, keys) -> None:
    app = ExplorerApp(FileSource(COMPILED), views=SNAPSHOT_VIEWS)
    assert snap_compare(app, terminal_size=size, press=keys, run_before=loaded)


MLP_CATEGORIES = str(DATA / "mlp_memory_categories.pt.trace.json.gz")  # scripts/make_memory_category_trace.py


@pytest.mark.parametrize(
    ("size", "keys"),
    [
        ((80, 24), ["5"]),  # Memory: stacked by category, modules at the peak, blocks.0 selected
        ((120, 40), ["5"]),
        ((120, 40), ["5", "m", "m"]),  # the what-ifs
    ],
    ids=["memory-categories-80x24", "memory-categories-120x40", "memory-what-ifs-120x40"],
)
def test_memory_category_screens(snap_compare, size, keys) -> None:
    app = ExplorerApp(FileSource(MLP_CATEGORIES), views=SNAPSHOT_VIEWS)
    assert snap_compare(app, terminal_size=size, press=keys, run_before=loaded)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_watch_screens(snap_compare, tmp_path, size) -> None:
    """The watch app on a finished job: the job's lines, the chart, the captures (its one page is
    fixed in tui/views/watch.py: no registry of views to pin)."""
    app = WatchApp(HistoryReader(make_watch_folder(tmp_path)))
    assert snap_compare(app, terminal_size=size, run_before=loaded)
