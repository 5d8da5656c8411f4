"""A tiny DDP training loop on CPU with the gloo backend (world size 2 under torchrun).

    torchrun --nproc-per-node 2 examples/train_ddp_gloo.py            # plain training
    torchrun --nproc-per-node 2 -m tuiprof run examples/train_ddp_gloo.py   # one trace per rank, then the explorer

A two-layer MLP on synthetic data: small enough that a profiled run takes a
few seconds, big enough that DDP's gradient all-reduce shows as a collective.
Rank 1 sleeps a little in its data loading, so the run has a straggler to find.
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--slow-rank", type=int, default=1, help="this rank loads its data 20 ms slower (-1: none)")
    args = parser.parse_args()

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(rank)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10)))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    inputs = torch.randn(args.batch_size, 64)
    targets = torch.randint(0, 10, (args.batch_size,))

    for _ in range(args.steps):
        with torch.profiler.record_function("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"):
            if rank == args.slow_rank:
                time.sleep(0.02)
            batch = inputs.clone()
        optimizer.zero_grad()
        loss = criterion(model(batch), targets)
        loss.backward()  # DDP all-reduces the gradients here
        optimizer.step()
    dist.barrier()
    if rank == 0:
        print(f"trained {args.steps} steps on {dist.get_world_size()} ranks; loss {loss.item():.3f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
