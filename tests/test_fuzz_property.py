"""A bounded, seeded run of scripts/fuzz.py's mutations as a property: any mutated trace
either loads (damage reported) or fails with a TraceError; nothing else escapes."""

from __future__ import annotations

import importlib.util
import random
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import ROOT, SAMPLES
from tuiprof.analysis import load_model
from tuiprof.errors import TraceError
from tuiprof.report.render import render_rows
from tuiprof.report.views import TRACE_VIEWS, ViewOptions

_spec = importlib.util.spec_from_file_location("tuiprof_fuzz", ROOT / "scripts" / "fuzz.py")
fuzz = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
sys.modules["tuiprof_fuzz"] = fuzz  # dataclasses look their module up
_spec.loader.exec_module(fuzz)  # type: ignore[union-attr]

SEED_EVENTS = 150  # small seeds: a few hundred cases in seconds
RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def _seeds() -> list[bytes]:
    fuzz.SEED_EVENTS, fuzz.SEED_BYTES = SEED_EVENTS, 0  # always cut, as Kineto lays it out
    return [fuzz.load_seed(path) for path in sorted(SAMPLES.glob("*.pt.trace.json.gz"))]


SEEDS = _seeds()
mutation = st.tuples(st.sampled_from(fuzz.MUTATIONS), st.integers(0, 2**32))


@settings(max_examples=200, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    seed=st.integers(0, len(SEEDS) - 1),
    mutations=st.lists(mutation, min_size=1, max_size=3),
    packed=st.integers(0, 4),
    view=st.sampled_from(sorted(TRACE_VIEWS)),
)
def test_mutated_traces_load_or_fail_cleanly(tmp_path_factory, seed: int, mutations, packed: int, view: str) -> None:
    data = SEEDS[seed]
    for mutate, number in mutations:
        data = mutate(data, random.Random(number))
    suffix = ".json"
    if packed == 0:
        data, suffix = fuzz.gzip_damage(data, random.Random(len(data))), ".json.gz"
    path = tmp_path_factory.mktemp("case") / f"case{suffix}"
    path.write_bytes(data)
    try:
        model = load_model(path)
    except TraceError as exc:
        assert "\n" not in str(exc)
        return
    shown = TRACE_VIEWS[view]
    rows = shown.build(model, ViewOptions())
    for fmt in ("markdown", "csv"):
        assert not RAW_CONTROL.search(render_rows(rows, shown.columns, fmt).replace("\n", ""))


def test_the_seeds_are_real_traces() -> None:
    assert len(SEEDS) >= 2
    for seed in SEEDS:
        assert seed.count(b'"ph"') == SEED_EVENTS


@pytest.mark.parametrize("name", ["truncate", "flip", "delete", "duplicate", "insert", "gzip_damage"])
def test_each_mutation_changes_its_input(name: str) -> None:
    mutate = getattr(fuzz, name)
    changed = sum(mutate(SEEDS[0], random.Random(i)) != SEEDS[0] for i in range(20))
    assert changed >= 15


def test_surfaces_are_a_comma_separated_list_with_trace_for_summary() -> None:
    assert fuzz.surface_list("trace,run,summary,diff") == ["summary", "run", "diff"]
    assert fuzz.surface_list("timeline") == ["timeline"]
    for bad in ("", ",", "summary,disk"):
        with pytest.raises(ValueError):
            fuzz.surface_list(bad)


def test_a_run_case_is_its_seed_run_with_one_rank_mutated_and_runs_clean_or_reports(tmp_path) -> None:
    folder = SAMPLES / "ddp_gloo_2ranks"
    ranks = [(path.name.removesuffix(".gz"), fuzz.load_seed(path)) for path in sorted(folder.glob("*.json.gz"))]
    seeds = fuzz.Seeds([], [], [(folder.name, ranks)])
    for number in range(6):
        files, args = fuzz.make_command("run", seeds, 0, random.Random(number))
        (mutated_name, mutated), *others = files
        assert sorted(name.removesuffix(".gz") for name, _ in files) == [name for name, _ in ranks]
        assert others == [rank for rank in ranks if rank[0] != mutated_name.removesuffix(".gz")]
        assert mutated != dict(ranks)[mutated_name.removesuffix(".gz")]
        assert args[:2] == ["summary", "{dir}"] and args[args.index("--view") + 1] in fuzz.RUN_VIEWS
    shown = fuzz._write_case(tmp_path, "case", files, args)
    assert shown.startswith("tuiprof summary case --view")
    assert sorted(path.name for path in (tmp_path / "case").iterdir()) == sorted(name for name, _ in files)
    outcome = fuzz.run_command([arg.format(dir=tmp_path / "case") for arg in args])
    assert outcome.kind == "clean", outcome.detail
