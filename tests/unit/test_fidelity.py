"""Our operator tables equal torch's key_averages() of the same profiling run.

The sidecars were written by scripts/make_sample_traces.py from the very
window each sample trace holds.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import SAMPLES, key_averages_mismatches
from tuiprof.analysis import load_model

SAMPLE_NAMES = sorted(p.name.split(".")[0] for p in SAMPLES.glob("*.key_averages.json"))


def _load(name: str):
    sidecar = json.loads((SAMPLES / f"{name}.key_averages.json").read_text())
    return sidecar, load_model(SAMPLES / f"{name}.pt.trace.json.gz")


@pytest.mark.parametrize("name", SAMPLE_NAMES)
@pytest.mark.parametrize("by_shape", [False, True], ids=["by-name", "by-shape"])
def test_operator_table_equals_key_averages(name: str, by_shape: bool) -> None:
    sidecar, model = _load(name)
    assert not key_averages_mismatches(model, sidecar["key_averages"], by_shape)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_recomputed_flops_equal_torch_per_call(name: str) -> None:
    sidecar, model = _load(name)
    live = {int(k): v for k, v in sidecar["live_flops_by_external_id"].items()}
    assert live
    calls = model.calls
    for row in range(len(calls)):
        assert calls.flops[row] == live.get(calls.external_id[row], 0), calls.name(row)


@pytest.mark.parametrize("name", SAMPLE_NAMES)
def test_module_instances_match_the_live_run(name: str) -> None:
    sidecar, model = _load(name)
    names = {node.name for node in model.modules.walk()}
    assert names == set(sidecar["modules"])
