"""One test's leftovers never reach the next: the environment a command line option sets for
the workers tuiprof starts is undone after its test (tests/conftest.py).  Checked in a
session of its own, so that the two tests run in this order in one process."""

from __future__ import annotations

import shutil
import subprocess
import sys

from tests.conftest import ROOT, SAMPLES

TWO_TESTS = f"""
import os

from tuiprof import cli


def test_no_sidecars_sets_the_variable_for_the_workers(capsys):
    assert cli.main(["summary", {str(SAMPLES / "ddp_gloo_2ranks")!r}, "--view", "ranks", "--no-sidecars"]) == 0
    assert os.environ["TUIPROF_NO_SIDECARS"] == "1"


def test_the_next_test_has_sidecars_on():
    assert "TUIPROF_NO_SIDECARS" not in os.environ
"""


def test_an_option_set_for_the_workers_ends_with_its_test(tmp_path) -> None:
    shutil.copy(ROOT / "tests" / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_two.py").write_text(TWO_TESTS)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout[-3000:]
