"""Injected: a Dataset whose __getitem__ waits 0.6 ms a sample (slow storage), loaded in the
main process (num_workers=0): about 40 ms of each ~60 ms step.  Remedy: DataLoader(num_workers=4,
persistent_workers=True), which makes the batches while the step computes (4 workers make a
batch each 40 ms, one every 10 ms together: less than the step's compute)."""

from __future__ import annotations

import time

import torch
from common import CLASSES, FEATURES, Net, arguments, quiet_torch, train_step

SAMPLE_WAIT_S = 0.0006  # reading a sample from slow storage
BATCH = 64


class SlowSamples(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.samples = torch.randn(1024, FEATURES)

    def __len__(self) -> int:
        return 1_000_000

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(SAMPLE_WAIT_S)
        return self.samples[index % len(self.samples)], index % CLASSES


def main() -> None:
    args = arguments(__doc__).parse_args()
    quiet_torch()
    model = Net(width=512, depth=6)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    workers = 4 if args.remedy else 0
    loader = torch.utils.data.DataLoader(
        SlowSamples(), batch_size=BATCH, num_workers=workers, persistent_workers=workers > 0
    )
    for step, (inputs, targets) in enumerate(loader, 1):
        train_step(model, optimizer, inputs, targets)
        if step == args.steps:
            break


if __name__ == "__main__":
    main()
