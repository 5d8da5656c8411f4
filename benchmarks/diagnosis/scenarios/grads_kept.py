"""Injected: optimizer.zero_grad(set_to_none=False): last step's gradients (4.4 MB, zeroed
but allocated) stay live through the forward and the backward of an activation-heavy step
(batch 512).  Remedy: zero_grad(set_to_none=True), gradients freed before the forward."""

from __future__ import annotations

import torch
from common import Net, arguments, batch, quiet_torch
from torch import nn


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    inputs, targets = batch(512)
    for _ in range(args.steps):
        optimizer.zero_grad(set_to_none=args.remedy)
        loss = nn.functional.cross_entropy(model(inputs), targets)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
