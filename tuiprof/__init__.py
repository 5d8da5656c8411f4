"""tuiprof: a terminal explorer for PyTorch profiler traces.

``import tuiprof`` is cheap: ``tuiprof.profile`` and ``tuiprof.watch`` load torch only when called.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "profile":
        from tuiprof.capture.api import profile

        return profile
    if name == "watch":
        from tuiprof.capture.watch import watch

        return watch
    raise AttributeError(f"module 'tuiprof' has no attribute {name!r}")
