"""Injected: blocks.1 does 12 extra matmuls with its own weight (forward and backward),
the same parameters as its siblings: about two thirds of module time in a ~50 ms step.
Remedy: it does what its siblings do."""

from __future__ import annotations

import torch
from common import Net, arguments, batch, quiet_torch, train_step

EXTRA_MATMULS = 12


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    if not args.remedy:
        model.blocks[1].extra_matmuls = EXTRA_MATMULS
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = batch(128)
    for _ in range(args.steps):
        train_step(model, optimizer, inputs, targets)


if __name__ == "__main__":
    main()
