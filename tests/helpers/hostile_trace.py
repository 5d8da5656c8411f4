"""One GPU trace whose every text field carries terminal escapes, for the tests of every surface.

Each name, annotation, kernel, memcpy, NCCL kernel, runtime call, module
frame, ``Input type``, ``deviceProperties`` name, compiled-region span,
Inductor kernel name and ``tuiprofLive`` fact ends with :data:`OSC52` (write
the clipboard) and :data:`OSC0` (set the window title).  A surface is clean
when neither ``ESC`` nor ``BEL`` reaches the terminal (:func:`leaks`) and the
escaped form (``\\x1b]52;``) is what it shows instead.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.gpu_trace import GpuTrace

OSC52 = "\x1b]52;c;cHduZWQ=\x07"  # "pwned" to the system clipboard
OSC0 = "\x1b]0;pwned\x07"  # the window title
EVIL = OSC52 + OSC0
SHOWN = "\\x1b]52;c;cHduZWQ=\\x07"  # what a sanitised surface shows for OSC52


def leaks(text: str | bytes) -> bool:
    """Whether ``text`` holds a raw ESC or BEL (what makes an OSC sequence run)."""
    if isinstance(text, bytes):
        return b"\x1b" in text or b"\x07" in text
    return "\x1b" in text or "\x07" in text


def hostile_trace(scale: float = 1.0) -> GpuTrace:
    """Two steps whose every text field ends with :data:`EVIL`; ``scale`` stretches the
    device times (a diff of two scales has excesses in every table)."""
    trace = GpuTrace()
    trace.step(1, 0, 1000)
    trace.step(2, 1000, 1000)
    for base in (0, 1000):
        top = trace.module("Net" + EVIL + "_0", base + 1, 900)
        trace.module("Linear" + EVIL + "_1", base + 2, 400, parent=top)
        with_types = {"Input Dims": [[8, 4], [4, 4]], "Input type": ["float" + EVIL, "float"]}
        mm = trace.op("aten::mm" + EVIL, base + 3, 100, **with_types)
        trace.launch(mm, "gemm" + EVIL, base + 4, 5, base + 10, 300 * scale, runtime="cudaLaunchKernel" + EVIL)
        copy = trace.op("aten::copy_" + EVIL, base + 120, 50)
        trace.launch(
            copy,
            "Memcpy HtoD" + EVIL,
            base + 121,
            4,
            base + 320 * scale,
            20 * scale,
            kind="gpu_memcpy",
            runtime="cudaMemcpyAsync" + EVIL,
        )
        reduce = trace.op("nccl:all_reduce" + EVIL, base + 200, 50)
        trace.launch(reduce, "ncclKernel_AllReduce" + EVIL, base + 201, 2, base + 400, 100 * scale, stream=9)
        trace._complete(
            "user_annotation", "## forward" + EVIL, base + 300, 300, 4242, 4242, {"External id": trace._take_external()}
        )
        trace.op("Torch-Compiled Region: 0/0" + EVIL, base + 500, 300)  # a compiled-region node
        fused = trace.op("aten::add" + EVIL, base + 510, 50)
        trace.launch(fused, "triton_poi_fused_add" + EVIL + "_0", base + 511, 2, base + 600, 50 * scale)
        trace.memory(base + 20, 1 << 20, 1 << 21)
        trace.memory(base + 700, -(1 << 20), 1 << 20)
    return trace


def write_hostile_trace(path: Path, scale: float = 1.0, rank: int | None = None) -> Path:
    """:func:`hostile_trace` written to ``path`` with an escaped device name and live facts
    (and ``rank`` of 2 in ``distributedInfo``, backend escaped too, when given)."""
    document = json.loads(hostile_trace(scale).text())
    if rank is not None:
        document = {"distributedInfo": {"backend": "nccl" + EVIL, "rank": rank, "world_size": 2}, **document}
    document["deviceProperties"][0]["name"] = "GPU" + EVIL
    document["tuiprofLive"] = {
        "version": 1,
        "modules": {
            name + EVIL + "_" + str(i): {
                "qualified_name": "layer" + EVIL,
                "parameters": 16,
                "output_shape": "8x4" + EVIL,
            }
            for i, name in enumerate(("Net", "Linear"))
        },
        "log_lines": ["log" + EVIL],
    }
    path.write_text(json.dumps(document))
    return path
