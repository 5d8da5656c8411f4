#!/usr/bin/env python3
"""Each top-level module's share of forward and backward time, eager against compiled.

A compiled run's module times come from the kernel map (docs/compiled.md): a kernel
fused across the model's direct parts is split between them by the work of its nodes.
This script puts those shares beside the eager run's of the same model (same weights,
same batch, one thread, a few steps), both captured by tuiprof's own capture
(``profile_training``) and read by its own analysis.  A share is a top-level module's
total time (submodules included) over the sum of all top-level modules' totals, per
direction; the compiled run's ``(compiled, unattributed)`` rest is printed beside, not
shared out.  The top-level modules are the outermost that ran: a ModuleList is only
indexed, so its items are (``layers.0``).

    python scripts/compare_compiled_shares.py [--model resnet18|transformer|all] [--limit 5]
        [--batch-size 8] [--steps 20] [--keep DIR | --reread DIR]

``--reread`` reads the traces an earlier run kept, so one capture can be read by two
versions of the analysis (the split before and after a change).

Exit status 1 when a share is off by more than ``--limit`` points.  resnet18 runs on
3x32x32 inputs, the transformer (2 encoder layers of width 128 as direct parts, between
an embedding and a norm + head) on 32x64, both at batch 8 unless told; compiling
takes about a minute a model on one core.  Eager and compiled are not the same program:
docs/compiled.md says where their shares part and why (Inductor's weight-layout copy).
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from torch import nn  # noqa: E402

from tuiprof.analysis import analyze  # noqa: E402
from tuiprof.analysis.compiled_map import UNATTRIBUTED  # noqa: E402
from tuiprof.capture.config import CaptureConfig  # noqa: E402
from tuiprof.capture.models import build_model  # noqa: E402
from tuiprof.capture.session import profile_training  # noqa: E402
from tuiprof.trace import load_trace  # noqa: E402

OUTSIDE = ("model", "loss")  # qualified names of the model itself and the loss: not its parts


class TwoLayerTransformer(nn.Module):
    """A 2-layer transformer encoder classifier whose layers are direct parts (as in
    ``nn.TransformerEncoder``: a ModuleList), so kernels fused from one layer into the
    next, or into the final norm, are split between top-level modules."""

    def __init__(self, features: int = 64, width: int = 128, heads: int = 4, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Linear(features, width)
        self.layers = nn.ModuleList(
            nn.TransformerEncoderLayer(width, heads, dim_feedforward=4 * width, batch_first=True) for _ in range(2)
        )
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x).mean(dim=1))


MODELS = {  # name -> (factory, input shape)
    "resnet18": (lambda: build_model("resnet18", 10), "3x32x32"),
    "transformer": (TwoLayerTransformer, "32x64"),
}


@dataclass
class Shares:
    forward: dict[str, float]  # top-level module -> share of forward module time (0-1)
    backward: dict[str, float]
    unattributed: tuple[float, float]  # compiled rest over the modules' time, forward and backward (0 eager)
    batch: int | None  # the batch the capture fed the model


def capture(model: nn.Module, shape: str, batch: int, compile: bool, path: Path, steps: int) -> None:
    """Train ``steps`` profiled steps under tuiprof's capture, saved at ``path``."""
    config = CaptureConfig(
        model=type(model).__name__,
        device="cpu",
        batch_size=batch,
        input_shape=shape,
        wait=1,
        warmup=1,
        active=steps,
        compile=compile,
    )
    profile_training(config, path, model=model)


def shares(path: Path) -> Shares:
    """The top-level shares of a saved capture's module tree (its map read from the trace)."""
    times: dict[str, list[float]] = {}  # qualified name -> [forward, backward] us
    rest = [0.0, 0.0]
    model = analyze(load_trace(path))
    for node in model.modules.walk():
        if node.name == UNATTRIBUTED:
            rest = [rest[0] + node.cpu_total_us, rest[1] + node.backward_cpu_us]
        elif node.qualified_name and node.qualified_name not in OUTSIDE:
            row = times.setdefault(node.qualified_name, [0.0, 0.0])
            row[0] += node.cpu_total_us
            row[1] += node.backward_cpu_us
    top = {name: row for name, row in times.items() if not _enclosed(name, times)}
    totals = [sum(row[i] for row in top.values()) or 1.0 for i in (0, 1)]
    return Shares(
        {name: row[0] / totals[0] for name, row in top.items()},
        {name: row[1] / totals[1] for name, row in top.items()},
        (rest[0] / totals[0], rest[1] / totals[1]),
        model.live_batch_size,
    )


def _enclosed(name: str, names) -> bool:
    """Whether a module that ran encloses ``name`` (``layers.0`` is not enclosed: ``layers`` never ran)."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in names for i in range(1, len(parts)))


def compare(name: str, batch: int, steps: int, keep: Path | None, reread: Path | None) -> float:
    """Print one model's table; its largest deviation in points."""
    factory, shape = MODELS[name]
    with tempfile.TemporaryDirectory() as scratch:
        folder = reread or keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        paths = [folder / f"{name}-{kind}.json.gz" for kind in ("eager", "compiled")]
        if reread is None:
            torch.manual_seed(0)
            model = factory()
            for compile, path in zip((False, True), paths):
                capture(copy.deepcopy(model), shape, batch, compile, path, steps)
        eager, compiled = (shares(path) for path in paths)
    print(f"{name}, batch {compiled.batch}: % of top-level module time, 1 thread")
    print(f"{'':10} {'---- forward -----':>18}   {'---- backward ----':>18}")
    print(f"{'module':10} " + "   ".join([f"{'eager':>6}{'comp':>6}{'off':>6}"] * 2))
    worst, where = 0.0, ""
    for module in sorted(eager.forward.keys() | compiled.forward.keys(), key=lambda k: -eager.forward.get(k, 0.0)):
        cells = []
        for side in ("forward", "backward"):
            a, b = (getattr(run, side).get(module, 0.0) * 100 for run in (eager, compiled))
            if abs(b - a) > worst:
                worst, where = abs(b - a), f"{module} {side}"
            cells.append(f"{a:>6.1f}{b:>6.1f}{b - a:>+6.1f}")
        print(f"{module[:10]:<10} {'   '.join(cells)}")
    fwd_rest, bwd_rest = (share * 100 for share in compiled.unattributed)
    print(f"unattributed (not shared out): fwd {fwd_rest:.1f}%, bwd {bwd_rest:.1f}%")
    print(f"largest deviation: {worst:.1f} points ({where})")
    return worst


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=[*MODELS, "all"], default="all")
    parser.add_argument("--batch-size", type=int, default=8, help="samples per step (default 8)")
    parser.add_argument(
        "--steps", type=int, default=20, help="profiled steps per run (default 20: steps are cheap, noise is not)"
    )
    parser.add_argument("--limit", type=float, default=5.0, help="largest deviation allowed, points (default 5)")
    parser.add_argument("--keep", type=Path, help="keep the traces in this folder")
    parser.add_argument("--reread", type=Path, help="read the traces kept in this folder instead of capturing")
    args = parser.parse_args()
    torch.set_num_threads(1)  # before compiling: Inductor's C++ kernels take the thread count then
    worst = 0.0
    for name in MODELS if args.model == "all" else [args.model]:
        worst = max(worst, compare(name, args.batch_size, args.steps, args.keep, args.reread))
        print()
    verdict = "within" if worst <= args.limit else "over"
    print(f"largest deviation of all: {worst:.1f} points, {verdict} {args.limit:g}")
    return 0 if worst <= args.limit else 1


if __name__ == "__main__":
    sys.exit(main())
