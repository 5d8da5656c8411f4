"""A tiny DDP run on CPU (gloo) with slowed ranks: what scripts/check_stragglers.py profiles.

    torchrun --nproc-per-node 2 -m tuiprof run --no-tui --save runs/x/train.pt.trace.json.gz \
        scripts/straggler_ddp.py --slow 1:sleep:30

``--slow RANK:KIND:MS`` (repeatable) slows one rank by about MS milliseconds a step:

- ``sleep``: ``time.sleep`` in the training loop before the forward, outside any operator (Python
  the rank runs): the rank is late at the step's first collective, the loss's all-reduce;
- ``sleep-backward``: the same after the loss's all-reduce, before the backward: the rank is late
  at the gradients' all-reduce;
- ``matmul``: the model's ``Extra`` module multiplies matrices for MS ms on that rank (on the
  others it does nothing): extra work inside one module, ``aten::mm``;
- ``data``: the rank's Dataset sleeps in ``__getitem__`` (``num_workers=0``): slow data loading.

A two-layer MLP on synthetic data, a DataLoader over it: small enough that each rank's step
is a few ms, so the slowdown is the run's story.  Two collectives a step: the loss averaged over
the ranks (for the log, as training loops do), then DDP's gradient all-reduce.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, Dataset

BATCH, FEATURES = 32, 64


class Samples(Dataset):
    """Synthetic samples; ``delay_s`` a sample on a rank that loads slowly."""

    def __init__(self, count: int, delay_s: float) -> None:
        self.inputs = torch.randn(count, FEATURES)
        self.targets = torch.randint(0, 10, (count,))
        self.delay_s = delay_s

    def __len__(self) -> int:
        return len(self.inputs)

    def __getitem__(self, index: int):
        if self.delay_s:
            time.sleep(self.delay_s)
        return self.inputs[index], self.targets[index]


class Extra(nn.Module):
    """Matrix products for about ``ms`` ms (timed once, before training): the slowed rank's extra work."""

    def __init__(self, ms: float) -> None:
        super().__init__()
        self.weight = torch.randn(256, 256)
        self.repeats = calibrate(self.weight, ms) if ms else 0

    def forward(self, x):
        product = self.weight
        for _ in range(self.repeats):
            product = torch.mm(product, self.weight).clamp_(-1, 1)
        return x + 0 * product[: x.shape[0], : x.shape[1]].sum()


def calibrate(weight: torch.Tensor, ms: float) -> int:
    """How many 256x256 products take ``ms`` ms here (the median of 5 timings of 20)."""
    times = []
    for _ in range(5):
        began = time.perf_counter()
        for _ in range(20):
            torch.mm(weight, weight)
        times.append((time.perf_counter() - began) / 20)
    return max(1, round(ms / 1000 / sorted(times)[2]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--slow", action="append", default=[], metavar="RANK:KIND:MS")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    slow = {"sleep": 0.0, "sleep-backward": 0.0, "matmul": 0.0, "data": 0.0}
    for spec in args.slow:
        which, kind, ms = spec.split(":")
        if int(which) == rank:
            slow[kind] += float(ms)
    torch.manual_seed(rank)
    model = DistributedDataParallel(
        nn.Sequential(nn.Linear(FEATURES, 256), Extra(slow["matmul"]), nn.ReLU(), nn.Linear(256, 10))
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    data = DataLoader(Samples(BATCH * args.steps, slow["data"] / 1000 / BATCH), batch_size=BATCH, num_workers=0)
    for inputs, targets in data:
        if slow["sleep"]:
            time.sleep(slow["sleep"] / 1000)
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        logged = loss.detach().clone()
        dist.all_reduce(logged)  # the mean loss for the log: the step's first collective
        if slow["sleep-backward"]:
            time.sleep(slow["sleep-backward"] / 1000)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
