"""FLOPs of one operator call, recomputed from ``Input Dims`` + ``Concrete Inputs``.

No trace file carries FLOPs (``with_flops`` only sets a top-level flag), so
files get them from torch's own formulas (``computeFlops`` in
``torch/csrc/profiler/util.cpp``): 2 FLOPs per multiply-add for conv2d, mm,
addmm, bmm and baddbmm; one per element for mul and add.  A live capture
reports torch's numbers directly and uses these only where torch has none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any

FlopsFn = Callable[[Sequence[Any], Sequence[Any] | None], int]


def _int_list(text: Any, default: list[int]) -> list[int]:
    """``"[2, 2]"`` -> ``[2, 2]``; Concrete Inputs hold int lists as strings."""
    if isinstance(text, list):
        return [int(v) for v in text] or default
    if not isinstance(text, str) or not text.strip("[] "):
        return default
    try:
        return [int(part) for part in text.strip("[] ").split(",")]
    except ValueError:
        return default


def _int(text: Any, default: int) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def conv2d_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    if len(dims) < 2 or len(dims[0]) != 4 or len(dims[1]) != 4:
        return 0
    n, c_in, h, w = dims[0]
    c_out, _, k_h, k_w = dims[1]
    concrete = list(concrete or [])
    concrete += [""] * (7 - len(concrete))
    stride = _int_list(concrete[3], [1, 1])
    padding = _int_list(concrete[4], [0, 0])
    dilation = _int_list(concrete[5], [1, 1])
    groups = _int(concrete[6], 1) or 1
    stride, padding, dilation = (v * 2 if len(v) == 1 else v for v in (stride, padding, dilation))
    out_h = (h + 2 * padding[0] - dilation[0] * (k_h - 1) - 1) // stride[0] + 1
    out_w = (w + 2 * padding[1] - dilation[1] * (k_w - 1) - 1) // stride[1] + 1
    return 2 * n * out_h * out_w * k_h * k_w * c_in * c_out // groups


def mm_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    if len(dims) < 2 or len(dims[0]) != 2 or len(dims[1]) != 2:
        return 0
    (m, k), (_, n) = dims[0], dims[1]
    return 2 * m * k * n


def addmm_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    return mm_flops(dims[1:3], concrete) if len(dims) >= 3 else 0


def bmm_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    if len(dims) < 2 or len(dims[0]) != 3 or len(dims[1]) != 3:
        return 0
    (b, m, k), (_, _, n) = dims[0], dims[1]
    return 2 * b * m * k * n


def baddbmm_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    return bmm_flops(dims[1:3], concrete) if len(dims) >= 3 else 0


def elementwise_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    if not dims or not isinstance(dims[0], list) or not dims[0]:
        return 0
    return prod(dims[0])


FORMULAS: dict[str, FlopsFn] = {
    "aten::conv2d": conv2d_flops,
    "aten::mm": mm_flops,
    "aten::addmm": addmm_flops,
    "aten::bmm": bmm_flops,
    "aten::baddbmm": baddbmm_flops,
    "aten::mul": elementwise_flops,
    "aten::add": elementwise_flops,
}


def operator_flops(name: str, dims: Sequence[Any] | None, concrete: Sequence[Any] | None) -> int:
    """FLOPs of one call of ``name``; 0 when torch has no formula for it."""
    formula = FORMULAS.get(name)
    if formula is None or not dims:
        return 0
    try:
        return max(0, int(formula(dims, concrete)))
    except (TypeError, ValueError, IndexError):
        return 0
