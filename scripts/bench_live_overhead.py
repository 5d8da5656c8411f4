#!/usr/bin/env python3
"""Step-time overhead of tuiprof's capture over bare torch.profiler, same flags.

Both run in this process, alternating rounds (and which goes first), on the same model and batch;
the median time of the profiled (active) steps is compared.  Target: ratio
<= 1.05.

    python scripts/bench_live_overhead.py [--rounds 3] [--batch-size 32] [--device cpu]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.profiler import ProfilerActivity, profile, record_function, schedule  # noqa: E402

from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.models import build_model, synthetic_batches  # noqa: E402
from tuiprof.capture.session import native_stderr_to, profile_training  # noqa: E402


def bare_profiler(model: nn.Module, batches, config: CaptureConfig, device: torch.device) -> list[float]:
    """The seed's loop under torch.profiler by hand: active-step times."""
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    times = []
    with tempfile.TemporaryDirectory() as scratch:
        with profile(
            activities=activities,
            schedule=schedule(wait=config.wait, warmup=config.warmup, active=config.active),
            on_trace_ready=lambda p: p.export_chrome_trace(f"{scratch}/bare.json"),
            record_shapes=True,
            profile_memory=True,
            with_stack=True,
            with_flops=True,
        ) as prof:
            for step in range(config.total_steps):
                inputs, targets = next(batches)
                started = time.perf_counter()
                with record_function("model_train"):
                    outputs = model(inputs)
                loss = criterion(outputs, targets)
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                float(loss.detach())
                if device.type == "cuda":
                    torch.cuda.synchronize(device)
                prof.step()
                if config.phase_of(step) == "active":
                    times.append(time.perf_counter() - started)
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--active", type=int, default=5)
    args = parser.parse_args()
    device = torch.device(args.device)
    config = CaptureConfig(
        model="resnet18", device=args.device, batch_size=args.batch_size, wait=1, warmup=1, active=args.active
    )
    torch.manual_seed(0)
    model = build_model("resnet18", 10).to(device)
    batches = synthetic_batches(args.batch_size, (3, 32, 32), 10, device)
    bare: list[float] = []
    ours: list[float] = []
    with tempfile.TemporaryDirectory() as scratch, native_stderr_to(Path(scratch) / "profiler.log"):
        for round_index in range(args.rounds):
            # Alternate which goes first, so warm-up and allocator state favour neither.
            for which in ("bare", "ours") if round_index % 2 == 0 else ("ours", "bare"):
                if which == "bare":
                    bare += bare_profiler(model, batches, config, device)
                else:
                    result = profile_training(config, Path(scratch) / "ours.json", model=model, batches=batches)
                    ours += [t for i, t in enumerate(result.step_times_s) if config.phase_of(i) == "active"]
    bare_median, ours_median = statistics.median(bare), statistics.median(ours)
    print(
        f"resnet18 batch {args.batch_size} on {device}, {len(bare)} active steps each, {args.rounds} alternating rounds"
    )
    print(f"bare torch.profiler: median step {bare_median * 1000:.1f} ms")
    print(f"tuiprof capture:     median step {ours_median * 1000:.1f} ms")
    print(f"ratio tuiprof / bare: {ours_median / bare_median:.3f} (target <= 1.05)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
