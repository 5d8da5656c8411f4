"""docs/views.md's promise as a test: a view added the documented way changes no other test.

The view is added as an engineer adds one, in a copy of the checkout: a module under
tuiprof/tui/views/, one line at the end of ``EXPLORER_VIEWS`` and its table one line in
report/views.py's ``TRACE_VIEWS`` (the Threads view of issue 38, which broke four tests: a
snapshot drawn with the registry of the day, and "threads" used as the name of no view).  Then
the tests that read the registries run there, untouched: the view names (catalog), the keymap
and its docs table, the header and help of the explorer, and the snapshots.  An edit of the
source, not a patch of the registries in this process: every place that binds the registry
at import (a default argument) sees the new view, as it would in a real change.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, SAMPLES

# The tests that read the view registries, run in the copy with the scratch view: the view names,
# the keymap (its ids and docs/views.md's table), the screens, and the explorer's header, help and
# view keys.  (tests/tui/test_many_views.py registers views of its own: no registry to read.)
READERS = (
    "tests/cli/test_catalog.py",
    "tests/tui/test_keymap.py",
    "tests/tui/test_snapshots.py",
    "tests/tui/test_tui.py",
)
ONLY = "not test_tui.py or header or help or view"  # of test_tui.py, the header, help and view-key tests


THREADS_MODULE = '''"""Threads: a scratch view (tests/tui/test_adding_a_view.py)."""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from tuiprof.report.views import Row
from tuiprof.tui.views.base import TraceTableView


class ThreadsView(TraceTableView):
    view_id = "threads"
    title = "Threads"

    def detail_text(self, row: Row) -> RenderableType:
        return Text(str(row["thread"]))
'''

THREADS_TABLE = (
    '    "threads": View("threads", "Threads", (Column("thread", "Thread", "text", "A thread."),), "",'
    ' lambda model, options: [{"thread": "main"}, {"thread": "backward"}]),\n'
)


EXPLORER_VIEWS_TITLES = """
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
print(*(view.title for view in ExplorerApp(FileSource("trace.json")).views))
"""


def _add(path: Path, pattern: str, line: str) -> None:
    """``line`` inserted where ``pattern`` (one group: what stays before it) matches once."""
    text = path.read_text()
    edited, count = re.subn(pattern, lambda match: match.group(1) + line, text, flags=re.MULTILINE)
    assert count == 1, f"{path}: {pattern!r} matched {count} times: the registry is no longer where docs/views.md says"
    path.write_text(edited)


def checkout_with_a_scratch_view(folder: Path) -> Path:
    """A copy of the checkout with the Threads view added as docs/views.md says."""
    for part in ("tuiprof", "tests", "docs", "sample_traces"):
        shutil.copytree(ROOT / part, folder / part, ignore=shutil.ignore_patterns("__pycache__", "*.tuiprof-summary"))
    shutil.copy(ROOT / "pyproject.toml", folder)
    views = folder / "tuiprof" / "tui" / "views"
    (views / "threads.py").write_text(THREADS_MODULE)
    _add(views / "__init__.py", r"(\n)(?=^EXPLORER_VIEWS\b)", "from tuiprof.tui.views.threads import ThreadsView\n\n")
    _add(views / "__init__.py", r"(^EXPLORER_VIEWS\b[^=]*= \((?:\n    \w+,)+\n)(?=\))", "    ThreadsView,\n")
    _add(folder / "tuiprof" / "report" / "views.py", r"(^TRACE_VIEWS\b[^=]*= \{\n(?:.*\n)*?)(?=\}\n)", THREADS_TABLE)
    return folder


def _run(checkout: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=checkout, env=env, timeout=timeout
    )


def test_a_view_added_as_documented_changes_no_other_test(tmp_path) -> None:
    checkout = checkout_with_a_scratch_view(tmp_path / "checkout")
    trace = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
    shown = _run(checkout, "-m", "tuiprof", "summary", trace, "--view", "threads", "--format", "json", timeout=60)
    assert json.loads(shown.stdout) == [{"thread": "main"}, {"thread": "backward"}], shown.stderr  # the view is there
    explorer = _run(checkout, "-c", EXPLORER_VIEWS_TITLES, timeout=60)
    assert explorer.stdout.split()[-1] == "Threads", explorer.stderr  # the explorer's last view
    tests = _run(
        checkout, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", "-k", ONLY, *READERS, timeout=600
    )
    assert tests.returncode == 0, tests.stdout[-4000:]
