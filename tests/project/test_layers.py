"""The layer order holds: headless modules never load Textual or torch, and
imports point only down cli -> capture -> tui -> report -> analysis -> trace -> errors."""

from __future__ import annotations

import importlib.util
import json
import pkgutil
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT

HEADLESS_PACKAGES = ("tuiprof.trace", "tuiprof.analysis", "tuiprof.report")
# The input kinds run the TUI, but only from inside their functions: importing them loads neither.
HEADLESS_MODULES = ["tuiprof", "tuiprof.cli", "tuiprof.errors"] + sorted(
    info.name
    for package in (*HEADLESS_PACKAGES, "tuiprof.kinds")
    for info in pkgutil.walk_packages(__import__(package, fromlist=["_"]).__path__, package + ".")
)
FORBIDDEN = ("textual", "torch", "torchvision")

PROBE = """
import importlib, json, sys
found = {}
for name in json.loads(sys.argv[1]):
    before = set(sys.modules)
    importlib.import_module(name)
    pulled = sorted(m for m in set(sys.modules) - before if m.split(".")[0] in %r)
    if pulled:
        found[name] = pulled[:5]
print(json.dumps(found))
""" % (FORBIDDEN,)


def test_headless_modules_load_no_tui_and_no_torch() -> None:
    assert len(HEADLESS_MODULES) > 20  # the walk found the packages
    result = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(HEADLESS_MODULES)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout) == {}


def test_import_layers_contract() -> None:
    from importlinter.cli import lint_imports

    assert lint_imports(config_filename=str(ROOT / "pyproject.toml")) == 0


def test_the_tui_is_not_headless() -> None:
    """The probe can fail: importing the explorer does load Textual."""
    code = "import sys, tuiprof.tui.app; print('textual' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.stdout.strip() == "True"


def test_the_read_api_loads_no_tui_and_no_torch() -> None:
    """``tuiprof.load`` and its tables, in a fresh interpreter: ``-X importtime`` lists every
    module imported, and none is Textual's or torch's."""
    sample = ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz"
    code = f"import tuiprof; print(len(tuiprof.load({str(sample)!r}).table('modules')))"
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0 and int(result.stdout) > 0, result.stderr[-2000:]
    imported = {
        line.rsplit("|", 1)[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")
    }
    assert "tuiprof.report.api" in imported  # the probe can fail: it sees what was loaded
    assert sorted(m for m in imported if m.split(".")[0] in FORBIDDEN) == []


def test_the_package_type_checks() -> None:
    """mypy, as ``[tool.mypy]`` in pyproject.toml sets it (the whole package, Textual and torch
    followed), finds no error, so CI fails on a type error anywhere.  Its cache is the checkout's
    ``.mypy_cache`` (git ignores it), where ``mypy`` itself and .ci/run's mypy step write: cold,
    about 21 s of CPU (two thirds of it reading torch); after them, under a second."""
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install -e '.[test]')")
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # Every module was checked (a `files` entry lost would check less and still pass).
    modules = list((ROOT / "tuiprof").rglob("*.py"))
    checked = re.search(r"no issues found in (\d+) source files", result.stdout)
    assert checked and int(checked[1]) >= len(modules), result.stdout
