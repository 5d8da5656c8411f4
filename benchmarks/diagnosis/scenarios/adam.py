"""Injected: Adam on a weight-heavy model (17 MB of parameters, batch 8): its two moment
buffers (twice the parameters) are live at the peak.  Remedy: an optimizer without state
(plain SGD)."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=1024, depth=4)
    if args.remedy:
        optimizer: torch.optim.Optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    else:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, optimizer, 8, args.steps)


if __name__ == "__main__":
    main()
