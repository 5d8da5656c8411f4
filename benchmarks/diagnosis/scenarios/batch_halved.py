"""Injected: batch 1024 on an activation-heavy model (4.4 MB of parameters, about 24 MB of
activations).  Remedy: half the batch (512)."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train

BATCH = 1024


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    train(model, torch.optim.SGD(model.parameters(), lr=0.01), BATCH // 2 if args.remedy else BATCH, args.steps)


if __name__ == "__main__":
    main()
