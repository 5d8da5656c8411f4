#!/usr/bin/env python3
"""The memory what-ifs checked by making each change and measuring again (issue 35).

For each case the injected run is captured (``tuiprof.profile()``), its predicted peak
after the remedy read from ``tuiprof summary TRACE --view memory-what-ifs --format json``;
then the remedied run is captured and its peak read as tuiprof measures one (the sum of
``--view memory-categories``), beside torch's own peak of the same profile
(``MemoryProfileTimeline``, computed in the capturing process).  One table: case,
predicted peak after, measured peak, torch's peak, error.  Exits 1 when a claimed
prediction is more than 10 % off (an abstention is not a claim).

    python scripts/check_memory_what_ifs.py [--keep DIR] [--only CASE ...]
    python scripts/check_memory_what_ifs.py train KEY=VALUE ...   # one capture (what the check runs)

Each capture is its own process (a fresh allocator, a fresh torch.compile).  Took 7.8 min
on 2 shared CPU cores at load 8-12 (docs/bench-log/memory-what-ifs.md).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuiprof.report.memory_texts import REMEDIES  # noqa: E402
from tuiprof.report.units import format_bytes  # noqa: E402

TOLERANCE = 0.10  # a claimed saving must re-measure within this (issue 35)
STEPS = 5  # wait 1, warm-up 1, active 3


@dataclass(frozen=True)
class Case:
    name: str
    remedy: str  # the what-if's id (report/memory_texts.py REMEDIES)
    injected: tuple[str, ...]  # train KEY=VALUE arguments
    remedied: tuple[str, ...]


CASES = (
    Case("momentum", "no-momentum", ("opt=sgdm",), ("opt=sgd",)),
    Case("adam", "stateless-optimizer", ("opt=adam",), ("opt=sgd",)),
    Case("grads cnn", "grads-to-none", ("none=0",), ("none=1",)),
    Case("grads mlp", "grads-to-none", ("model=mlp", "none=0"), ("model=mlp", "none=1")),
    Case("grads resnet18", "grads-to-none", ("model=resnet18", "none=0"), ("model=resnet18", "none=1")),
    Case("batch", "half-batch", ("batch=32",), ("batch=16",)),
    Case("batch resnet18", "half-batch", ("model=resnet18", "batch=32"), ("model=resnet18", "batch=16")),
    Case("batch compiled", "half-batch", ("batch=32", "compile=1"), ("batch=16", "compile=1")),
)


# ------------------------------------------------------------------ one capture (its own process)


def train(arguments: list[str]) -> None:
    """One small training run under tuiprof.profile(): ``out=`` the trace, and beside it
    (``.torch.json``) torch's own categorised peak of the same profile.  The other keys:
    ``model=cnn|mlp|resnet18``, ``opt=sgdm|sgd|adam``, ``none=1|0`` (zero_grad's set_to_none),
    ``batch=N``, ``compile=1``."""
    import torch
    from torch import nn
    from torch.profiler._memory_profiler import MemoryProfileTimeline

    import tuiprof
    from tuiprof.capture import memory_categories

    options = dict(argument.split("=", 1) for argument in arguments)
    batch = int(options.get("batch", "32"))
    torch.manual_seed(0)
    kind = options.get("model", "cnn")
    if kind == "resnet18":
        import torchvision

        model: nn.Module = torchvision.models.resnet18(num_classes=10)
    elif kind == "mlp":  # parameters outweigh activations
        model = nn.Sequential(
            nn.Flatten(), nn.Linear(3 * 32 * 32, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)
        )
    else:
        model = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(4),
            nn.Flatten(),
            nn.Linear(512, 256),
            nn.ReLU(),
            nn.Linear(256, 10),
        )
    if options.get("compile") == "1":
        model = torch.compile(model)  # type: ignore[assignment]
    optimizers = {
        "sgdm": lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9),
        "sgd": lambda p: torch.optim.SGD(p, lr=0.01),
        "adam": lambda p: torch.optim.Adam(p, lr=1e-3),
    }
    optimizer = optimizers[options.get("opt", "sgdm")](model.parameters())
    set_to_none = options.get("none", "1") == "1"
    inputs, targets = torch.randn(batch, 3, 32, 32), torch.randint(0, 10, (batch,))
    out = Path(options["out"])

    original = memory_categories.memory_categories_member
    torch_peak: list[int] = []

    def with_torch_peak(prof, *args, **kwargs):
        _, sizes = MemoryProfileTimeline(prof._memory_profile())._coalesce_timeline("cpu")
        torch_peak.append(max(sum(point[1:]) for point in sizes))
        return original(prof, *args, **kwargs)

    memory_categories.memory_categories_member = with_torch_peak  # tuiprof.profile() imports it when called
    schedule = torch.profiler.schedule(wait=1, warmup=1, active=STEPS - 2)
    try:
        with tuiprof.profile(out, schedule=schedule) as session:
            for _ in range(STEPS):
                optimizer.zero_grad(set_to_none=set_to_none)  # before the forward
                nn.functional.cross_entropy(model(inputs), targets).backward()
                optimizer.step()
                session.step()
    finally:
        memory_categories.memory_categories_member = original
    out.with_suffix(".torch.json").write_text(json.dumps({"peak_bytes": torch_peak[0]}))


# ------------------------------------------------------------------ the check


def _capture(folder: Path, name: str, arguments: tuple[str, ...]) -> Path:
    trace = folder / f"{name}.json.gz"
    done = subprocess.run(
        [sys.executable, __file__, "train", f"out={trace}", *arguments], capture_output=True, text=True, cwd=ROOT
    )
    if done.returncode:
        raise SystemExit(f"capture {name} failed:\n{done.stderr}")
    return trace


def _summary(trace: Path, view: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(trace), "--view", view, "--format", "json"],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout)


def _measured(trace: Path) -> int:
    """The peak as tuiprof measures it: torch's categories at their peak, summed."""
    return sum(row["bytes_at_peak"] for row in _summary(trace, "memory-categories"))


def check(case: Case, folder: Path) -> tuple[list[str], bool]:
    """The case's table row, and whether it passes."""
    slug = case.name.replace(" ", "-")
    injected = _capture(folder, f"{slug}-injected", case.injected)
    rows = {row["remedy"]: row for row in _summary(injected, "memory-what-ifs")}
    what_if = rows[REMEDIES[case.remedy]]
    remedied = _capture(folder, f"{slug}-remedied", case.remedied)
    measured = _measured(remedied)
    torch_peak = json.loads(remedied.with_suffix(".torch.json").read_text())["peak_bytes"]
    peak = _measured(injected)
    predicted = what_if["peak_after_bytes"]
    if predicted is None:  # not a claim: why, on stderr
        print(f"{case.name} abstains: {what_if['how']}", file=sys.stderr)
        return [case.name, format_bytes(peak), "abstains", format_bytes(measured), format_bytes(torch_peak), "--"], True
    error = (predicted - measured) / measured
    row = [case.name, format_bytes(peak), format_bytes(predicted), format_bytes(measured), format_bytes(torch_peak)]
    return [*row, f"{100 * error:+.1f} %"], abs(error) <= TOLERANCE


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "train":
        train(sys.argv[2:])
        return 0
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="keep the traces in this folder")
    parser.add_argument("--only", nargs="+", choices=[c.name for c in CASES], help="run these cases only")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.only or c.name in args.only]
    header = ["case", "peak now", "predicted", "measured", "torch", "error"]
    table = [header]
    passed = True
    with tempfile.TemporaryDirectory() as scratch:
        folder = args.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        for case in cases:
            row, ok = check(case, folder)
            table.append(row)
            passed &= ok
            print(f"{case.name}: {'ok' if ok else 'OFF BY MORE THAN 10 %'}", file=sys.stderr, flush=True)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print(
            "  ".join(
                cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width) in enumerate(zip(row, widths))
            )
        )
    print("peak now: the injected run's peak; predicted: its peak after the remedy, replayed")
    print("from its capture; measured: the remedied run's peak as tuiprof measures it;")
    print("torch: MemoryProfileTimeline's peak of the same profile.")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
