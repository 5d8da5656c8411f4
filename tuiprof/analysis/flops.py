"""FLOPs of one operator call, recomputed from ``Input Dims`` + ``Concrete Inputs``.

No trace file carries FLOPs (``with_flops`` only sets a top-level flag), so
files get them from torch's own formulas.  Two sets, for two questions:

- :data:`FORMULAS`, the profiler's (``computeFlops`` in
  ``torch/csrc/profiler/util.cpp``): 2 FLOPs per multiply-add for conv2d, mm,
  addmm, bmm and baddbmm, one per element for mul and add, forward only.
  They give the ``flops`` of a call, equal to ``key_averages()``'s.  A live
  capture reports torch's numbers directly and uses these only where torch has none.
- :data:`COUNTED`, ``torch.utils.flop_counter.FlopCounterMode``'s: matrix
  products and convolutions, forward *and* backward (``convolution_backward``
  costs what its output mask asks for: each of grad input and grad weight
  as much as the forward), no elementwise ops.  They give the training FLOPs
  of modules and steps, and where the time is spent
  (:func:`tuiprof.analysis.calls.counted_flops`).

A formula that cannot be evaluated (a size that overflows, stride 0, missing
members) gives None: the call has no FLOPs and is counted as damaged.
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


def _conv_flop_count(x: Sequence[int], w: Sequence[int], out: Sequence[int], transposed: bool) -> int:
    """FlopCounterMode's ``conv_flop_count``: 2 x batch x weight elements x output positions
    (input positions for a transposed convolution)."""
    return 2 * x[0] * prod(w) * prod(x[2:] if transposed else out[2:])


def _conv_output(
    x: Sequence[int], w: Sequence[int], stride: list[int], padding: list[int], dilation: list[int]
) -> list[int]:
    spatial = len(x) - 2
    stride, padding, dilation = (v * spatial if len(v) == 1 else v for v in (stride, padding, dilation))
    return [x[0], w[0]] + [
        (x[2 + i] + 2 * padding[i] - dilation[i] * (w[2 + i] - 1) - 1) // stride[i] + 1 for i in range(spatial)
    ]


def convolution_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    """``aten::convolution``/``aten::_convolution`` (input, weight, bias, stride, padding,
    dilation, transposed, output_padding, groups, ...)."""
    x, w = dims[0], dims[1]
    concrete = list(concrete or []) + [""] * 9
    stride, padding, dilation = (_int_list(concrete[i], [d]) for i, d in ((3, 1), (4, 0), (5, 1)))
    transposed = str(concrete[6]).strip() == "True"
    out = x if transposed else _conv_output(x, w, stride, padding, dilation)
    return _conv_flop_count(x, w, out, transposed)


def conv2d_counted_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    """``aten::conv2d`` (input, weight, bias, stride, padding, dilation, groups) as FlopCounterMode counts it."""
    x, w = dims[0], dims[1]
    if len(x) != 4 or len(w) != 4:
        raise ValueError("conv2d of other than 4-d tensors")
    concrete = list(concrete or []) + [""] * 7
    stride, padding, dilation = (_int_list(concrete[i], [d]) for i, d in ((3, 1), (4, 0), (5, 1)))
    return _conv_flop_count(x, w, _conv_output(x, w, stride, padding, dilation), False)


def convolution_backward_flops(dims: Sequence[Any], concrete: Sequence[Any] | None) -> int:
    """FlopCounterMode's ``conv_backward_flop``: (grad_output, input, weight, bias_sizes,
    stride, padding, dilation, transposed, output_padding, groups, output_mask)."""
    grad_out, x, w = dims[0], dims[1], dims[2]
    concrete = list(concrete or []) + [""] * 11
    transposed = str(concrete[7]).strip() == "True"
    mask = [part.strip() == "True" for part in str(concrete[10]).strip("[] ").split(",")] + [True, True]
    flops = 0
    if mask[0]:  # grad input: the convolution run the other way
        flops += _conv_flop_count(grad_out, w, x, not transposed)
    if mask[1]:  # grad weight

        def swap(shape: Sequence[int]) -> list[int]:
            return [shape[1], shape[0], *shape[2:]]

        if transposed:
            flops += _conv_flop_count(swap(grad_out), swap(x), swap(w), False)
        else:
            flops += _conv_flop_count(swap(x), swap(grad_out), swap(w), False)
    return flops


COUNTED: dict[str, FlopsFn] = {
    "aten::conv1d": convolution_flops,
    "aten::conv2d": conv2d_counted_flops,
    "aten::conv3d": convolution_flops,
    "aten::convolution": convolution_flops,
    "aten::_convolution": convolution_flops,
    "aten::convolution_backward": convolution_backward_flops,
    "aten::mm": mm_flops,
    "aten::addmm": addmm_flops,
    "aten::bmm": bmm_flops,
    "aten::baddbmm": baddbmm_flops,
}
# Beyond this a count is damage, not work (2**53 FLOPs is 9 PFLOP in one call); it also
# keeps sums of many calls inside int64.
ABSURD_FLOPS = 1 << 53


def operator_flops(
    name: str, dims: Sequence[Any] | None, concrete: Sequence[Any] | None, formulas: dict[str, FlopsFn] = FORMULAS
) -> int | None:
    """FLOPs of one call of ``name`` (0 when ``formulas`` has none for it or there are no
    Input Dims); None when the formula cannot be evaluated on these inputs (damaged)."""
    formula = formulas.get(name)
    if formula is None or not dims:
        return 0
    try:
        value = int(formula(dims, concrete))
    except (TypeError, ValueError, IndexError, ZeroDivisionError, OverflowError, MemoryError):
        return None
    return max(0, value) if value < ABSURD_FLOPS else None
