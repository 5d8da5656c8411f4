"""What Dynamo said while it compiled: graph breaks and (re)compilations, as a capture saw them.

A trace shows a compiled frame only as ``Torch-Compiled Region: N/M`` spans:
frame N's M-th compilation, with no word on *why* frame N exists (the code
after a graph break) or why it was compiled again.  Dynamo knows both while
it compiles, in the capturing process only (:mod:`tuiprof.capture.compile_log`
reads them); this plain record is saved in the trace's ``tuiprofLive`` member
so ``open`` and ``summary`` can show them later without torch
(:mod:`tuiprof.analysis.compiled_run`).
"""

from __future__ import annotations

import msgspec

COMPILE_LOG_VERSION = 1


class GraphBreak(msgspec.Struct):
    """One graph break Dynamo took while compiling a frame."""

    compile_id: str  # the compilation it happened in ("0/1": frame 0, its second compilation)
    file: str  # the user code line the graph broke at
    line: int
    function: str
    reason: str  # Dynamo's reason, its first lines ("Call to `torch._dynamo.graph_break()`", ...)


class FrameCompile(msgspec.Struct):
    """One compilation of one Python frame (Dynamo's forward compile; a backward graph has none)."""

    compile_id: str  # "1/0": as in the trace's "Torch-Compiled Region: 1/0"
    function: str  # the frame's code ("forward", "torch_dynamo_resume_in_forward_at_9")
    file: str
    line: int  # the code's first line
    recompile_reason: str = (
        ""  # why a guard failed ("0/0: tensor 'x' size mismatch at index 0..."), "" for a first compile
    )


class CompileLog(msgspec.Struct):
    version: int = COMPILE_LOG_VERSION
    graph_breaks: list[GraphBreak] = []
    compiles: list[FrameCompile] = []
