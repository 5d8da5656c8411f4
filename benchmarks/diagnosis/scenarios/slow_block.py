"""Injected, by ``--cause``: ``sleep``: blocks.2's forward sleeps 20 ms (Python work in a
module: I/O, a lock, a print of a tensor) in a ~30 ms step; ``matmul``: blocks.1 does 12
extra matmuls with its own weight, forward and backward, the same parameters as its
siblings (about two thirds of module time in a ~50 ms step).  Remedy: the block does what
its siblings do."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train

# cause: (width, batch, the block slowed, what it does)
CAUSES = {"sleep": (512, 16, 2, {"sleep_s": 0.020}), "matmul": (512, 128, 1, {"extra_matmuls": 12})}


def main() -> None:
    parser = arguments(__doc__)
    parser.add_argument("--cause", choices=sorted(CAUSES), required=True)
    args = parser.parse_args()
    quiet_torch()
    width, batch_size, slowed, injected = CAUSES[args.cause]
    model = Net(width=width, depth=4)
    if not args.remedy:
        for name, value in injected.items():
            setattr(model.blocks[slowed], name, value)
    train(model, torch.optim.SGD(model.parameters(), lr=0.01), batch_size, args.steps)


if __name__ == "__main__":
    main()
