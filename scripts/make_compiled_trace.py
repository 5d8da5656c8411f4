#!/usr/bin/env python3
"""Capture tests/data/compiled_mlp_cpu.json.gz: a torch.compile'd MLP trained on CPU.

A small, real trace of a compiled model for the tests of analysis/compiled.py
(compiled regions in the module tree, Inductor's fused kernel names), shipped
so that CI never compiles:

- ``Net`` runs eagerly (an input ``Linear``, the compiled ``body``, an output ``Linear``),
  so the region must land under the eager module that called it;
- ``body = torch.compile(Body())`` has a graph break inside its second block, so the
  trace holds two compiled frames (``Torch-Compiled Region: 0/0`` and ``1/0``) and an
  eager module frame inside the first region;
- Inductor's C++ kernels are timed by the profiler only with
  ``torch._inductor.config.cpp.enable_kernel_profile`` (``TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE=1``),
  set here so that ``cpp_fused_*`` names are in the trace.

Compilation (two warm-up steps, ~20 s on 2 cores) happens before the profiled step.

    python scripts/make_compiled_trace.py [--out tests/data/compiled_mlp_cpu.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import tempfile
from pathlib import Path

os.environ.setdefault("TORCHINDUCTOR_CPP_ENABLE_KERNEL_PROFILE", "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


class Block(nn.Module):
    def __init__(self, width: int, graph_break: bool = False) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)
        self.graph_break = graph_break

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(self.norm(x))
        if self.graph_break:
            torch._dynamo.graph_break()
        return x + nn.functional.silu(y)


class Body(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.a = Block(width)
        self.b = Block(width, graph_break=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(self.a(x))


class Net(nn.Module):
    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Linear(16, width)
        self.body = torch.compile(Body(width))
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.embed(x)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "compiled_mlp_cpu.json.gz")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = Net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))

    def step() -> None:
        optimizer.zero_grad()
        nn.functional.cross_entropy(net(x), y).backward()
        optimizer.step()

    step()  # compiles forward and backward
    step()
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True) as prof:
        step()
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        trace = json.loads(raw.read_text())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(args.out, "wt", compresslevel=9) as out:
        json.dump(trace, out, separators=(",", ":"))
    print(f"{args.out}: {args.out.stat().st_size / 1e3:.1f} kB, {len(trace['traceEvents'])} events")


if __name__ == "__main__":
    main()
