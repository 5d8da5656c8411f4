"""A change that helps per sample but not per step: each step pays 15 ms that do not grow
with the batch (the host's bookkeeping: logging, a checkpoint check) besides compute that
does.  Injected: batch 64; --remedy: batch 128, so a step takes longer while a sample takes
less.  The diff of the two captures must say so."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train

BATCH = 64
PER_STEP_S = 0.015


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train(model, optimizer, 2 * BATCH if args.remedy else BATCH, args.steps, fixed_cost_s=PER_STEP_S)


if __name__ == "__main__":
    main()
