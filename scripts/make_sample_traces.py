#!/usr/bin/env python3
"""Capture the project's sample traces with torch.profiler, plus torch's own numbers.

Each trace in ``sample_traces/`` gets a sidecar ``<stem>.key_averages.json``
with ``key_averages()`` (by name and by name + input shapes) from the same
profiling window; the fidelity tests compare tuiprof's tables with it.

    python scripts/make_sample_traces.py            # CPU samples (and CUDA ones when a GPU is present)
    python scripts/make_sample_traces.py --only resnet18_cpu
    python scripts/make_sample_traces.py --only ddp_gloo_2ranks   # torchrun, 2 ranks, gloo: sample_traces/ddp_gloo_2ranks/
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
import torch  # noqa: E402

from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.session import native_stderr_to, profile_training  # noqa: E402

# The seed's setting: CIFAR-10 shapes, 10 classes, SGD(0.01, 0.9), CrossEntropyLoss.
SAMPLES = {
    # What `tuiprof open` shows with no argument: a capture with every view filled (qualified
    # module names, torch's memory categories, FLOPs), small enough to ship.
    "resnet18_train_cpu": CaptureConfig(model="resnet18", device="cpu", batch_size=32, wait=1, warmup=1, active=3),
    "resnet18_cpu": CaptureConfig(model="resnet18", device="cpu", batch_size=128, wait=1, warmup=1, active=2),
    # The diff pair's second half: resnet18_cpu at half the batch (tests/cli/test_diff_samples.py).
    "resnet18_b64_cpu": CaptureConfig(model="resnet18", device="cpu", batch_size=64, wait=1, warmup=1, active=2),
    "tiny_transformer_cpu": CaptureConfig(
        model="tuiprof.capture.models:tiny_transformer",
        device="cpu",
        batch_size=32,
        input_shape="32x64",
        wait=1,
        warmup=1,
        active=2,
    ),
    "resnet18_cuda": CaptureConfig(model="resnet18", device="cuda", batch_size=128, wait=1, warmup=2, active=2),
    "tiny_transformer_cuda": CaptureConfig(
        model="tuiprof.capture.models:tiny_transformer",
        device="cuda",
        batch_size=64,
        input_shape="32x64",
        wait=1,
        warmup=2,
        active=2,
    ),
}


DDP_SAMPLE = "ddp_gloo_2ranks"


def capture_ddp_sample(directory: Path) -> None:
    """A real 2-rank run: ``torchrun -m tuiprof run`` on examples/train_ddp_gloo.py (CPU, gloo)."""
    import shutil
    import subprocess

    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir(parents=True)
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent)) or "torchrun"
    subprocess.run(
        [
            torchrun,
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "tuiprof",
            "run",
            "--no-tui",
            "--save",
            str(directory / "train_ddp_gloo.pt.trace.json.gz"),
            "examples/train_ddp_gloo.py",
        ],
        cwd=ROOT,
        check=True,
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1"),
    )
    for trace in sorted(directory.iterdir()):
        print(f"{trace.relative_to(ROOT)}: {trace.stat().st_size / 1e6:.2f} MB")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "sample_traces")
    parser.add_argument("--only", action="append", choices=sorted([*SAMPLES, DDP_SAMPLE]), help="capture only these")
    args = parser.parse_args()
    wanted = args.only or [n for n in SAMPLES if not n.endswith("_cuda") or torch.cuda.is_available()] + [DDP_SAMPLE]
    args.out.mkdir(parents=True, exist_ok=True)
    if DDP_SAMPLE in wanted:
        wanted.remove(DDP_SAMPLE)
        capture_ddp_sample(args.out / DDP_SAMPLE)
    for name in wanted:
        config = SAMPLES[name]
        trace = args.out / f"{name}.pt.trace.json.gz"
        torch.manual_seed(0)
        with native_stderr_to(args.out / ".profiler.log"):
            result = profile_training(config, trace, want_key_averages=True)
        sidecar = {
            "trace": trace.name,
            "torch": torch.__version__,
            "config": vars(config),
            "device": torch.cuda.get_device_name() if config.device == "cuda" else "cpu",
            "live_flops_by_external_id": result.facts.flops_by_external_id,
            "modules": {k: msgspec.to_builtins(v) for k, v in result.facts.modules.items()},
            "key_averages": result.key_averages,
        }
        (args.out / f"{name}.key_averages.json").write_text(json.dumps(sidecar, indent=1, default=str) + "\n")
        print(
            f"{trace.relative_to(ROOT) if trace.is_relative_to(ROOT) else trace}: {trace.stat().st_size / 1e6:.2f} MB, "
            f"{len(result.key_averages)} key_averages rows"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
