"""Injected: SGD with momentum=0.9 on a weight-heavy model (17 MB of parameters, batch 8):
its momentum buffers, as large as the parameters, are live at the peak.  Remedy: SGD
without momentum (an optimizer without state)."""

from __future__ import annotations

import torch
from common import Net, arguments, batch, quiet_torch, train_step


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=1024, depth=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0 if args.remedy else 0.9)
    inputs, targets = batch(8)
    for _ in range(args.steps):
        train_step(model, optimizer, inputs, targets)


if __name__ == "__main__":
    main()
