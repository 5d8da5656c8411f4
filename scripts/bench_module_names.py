#!/usr/bin/env python3
"""Step-time cost of the module-name hooks of ``tuiprof run`` / ``tuiprof.profile()``
(tuiprof/capture/module_names.py): the same loop with and without them, in one process.

For each model, rounds alternate hooks off and on (which goes first alternates too); each round
times (thread CPU time, torch on one thread) unprofiled steps (the hooks are in place from the script's start, so its wait steps pay
them too) and steps profiled with tuiprof run's switches (shapes, memory, stacks, FLOPs).
Printed: the median step of each, the ratio on/off, and what naming the window cost after it
(the event-tree walk of ``ModuleNames.facts``) beside torch's export of the same window.

    python scripts/bench_module_names.py [--rounds 5] [--steps 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, schedule  # noqa: E402

from tuiprof.capture.module_names import ModuleNames  # noqa: E402

Step = Callable[[], None]


class Round(NamedTuple):
    unprofiled: list[float]  # step times, s
    profiled: list[float]
    naming_s: float  # ModuleNames.facts on the window
    export_s: float  # torch's export_chrome_trace of it


def diagnosis_net() -> tuple[nn.Module, torch.Tensor]:
    """The diagnosis benchmark's model (stem -> 4 blocks -> head, width 256, batch 16): 10 module calls."""
    sys.path.insert(0, str(ROOT / "benchmarks" / "diagnosis" / "scenarios"))
    from common import Net  # type: ignore[import-not-found]

    return Net(width=256, depth=4), torch.randn(16, 128)


def many_small_modules() -> tuple[nn.Module, torch.Tensor]:
    """The worst case: 64 blocks of Sequential(Linear 32, ReLU), batch 4: 193 module calls, tiny work each."""
    blocks = [nn.Sequential(nn.Linear(32, 32), nn.ReLU()) for _ in range(64)]
    return nn.Sequential(*blocks), torch.randn(4, 32)


def resnet18() -> tuple[nn.Module, torch.Tensor]:
    """torchvision's resnet18 on 8 CIFAR-sized images: 60 module calls, real work."""
    import torchvision

    return torchvision.models.resnet18(num_classes=10), torch.randn(8, 3, 32, 32)


def train_step(model: nn.Module, inputs: torch.Tensor) -> Step:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step() -> None:
        optimizer.zero_grad()
        model(inputs).sum().backward()
        optimizer.step()

    return step


def timed(step: Step, steps: int, after: Callable[[], None] = lambda: None) -> list[float]:
    """Each step's CPU time on this thread (torch runs on one): what the hooks add is work, and
    a shared machine's other processes take wall time, not this thread's CPU time."""
    times = []
    for _ in range(steps):
        started = time.thread_time()
        step()
        times.append(time.thread_time() - started)
        after()
    return times


def one_round(step: Step, steps: int, hooks: bool, scratch: str) -> Round:
    names = ModuleNames()
    costs = {"names": 0.0, "export": 0.0}

    def ready(prof: profile) -> None:
        started = time.thread_time()
        if hooks:
            names.facts(prof)
        costs["names"] = time.thread_time() - started
        started = time.thread_time()
        prof.export_chrome_trace(os.path.join(scratch, "trace.json"))
        costs["export"] = time.thread_time() - started

    with names.hooked(hooks):
        eager = timed(step, steps)
        prof = profile(
            activities=[ProfilerActivity.CPU],
            schedule=schedule(wait=1, warmup=1, active=steps),
            on_trace_ready=ready,
            record_shapes=True,
            profile_memory=True,
            with_stack=True,
            with_flops=True,
        )
        with prof:
            times = timed(step, steps + 2, prof.step)[2:]
    return Round(eager, times, costs["names"], costs["export"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start; torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as scratch:
        for build in (diagnosis_net, many_small_modules, resnet18):
            model, inputs = build()
            step = train_step(model, inputs)
            timed(step, 3)  # warm caches
            runs: dict[bool, list[Round]] = {False: [], True: []}
            for index in range(args.rounds):
                for hooks in (False, True) if index % 2 == 0 else (True, False):
                    runs[hooks].append(one_round(step, args.steps, hooks, scratch))

            naming = statistics.median(run.naming_s for run in runs[True])
            export = statistics.median(run.export_s for run in runs[True])
            print(f"{build.__name__}:")
            for what in ("unprofiled", "profiled"):
                off, on = (
                    statistics.median(t for run in runs[hooks] for t in getattr(run, what)) for hooks in (False, True)
                )
                print(f"  {what:10} step {off * 1e3:8.3f} ms without hooks, {on * 1e3:8.3f} ms with: x{on / off:.3f}")
            print(f"  naming the window {naming * 1e3:.1f} ms; torch's export of it {export * 1e3:.1f} ms")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
