"""The capture commands' command-line glue, checked without torch: the parser
stays light, a viewer-only install says what to install, exit codes."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES

HEAVY = (
    "numpy",
    "msgspec",
    "rich",
    "orjson",
    "textual",
    "torch",
    "tuiprof.analysis",
    "tuiprof.trace",
    "tuiprof.report.render",
)


def _python(code: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("argv", [["--help"], ["summary", "--help"], ["live", "--help"], ["run", "--help"]])
def test_help_loads_no_heavy_module(argv: list[str]) -> None:
    code = (
        f"import sys\nfrom tuiprof.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY', sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    result = _python(code)
    assert "usage: tuiprof" in result.stdout and "HEAVY []" in result.stdout, result.stdout + result.stderr


def test_version_is_the_package_version() -> None:
    version = re.search(r'^version = "([^"]+)"', (ROOT / "pyproject.toml").read_text(), re.M).group(1)
    result = subprocess.run([sys.executable, "-m", "tuiprof", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0 and result.stdout.strip() == f"tuiprof {version}"


# A viewer-only install: torch and torchvision cannot be imported (nor found).
_NO_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('torch', 'torchvision'):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoTorch())
from tuiprof.cli import main
sys.exit(main(%r))
"""


@pytest.mark.parametrize(
    "argv",
    [["live", "resnet18", "--no-tui"], ["run", "--no-tui", "examples/train_resnet18_cifar.py"]],
    ids=["live", "run"],
)
def test_capture_without_torch_says_what_to_install(argv: list[str], tmp_path) -> None:
    result = _python(_NO_TORCH % argv)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "torch" in lines[0] and 'pip install "tuiprof[live]"' in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_viewer_works_without_torch() -> None:
    result = _python(_NO_TORCH % ["summary", str(SAMPLES / "resnet18_cpu.pt.trace.json.gz"), "--limit", "3"])
    assert result.returncode == 0 and "aten::" in result.stdout, result.stderr


def test_capture_modules_import_no_cli_glue() -> None:
    """The profiling halves (script, live, session) never import the command glue (no cycle)."""
    result = _python(
        "import sys, tuiprof.capture.script, tuiprof.capture.live\n"
        "print('GLUE', [m for m in ('tuiprof.capture.commands', 'tuiprof.cli', 'textual') if m in sys.modules])"
    )
    assert "GLUE []" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize(
    "option", [["--batch-size", "4"], ["--input-shape", "8x64"], ["--device", "cpu"], ["--data", "cifar10"]]
)
def test_run_refuses_live_only_options_in_one_line(option: list[str]) -> None:
    """They would be silently ignored: the script builds its own model and data."""
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "run", *option, "--no-tui", "examples/train_ddp_gloo.py"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith(f"tuiprof: run {option[0]}: an option of tuiprof live, not of run")
    assert f"tuiprof run SCRIPT {option[0]} ..." in result.stderr


def test_run_help_lists_no_live_only_option() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "run", "--help"], capture_output=True, text=True, cwd=ROOT
    )
    live = subprocess.run([sys.executable, "-m", "tuiprof", "live", "--help"], capture_output=True, text=True, cwd=ROOT)
    for flag in ("--batch-size", "--input-shape", "--num-classes", "--mode", "--device", "--data-root"):
        assert flag not in result.stdout and flag in live.stdout
    assert "--save" in result.stdout and "--active" in result.stdout
