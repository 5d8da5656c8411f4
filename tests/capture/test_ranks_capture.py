"""Under torchrun (CPU, gloo, world size 2): one trace per rank in one run directory,
distributedInfo in each, and rank 0 shows the run once every rank wrote."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.helpers.processes import torchrun
from tuiprof.analysis.ranks import summarise_run
from tuiprof.trace.run import open_run

needs_torchrun = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch not installed")
DDP_SAMPLE = SAMPLES / "ddp_gloo_2ranks"


def header(path: Path) -> dict:
    document = json.loads(gzip.decompress(path.read_bytes()))
    return {k: v for k, v in document.items() if k != "traceEvents"}


@needs_torchrun
def test_torchrun_tuiprof_run_writes_every_rank_and_rank_0_names_the_straggler(tmp_path):
    run_dir = tmp_path / "runs" / "ddp"  # --save creates the missing folders
    save = ["--save", str(run_dir / "train.pt.trace.json.gz")]
    result = torchrun(["-m", "tuiprof", "run", "--no-tui", *save, "examples/train_ddp_gloo.py"], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert f"tuiprof: run saved: {run_dir}/ (reopen: tuiprof open {run_dir})" in result.stderr
    files = sorted(p.name for p in run_dir.iterdir())
    assert files == ["train.rank0.pt.trace.json.gz", "train.rank1.pt.trace.json.gz"]
    for rank, name in enumerate(files):
        info = header(run_dir / name)["distributedInfo"]
        assert (info["rank"], info["world_size"], info["backend"]) == (rank, 2, "gloo")
    # only rank 0 printed the run: one ranks table, the straggler (rank 1 sleeps 20 ms loading data)
    assert result.stdout.count("Ranks - ") == 1 and result.stdout.count("Collectives - ") == 1
    assert "straggler: rank 1: " in result.stdout and "Data load" in result.stdout


@needs_torchrun
def test_torchrun_run_without_save_keeps_the_run_in_tuiprof_runs(tmp_path):
    """docs/capture.md's torchrun command leaves a run to open: ./tuiprof-runs/<when torchrun started>-<its pid>/."""
    work = tmp_path / "work"
    work.mkdir()
    script = ROOT / "examples" / "train_ddp_gloo.py"
    result = torchrun(
        ["-m", "tuiprof", "run", "--no-tui", "--no-stack", str(script), "--steps", "6"], tmp_path, cwd=work
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (run_dir,) = (work / "tuiprof-runs").iterdir()
    assert re.fullmatch(r"\d{8}-\d{6}-\d+", run_dir.name)
    files = sorted(p.name for p in run_dir.iterdir())
    assert files == ["train_ddp_gloo.rank0.pt.trace.json.gz", "train_ddp_gloo.rank1.pt.trace.json.gz"]
    relative = Path("tuiprof-runs") / run_dir.name
    assert f"tuiprof: run saved: {relative}/ (reopen: tuiprof open {relative})" in result.stderr
    run = summarise_run(open_run(run_dir), workers=1, use_sidecars=False)
    assert [r.rank for r in run.ranks] == [0, 1] and run.problems == ()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("tuiprof-run")]  # nothing left in TMPDIR


@needs_torchrun
def test_tuiprof_profile_in_a_ddp_script_writes_one_trace_per_rank(tmp_path):
    script = tmp_path / "ddp_profile.py"
    script.write_text(
        "import sys, torch, torch.distributed as dist, tuiprof\n"
        "from torch import nn\n"
        "dist.init_process_group('gloo')\n"
        "model = nn.parallel.DistributedDataParallel(nn.Linear(8, 2))\n"
        "with tuiprof.profile(sys.argv[1], with_stack=False) as p:\n"
        "    for _ in range(3):\n"
        "        model(torch.randn(4, 8)).sum().backward()\n"
        "        p.step()\n"
        "dist.destroy_process_group()\n"
    )
    target = tmp_path / "run" / "ddp.pt.trace.json.gz"
    result = torchrun([str(script), str(target)], tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in target.parent.iterdir()) == [
        "ddp.rank0.pt.trace.json.gz",
        "ddp.rank1.pt.trace.json.gz",
    ]
    run = summarise_run(open_run(target.parent), workers=1, use_sidecars=False)
    assert [r.rank for r in run.ranks] == [0, 1] and run.problems == ()
    assert "all_reduce" in {c.kind for c in run.collectives.collectives}  # DDP also broadcasts in forward


@pytest.mark.skipif(not DDP_SAMPLE.is_dir(), reason="run scripts/make_sample_traces.py")
def test_the_shipped_2_rank_gloo_sample_names_rank_1():
    run = summarise_run(open_run(DDP_SAMPLE), workers=1, use_sidecars=False)
    assert [r.rank for r in run.ranks] == [0, 1] and run.problems == ()
    assert all(c.kind == "all_reduce" and c.size_bytes == 19210 * 4 for c in run.collectives.collectives)
    assert run.collectives.last_arrivals()[1] == len(run.collectives.collectives)
    assert list(run.stragglers()) == [1]
    assert all(p.stat().st_size < 1 << 20 for p in DDP_SAMPLE.iterdir())
