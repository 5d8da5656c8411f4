#!/usr/bin/env python3
"""Evidence for the work rule that splits a fused kernel's time (docs/compiled.md).

1. resnet18's channels-last weight copy (``cpp_fused_0``, the one fused kernel that
   is split between many modules): each weight's time inside one Inductor copy kernel,
   taken as (time of a kernel copying K weights of a shape - time of one) / (K - 1),
   per top-level layer against its share of the bytes and of the FX nodes.
2. The machine's balance at one thread: fp32 matmul FLOP/s over copy bytes/s (read
   plus written), the factor that turns FLOPs into bytes in the work of a node.

    python scripts/bench_fused_work.py [--repeats 40]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch

K = 4  # weights of one shape copied by the longer kernel


def median_s(function: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        function()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def per_weight_s(shape: tuple[int, ...], repeats: int) -> float:
    """One weight's part of an Inductor channels-last copy kernel (median of rounds)."""
    tensors = [torch.randn(shape) for _ in range(K)]
    one = torch.compile(lambda w: w.contiguous(memory_format=torch.channels_last))
    many = torch.compile(lambda *ws: [w.contiguous(memory_format=torch.channels_last) for w in ws])
    one(tensors[0]), many(*tensors)  # compile
    rounds = [
        (median_s(lambda: many(*tensors), 3) - median_s(lambda: one(tensors[0]), 3)) / (K - 1)
        for _ in range(repeats // 3)
    ]
    return max(statistics.median(rounds), 0.0)


def copy_times(repeats: int) -> None:
    from torchvision.models import resnet18

    weights = [
        (name.split(".")[0], tuple(p.shape))
        for name, p in resnet18(num_classes=10).named_parameters()
        if p.dim() == 4 and p.shape[-1] > 1  # the 3x3 and 7x7 convolutions: the copy's weights
    ]
    per_weight = {shape: per_weight_s(shape, repeats) for shape in sorted({shape for _, shape in weights})}
    for shape, seconds in per_weight.items():
        size = torch.Size(shape).numel() * 4
        print(f"  {str(shape):18} {size / 1e6:6.2f} MB  {seconds * 1e6:8.1f} us per weight")
    layers: dict[str, list[float]] = {}
    for layer, shape in weights:
        row = layers.setdefault(layer, [0.0, 0.0, 0.0])
        row[0] += per_weight[shape]
        row[1] += torch.Size(shape).numel()
        row[2] += 1
    totals = [sum(row[i] for row in layers.values()) for i in range(3)]
    print(f"  {'layer':8} {'measured':>9} {'bytes':>9} {'nodes':>9}   (% of the copy)")
    for layer, row in layers.items():
        print(f"  {layer:8} " + " ".join(f"{100 * row[i] / totals[i]:9.1f}" for i in range(3)))


def balance(repeats: int) -> None:
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    mm_s = median_s(lambda: torch.mm(a, b), repeats)
    source, target = torch.randn(16 * 2**20), torch.empty(16 * 2**20)  # 64 MB: past the caches
    copy_s = median_s(lambda: target.copy_(source), repeats)
    flop_rate = 2 * 512**3 / mm_s
    byte_rate = 2 * source.numel() * 4 / copy_s
    print(f"  mm 512^3: {flop_rate / 1e9:.1f} GFLOP/s; copy 64 MB: {byte_rate / 1e9:.1f} GB/s read + written")
    print(f"  balance: {flop_rate / byte_rate:.1f} FLOP per byte")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"resnet18's weight copy, one Inductor kernel per shape (1 thread, {K} weights - 1):")
    copy_times(args.repeats)
    print("machine balance (1 thread):")
    balance(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
