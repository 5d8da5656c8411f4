"""Where numba keeps tuiprof's compiled kernels (tuiprof/trace/jit.py ``kernel_cache_dir``).

A read-only install cannot cache beside the module; it caches in the user's private
``$XDG_CACHE_HOME/tuiprof/numba``, and the snapshot reader looks there too (it looked only beside
the module, so such an install kept the 1 GB threshold of an uncompiled kernel forever)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tuiprof.trace import jit

pytest.importorskip("numba")

READ_ONLY = """
import sys
from pathlib import Path
from tuiprof.trace import jit, snapshot

writable = jit._writable
jit._writable = lambda folder, create: folder.name != "__pycache__" and writable(folder, create)  # a read-only install
numba = jit.numba_module()
from tuiprof.trace.snapshot_kernel import scan

folder = jit.kernel_cache_dir()
print(numba.core.config.CACHE_DIR)
print(scan._cache._cache_path == str(folder))
print(snapshot._use_scanner(Path(sys.argv[1]), 32 << 20))
(folder / "snapshot_kernel.scan-1.py311.nbi").write_bytes(b"")  # what numba's first compile leaves
print(snapshot._use_scanner(Path(sys.argv[1]), 32 << 20))
"""


def test_numba_names_the_folder_tuiprof_looks_in() -> None:
    from numba.core.caching import _CacheLocator

    assert jit.numba_subpath(jit.KERNELS) == _CacheLocator.get_suitable_cache_subpath(
        str(jit.KERNELS / "snapshot_kernel.py")
    )


def test_a_read_only_install_caches_in_the_users_private_folder(tmp_path: Path) -> None:
    """numba caches the kernel where tuiprof looks for it (no compile here: numba's locator is
    asked), and once an index is there the scanner reads from 32 MB."""
    snap = tmp_path / "snap.pickle"
    snap.write_bytes(b"\x80\x04}.")
    env = {key: value for key, value in os.environ.items() if key not in ("NUMBA_CACHE_DIR", "TUIPROF_NO_JIT")}
    env.pop("TUIPROF_SNAPSHOT_SCAN_BYTES", None)
    result = subprocess.run(
        [sys.executable, "-c", READ_ONLY, str(snap)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        env={**env, "XDG_CACHE_HOME": str(tmp_path / "cache")},
    )
    assert result.returncode == 0, result.stderr
    root = tmp_path / "cache" / "tuiprof" / "numba"
    assert result.stdout.split("\n")[:4] == [str(root), "True", "False", "True"]
    assert root.stat().st_mode & 0o777 == 0o700


def test_a_cache_folder_others_could_write_is_not_used(tmp_path: Path, monkeypatch) -> None:
    """numba loads machine code from its cache: a folder someone else may write to is never used."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    writable = jit._writable
    monkeypatch.setattr(
        jit, "_writable", lambda folder, create: folder.name != "__pycache__" and writable(folder, create)
    )
    private = jit.kernel_cache_dir(create=True)
    root = tmp_path / "tuiprof" / "numba"
    assert private == root / jit.numba_subpath(jit.KERNELS)
    root.chmod(0o770)
    assert jit.kernel_cache_dir() is None
    root.chmod(0o700)
    root.parent.chmod(0o777)
    assert jit.kernel_cache_dir() is None
    root.parent.chmod(0o700)
    root.rename(tmp_path / "elsewhere")
    root.symlink_to(tmp_path / "elsewhere")
    assert jit.kernel_cache_dir(create=True) is None
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "chosen"))  # the user's own choice wins
    assert jit.kernel_cache_dir() == tmp_path / "chosen" / jit.numba_subpath(jit.KERNELS)
