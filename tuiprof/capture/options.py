"""Arguments of ``live`` and ``run`` and the checks made before anything starts.

Importing this costs nothing (argparse only): ``tuiprof --help`` builds the
parser, and a missing torch is reported before any screen appears.
"""

from __future__ import annotations

import argparse
import importlib.util
from pathlib import Path

from tuiprof.capture.config import CaptureConfig
from tuiprof.errors import TraceError

LIVE_EXTRA = 'pip install "tuiprof[live]"'


def add_capture_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--input-shape", default="3x32x32", help="CxHxW of one sample (default 3x32x32)")
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--mode", choices=("train", "eval"), default="train")
    parser.add_argument("--wait", type=int, default=1, help="schedule: steps skipped first")
    parser.add_argument("--warmup", type=int, default=1, help="schedule: steps traced but discarded")
    parser.add_argument("--active", type=int, default=3, help="schedule: steps recorded")
    parser.add_argument("--repeat", type=int, default=1, help="schedule: cycles (the last complete one is kept)")
    for flag, what in (("shapes", "input shapes"), ("memory", "memory"), ("stack", "Python stacks (module tree)"), ("flops", "FLOPs")):
        parser.add_argument(f"--no-{flag}", action="store_true", help=f"do not record {what}")
    parser.add_argument("--save", metavar="PATH", help="keep the trace here (.json or .json.gz); without it the trace is not kept")
    parser.add_argument("--no-tui", action="store_true", help="print the summary tables instead of the explorer")
    parser.add_argument("--data", choices=("synthetic", "cifar10"), default="synthetic")
    parser.add_argument("--data-root", metavar="DIR", help="where a local CIFAR-10 copy lives (never downloaded)")


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """``live`` only: ``run`` profiles scripts that call torch.compile themselves."""
    parser.add_argument("--compile", action="store_true", help="torch.compile the model (compiled before profiling; see docs/compiled.md)")
    parser.add_argument("--compile-mode", choices=("default", "reduce-overhead", "max-autotune"), default="default", help="torch.compile mode (with --compile)")
    parser.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True) (with --compile)")


def config_from_args(model: str, args: argparse.Namespace) -> CaptureConfig:
    return CaptureConfig(
        model=model,
        device=args.device,
        batch_size=args.batch_size,
        input_shape=args.input_shape,
        num_classes=args.num_classes,
        mode=args.mode,
        wait=args.wait,
        warmup=args.warmup,
        active=args.active,
        repeat=args.repeat,
        record_shapes=not args.no_shapes,
        profile_memory=not args.no_memory,
        with_stack=not args.no_stack,
        with_flops=not args.no_flops,
        data=args.data,
        data_root=args.data_root,
        compile=getattr(args, "compile", False),
        compile_mode=getattr(args, "compile_mode", "default"),
        dynamic=getattr(args, "dynamic", False),
    )


def require_packages(command: str, packages: tuple[str, ...]) -> None:
    """Fail with the install command when torch (or torchvision) is missing.

    Only looks the packages up (milliseconds); importing torch takes seconds
    and happens once progress is on screen.
    """
    missing = [name for name in packages if not _installed(name)]
    if missing:
        raise TraceError(
            f"tuiprof {command}", f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed",
            f"install the capture extra: {LIVE_EXTRA} (the viewer commands open and summary work without it)",
        )


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_save_path(path: str) -> None:
    if not path.endswith((".json", ".json.gz")):
        raise TraceError(f"--save {path}", "the file name must end in .json or .json.gz", "pick such a name")
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise TraceError(f"--save {path}", "its folder does not exist", "create it first")
