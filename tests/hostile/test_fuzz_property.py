"""A bounded, seeded run of scripts/fuzz.py's mutations as a property: any mutated trace
either loads (damage reported) or fails with a TraceError; nothing else escapes."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import sys
from pathlib import Path

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


def _run_case(directory: Path, files, args, monkeypatch):
    """One case as scripts/fuzz.py's worker runs it: its own cache, its folder the current directory."""
    directory.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(directory / "cache"))
    monkeypatch.chdir(directory)
    for name in fuzz.SWITCHES_ENV:
        monkeypatch.delenv(name, raising=False)
    paths = [str(directory / name) for name, _ in files]
    for path, (_, data) in zip(paths, files):
        Path(path).write_bytes(data)
    return fuzz.run_case(args, paths, str(directory))[0]


NEW_SURFACES = {
    "snapshot": lambda: fuzz.Seeds([], [], [], snapshots=fuzz.snapshot_seeds()),
    "watch": lambda: fuzz.Seeds(SEEDS, [], [], watches=fuzz.watch_seeds(SEEDS)),
    "sidecar": lambda: fuzz.Seeds([], [], fuzz.run_seeds()[:1]),
    "cache": lambda: fuzz.Seeds(SEEDS[:1], ["seed"], []),
}


@pytest.mark.parametrize("surface", sorted(NEW_SURFACES))
def test_cases_of_each_surface_on_tuiprofs_own_files_run_clean(tmp_path, monkeypatch, surface: str) -> None:
    seeds = NEW_SURFACES[surface]()
    for number in range(1 if surface == "sidecar" else 3):  # a sidecar case runs a run directory 4 times
        files, args = fuzz.make_command(surface, seeds, number % seeds.count(surface), random.Random(number))
        outcome = _run_case(tmp_path / str(number), files, args, monkeypatch)
        assert outcome.kind == "clean", (number, outcome.signature, outcome.detail)


def test_the_pickle_payloads_would_run_code_under_a_plain_unpickler(tmp_path, monkeypatch) -> None:
    """The snapshot surface's marker check can fail: pickle.loads runs these payloads, and a
    case whose command made the marker is a crash."""
    import pickle

    monkeypatch.chdir(tmp_path)
    for payload in fuzz.PICKLE_PAYLOADS[:3]:
        (tmp_path / fuzz.MARKER).unlink(missing_ok=True)
        pickle.loads(payload + b".")
        assert (tmp_path / fuzz.MARKER).exists(), payload
    (tmp_path / "case").mkdir()
    (tmp_path / "case" / fuzz.MARKER).touch()
    outcome, _ = fuzz.run_case(
        ["summary", "{0}"], [str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")], str(tmp_path / "case")
    )
    assert outcome.signature == "code from a pickle ran"


def test_a_sidecar_believed_without_its_signature_is_reported(tmp_path, monkeypatch) -> None:
    """The sidecar surface's oracle can fail: with signatures and content hashes not checked,
    sidecars whose numbers were scaled (signed with another key) change the output: a crash."""
    from tuiprof.trace import run

    monkeypatch.setattr(run.hmac, "compare_digest", lambda a, b: True)

    def scale(directory: Path, rng: random.Random):
        for path in directory.glob("*" + fuzz.SIDECAR_SUFFIX):
            _, _, body = path.read_bytes().partition(b"\n")
            record = json.loads(body)
            record = fuzz.planted_numbers(record, 1000)
            path.write_bytes(b"0" * 64 + b"\n" + json.dumps(record).encode())
        return [], False

    _run_case(tmp_path / "case", fuzz.run_seeds()[0][1], ["summary", "{dir}"], monkeypatch)
    argv = ["summary", str(tmp_path / "case"), "--view", "ranks", "--format", "json"]
    outcome, _ = fuzz.run_planted(argv, "--no-sidecars", "sidecar", scale, str(tmp_path / "case"), random.Random(0))
    assert outcome.signature == "a planted sidecar was believed"
