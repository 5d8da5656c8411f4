"""The Python stack (``with_stack`` frames) around a moment on a thread: where an
allocation live at the memory peak was made, in the user's code.

A stack is the frames enclosing the moment on its thread, innermost found by time
(the latest-starting frame holding it), then its callers by the frames' ``Python
parent id`` links, the links the module tree uses (analysis/modules.py).  Stacks
are outermost first, frame names as torch wrote them (``train.py(42): forward``).

"User code" (the one frame a table has room for) is the deepest frame that is
neither torch's (``torch/...``), the standard library's (``typing.py``,
``<frozen os>``), a built-in (``<built-in method ...>``) nor an ``nn.Module:``
marker: the line of the model or training script that asked for the memory.
"""

from __future__ import annotations

import sys

import numpy as np

from tuiprof.analysis.intervals import innermost_spans_at
from tuiprof.analysis.modules import MAX_MODULE_DEPTH, frame_parents
from tuiprof.trace.columns import FrameColumns

Stack = tuple[str, ...]
LIBRARY_PACKAGES = frozenset(sys.stdlib_module_names) | {"torch"}


def python_stacks(frames: FrameColumns, names: list[str], threads: list[int | str], queries: list[tuple[int | str, int]]) -> list[Stack]:
    """The stack at each (thread id, time ns) query, outermost first; () where no frame holds it."""
    if not len(frames) or not queries:
        return [() for _ in queries]
    order = np.argsort(frames.start_ns, kind="stable")
    spans = (frames.start_ns[order], frames.end_ns[order], frames.thread[order])
    innermost = innermost_spans_at(spans, threads, [tid for tid, _ in queries], [time for _, time in queries])
    parent, _ = frame_parents(frames)  # loops were counted when the module tree was built
    stacks = []
    for found in innermost.tolist():
        stack: list[str] = []
        row = int(order[found]) if found >= 0 else -1
        while row >= 0 and len(stack) < MAX_MODULE_DEPTH:
            stack.append(names[int(frames.name[row])])
            row = int(parent[row])
        stacks.append(tuple(reversed(stack)))
    return stacks


def is_user_frame(frame: str) -> bool:
    """Whether a frame name is the user's code (not torch, the standard library or a built-in)."""
    if frame.startswith(("<", "nn.Module:", "nn.Module ")):
        return False
    path = frame.rpartition("(")[0] if "(" in frame else frame
    top = path.replace("\\", "/").lstrip("/").split("/")[0].removesuffix(".py")
    return bool(path) and top not in LIBRARY_PACKAGES


def user_frame(stack: Stack) -> str:
    """The deepest frame of user code in ``stack``, '' when there is none."""
    return next((frame for frame in reversed(stack) if is_user_frame(frame)), "")
