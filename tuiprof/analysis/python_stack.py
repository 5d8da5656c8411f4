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

from tuiprof.analysis.modules import MAX_MODULE_DEPTH, frame_parents
from tuiprof.trace.columns import FrameColumns
from tuiprof.trace.store import as_thread_id

Stack = tuple[str, ...]
LIBRARY_PACKAGES = frozenset(sys.stdlib_module_names) | {"torch"}


def python_stacks(
    frames: FrameColumns, names: list[str], threads: list[int | str], queries: list[tuple[int | str, int]]
) -> list[Stack]:
    """The stack at each (thread id, time ns) query, outermost first; () where no frame holds it.

    Frames nest on their thread, so every frame enclosing a moment is the last frame started
    by then or one of its callers: each query is a binary search and a short walk up."""
    if not len(frames) or not queries:
        return [() for _ in queries]
    order = np.lexsort((frames.start_ns, frames.thread))  # by thread, then start
    sorted_threads, sorted_starts = frames.thread[order], frames.start_ns[order]
    parent, _ = frame_parents(frames)  # loops were counted when the module tree was built
    code_of = {tid: code for code, tid in enumerate(threads)}
    stacks: list[Stack] = []
    for tid, time_ns in queries:
        code = code_of.get(as_thread_id(tid), -1)
        low, high = np.searchsorted(sorted_threads, code), np.searchsorted(sorted_threads, code, side="right")
        last = low + int(np.searchsorted(sorted_starts[low:high], time_ns, side="right")) - 1
        row = int(order[last]) if code >= 0 and last >= low else -1
        climbed = 0
        while row >= 0 and frames.end_ns[row] < time_ns:  # ended before the moment: not on its stack
            row = int(parent[row]) if climbed < MAX_MODULE_DEPTH else -1  # links from a file: bounded
            climbed += 1
        stack: list[str] = []
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
