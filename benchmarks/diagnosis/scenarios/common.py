"""What every scenario script shares: its flags, a quiet torch, the model and the step.

A scenario script is a plain training loop (``tuiprof run`` ends a step at each
``optimizer.step()``) with one injected cause; ``--remedy`` removes it or applies its
fix, the script otherwise the same.  Torch runs on one thread so that a scenario's
time does not depend on how many of the machine's cores are free.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch import nn

FEATURES, CLASSES = 128, 10


def arguments(description: str | None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--remedy", action="store_true", help="remove the injected cause (or apply its fix)")
    parser.add_argument(
        "--steps", type=int, default=1000, help="optimizer steps at most (tuiprof run stops after its capture)"
    )
    return parser


def quiet_torch() -> None:
    torch.manual_seed(0)
    torch.set_num_threads(1)


class Block(nn.Module):
    """A residual Linear block; ``sleep_s`` and ``extra_matmuls`` are the injected causes
    a scenario may give one block (host time in its forward, extra work with the same
    parameters as its siblings)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.linear = nn.Linear(width, width)
        self.sleep_s = 0.0
        self.extra_matmuls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        h = self.linear(x)
        for _ in range(self.extra_matmuls):
            h = torch.tanh(h @ self.linear.weight)
        return x + torch.relu(h)


class Net(nn.Module):
    """stem -> blocks.0 .. blocks.N-1 -> head: the qualified names a finding must name."""

    def __init__(self, width: int = 256, depth: int = 4) -> None:
        super().__init__()
        self.stem = nn.Linear(FEATURES, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, CLASSES)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def batch(size: int) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(size, FEATURES), torch.randint(0, CLASSES, (size,))


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    inputs: torch.Tensor,
    targets: torch.Tensor,
    *,
    set_to_none: bool = True,
    after_backward: Callable[[nn.Module], object] | None = None,
) -> None:
    """zero_grad, forward, backward, (``after_backward``), step: the loop every scenario starts from."""
    optimizer.zero_grad(set_to_none=set_to_none)
    loss = nn.functional.cross_entropy(model(inputs), targets)
    loss.backward()
    if after_backward is not None:
        after_backward(model)
    optimizer.step()


def train(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    batch_size: int,
    steps: int,
    *,
    fixed_cost_s: float = 0.0,
    set_to_none: bool = True,
    after_backward: Callable[[nn.Module], object] | None = None,
) -> None:
    """``steps`` steps on one batch of ``batch_size``; ``fixed_cost_s``: host time each step
    spends before it that does not grow with the batch (logging, a checkpoint check)."""
    inputs, targets = batch(batch_size)
    for _ in range(steps):
        if fixed_cost_s:
            time.sleep(fixed_cost_s)
        train_step(model, optimizer, inputs, targets, set_to_none=set_to_none, after_backward=after_backward)
