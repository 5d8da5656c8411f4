"""Graph breaks and recompilations, read from Dynamo while the capture runs.

Dynamo makes a ``GraphCompileReason`` (``torch._dynamo.output_graph``) for each
graph break it takes, with the reason and the user stack at the break (and
appends it to ``torch._dynamo.utils.graph_break_reasons``, which
``torch._dynamo.explain`` reads), and one ``CompilationMetrics`` per frame
compilation (``torch._dynamo.utils.get_compilation_metrics()``: compile id,
the frame's code, and ``recompile_reason``, the guard that failed).  The list
of breaks does not say which compilation took them, so the recorder wraps
``GraphCompileReason.__post_init__`` while it records and notes the current
compile id beside each break; compilations are the metrics added since it
started.  If a later torch renames these, the log is empty (never an error)
and the analysis counts what the trace's ``Torch-Compiled Region`` spans show.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from tuiprof.trace.compile_log import CompileLog, FrameCompile, GraphBreak

REASON_LINES = 2  # Dynamo's reason: its first line says what, the second ("Explanation: ...") why


class CompileLogRecorder:
    """Collects the graph breaks and frame compilations Dynamo reports while :meth:`recording`."""

    def __init__(self) -> None:
        self._breaks: list[GraphBreak] = []
        self._metrics_before: set[int] = set()

    @contextmanager
    def recording(self) -> Iterator[CompileLogRecorder]:
        try:
            from torch._dynamo.output_graph import GraphCompileReason
        except ImportError:
            yield self
            return
        self._metrics_before = {id(m) for m in _compilation_metrics()}
        original = GraphCompileReason.__post_init__

        def post_init(reason: GraphCompileReason) -> None:
            original(reason)
            try:
                graph_break = _graph_break(reason)
            except Exception:  # the log is a by-product: it never breaks the user's compile
                graph_break = None
            if graph_break is not None:
                self._breaks.append(graph_break)

        # The ignores: a method replaced at run time, and mypy's dataclass plugin gives torch's
        # __post_init__ a second self in its type.
        GraphCompileReason.__post_init__ = post_init  # type: ignore[method-assign, assignment]
        try:
            yield self
        finally:
            GraphCompileReason.__post_init__ = original  # type: ignore[method-assign]  # restored

    def taken(self) -> CompileLog | None:
        """What Dynamo reported since recording began, None when it compiled nothing."""
        compiles = [
            _frame_compile(m) for m in _compilation_metrics() if id(m) not in self._metrics_before and m.co_name
        ]
        log = CompileLog(graph_breaks=list(self._breaks), compiles=compiles)
        return log if log.compiles or log.graph_breaks else None


def _compilation_metrics() -> list[Any]:
    from torch._dynamo import utils

    return list(utils.get_compilation_metrics()) if hasattr(utils, "get_compilation_metrics") else []


def _graph_break(reason: Any) -> GraphBreak | None:
    """A ``GraphCompileReason`` that is a graph break, with the user frame it broke at."""
    if not getattr(reason, "graph_break", True):
        return None
    stack = getattr(reason, "user_stack", None) or []
    frame = stack[-1] if stack else None
    text = "\n".join(str(getattr(reason, "reason", "")).strip().splitlines()[:REASON_LINES])
    import torch._guards

    compile_id = torch._guards.CompileContext.current_compile_id()
    return GraphBreak(
        compile_id=str(compile_id) if compile_id is not None else "",
        file=str(getattr(frame, "filename", "")),
        line=int(getattr(frame, "lineno", 0) or 0),
        function=str(getattr(frame, "name", "")),
        reason=text,
    )


def _frame_compile(metrics: Any) -> FrameCompile:
    return FrameCompile(
        compile_id=str(metrics.compile_id or ""),
        function=str(metrics.co_name or ""),
        file=str(metrics.co_filename or ""),
        line=int(metrics.co_firstlineno or 0),
        recompile_reason=str(metrics.recompile_reason or ""),
    )
