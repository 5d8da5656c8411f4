"""One convention for sizes (issue 37, item 5): binary, named KiB/MiB/GiB as torch's
memory_summary writes them, in every text tuiprof prints; ``tuiprof --help`` says so."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

from tests.conftest import ROOT
from tests.helpers.cli import tuiprof
from tests.helpers.snapshot_gen import make_snapshot

TRAIN = ROOT / "sample_traces" / "resnet18_train_cpu.pt.trace.json.gz"
OTHER = ROOT / "sample_traces" / "resnet18_b64_cpu.pt.trace.json.gz"
SIZE = re.compile(r"\b\d+(?:\.\d+)? ?([KMGT]i?B)\b")  # a number and a unit of size (not GB/s: a rate)


def test_every_size_printed_is_binary_and_named_so(tmp_path: Path) -> None:
    """The memory views, the what-ifs, the findings, diff and a snapshot's summary print sizes
    (the resnet18 training capture: ~150 MiB at the peak); each one's unit is KiB, MiB or GiB."""
    data, _ = make_snapshot(1, steps=150)
    snapshot = tmp_path / "s.pickle"
    snapshot.write_bytes(pickle.dumps(data))
    runs = [("summary", str(TRAIN), "--view", view) for view in ("memory", "memory-what-ifs", "findings", "operators")]
    runs += [("diff", str(OTHER), str(TRAIN)), ("summary", str(snapshot))]
    for args in runs:
        result = tuiprof(*args)
        assert result.returncode == 0, (args, result.stderr)
        units = {m[1] for m in SIZE.finditer(result.stdout.replace("GB/s", ""))}
        assert units and units <= {"KiB", "MiB", "GiB"}, (args, units)


def test_the_help_says_which_convention() -> None:
    result = tuiprof("--help")
    assert "Sizes are binary everywhere: KiB, MiB, GiB" in " ".join(result.stdout.split())
