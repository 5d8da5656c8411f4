"""tuiprof: a terminal explorer for PyTorch profiler traces.

The Python API (docs/api.md):

- ``tuiprof.profile(...)``: profile a block of your code into a trace (loads torch when called);
- ``tuiprof.watch(DIR)``: watch a long job's steps, capture when they turn slow (docs/watch.md; loads torch);
- ``tuiprof.load(path)``: read a trace and get its tables as rows (never loads torch or Textual);
- ``tuiprof.TraceError``: what ``load`` raises for a path or trace it cannot use.

``import tuiprof`` is cheap: ``profile``, ``watch`` and ``load`` are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tuiprof.errors import TraceError

if TYPE_CHECKING:
    from tuiprof.capture.api import profile
    from tuiprof.capture.watch import watch
    from tuiprof.report.api import LoadedTrace, load

__version__ = "0.1.0"
__all__ = ["LoadedTrace", "TraceError", "load", "profile", "watch"]


def __getattr__(name: str) -> Any:
    # Import statements, not importlib: import-linter and ``python -X importtime`` see them.
    if name == "profile":
        from tuiprof.capture.api import profile

        return profile
    if name == "watch":
        from tuiprof.capture.watch import watch

        return watch
    if name in ("load", "LoadedTrace"):
        from tuiprof.report import api

        return getattr(api, name)
    raise AttributeError(f"module 'tuiprof' has no attribute {name!r}")
