"""The command line as a user runs it: ``python -m tuiprof ARGS`` in a fresh process, from the
checkout's root, and the check that a refusal is one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT


def tuiprof(*args: str, timeout: float = 120, **options) -> subprocess.CompletedProcess[str]:
    """Its stdout and stderr as text; ``options`` go to subprocess.run (``input``, ``env``,
    ``check``...).  The timeout only stops a hang."""
    return subprocess.run(
        [sys.executable, "-m", "tuiprof", *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, **options
    )


def tuiprof_bytes(*args: str, cwd=ROOT, env=None, timeout: float = 60, **options) -> subprocess.CompletedProcess[bytes]:
    """Its stdout and stderr as the bytes a terminal would get (hostile input: an escape or a
    byte that is not UTF-8 must be seen as it is), from any folder (``cwd``: PYTHONPATH names
    the checkout unless ``env`` is given)."""
    return subprocess.run(
        [sys.executable, "-m", "tuiprof", *args],
        capture_output=True,
        timeout=timeout,
        cwd=cwd,
        env=env if env is not None else dict(os.environ, PYTHONPATH=str(ROOT)),
        **options,
    )


def one_line_exit_2(result: subprocess.CompletedProcess, *needles: str) -> str:
    """A refusal as the house has it (of a tuiprof_bytes run): exit 2, one line on stderr that
    starts with ``tuiprof: `` and holds each of ``needles``, no traceback; returns the line."""
    stderr = result.stderr.decode()
    lines = stderr.strip().splitlines()
    assert result.returncode == 2, (result.returncode, stderr)
    assert len(lines) == 1 and lines[0].startswith("tuiprof: ") and "Traceback" not in stderr, stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]
