"""DDP (gloo, CPU) with slowed ranks: ``--slow RANK:CAUSE[:AMOUNT]``, repeated for two.

Causes, each slowing that rank's steps (AMOUNT after the cause):
``sleep[:MS]``: blocks.1's forward sleeps MS ms (default 40); ``matmul[:N]``: blocks.1
does N extra matmuls with its own weight, forward and backward (default 64); ``data[:MS]``:
its Dataset waits MS ms (default 40) in __getitem__, loaded in the main process
(num_workers=0).  The others wait for it in the gradient all-reduce.  --remedy removes
the first --slow given (list the worst first): the rank a finding must name first.

    torchrun --nproc-per-node 4 -m tuiprof run ranks.py --slow 3:sleep:40 --slow 1:sleep:20
"""

from __future__ import annotations

import time

import torch
import torch.distributed as dist
from common import Net, arguments, batch, quiet_torch
from torch import nn
from torch.nn.parallel import DistributedDataParallel

BATCH = 32
DEFAULTS = {"sleep": 40.0, "matmul": 64, "data": 40.0}  # about 30-50 ms a step each, profiled


class Batches(torch.utils.data.Dataset):
    """The same batch again, after ``wait_s`` (slow storage on this rank)."""

    def __init__(self, wait_s: float) -> None:
        self.wait_s = wait_s
        self.inputs, self.targets = batch(BATCH)

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.wait_s:
            time.sleep(self.wait_s)
        return self.inputs, self.targets


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--slow", action="append", default=[], metavar="RANK:CAUSE[:AMOUNT]")
    args = parser.parse_args()
    slowed = [spec.split(":") for spec in args.slow]
    if args.remedy:
        slowed = slowed[1:]
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    quiet_torch()
    net = Net(width=256, depth=4)
    wait_s = 0.0
    for spec in slowed:
        if int(spec[0]) != rank:
            continue
        cause, amount = spec[1], float(spec[2]) if len(spec) > 2 else DEFAULTS.get(spec[1], 0.0)
        if cause == "sleep":
            net.blocks[1].sleep_s = amount / 1000
        elif cause == "matmul":
            net.blocks[1].extra_matmuls = int(amount)
        elif cause == "data":
            wait_s = amount / 1000
        else:
            raise SystemExit(f"unknown cause {cause!r}: sleep, matmul or data")
    model = DistributedDataParallel(net)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(Batches(wait_s), batch_size=None)
    for step, (inputs, targets) in enumerate(loader, 1):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()  # DDP all-reduces the gradients here: the others wait for the slowed rank
        optimizer.step()
        if step == args.steps:
            break
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
