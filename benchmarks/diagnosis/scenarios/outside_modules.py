"""Injected: between loss.backward() and optimizer.step(), outside every module and under
no_grad, a loop of small tensor ops (per-parameter gradient statistics, 4 passes): about
two thirds of a ~30 ms step.  Remedy: the loop is gone."""

from __future__ import annotations

import torch
from common import Net, arguments, quiet_torch, train
from torch import nn

PASSES = 4


def gradient_statistics(model: nn.Module) -> torch.Tensor:
    """What a logging hook might compute every step: many tiny ops, no module around them."""
    total = torch.zeros(())
    with torch.no_grad():
        for _ in range(PASSES):
            for parameter in model.parameters():
                total += parameter.grad.abs().mean() * 0.5
    return total


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train(model, optimizer, 16, args.steps, after_backward=None if args.remedy else gradient_statistics)


if __name__ == "__main__":
    main()
