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


@pytest.fixture(scope="session")
def resnet_model():
    from tuiprof.analysis import load_model

    return load_model(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
