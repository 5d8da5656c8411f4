"""Injected: Adam on a weight-heavy model (17 MB of parameters, batch 8): its two moment
buffers (twice the parameters) are live at the peak.  Remedy: an optimizer without state
(plain SGD)."""

from __future__ import annotations

import torch
from common import Net, arguments, batch, quiet_torch, train_step


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=1024, depth=4)
    if args.remedy:
        optimizer: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    inputs, targets = batch(8)
    for _ in range(args.steps):
        train_step(model, optimizer, inputs, targets)


if __name__ == "__main__":
    main()
