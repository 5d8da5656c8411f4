"""A tiny MLP trained from a DataLoader whose loading stalls from a given step on.

``python tests/helpers/watch_script.py STEPS [--stall-from N] [--stall-ms MS] [--crash-at N]
[--pause-at N --pause-s S] [--marker FILE] [--slow-step N --slow-ms MS]``

The dataset gives whole batches (``batch_size=None``): batch ``i`` is loaded
in optimizer step ``i + 1`` (step 1 loads batch 0), so with ``--stall-from
50`` every step from 50 on sleeps ``MS`` ms inside ``DataLoader.__next__`` --
known by construction, the oracle of the watch tests.  ``--crash-at N``
raises inside step N's forward; ``--pause-at N`` sleeps S s after step N's
optimizer step while touching ``--marker`` (a test can act while the job is
known to be between steps N and N+1); ``--slow-step N`` sleeps MS ms in
step N's forward (one slow step).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from torch import nn

FEATURES, BATCH = 32, 16


class StallingBatches(torch.utils.data.Dataset):
    def __init__(self, count: int, stall_from: int, stall_s: float) -> None:
        self.count, self.stall_from, self.stall_s = count, stall_from, stall_s
        generator = torch.Generator().manual_seed(0)
        self.inputs = torch.randn(BATCH, FEATURES, generator=generator)
        self.targets = torch.randint(0, 4, (BATCH,), generator=generator)

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.stall_from and index + 1 >= self.stall_from:  # batch index is loaded in step index + 1
            time.sleep(self.stall_s)
        return self.inputs, self.targets


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("steps", type=int)
    parser.add_argument("--stall-from", type=int, default=0)
    parser.add_argument("--stall-ms", type=float, default=10.0)
    parser.add_argument("--crash-at", type=int, default=0)
    parser.add_argument("--pause-at", type=int, default=0)
    parser.add_argument("--pause-s", type=float, default=0.0)
    parser.add_argument("--marker")
    parser.add_argument("--slow-step", type=int, default=0)
    parser.add_argument("--slow-ms", type=float, default=50.0)
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(FEATURES, 64), nn.ReLU(), nn.Linear(64, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(
        StallingBatches(args.steps, args.stall_from, args.stall_ms / 1000), batch_size=None
    )
    for step, (inputs, targets) in enumerate(loader, 1):
        if step == args.crash_at:
            raise RuntimeError(f"crashed on purpose at step {step}")
        if step == args.slow_step:
            time.sleep(args.slow_ms / 1000)
        loss = nn.functional.cross_entropy(model(inputs), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step == args.pause_at:
            Path(args.marker).write_text(str(step))
            time.sleep(args.pause_s)


if __name__ == "__main__":
    main()
