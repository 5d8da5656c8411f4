#!/usr/bin/env python3
"""tuiprof's ranks view against HTA (HolisticTraceAnalysis) on one run directory.

HTA needs pandas, plotly and (by its metadata) jupyterlab: run it from its own
virtual environment, given with --hta-python; this script prints both sides.

    python -m venv /tmp/hta && /tmp/hta/bin/pip install --no-deps HolisticTraceAnalysis \\
        && /tmp/hta/bin/pip install pandas plotly networkx pydot psutil pyyaml
    python scripts/crosscheck_hta.py ../shared/traces/dlrm_8ranks --hta-python /tmp/hta/bin/python

Definitions (docs/ranks.md): HTA's compute time is our compute (union of
non-communication kernels); HTA's non-compute time is our exposed
communication plus memcpy/memset time no compute kernel hides; HTA's
communication/computation overlap is (communication - exposed communication)
/ communication.  HTA's idle time is measured from the first to the last
kernel; ours from the step's CPU start (or first kernel, if earlier) to the
last kernel: both are printed.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tuiprof.analysis import load_model  # noqa: E402
from tuiprof.analysis.ranks import summarise_run  # noqa: E402
from tuiprof.analysis.steps import union_ns  # noqa: E402
from tuiprof.trace.run import open_run  # noqa: E402

HTA_SCRIPT = """
import json, sys
from hta.trace_analysis import TraceAnalysis
analysis = TraceAnalysis(trace_dir=sys.argv[1])
breakdown = analysis.get_temporal_breakdown(visualize=False)
overlap = analysis.get_comm_comp_overlap(visualize=False)
print("HTA-JSON" + json.dumps({"breakdown": breakdown.to_dict("records"), "overlap": overlap.to_dict("records")}))
"""


def run_hta(python: str, directory: Path) -> dict:
    with tempfile.TemporaryDirectory() as scratch:  # HTA may write next to the traces
        copy = Path(scratch) / "run"
        shutil.copytree(directory, copy, ignore=shutil.ignore_patterns("*.tuiprof-summary"))
        result = subprocess.run([python, "-c", HTA_SCRIPT, str(copy)], capture_output=True, text=True, check=True)
    line = next(line for line in result.stdout.splitlines() if line.startswith("HTA-JSON"))
    return json.loads(line[len("HTA-JSON") :])


def kernel_span_idle_us(path: Path) -> float:
    """Idle time as HTA measures it: first kernel start to last kernel end, minus busy."""
    activity = load_model(path).activity
    begins, ends = activity.start_ns, activity.start_ns + activity.dur_ns
    return (int(ends.max()) - int(begins.min()) - union_ns(begins, ends)) / 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--hta-python", required=True, help="a Python with HolisticTraceAnalysis installed")
    args = parser.parse_args()
    hta = run_hta(args.hta_python, args.run_dir)
    breakdown = {row["rank"]: row for row in hta["breakdown"]}
    overlap = {row["rank"]: row["comp_comm_overlap_pctg"] for row in hta["overlap"]}
    run = open_run(args.run_dir)
    summaries = summarise_run(run, use_sidecars=False)
    header = (
        f"{'rank':>4} {'compute us':>21} {'non-compute us':>21} {'comm/comp overlap %':>21} "
        f"{'idle us (HTA def.)':>21} {'idle us (our def.)':>18}"
    )
    print(header + "\n" + " " * 5 + "      tuiprof       HTA" * 4)
    worst = 0.0
    for summary in summaries.ranks:
        (step,) = summary.steps[:1]
        h = breakdown[summary.rank]
        non_compute = step.exposed_communication_us + (step.memcpy_us or 0) + (step.memset_us or 0)
        ours_overlap = 100 * (step.communication_us - step.exposed_communication_us) / step.communication_us
        idle = kernel_span_idle_us(run.file_of(summary.rank).path)
        pairs = [
            (step.compute_us, h["compute_time(us)"]),
            (non_compute, h["non_compute_time(us)"]),
            (round(ours_overlap, 2), overlap[summary.rank]),
            (idle, h["idle_time(us)"]),
        ]
        worst = max(worst, *(abs(a - b) for a, b in pairs[:2]), 100 * abs(pairs[2][0] - pairs[2][1]))
        cells = " ".join(f"{a:>10.2f}{b:>11.2f}" for a, b in pairs)
        print(f"{summary.rank:>4} {cells} {step.device_idle_us:>18.1f}")
    print(f"largest difference in compute / non-compute (us) or overlap (x100): {worst:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
