"""Capturing under ``torchrun``: one trace per rank in one run directory, rank 0 shows them.

Every rank runs the same command (``torchrun --nproc-per-node N -m tuiprof run
train.py``, or a DDP script calling ``tuiprof.profile()``), so each must find,
without talking to the others, the same run directory and its own file name:

- the run directory: the folder of ``--save``/``path`` when given (a shared
  filesystem for several nodes), else ``./tuiprof-runs/<when torchrun started>-<its pid>/``
  (:func:`run_directory`: the same for every rank of one launch on a node, and
  kept, so that the run can be opened again);
- the file: the rank goes into the name (``train.rank1.pt.trace.json.gz``), and
  the profiler's ``distributedInfo`` (rank, world size, backend, groups) is in
  the header; a rank whose process group did not exist when the profiler
  started gets it added at its first profiled step;
- a trace appears under its final name only once complete (written in a
  hidden sub-folder, then renamed), so rank 0 opens the run when every
  rank's file exists, without a barrier (the script may have destroyed its
  process group by then).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tuiprof.report.render import print_notice

TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json")
WAIT_FOR_RANKS_S = 600.0  # a rank that crashed must not hold rank 0 forever


@dataclass(frozen=True)
class Launch:
    """This process's place in a torchrun launch."""

    rank: int
    world_size: int
    run_id: str


def torchrun_launch() -> Launch | None:
    """The launch this process is part of (``RANK``/``WORLD_SIZE`` set by torchrun), None when alone."""
    try:
        rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    except (KeyError, ValueError):
        return None
    if world_size < 2:
        return None
    run_id = os.environ.get("TORCHELASTIC_RUN_ID") or f"port{os.environ.get('MASTER_PORT', '0')}"
    return Launch(rank, world_size, run_id)


RUNS_FOLDER = Path("tuiprof-runs")


def run_directory(launch: Launch) -> Path:
    """The default run directory of this launch: ``./tuiprof-runs/20261204-224650-4127/``.

    Every local rank is a child of the same torchrun agent, so its start time
    and pid name the launch without the ranks talking to each other (the
    rendezvous id is ``none`` unless ``--standalone`` or ``--rdzv-id`` is given).
    Without ``/proc`` (not Linux): ``run-<rendezvous id>-<agent pid>``.
    """
    agent = os.getppid()
    started = _process_start_time(agent)
    if started is None:
        return RUNS_FOLDER / f"run-{launch.run_id}-{agent}"
    return RUNS_FOLDER / f"{time.strftime('%Y%m%d-%H%M%S', time.localtime(started))}-{agent}"


def _process_start_time(pid: int) -> float | None:
    """When process ``pid`` started (seconds since the epoch), from Linux's /proc; None elsewhere."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(line for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
        return int(boot.split()[1]) + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def rank_trace_path(path: Path, launch: Launch) -> Path:
    """``train.pt.trace.json.gz`` -> ``train.rank1.pt.trace.json.gz`` (same folder)."""
    name = path.name
    suffix = next((s for s in TRACE_SUFFIXES if name.endswith(s)), "")
    stem = name[: len(name) - len(suffix)] if suffix else name
    return path.with_name(f"{stem}.rank{launch.rank}{suffix or '.pt.trace.json.gz'}")


def write_rank_trace(prof: Any, path: Path, *args: Any) -> None:
    """``session.write_trace``, so that the trace appears under ``path`` only when complete."""
    from tuiprof.capture.session import write_trace

    partial = path.parent / f".tuiprof-partial-{os.getpid()}"
    partial.mkdir(parents=True, exist_ok=True)
    try:
        write_trace(prof, partial / path.name, *args)
        os.replace(partial / path.name, path)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def ensure_distributed_info(prof: Any) -> None:
    """Add ``distributedInfo`` to the trace being recorded if the profiler started before the process group.

    torch records it when the trace starts; ``tuiprof run`` starts the profiler
    before the script calls ``init_process_group``.  Called at every profiled
    step; acts once, while recording.
    """
    if getattr(prof, "_tuiprof_distributed_info", False):
        return
    import torch.distributed as dist

    if not dist.is_available() or not dist.is_initialized() or getattr(prof, "profiler", None) is None:
        return
    info = prof._get_distributed_info()
    if info:
        prof.add_metadata_json("distributedInfo", json.dumps(info))
    prof._tuiprof_distributed_info = True


def trace_already_has_distributed_info(prof: Any) -> None:
    """Mark a profiler that starts after ``init_process_group`` (torch records the info itself)."""
    import torch.distributed as dist

    prof._tuiprof_distributed_info = dist.is_available() and dist.is_initialized()


def wait_for_ranks(paths: list[Path], timeout_s: float = WAIT_FOR_RANKS_S) -> list[Path]:
    """Wait until every rank's trace exists; the missing ones after ``timeout_s`` are returned."""
    deadline = time.monotonic() + timeout_s
    missing = [p for p in paths if not p.exists()]
    while missing and time.monotonic() < deadline:
        time.sleep(0.2)
        missing = [p for p in missing if not p.exists()]
    return missing


def rank_paths(own: Path, launch: Launch) -> list[Path]:
    """Every rank's trace path, given this rank's."""
    marker = f".rank{launch.rank}."
    name = own.name
    at = name.rindex(marker)
    return [own.with_name(f"{name[:at]}.rank{rank}.{name[at + len(marker) :]}") for rank in range(launch.world_size)]


def gather_run(own: Path, launch: Launch) -> Path:
    """On rank 0: the run directory once every rank wrote (missing ranks are named, not waited for forever)."""
    for path in wait_for_ranks(rank_paths(own, launch)):
        print_notice(f"tuiprof: {path}: not written within {WAIT_FOR_RANKS_S:.0f} s; the run is shown without it")
    return own.parent


def finish_rank(trace: Path, launch: Launch, no_tui: bool) -> int:
    """After this rank's capture: rank 0 shows the run once every rank wrote (the ranks and
    collectives tables with ``no_tui``, else the explorer), then says where it is kept."""
    if launch.rank > 0:
        print_notice(f"tuiprof: rank {launch.rank}: trace written: {trace}; rank 0 shows the run")
        return 0
    run_dir = gather_run(trace, launch)
    if no_tui or not sys.stdout.isatty():
        print_run_tables(run_dir)
        code = 0
    else:
        from tuiprof.tui.app import run_explorer

        code = run_explorer(str(run_dir))
    print_notice(f"tuiprof: run saved: {run_dir}/ (reopen: tuiprof open {run_dir})")
    return code


def print_run_tables(run_dir: Path) -> None:
    """The ranks and collectives of the run just captured."""
    from tuiprof.analysis.ranks import summarise_run
    from tuiprof.report.summary import SummaryRequest, print_run_summary
    from tuiprof.trace.run import open_run

    run = summarise_run(open_run(run_dir), use_sidecars=False)
    for view in ("ranks", "collectives"):
        print_run_summary(run, SummaryRequest(view=view))
