"""The optional JIT (numba, the ``fast`` extra) that the hottest byte scanners may use.

Decisions, for every JIT path in tuiprof:
- **Optional.** ``pip install 'tuiprof[fast]'`` adds numba; without it (or with ``TUIPROF_NO_JIT=1``)
  every JIT path falls back to the plain-Python/numpy code, which gives the same answers. The tests
  install numba (the ``test`` extra) and run each JIT path against its fallback.
- **Bounds-checked.** Kernels are compiled with ``boundscheck=True``: a length or offset read from a
  file that points past the buffer raises ``IndexError`` instead of reading memory, and the caller
  turns it into its usual one-line refusal.
- **Cached where only the user writes.** ``cache=True`` keeps the compiled code (numba loads
  machine code from it) in the ``__pycache__`` beside the module when it is writable (numba's
  first choice; as trusted as the ``.pyc`` files Python loads from there), else (a read-only or
  system install) in ``$XDG_CACHE_HOME/tuiprof/numba`` (``~/.cache``), used only while it and
  its parent are the user's own and private (0700, no link): :func:`kernel_cache_dir`.  A
  ``NUMBA_CACHE_DIR`` the user set wins (numba's own setting).  Where none of these can be used,
  numba falls back to its own per-user cache and tuiprof counts the kernel as not cached.
- **Only where it pays.** Importing numba costs ~0.3 s and the first compile seconds, so callers use
  a kernel only for inputs big enough to win (each states its threshold).
"""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
from functools import cache
from pathlib import Path
from types import ModuleType

NO_JIT_ENV = "TUIPROF_NO_JIT"
KERNELS = Path(__file__).resolve().parent  # the folder of the modules whose kernels are cached


def _writable(folder: Path, create: bool) -> bool:
    """Whether numba can cache in ``folder``: its own test (make it, write a temporary file)."""
    try:
        if create:
            folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
    except OSError:
        return False
    return True


def _private_root(create: bool) -> Path | None:
    """``$XDG_CACHE_HOME/tuiprof/numba`` if it (made 0700 when ``create``) and its parent are this
    user's, not links, and no one else may write to them: numba loads code from there."""
    from tuiprof.trace.cache import cache_root

    root = cache_root() / "numba"
    try:
        if create:
            root.mkdir(mode=0o700, parents=True, exist_ok=True)
        for folder, others in ((root, 0o077), (root.parent, 0o022)):
            status = folder.lstat()
            if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & others:
                return None
    except OSError:
        return None
    return root


def numba_subpath(folder: Path) -> str:
    """The folder numba gives a module's cache under a cache root (its
    ``_CacheLocator.get_suitable_cache_subpath``: the module folder's name and a SHA-1 of its path)."""
    return f"{folder.name}_{hashlib.sha1(str(folder).encode()).hexdigest()}"


def kernel_cache_dir(create: bool = False) -> Path | None:
    """Where numba keeps tuiprof's compiled kernels (see the module's decisions); None: nowhere
    tuiprof trusts.  ``create``: make the folders (the first compile needs them)."""
    chosen = os.environ.get("NUMBA_CACHE_DIR")
    if chosen:
        return Path(chosen) / numba_subpath(KERNELS)
    in_tree = KERNELS / "__pycache__"
    if _writable(in_tree, create):
        return in_tree
    root = _private_root(create)
    return root / numba_subpath(KERNELS) if root else None


@cache
def numba_module() -> ModuleType | None:
    """numba, or None when it is not installed, fails to import, or ``TUIPROF_NO_JIT`` is set."""
    if os.environ.get(NO_JIT_ENV, "") not in ("", "0"):
        return None
    try:
        import numba
    except Exception:  # noqa: BLE001 - a broken numba/llvmlite install is the same as none
        return None
    if not os.environ.get("NUMBA_CACHE_DIR"):
        folder = kernel_cache_dir(create=True)
        if folder is not None and folder.name != "__pycache__":
            # numba.core.config reads its settings at run time: its stub lists none of them
            numba.core.config.CACHE_DIR = str(folder.parent)  # type: ignore[attr-defined]
    return numba


def jit_enabled() -> bool:
    """Whether the JIT paths run (numba importable and not switched off)."""
    return numba_module() is not None
