#!/usr/bin/env python3
"""Capture tests/data/mlp_memory_categories.pt.trace.json.gz: a small live capture whose
``tuiprofLive`` member holds torch's memory categories (the Memory view's snapshots and
its Pilot test open it without torch).

A three-stage MLP (two Linear + ReLU blocks and a head) trained with tuiprof's own loop
(SGD with momentum), batch 256, one warmup and two active steps, on CPU.

    python scripts/make_memory_category_trace.py
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.models import synthetic_batches  # noqa: E402
from tuiprof.capture.session import native_stderr_to, profile_training  # noqa: E402

TRACE = ROOT / "tests" / "data" / "mlp_memory_categories.pt.trace.json.gz"
CONFIG = CaptureConfig(
    model="mlp",
    device="cpu",
    batch_size=256,
    input_shape="128",
    num_classes=10,
    wait=0,
    warmup=1,
    active=2,
)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(
            nn.Sequential(nn.Linear(128, 512), nn.ReLU()),
            nn.Sequential(nn.Linear(512, 256), nn.ReLU()),
        )
        self.head = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def main() -> int:
    torch.manual_seed(0)
    batches = synthetic_batches(CONFIG.batch_size, (128,), CONFIG.num_classes, torch.device("cpu"))
    with native_stderr_to(Path("/dev/null")):
        result = profile_training(CONFIG, TRACE, model=MLP(), batches=batches)
    print(f"{TRACE.relative_to(ROOT)}: {TRACE.stat().st_size / 1e3:.1f} kB, {result.steps_done} steps")
    return 0


if __name__ == "__main__":
    sys.exit(main())
