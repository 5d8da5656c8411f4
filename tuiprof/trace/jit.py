"""The optional JIT (numba, the ``fast`` extra) that the hottest byte scanners may use.

Decisions, for every JIT path in tuiprof:
- **Optional.** ``pip install 'tuiprof[fast]'`` adds numba; without it (or with ``TUIPROF_NO_JIT=1``)
  every JIT path falls back to the plain-Python/numpy code, which gives the same answers. The tests
  install numba (the ``test`` extra) and run each JIT path against its fallback.
- **Bounds-checked.** Kernels are compiled with ``boundscheck=True``: a length or offset read from a
  file that points past the buffer raises ``IndexError`` instead of reading memory, and the caller
  turns it into its usual one-line refusal.
- **Cached where Python caches bytecode.** ``cache=True`` keeps the compiled code in the
  ``__pycache__`` beside the module (numba's default), which is as trusted as the ``.pyc`` files
  Python loads from there; nothing is cached under ``$XDG_CACHE_HOME/tuiprof``, whose contents are
  treated as untrusted input.
- **Only where it pays.** Importing numba costs ~0.3 s and the first compile seconds, so callers use
  a kernel only for inputs big enough to win (each states its threshold).
"""

from __future__ import annotations

import os
from functools import cache
from types import ModuleType

NO_JIT_ENV = "TUIPROF_NO_JIT"


@cache
def numba_module() -> ModuleType | None:
    """numba, or None when it is not installed, fails to import, or ``TUIPROF_NO_JIT`` is set."""
    if os.environ.get(NO_JIT_ENV, "") not in ("", "0"):
        return None
    try:
        import numba
    except Exception:  # noqa: BLE001 - a broken numba/llvmlite install is the same as none
        return None
    return numba


def jit_enabled() -> bool:
    """Whether the JIT paths run (numba importable and not switched off)."""
    return numba_module() is not None
