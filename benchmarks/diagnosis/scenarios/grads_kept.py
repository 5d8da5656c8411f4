"""Injected: optimizer.zero_grad(set_to_none=False): last step's gradients (4.4 MB, zeroed
but allocated) stay live through the forward and the backward of an activation-heavy step
(batch 512).  Remedy: zero_grad(set_to_none=True), gradients freed before the forward."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    train(model, torch.optim.SGD(model.parameters(), lr=0.01), 512, args.steps, set_to_none=args.remedy)


if __name__ == "__main__":
    main()
