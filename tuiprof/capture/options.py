"""Arguments of ``live`` and ``run`` (argparse only: importing this costs nothing)."""

from __future__ import annotations

import argparse


def add_capture_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (default: auto)")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--input-shape", default="3x32x32", help="CxHxW of one sample (default 3x32x32)")
    parser.add_argument("--num-classes", type=int, default=10)
    parser.add_argument("--mode", choices=("train", "eval"), default="train")
    parser.add_argument("--wait", type=int, default=1, help="schedule: steps skipped first")
    parser.add_argument("--warmup", type=int, default=1, help="schedule: steps traced but discarded")
    parser.add_argument("--active", type=int, default=3, help="schedule: steps recorded")
    parser.add_argument("--repeat", type=int, default=1, help="schedule: cycles")
    for flag, what in (("shapes", "input shapes"), ("memory", "memory"), ("stack", "Python stacks (module tree)"), ("flops", "FLOPs")):
        parser.add_argument(f"--no-{flag}", action="store_true", help=f"do not record {what}")
    parser.add_argument("--save", metavar="PATH", help="also write the trace (.json or .json.gz)")
    parser.add_argument("--no-tui", action="store_true", help="print the summary tables instead of the explorer")
    parser.add_argument("--data", choices=("synthetic", "cifar10"), default="synthetic")
    parser.add_argument("--data-root", metavar="DIR", help="where a local CIFAR-10 copy lives (never downloaded)")
