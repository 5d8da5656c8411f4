"""The straggler sentence's numbers, recomputed from the raw JSON events in plain Python
(no tuiprof code): the shipped 2-rank gloo sample and the shared 8-rank DLRM run.

Per rank and step: Step = the ProfilerStep#N span; Exposed comm = |comm U compute| - |compute|
(GPU: NCCL kernels against the other kernels, in the step's device window: its CPU span
stretched to the end of the device work launched in it; CPU-only: gloo spans against the
cpu_ops outside communication); Data load = enumerate(DataLoader) spans; CPU-bound = the
window minus device activity and data loading.  Work = Step - Exposed comm.  A straggler
works more than the others' median by over max(1 ms, 10 % of the median step), or arrived
last at most collectives (n-th collective of every rank matched, last = latest start).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path
from statistics import median

import pytest

from tests.conftest import SAMPLES, SHARED_TRACES
from tuiprof.analysis.ranks import summarise_run
from tuiprof.report.stragglers import straggler_cause, straggler_sentence
from tuiprof.trace.run import open_run

COMM_PREFIXES = ("c10d::", "record_param_comms", "gloo:", "nccl:")
CAUSE_HEADERS = {
    "compute": "Compute",
    "data_loading": "Data load",
    "cpu_bound": "CPU-bound",
    "memcpy": "Memcpy",
    "memset": "Memset",
}
RUNS = [
    pytest.param(
        SAMPLES / "ddp_gloo_2ranks",
        marks=pytest.mark.skipif(not (SAMPLES / "ddp_gloo_2ranks").is_dir(), reason="no sample"),
    ),
    pytest.param(
        SHARED_TRACES / "dlrm_8ranks",
        marks=pytest.mark.skipif(not (SHARED_TRACES / "dlrm_8ranks").is_dir(), reason="no shared traces"),
    ),
]


def union(spans: list[tuple[float, float]]) -> float:
    covered, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            covered += b - max(a, end)
            end = b
    return covered


def clip(spans, low: float, high: float) -> list[tuple[float, float]]:
    return [(max(a, low), min(b, high)) for a, b in spans if min(b, high) > max(a, low)]


def rank_of_file(path: Path) -> tuple[int, dict]:
    document = json.loads(gzip.decompress(path.read_bytes()))
    return document["distributedInfo"]["rank"], document


def raw_rank(document: dict) -> dict:
    """Mean per step of every column the sentence uses, and the collectives' start times (us)."""
    events = [e for e in document["traceEvents"] if e.get("ph") == "X"]
    span = lambda e: (float(e["ts"]), float(e["ts"]) + float(e["dur"]))  # noqa: E731
    steps = [e for e in events if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
    loading = [span(e) for e in events if e["name"].startswith("enumerate(DataLoader)")]
    device = [e for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    launched_at = {
        e["args"]["correlation"]: float(e["ts"])
        for e in events
        if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})
    }
    comm_kernels = [e for e in device if e["cat"] == "kernel" and "nccl" in e["name"].lower()]
    if device:
        collectives = sorted(span(e) for e in comm_kernels)
    else:
        collectives = sorted(span(e) for e in events if e["name"].startswith("gloo:"))
    rows = []
    for step in steps:
        low, high = span(step)
        row = {"step": high - low, "data_loading": union(clip(loading, low, high))}
        if device:
            own = [span(e) for e in device if low <= launched_at.get(e["args"].get("correlation"), -1) < high]
            window = (low, max([high] + [b for _, b in own]))
            kernels = [e for e in device if e["cat"] == "kernel"]
            compute = clip([span(e) for e in kernels if e not in comm_kernels], *window)
            comm = clip([span(e) for e in comm_kernels], *window)
            everything = clip([span(e) for e in device], *window)
            row["compute"] = union(compute)
            row["exposed"] = union(compute + comm) - union(compute)
            row["memcpy"] = union(clip([span(e) for e in device if e["cat"] == "gpu_memcpy"], *window))
            row["memset"] = union(clip([span(e) for e in device if e["cat"] == "gpu_memset"], *window))
            row["cpu_bound"] = (window[1] - window[0]) - union(everything + clip(loading, *window))
        else:
            named = [e for e in events if e["name"].startswith(COMM_PREFIXES)]

            def in_communication(e: dict) -> bool:
                a, b = span(e)
                # called within this iteration only: ``named`` is this rank's
                return any(c["tid"] == e["tid"] and span(c)[0] <= a and b <= span(c)[1] for c in named)  # noqa: B023

            compute = clip([span(e) for e in events if e.get("cat") == "cpu_op" and not in_communication(e)], low, high)
            comm = clip([span(e) for e in events if e["name"].startswith("gloo:")], low, high)
            row["exposed"] = union(compute + comm) - union(compute)
        rows.append(row)
    means = {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}
    base = document.get("baseTimeNanoseconds", 0) / 1000
    return {**means, "work": means["step"] - means["exposed"], "arrivals": [a + base for a, _ in collectives]}


def raw_stragglers(directory: Path) -> dict[int, dict]:
    ranks = dict(rank_of_file(p) for p in sorted(directory.glob("*.pt.trace.json.gz")))
    raw = {rank: raw_rank(document) for rank, document in ranks.items()}
    counts = {len(r["arrivals"]) for r in raw.values()}
    assert len(counts) == 1, "every rank recorded the same collectives"
    matched = counts.pop()
    last = dict.fromkeys(raw, 0)
    for i in range(matched):
        arrivals = {rank: r["arrivals"][i] for rank, r in raw.items()}
        if max(arrivals.values()) > min(arrivals.values()):
            last[max(arrivals, key=arrivals.__getitem__)] += 1
    threshold = max(1000.0, 0.10 * median(r["step"] for r in raw.values()))
    result = {}
    for rank, own in raw.items():
        others = [r for k, r in raw.items() if k != rank]
        others_work = median(r["work"] for r in others)
        if own["work"] - others_work <= threshold and not (matched >= 2 and 2 * last[rank] > matched):
            continue
        excess = {key: own[key] - median(r[key] for r in others) for key in CAUSE_HEADERS if key in own}
        cause = max(excess, key=excess.__getitem__)
        result[rank] = {
            "work": own["work"],
            "others_work": others_work,
            "cause": cause if excess[cause] > threshold / 2 else None,
            "cause_excess": excess[cause],
            "last": last[rank],
            "collectives": matched,
        }
    return result


def numbers(text: str) -> list[float]:
    return [float(n) for n in re.findall(r"(-?\d+\.\d) ms", text)]


@pytest.mark.parametrize("directory", RUNS)
def test_the_straggler_sentence_states_what_the_raw_events_say(directory, tmp_path):
    run_dir = shutil.copytree(directory, tmp_path / "run", ignore=shutil.ignore_patterns("*.tuiprof-summary"))
    run = summarise_run(open_run(run_dir), workers=1, use_sidecars=False)
    expected = raw_stragglers(run_dir)
    stragglers = run.stragglers()
    assert sorted(stragglers) == sorted(expected) and expected
    for rank, raw in expected.items():
        straggler = stragglers[rank]
        sentence, cause = straggler_sentence(straggler), straggler_cause(straggler)
        close = lambda printed, us: abs(printed - us / 1000) <= 0.051  # noqa: E731  (0.1 ms printed)
        excess, work, others_work = numbers(sentence)[:3]
        assert close(excess, raw["work"] - raw["others_work"]), sentence
        assert close(work, raw["work"]) and close(others_work, raw["others_work"]), sentence
        assert f"last to arrive at {raw['last']} of {raw['collectives']} collectives" in sentence
        header = CAUSE_HEADERS[raw["cause"]]
        assert f", {header} " in sentence and cause.startswith(f"{header} +"), sentence
        assert close(numbers(cause)[0], raw["cause_excess"]) and close(numbers(sentence)[3], raw["cause_excess"]), (
            sentence
        )
        # never "+N ms per step": on both runs the stragglers' Step is not the longest
        assert not re.search(r"\+\d+(\.\d)? ms per step", sentence + cause)
