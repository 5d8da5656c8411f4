"""Injected: batch 1024 on an activation-heavy model (4.4 MB of parameters, about 24 MB of
activations).  Remedy: half the batch (512)."""

from __future__ import annotations

import torch
from common import Net, arguments, batch, quiet_torch, train_step

BATCH = 1024


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = batch(BATCH // 2 if args.remedy else BATCH)
    for _ in range(args.steps):
        train_step(model, optimizer, inputs, targets)


if __name__ == "__main__":
    main()
