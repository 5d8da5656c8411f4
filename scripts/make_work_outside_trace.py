#!/usr/bin/env python3
"""Capture tests/data/mlp_work_outside_modules.json.gz: tensor work between backward and step.

Issue 35 item 3: ops run with grad mode on but on tensors that need no grad carry
autograd's next ``Sequence number`` (the next step's first node), so charging backward
time by number put them in the next step's first ``Linear``.  This trace holds that
case, small and real, for tests/unit/test_backward_attribution.py:

- a two-layer MLP (``Sequential_0``: ``Linear_0``, ``ReLU_0``, ``Linear_1``) and a
  ``CrossEntropyLoss_0``, trained with SGD, one thread, on CPU;
- its forward inside a ``record_function`` span (a container around modules, not work
  outside them);
- between ``loss.backward()`` and ``optimizer.step()``: the gradients' norms and a
  matmul of random matrices, five times, with grad mode on;
- the profiler's schedule (one wait, one warmup, three active steps), ``prof.step()``
  after the optimizer step, with_stack and shapes recorded.

    python scripts/make_work_outside_trace.py [--out tests/data/mlp_work_outside_modules.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import shutil
import tempfile
from pathlib import Path

import torch
from torch import nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT / "tests" / "data" / "mlp_work_outside_modules.json.gz"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TRACE)
    out = parser.parse_args().out
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    with profile(
        activities=[ProfilerActivity.CPU],
        schedule=schedule(wait=1, warmup=1, active=3),
        record_shapes=True,
        with_stack=True,
    ) as prof:
        for _ in range(5):
            optimizer.zero_grad()
            with record_function("model_forward"):
                out_ = model(x)
            loss = loss_fn(out_, y)
            loss.backward()
            for _ in range(5):  # grad mode on, no tensor needing grad: the next node's number
                norms = [p.grad.norm() for p in model.parameters()]
                product = torch.randn(128, 128) @ torch.randn(128, 128)
            del norms, product
            optimizer.step()
            prof.step()
    with tempfile.TemporaryDirectory() as folder:
        plain = Path(folder) / "trace.json"
        prof.export_chrome_trace(str(plain))
        out.parent.mkdir(parents=True, exist_ok=True)
        with (
            plain.open("rb") as source,
            out.open("wb") as file,
            gzip.GzipFile(fileobj=file, mode="wb", mtime=0) as target,
        ):
            shutil.copyfileobj(source, target)
    print(f"{out}: {out.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
