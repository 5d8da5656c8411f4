"""Names as tables show them: short kernel names, and the one rule that cuts a name
to a width (:func:`fit_name`, :func:`fit_names`) so that rows stay apart.

Short kernel names, as profilers show them: CUDA kernels are C++ template
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
from collections.abc import Iterable
from functools import lru_cache
from os.path import commonprefix

from rich.cells import cell_len, set_cell_size

from tuiprof.analysis.modules import ModuleNode

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
# A module as the tables label it: its qualified name and, in brackets, its class (or what it is:
# "[compiled 0:0] (compiled, distributed)").  Cut, the bracket goes first: the name tells rows apart.
MODULE_LABEL = re.compile(r"(?P<indent> *)(?P<name>[^\s()]+) \((?P<what>[^()]+)\)")  # indented in a tree table
# Where a qualified name may be cut, keeping what follows: a path's levels, a namespace, a label.
QUALIFIER = re.compile(r"/|::|: ")
TEMPLATE = re.compile(r"(?P<base>[^<]+)<(?P<argument>.+)>")  # a short kernel name: base<argument>
ALIGNED = " → "  # a diff row aligned across a rename: "a → b" (analysis.diff.ALIGN_ARROW)
BASE_FLOOR = 8  # cells a kernel's base name keeps before its template argument is cut


def tree_label(module: ModuleNode) -> str:
    """A module's row in a tree, under its parent's row: its qualified name less the parent's
    (``layer4.0.downsample`` under ``layer4.0``: ``downsample (Sequential)``), so that a narrow
    pane cuts the class, not the part that tells siblings apart (``…0`` and ``la…2`` at 60
    columns); the whole path is in the detail pane."""
    qualified = module.qualified_name
    if not qualified:
        return module.label
    above = module.parent.qualified_name if module.parent is not None else ""
    if above and qualified.startswith(above + "."):
        qualified = qualified[len(above) + 1 :]
    return f"{qualified} ({module.class_name})"


def fit_name(name: str, width: int) -> str:
    """``name`` in ``width`` cells, cut where rows that share a prefix still differ.

    The one rule for every table, pane and text output that cuts a name:

    - a path or a qualified name keeps its tail, cut before a separator:
      ``…/Sequential_5/BasicBlock_1/Conv2d_2``, ``…::convolution_backward``,
      ``…: ConvolutionBackward0`` (torch numbers modules per class, so the last level
      tells modules apart; a namespace is shared by most operators);
    - one cut per name: a last level too wide for ``…`` and itself is cut once, on its own
      (``native_batc…rm_backward``, not ``…::native_b…backward``);
    - a module keeps its index: ``Seque…_5``, not ``Sequenti…`` for Sequential_3 and _5;
    - a kernel's template argument (the functor that tells instances apart, see
      :func:`short_kernel_name`, applied before the name is cut) outlasts its base name:
      ``vectoriz…<CUDAFunctor_add>``, ``vectori…<GeluCU…lImpl>``;
    - a diff row aligned across a rename keeps both sides: ``…/Conv2d_3 → …/Conv2d_4``;
    - a module label ``layer3.1.bn1 (BatchNorm2d)`` drops its bracket first, then keeps the
      tail of its qualified name from a level on: ``layer3.1.bn1``, ``…1.bn1``;
    - any other name keeps its head and its tail: ``cutlass_80…_tn_align1``.
    """
    if cell_len(name) <= width:
        return name
    if width < 2:
        return "…"[: max(0, width)]
    label = MODULE_LABEL.fullmatch(name)
    if label is not None:  # "layer3.1.bn1 (BatchNorm2d)": the class goes first, then the head of the path
        indent = label.group("indent")
        return indent + _fit_dotted(label.group("name"), width - len(indent))
    if ALIGNED in name and width >= 2 * 4 + len(ALIGNED):
        left, right = name.split(ALIGNED, 1)
        room = width - len(ALIGNED)
        left_room = min(cell_len(left), max(room // 2, room - cell_len(right)))
        return fit_name(left, left_room) + ALIGNED + fit_name(right, room - left_room)
    separators = [m for m in QUALIFIER.finditer(name) if _depth_at(name, m.start()) == 0]
    for separator in separators:  # the longest tail that fits
        tail = name[separator.start() :]
        if cell_len(tail) + 1 <= width:
            return "…" + tail
    if separators:
        last = separators[-1]
        level = name[last.end() :]
        if cell_len(level) + 1 <= width:  # the last level whole, its separator left out
            return "…" + level
        # One cut per name: the last level cut once, not after a `…::` that is a cut of its
        # own (`…::native_batc…rm_backward` read as two fragments).
        return _cut_part(
            level, min(width, cell_len(level) - 1)
        )  # cut even where it would just fit: the namespace is gone
    return _cut_part(name, width)


def _fit_dotted(qualified: str, width: int) -> str:
    """A module's qualified name (``layer3.1.bn1``) in ``width`` cells: whole, else its longest
    tail that starts at a level (``…1.bn1``, ``…bn1``): the last levels tell modules apart."""
    if cell_len(qualified) <= width:
        return qualified
    for dot in (m.start() for m in re.finditer(r"\.", qualified)):
        tail = qualified[dot + 1 :]
        if cell_len(tail) + 1 <= width:
            return "…" + tail
    return _cut_part(qualified, width)


def fit_names(names: Iterable[str], width: int) -> dict[str, str]:
    """Each of ``names`` (a column's values) cut by :func:`fit_name`; where different names
    would read the same (cuBLAS kernels that differ only in their tile size, in the middle:
    ``sm90_xmma_gemm_…_tilesize128x128x64_…_cublas``), each shows its head, the place where
    it differs from the others, and its tail: ``sm90_xm…e128x128x64…_5x_cublas``."""
    distinct = set(names)
    cut = {name: fit_name(name, width) for name in distinct}
    for _ in range(3):  # names that still read the same differ further on: look again
        groups: dict[str, list[str]] = {}
        for name, shown in cut.items():
            groups.setdefault(shown, []).append(name)
        clashes = [group for group in groups.values() if len(group) > 1]
        if not clashes:
            break
        for group in clashes:
            start = len(commonprefix(group))
            for name in group:
                shown = _showing(name, start, width)
                if cell_len(shown) <= width:
                    cut[name] = shown
    return cut


def _showing(name: str, start: int, width: int) -> str:
    """``name`` in ``width`` cells showing its characters from ``start`` on (a little before)."""
    begin = max(0, start - 2)
    quarter = max(1, (width - 2) // 4)
    if begin <= quarter:
        return name[:begin] + _middle_cut(name[begin:], width - begin)
    return name[:quarter] + "…" + _middle_cut(name[begin:], width - quarter - 1)


def _depth_at(text: str, position: int) -> int:
    """Brackets open at ``position``: a separator inside a template argument is not a level."""
    depth = 0
    for char in text[:position]:
        if char in OPEN:
            depth += 1
        elif char in CLOSE:
            depth = max(0, depth - 1)
    return depth


def _cut_part(name: str, width: int) -> str:
    """One level of a name (no separator left) in ``width`` cells."""
    if cell_len(name) <= width:
        return name
    if width < 2:
        return "…"[: max(0, width)]
    template = TEMPLATE.fullmatch(name)
    if template and width >= 4:
        base, argument = template.group("base"), template.group("argument")
        base_room = max(min(cell_len(base), BASE_FLOOR), width - 2 - cell_len(argument))
        if width - 2 - base_room >= 3:
            return cut_end(base, base_room) + "<" + _cut_part(argument, width - 2 - base_room) + ">"
        return cut_end(name, width)
    index = MODULE_INDEX.search(name)
    if index and len(index.group()) <= width - 2:
        return set_cell_size(name, width - 1 - len(index.group())) + "…" + index.group()
    if width < 4 or index:
        return cut_end(name, width)
    return _middle_cut(name, width)


def _middle_cut(name: str, width: int) -> str:
    """Head, ``…``, tail: names of one family share their start, and often their end."""
    if cell_len(name) <= width:
        return name
    if width < 4:
        return cut_end(name, width)
    head = width // 2
    return set_cell_size(name, head) + "…" + _tail(name, width - 1 - head)


def cut_end(text: str, width: int) -> str:
    """The first cells of ``text`` and an ellipsis, ``width`` cells in all: for a sentence or
    a header, which reads from its start (a name goes through :func:`fit_name`)."""
    return text if cell_len(text) <= width else set_cell_size(text, max(0, width - 1)) + "…"


def _tail(text: str, width: int) -> str:
    """The last ``width`` cells of ``text``."""
    kept = ""
    for char in reversed(text):
        if cell_len(char + kept) > width:
            break
        kept = char + kept
    return kept


def short_kernel_name(name: str) -> str:
    """The kernel's short name (the name itself when it is not a C++ signature)."""
    return _shorten(name) if ("::" in name or "<" in name or re.match(r"\w+\(", name)) else name


def short_kernel_names(names: Iterable[str]) -> dict[str, str]:
    """Each kernel's short name; where kernels of one table would share one (template instances
    that differ only in numbers or types: ``implicit_convolve_sgemm<float, float, 1024, 6, 7, ...>``
    and ``<float, float, 128, 6, 7, ...>``), each shows the template arguments that differ,
    namespaces dropped: ``implicit_convolve_sgemm<1024, 6, 7, 5>``."""
    short = {name: short_kernel_name(name) for name in set(names)}
    groups: dict[str, list[str]] = {}
    for name, shown in short.items():
        groups.setdefault(shown, []).append(name)
    for shown, group in groups.items():
        if len(group) < 2:
            continue
        arguments = {name: _template_arguments(name) for name in group}
        longest = max(len(a) for a in arguments.values())
        differing = [i for i in range(longest) if len({tuple(a[i : i + 1]) for a in arguments.values()}) > 1]
        if not differing:
            continue
        base = shown.split("<", 1)[0]
        for name, args in arguments.items():
            kept = [NAMESPACE.sub("", args[i]) if i < len(args) else "" for i in differing]
            short[name] = f"{base}<{', '.join(kept)}>"
    return short


NAMESPACE = re.compile(r"\b(?:\w+|anonymous_namespace)::")


def _template_arguments(name: str) -> list[str]:
    """The top-level template arguments of a kernel's signature (none: [])."""
    _, arguments = _split_call(
        name.removeprefix("void ").replace("(anonymous namespace)", "anonymous_namespace").strip()
    )
    return [a.strip() for a in _top_level_split(arguments, ",")] if arguments else []


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
                    return text[: head_end if head_end is not None else index], text[
                        targ_start:targ_end
                    ] if targ_start is not None and targ_end is not None else ""
            depth += 1
        elif char in CLOSE:
            depth -= 1
            if depth == 0 and char == ">" and targ_start is not None and targ_end is None:
                targ_end = index
    return text[: head_end if head_end is not None else len(text)], text[
        targ_start:targ_end
    ] if targ_start is not None and targ_end is not None else ""


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
