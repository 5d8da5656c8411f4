"""Injected: SGD with momentum=0.9 on a weight-heavy model (17 MB of parameters, batch 8):
its momentum buffers, as large as the parameters, are live at the peak.  Remedy: SGD
without momentum (an optimizer without state)."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=1024, depth=4)
    train(model, torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.0 if args.remedy else 0.9), 8, args.steps)


if __name__ == "__main__":
    main()
