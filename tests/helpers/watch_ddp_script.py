"""A tiny DDP MLP (gloo, CPU) whose rank ``--slow-rank`` loads its data ``--stall-ms`` slower from step ``--stall-from`` on.

``python -m torch.distributed.run --nproc-per-node 2 -m tuiprof run --watch DIR tests/helpers/watch_ddp_script.py STEPS``

``--slow-step N --slow-ms MS``: rank ``--slow-rank`` loads batch N (step N's) MS ms slower, once
(pass ``--stall-from 0`` to have that one slow step alone).

Every step sleeps ``--step-ms`` on every rank (steps of tens of ms, so that
rank 0's capture orders reach the other rank within a few steps); the
DataLoader gives whole batches: batch ``i`` is loaded in optimizer step ``i + 1``.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


class Batches(torch.utils.data.Dataset):
    def __init__(self, count: int, stall_from: int, stall_s: float, slow_step: int = 0, slow_s: float = 0.0) -> None:
        self.count, self.stall_from, self.stall_s = count, stall_from, stall_s
        self.slow_step, self.slow_s = slow_step, slow_s
        self.inputs, self.targets = torch.randn(16, 32), torch.randint(0, 4, (16,))

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int):
        if self.stall_from and index + 1 >= self.stall_from:
            time.sleep(self.stall_s)
        if self.slow_step and index + 1 == self.slow_step:
            time.sleep(self.slow_s)
        return self.inputs, self.targets


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int)
    parser.add_argument("--slow-rank", type=int, default=1)
    parser.add_argument("--stall-from", type=int, default=30)
    parser.add_argument("--stall-ms", type=float, default=40.0)
    parser.add_argument("--step-ms", type=float, default=20.0)
    parser.add_argument("--slow-step", type=int, default=0)
    parser.add_argument("--slow-ms", type=float, default=0.0)
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    stall_from = args.stall_from if rank == args.slow_rank else 0
    slow_step = args.slow_step if rank == args.slow_rank else 0
    batches = Batches(args.steps, stall_from, args.stall_ms / 1000, slow_step, args.slow_ms / 1000)
    loader = torch.utils.data.DataLoader(batches, batch_size=None)
    for inputs, targets in loader:
        time.sleep(args.step_ms / 1000)
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
