"""Arguments of ``live`` and ``run`` and the checks made before anything starts.

Importing this costs nothing (argparse only): ``tuiprof --help`` builds the
parser, and a missing torch is reported before any screen appears.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path

from tuiprof.capture.config import CaptureConfig
from tuiprof.errors import TraceError

LIVE_EXTRA = 'pip install "tuiprof[live]"'


# What ``live`` builds (the model, its data, the device): ``run`` runs the user's script,
# which builds its own, so there these are refused (a script's own options go after it).
MODEL_OPTIONS = ("--device", "--batch-size", "--input-shape", "--num-classes", "--mode", "--data", "--data-root")


def add_capture_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """The options of ``live`` or ``run``; ``run`` parses :data:`MODEL_OPTIONS` only to refuse them
    (:func:`refuse_model_options`), and its ``--help`` does not list them."""
    _add_model_arguments(parser, hidden=command == "run")
    parser.add_argument("--wait", type=int, default=1, help="schedule: steps skipped first")
    parser.add_argument("--warmup", type=int, default=1, help="schedule: steps traced but discarded")
    parser.add_argument("--active", type=int, default=3, help="schedule: steps recorded")
    parser.add_argument("--repeat", type=int, default=1, help="schedule: cycles (the last complete one is kept)")
    for flag, what in (
        ("shapes", "input shapes"),
        ("memory", "memory"),
        ("stack", "Python stacks (module tree)"),
        ("flops", "FLOPs"),
    ):
        parser.add_argument(f"--no-{flag}", action="store_true", help=f"do not record {what}")
    parser.add_argument(
        "--save",
        metavar="PATH",
        help="keep the trace here (.json or .json.gz; missing folders are created); without it the trace is not kept"
        + (" (under torchrun: the run is kept in ./tuiprof-runs/)" if command == "run" else ""),
    )
    parser.add_argument("--no-tui", action="store_true", help="print the summary tables instead of the explorer")


def _add_model_arguments(parser: argparse.ArgumentParser, hidden: bool) -> None:
    def described(text: str) -> str:
        return argparse.SUPPRESS if hidden else text

    defaults = CaptureConfig()
    options = (
        ("--device", {"help": described("auto | cpu | cuda | cuda:N (default: auto)")}),
        ("--batch-size", {"type": int, "help": described(f"samples per step (default {defaults.batch_size})")}),
        ("--input-shape", {"help": described(f"CxHxW of one sample (default {defaults.input_shape})")}),
        ("--num-classes", {"type": int, "help": described(f"classifier outputs (default {defaults.num_classes})")}),
        ("--mode", {"choices": ("train", "eval"), "help": described("train (default) or eval")}),
        ("--data", {"choices": ("synthetic", "cifar10"), "help": described("synthetic (default) or cifar10")}),
        ("--data-root", {"metavar": "DIR", "help": described("where a local CIFAR-10 copy lives (never downloaded)")}),
    )
    for flag, settings in options:
        parser.add_argument(flag, default=None, **settings)


def refuse_model_options(args: argparse.Namespace) -> None:
    """``run`` with an option of ``live``: one line, exit 2 (it would be silently ignored)."""
    given = [flag for flag in MODEL_OPTIONS if getattr(args, _dest(flag)) is not None]
    if given:
        flag = given[0]
        raise TraceError(
            f"run {flag}",
            "an option of tuiprof live, not of run (your script builds its own model)",
            f"to pass it to your script, put it after the script: tuiprof run SCRIPT {flag} ...",
        )


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    """``live`` only: ``run`` profiles scripts that call torch.compile themselves."""
    parser.add_argument(
        "--compile",
        action="store_true",
        help="torch.compile the model (compiled before profiling; see docs/compiled.md)",
    )
    parser.add_argument(
        "--compile-mode",
        choices=("default", "reduce-overhead", "max-autotune"),
        default="default",
        help="torch.compile mode (with --compile)",
    )
    parser.add_argument("--dynamic", action="store_true", help="torch.compile(dynamic=True) (with --compile)")


def config_from_args(model: str, args: argparse.Namespace) -> CaptureConfig:
    """The capture's settings; model options not given keep :class:`CaptureConfig`'s defaults."""
    given = {
        _dest(flag): getattr(args, _dest(flag)) for flag in MODEL_OPTIONS if getattr(args, _dest(flag)) is not None
    }
    return CaptureConfig(
        model=model,
        wait=args.wait,
        warmup=args.warmup,
        active=args.active,
        repeat=args.repeat,
        record_shapes=not args.no_shapes,
        profile_memory=not args.no_memory,
        with_stack=not args.no_stack,
        with_flops=not args.no_flops,
        **given,
        compile=getattr(args, "compile", False),
        compile_mode=getattr(args, "compile_mode", "default"),
        dynamic=getattr(args, "dynamic", False),
    )


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def require_packages(command: str, packages: tuple[str, ...]) -> None:
    """Fail with the install command when torch (or torchvision) is missing.

    Only looks the packages up (milliseconds); importing torch takes seconds
    and happens once progress is on screen.
    """
    missing = [name for name in packages if not _installed(name)]
    if missing:
        raise TraceError(
            f"tuiprof {command}",
            f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed",
            f"install the capture extra: {LIVE_EXTRA} (the viewer commands open and summary work without it)",
        )


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def check_save_path(path: str) -> None:
    """A name tuiprof can write: ``.json``/``.json.gz``, in a folder that exists or can be created."""
    if not path.endswith((".json", ".json.gz")):
        raise TraceError(f"--save {path}", "the file name must end in .json or .json.gz", "pick such a name")
    check_folder(Path(path).parent, f"--save {path}", "pick another folder")


def check_folder(folder: Path, source: str, remedy: str) -> None:
    """``folder`` exists or can be created (the trace's writer creates it): its nearest existing
    ancestor is a folder this user may write into."""
    existing = folder.resolve()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise TraceError(source, f"{existing} is not a folder", remedy)
    if not os.access(existing, os.W_OK):
        raise TraceError(source, f"cannot write into {existing}", remedy)
