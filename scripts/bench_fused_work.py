#!/usr/bin/env python3
"""Evidence for the work rule that splits a fused kernel's time (docs/compiled.md).

1. resnet18's channels-last weight copy (``cpp_fused_0``, the one large fused kernel
   split between the model's direct parts), measured in the real compiled forward
   graph: the graph's CPU time with every convolution weight to copy, minus the same
   with one group's weights already channels-last (Inductor then leaves them out of
   the copy), per group, against the group's share of the copy's bytes and of its FX
   nodes.  CPU time of the thread (``time.thread_time``), not wall time: on a shared
   machine a descheduled thread's wall time grows, its CPU time does not.  Beside it,
   the eager forward's CPU time and its layer4's.
2. The machine's balance at one thread: fp32 matmul FLOP/s over copy bytes/s (read
   plus written), the factor that turns FLOPs into bytes in the work of a node.

    python scripts/bench_fused_work.py [--repeats 30] [--batch-size 8]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

LAYERS = {  # group -> the direct parts whose convolution weights it holds
    "layer4": ("layer4",),
    "layer3": ("layer3",),
    "conv1, layer1-2": ("conv1", "layer1", "layer2"),
}


def cpu_ms(function: Callable[[], object]) -> float:
    began = time.thread_time()
    function()
    return (time.thread_time() - began) * 1e3


def resnet18(channels_last: tuple[str, ...] = ()) -> nn.Module:
    from torchvision.models import resnet18 as build

    torch.manual_seed(0)
    model = build(num_classes=10)
    for part in channels_last:
        getattr(model, part).to(memory_format=torch.channels_last)
    return model


def copied(model: nn.Module, parts: tuple[str, ...]) -> tuple[int, int]:
    """Bytes and weights of ``parts`` that the copy holds: the 3x3 and 7x7 convolutions
    (a 1x1 weight is channels-last already)."""
    weights = [p for part in parts for p in getattr(model, part).parameters() if p.dim() == 4 and p.shape[-1] > 1]
    return sum(p.numel() * p.element_size() for p in weights), len(weights)


def weight_copy(batch: int, repeats: int) -> None:
    inputs = torch.randn(batch, 3, 32, 32)
    variants = {"all copied": (), **LAYERS, "none copied": tuple(p for parts in LAYERS.values() for p in parts)}
    compiled = {name: torch.compile(resnet18(parts)) for name, parts in variants.items()}
    for model in compiled.values():
        model(inputs)  # compiles the training forward graph
    eager = resnet18()
    layer4_input: list[torch.Tensor] = []
    eager.layer4.register_forward_pre_hook(lambda _, args: layer4_input.append(args[0].detach()))
    eager(inputs)
    times: dict[str, list[float]] = {name: [] for name in [*compiled, "eager", "eager layer4"]}
    for _ in range(repeats):  # interleaved, so a slow spell of the machine touches every variant
        for name, model in compiled.items():
            times[name].append(cpu_ms(lambda m=model: m(inputs)))
        times["eager"].append(cpu_ms(lambda: eager(inputs)))
        times["eager layer4"].append(cpu_ms(lambda: eager.layer4(layer4_input[0])))
    median = {name: statistics.median(values) for name, values in times.items()}
    whole = median["all copied"] - median["none copied"]
    print(f"  compiled forward {median['all copied']:.2f} ms, the weight copy {whole:.2f} ms of it")
    print(f"  eager forward {median['eager']:.2f} ms, its layer4 {median['eager layer4']:.2f} ms")
    model = resnet18()
    total_bytes, total_nodes = copied(model, tuple(p for parts in LAYERS.values() for p in parts))
    print(f"  {'':16} {'':>8} {'% of the copy':>25}")
    print(f"  {'group':16} {'copy ms':>8} {'measured':>9} {'bytes':>7} {'nodes':>7}")
    for name, parts in LAYERS.items():
        size, nodes = copied(model, parts)
        part_ms = median["all copied"] - median[name]
        print(
            f"  {name:16} {part_ms:8.2f} {100 * part_ms / whole:9.1f}"
            f" {100 * size / total_bytes:7.1f} {100 * nodes / total_nodes:7.1f}"
        )


def balance(repeats: int) -> None:
    a, b = torch.randn(512, 512), torch.randn(512, 512)
    mm_ms = statistics.median(cpu_ms(lambda: torch.mm(a, b)) for _ in range(repeats))
    source, target = torch.randn(16 * 2**20), torch.empty(16 * 2**20)  # 64 MB: past the caches
    copy_ms = statistics.median(cpu_ms(lambda: target.copy_(source)) for _ in range(repeats))
    flop_rate = 2 * 512**3 / mm_ms * 1e3
    byte_rate = 2 * source.numel() * 4 / copy_ms * 1e3
    print(f"  mm 512^3: {flop_rate / 1e9:.1f} GFLOP/s")
    print(f"  copy 64 MB: {byte_rate / 1e9:.1f} GB/s read + written")
    print(f"  balance: {flop_rate / byte_rate:.1f} FLOP per byte")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)  # before compiling: Inductor's C++ kernels take the thread count then
    print(f"resnet18's weight copy, compiled forward (batch {args.batch_size}):")
    print("  1 thread, CPU time, medians")
    weight_copy(args.batch_size, args.repeats)
    print("machine balance (1 thread):")
    balance(args.repeats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
