"""Shared paths and fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
SHARED_TRACES = ROOT.parent / "shared" / "traces"


def shared_trace_paths() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    files = sorted(p for p in SHARED_TRACES.iterdir() if p.name.endswith((".json", ".json.gz")))
    return files + [SHARED_TRACES / "dlrm_8ranks"]


needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces not present")


@pytest.fixture(autouse=True)
def _no_user_keymap(monkeypatch, tmp_path_factory):
    """The explorer reads $XDG_CONFIG_HOME/tuiprof/keymap.toml: no test sees the developer's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-config"))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Sidecars of read-only run directories (../shared/traces) go to the user's cache: a private one here.
    The decoded-trace cache is off, so every other test decodes what it opens
    (tests/test_cache.py turns it on)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        # the registry of watched processes (tuiprof capture PID) lives there too, never the user's
        patch.setenv("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
        patch.setenv("TUIPROF_NO_CACHE", "1")
        yield


@pytest.fixture(scope="session")
def resnet_model():
    from tuiprof.analysis import load_model

    return load_model(SAMPLES / "resnet18_cpu.pt.trace.json.gz")


def key_averages_mismatches(model, records: list[dict], by_shape: bool) -> list[str]:
    """Where our operator table differs from torch's key_averages() records:
    calls exact, self/total CPU within 1 % (ops over 100 us), CPU memory exact,
    FLOPs equal where torch counts them."""
    ours = {(s.name, s.input_shapes): s for s in model.operators(group_by_shape=by_shape)}
    expected = [r for r in records if (r["input_shapes"] is not None) == by_shape]
    assert expected, "no key_averages records"
    problems = []
    for record in expected:
        stats = ours.get((record["name"], record["input_shapes"]))
        if stats is None:
            problems.append(f"missing {record['name']} {record['input_shapes']}")
            continue
        if stats.calls != record["calls"]:
            problems.append(f"{record['name']}: calls {stats.calls} != {record['calls']}")
        for key in ("self_cpu_us", "cpu_total_us"):
            if record[key] > 100 and abs(getattr(stats, key) - record[key]) > 0.01 * record[key]:
                problems.append(f"{record['name']}: {key} {getattr(stats, key)} != {record[key]}")
        for key in ("cpu_mem_bytes", "self_cpu_mem_bytes"):
            if getattr(stats, key) != record[key]:
                problems.append(f"{record['name']}: {key} {getattr(stats, key)} != {record[key]}")
        if record["flops"] and stats.flops != record["flops"]:
            problems.append(f"{record['name']}: flops {stats.flops} != {record['flops']}")
    if len(ours) != len(expected):
        problems.append(f"{len(ours)} rows, torch has {len(expected)}")
    return problems
