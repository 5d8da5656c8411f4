"""Processes in tests: whether one tuiprof started is still there (tests/hostile: no worker
outlives tuiprof), torchrun, and this process's bytes read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT


def running(pid: int) -> bool:
    """The process exists and is not a zombie (Linux: /proc)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def torchrun(args: list[str], tmp_path: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc-per-node 2 ARGS`` (as ``python -m torch.distributed.run``:
    the ``torchrun`` script may not be on this venv's PATH)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def bytes_read() -> int:
    """This process's bytes read through read() so far (Linux's rchar)."""
    with open("/proc/self/io") as io:
        return int(next(line for line in io if line.startswith("rchar:")).split()[1])
