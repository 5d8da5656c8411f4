"""Memory categories as a capture saves them, built by hand (tests/unit/test_memory_categories.py,
tests/unit/test_memory_what_ifs.py)."""

from __future__ import annotations

from tuiprof.trace.live import CATEGORY_NAMES, DeviceMemoryCategories

CODE = {name: index for index, name in enumerate(CATEGORY_NAMES)}


def device_categories(
    changes: list[tuple[int, int, str, int]], preexisting: int = 0, first_ns: int = 10_000_000
) -> DeviceMemoryCategories:
    """Changes as (absolute ns, signed bytes, category, tensor row); two tensors' owners named."""
    times = [t for t, *_ in changes]
    deltas = [0] * preexisting
    previous = first_ns
    for t in times[preexisting:]:
        deltas.append(t - previous)
        previous = t
    tensors = max(row for *_, row in changes) + 1
    return DeviceMemoryCategories(
        device="cpu",
        categories=list(CATEGORY_NAMES),
        first_ns=first_ns,
        preexisting=preexisting,
        delta_ns=deltas,
        bytes=[b for _, b, _, _ in changes],
        category=[CODE[c] for _, _, c, _ in changes],
        tensor=[row for *_, row in changes],
        tensor_id=list(range(tensors)),
        tensor_operator=[0] + [-1] * (tensors - 1),
        tensor_module=[0] + [-1] * (tensors - 1),
        operators=["aten::linear"],
        modules=["Linear_0"],
    )
