"""Injected: blocks.2's forward sleeps 20 ms (Python work in a module: I/O, a lock, a
print of a tensor) in a ~35 ms step.  Remedy: it no longer sleeps."""

from __future__ import annotations

import torch
from common import Net, arguments, batch, quiet_torch, train_step

SLEEP_S = 0.020


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=1024, depth=4)
    if not args.remedy:
        model.blocks[2].sleep_s = SLEEP_S
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = batch(16)
    for _ in range(args.steps):
        train_step(model, optimizer, inputs, targets)


if __name__ == "__main__":
    main()
