"""A 2-layer MLP that is interrupted inside a training step, as by Ctrl-C.

``InterruptAt`` sits between the layers: on its ``call``-th forward it raises
KeyboardInterrupt (``signals=0``) or delivers SIGINT to its own process
``signals`` times (the terminal's Ctrl-C, pressed once or twice).  The step it
is in has run one Linear and none of its backward: a cut step.
"""

from __future__ import annotations

import os
import signal

import torch
from torch import nn

FEATURES = 16


class InterruptAt(nn.Module):
    def __init__(self, call: int, signals: int = 0) -> None:
        super().__init__()
        self.call, self.signals, self.calls = call, signals, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.calls == self.call:
            if not self.signals:
                raise KeyboardInterrupt
            for _ in range(self.signals):
                os.kill(os.getpid(), signal.SIGINT)
        return x


def mlp(call: int, signals: int = 0) -> nn.Sequential:
    return nn.Sequential(nn.Linear(FEATURES, 32), InterruptAt(call, signals), nn.ReLU(), nn.Linear(32, 10))


def live_mlp() -> nn.Module:
    """``tuiprof live tests.helpers.interrupting:live_mlp --input-shape 16``: Ctrl-C twice on forward call
    ``$INTERRUPT_AT_CALL`` (the first press asks to stop after the step, the second aborts it)."""
    return mlp(int(os.environ["INTERRUPT_AT_CALL"]), signals=2)
