#!/usr/bin/env python3
"""Step-time overhead of ``--watch`` (the profiler off: recording only) against no watch.

The seed's loop (SGD momentum 0.9, CrossEntropyLoss) over a ``DataLoader``,
in this process, in alternating blocks (watched, unwatched; which goes
first alternates), the same model and batches.  Each watched block has its
own Watcher (hook on the optimizer step, DataLoader timing, history written
every step) with no capture: the healthy window off and a slow rule that
cannot fire -- what a job pays between captures.  Printed: the median step
of each side, their ratio (target <= 1.01), and the watcher's own cost per
step measured directly (``Watcher.step`` timed alone), over the median step.

    python scripts/bench_watch_overhead.py [--model mlp|resnet18] [--blocks 6] [--steps 50]

``mlp`` (default) has steps of a few hundred microseconds: the worst case for
a fixed per-step cost.  ``resnet18`` is the seed's CIFAR-10 setting (batch
128, 3x32x32, synthetic data of that shape).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tuiprof.analysis.watch import SlowRule  # noqa: E402
from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.models import build_model  # noqa: E402
from tuiprof.capture.watch import Watcher, WatchSettings  # noqa: E402

NEVER_SLOW = WatchSettings(rule=SlowRule(ratio=1e9, window=50, held=3, warmup=0), healthy=False)
CATCH = WatchSettings(rule=SlowRule(ratio=1e9, window=50, held=3, warmup=0), healthy=False, catch=True)


class Batches(torch.utils.data.Dataset):
    def __init__(self, shape: tuple[int, ...], classes: int, count: int) -> None:
        self.inputs, self.targets, self.count = torch.randn(*shape), torch.randint(0, classes, (shape[0],)), count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int):
        return self.inputs, self.targets


def build(name: str, batch: int) -> tuple[nn.Module, tuple[int, ...], int]:
    if name == "mlp":
        return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)), (16, 32), 4
    return build_model("resnet18", 10), (batch, 3, 32, 32), 10


def block(model: nn.Module, loader, watched_into: Path | None, settings: WatchSettings = NEVER_SLOW) -> list[float]:
    """One block of steps; their wall times (measured around the whole step, the hook included)."""
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    watcher = Watcher(watched_into, settings, CaptureConfig(), "bench").start() if watched_into else None
    times = []
    try:
        last = time.perf_counter()
        for inputs, targets in loader:
            loss = criterion(model(inputs), targets)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            now = time.perf_counter()
            times.append(now - last)
            last = now
    finally:
        if watcher:
            watcher.close()
    return times[1:]  # the first holds the loader's start


def watcher_cost_us(scratch: Path, calls: int = 20000) -> float:
    """``Watcher.step`` alone: the history line, the slow rule, the request check."""
    watcher = Watcher(scratch / "alone", NEVER_SLOW, CaptureConfig(), "bench", on="manual").start()
    started = time.perf_counter()
    for _ in range(calls):
        watcher.step()
    cost = (time.perf_counter() - started) / calls
    watcher.close()
    return cost * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=("mlp", "resnet18"), default="mlp")
    parser.add_argument("--blocks", type=int, default=6, help="blocks per side")
    parser.add_argument("--steps", type=int, default=50, help="steps per block")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--catch", action="store_true", help="watch with --catch (every step profiled, none kept)")
    args = parser.parse_args()
    torch.manual_seed(0)
    model, shape, classes = build(args.model, args.batch_size)
    loader = torch.utils.data.DataLoader(Batches(shape, classes, args.steps + 1), batch_size=None)
    side = {"watched": [], "unwatched": []}
    with tempfile.TemporaryDirectory() as scratch:
        block(model, loader, None)  # warm-up
        for index in range(args.blocks):
            order = ("watched", "unwatched") if index % 2 else ("unwatched", "watched")
            for name in order:
                into = Path(scratch) / f"w{index}" if name == "watched" else None
                side[name].append(statistics.median(block(model, loader, into, CATCH if args.catch else NEVER_SLOW)))
        alone = watcher_cost_us(Path(scratch))
    watched, unwatched = statistics.median(side["watched"]), statistics.median(side["unwatched"])
    print(
        f"model {args.model}{', --catch' if args.catch else ''}, {args.blocks} blocks x {args.steps} steps per side, torch {torch.__version__}, "
        f"{torch.get_num_threads()} threads"
    )
    print(
        f"median step: unwatched {unwatched * 1e3:.3f} ms, watched {watched * 1e3:.3f} ms, "
        f"ratio {watched / unwatched:.4f}" + ("" if args.catch else " (target <= 1.01)")
    )
    print(f"block medians, unwatched: {' '.join(f'{t * 1e3:.3f}' for t in side['unwatched'])} ms")
    print(f"block medians, watched:   {' '.join(f'{t * 1e3:.3f}' for t in side['watched'])} ms")
    print(
        f"Watcher.step alone: {alone:.2f} us per step = {alone / (unwatched * 1e6) * 100:.3g} % of the unwatched median step"
    )


if __name__ == "__main__":
    main()
