"""Short kernel names, as profilers show them: CUDA kernels are C++ template
instances (``void at::native::vectorized_elementwise_kernel<4,
at::native::CUDAFunctor_add<float>, ...>(int, ...)``) whose first 60
characters are the same for dozens of kernels.

The short name drops the return type, namespaces and parameters, and keeps the
one template argument that tells instances apart: the first functor, operator
or lambda's enclosing function (``vectorized_elementwise_kernel<CUDAFunctor_add>``).
Full names stay in detail panes and exports.
"""

from __future__ import annotations

import re
from functools import lru_cache

from rich.cells import cell_len, set_cell_size

OPEN, CLOSE = "<({[", ">)}]"
IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
NAME_NOT_NAMESPACE = re.compile(r"[A-Za-z_]\w*(?!\w|::)")
# Template arguments that never tell two kernels apart: scalar types, containers, wrappers.
GENERIC = frozenset(
    "void bool char short int long unsigned signed float double half Half BFloat16 Float8_e4m3fn Float8_e5m2 "
    "__half __nv_bfloat16 __nv_half int8_t uint8_t int16_t int32_t int64_t uint32_t uint64_t size_t true false const "
    "Array array TrivialOffsetCalculator OffsetCalculator IntDivider TensorInfo GenericPackedTensorAccessor "
    "PackedTensorAccessor TensorAccessor ArrayRef DefaultPtrTraits RestrictPtrTraits OpaqueType "
    "BinaryFunctor AUnaryFunctor BUnaryFunctor ReduceOp gpu_kernel_impl gpu_kernel_impl_nocast TensorListMetadata "
    "anonymous_namespace lambda operator Params std at native detail c10 cuda cub at_cuda_detail "
    "torch headeronly decltype".split()
)


MODULE_INDEX = re.compile(r"_\d+$")  # torch's module names end in their index: Sequential_5


def fit_module_name(name: str, width: int) -> str:
    """``name`` in ``width`` cells, cut in the middle so that the index that tells sibling
    modules apart stays: ``Seque…_5``, not ``Sequenti…`` for both Sequential_3 and _5.
    A path keeps its last module: ``…/Basi…_7`` for ``…/Sequential_5/BasicBlock_7``."""
    if cell_len(name) <= width:
        return name
    above, slash, last = name.rpartition("/")
    if slash and width >= 6:
        return "…/" + _cut_keeping_index(last, width - 2)
    return _cut_keeping_index(last if slash else name, width)


def _cut_keeping_index(name: str, width: int) -> str:
    if cell_len(name) <= width:
        return name
    if width < 2:
        return "…"[:width]
    index = MODULE_INDEX.search(name)
    tail = index.group() if index and len(index.group()) <= width - 2 else ""
    return set_cell_size(name, width - 1 - len(tail)) + "…" + tail


def short_kernel_name(name: str) -> str:
    """The kernel's short name (the name itself when it is not a C++ signature)."""
    return _shorten(name) if ("::" in name or "<" in name or re.match(r"\w+\(", name)) else name


@lru_cache(maxsize=65536)
def _shorten(name: str) -> str:
    text = name.removeprefix("void ").replace("(anonymous namespace)", "anonymous_namespace").strip()
    head, targs = _split_call(text)
    base = _last_component(head)
    if not base:
        return name
    hint = _distinguishing(targs) if targs else None
    return f"{base}<{hint}>" if hint else base


def _split_call(text: str) -> tuple[str, str]:
    """``ns::f<targs>(params)`` -> (``ns::f``, ``targs``), at the top nesting level."""
    depth = 0
    head_end = None
    targ_start = targ_end = None
    for index, char in enumerate(text):
        if char in OPEN:
            if depth == 0:
                if char == "<" and head_end is None:
                    head_end, targ_start = index, index + 1
                elif char == "(":
                    return text[: head_end if head_end is not None else index], text[targ_start:targ_end] if targ_start is not None and targ_end is not None else ""
            depth += 1
        elif char in CLOSE:
            depth -= 1
            if depth == 0 and char == ">" and targ_start is not None and targ_end is None:
                targ_end = index
    return text[: head_end if head_end is not None else len(text)], text[targ_start:targ_end] if targ_start is not None and targ_end is not None else ""


def _last_component(qualified: str) -> str:
    """``at::native::(anonymous namespace)::kernel`` -> ``kernel``."""
    parts = [p for p in _top_level_split(qualified, "::") if p]
    last = parts[-1] if parts else ""
    match = IDENTIFIER.match(last)
    return match.group(0) if match else ""


def _top_level_split(text: str, separator: str) -> list[str]:
    parts, depth, start, index = [], 0, 0, 0
    while index < len(text):
        char = text[index]
        if char in OPEN:
            depth += 1
        elif char in CLOSE:
            depth -= 1
        elif depth == 0 and text.startswith(separator, index):
            parts.append(text[start:index])
            index += len(separator)
            start = index
            continue
        index += 1
    parts.append(text[start:])
    return parts


def _distinguishing(targs: str) -> str | None:
    """The first template argument (depth first) that names a functor, an op or a lambda's function."""
    for word in NAME_NOT_NAMESPACE.findall(targs):
        if word not in GENERIC and not word.isdigit() and not word.endswith("_t") and len(word) > 2:
            return word
    return None
