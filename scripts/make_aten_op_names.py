#!/usr/bin/env python3
"""Write tuiprof/analysis/aten_op_names.txt: aten operator names that hold an underscore.

Inductor names a fused kernel after the aten ops it computes, joined by ``_``
(``triton_red_fused__unsafe_view_add_mean_mul_pow_rsqrt_1``), so an op whose own
name holds an underscore (``_unsafe_view``, ``native_layer_norm``) cannot be told
from two ops without a list of names.  tuiprof reads files without torch, so the
list is written once from torch's dispatcher and shipped:

    python scripts/make_aten_op_names.py

In-place variants (one trailing ``_``; dunders like ``__and__`` stay) are left out: Inductor sees functional graphs.
"""

from __future__ import annotations

from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent.parent / "tuiprof" / "analysis" / "aten_op_names.txt"


def main() -> None:
    names = {
        name.split("::", 1)[1].split(".", 1)[0]
        for name in torch._C._dispatch_get_all_op_names()
        if name.startswith("aten::")
    }
    wanted = sorted(n for n in names if "_" in n and (not n.endswith("_") or n.endswith("__")))
    header = f"# aten ops whose name holds an underscore (torch {torch.__version__}); scripts/make_aten_op_names.py\n"
    OUT.write_text(header + "\n".join(wanted) + "\n")
    print(f"{OUT}: {len(wanted)} names")


if __name__ == "__main__":
    main()
