"""Shared paths and fixtures."""

from __future__ import annotations

import ast
import functools
import json
import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "sample_traces"
DATA = ROOT / "tests" / "data"  # traces made for the tests (tests/data/README.md)
SHARED_TRACES = ROOT.parent / "shared" / "traces"


def shared_trace_paths() -> list[Path]:
    if not SHARED_TRACES.is_dir():
        return []
    files = sorted(p for p in SHARED_TRACES.iterdir() if p.name.endswith((".json", ".json.gz")))
    return files + [SHARED_TRACES / "dlrm_8ranks"]


needs_shared = pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces not present")

WATCH_HEALTHY = "step000007-healthy.pt.trace.json.gz"
WATCH_SLOW = "step000042-slow.pt.trace.json.gz"


def make_watch_folder(
    tmp_path: Path, steps: int = 60, ended: bool = True, slow_ms: float = 5.0, settings: dict | None = None
) -> Path:
    """A watch folder's history by hand (tests/tui/test_watch_tui.py, the watch app's snapshots): 1 ms
    steps, ``slow_ms`` from step 40 on; the healthy capture at 7-9 (resnet18 at batch 64), the
    slow one at 42-44 (batch 32)."""
    directory = tmp_path / "w"
    directory.mkdir()
    shutil.copy(SAMPLES / "resnet18_b64_cpu.pt.trace.json.gz", directory / WATCH_HEALTHY)
    shutil.copy(SAMPLES / "resnet18_cpu.pt.trace.json.gz", directory / WATCH_SLOW)
    lines: list[dict] = [
        {
            "format": "tuiprof-watch",
            "version": 1,
            "pid": 1,
            "started": 0,
            "what": "train.py",
            "settings": settings or {"ratio": 1.2, "window": 20, "held": 3, "warmup_steps": 5},
        }
    ]
    for step in range(1, steps + 1):
        wall = slow_ms / 1000 if step >= 40 else 0.001
        lines.append(
            {"s": step, "t": step * 0.01, "w": wall, **({"p": 1} if 6 <= step <= 10 or 41 <= step <= 45 else {})}
        )
        if step == 5:
            lines.append({"e": "trigger", "step": 5, "trigger": "healthy", "why": "after the warm-up"})
        if step == 9:
            lines.append(
                {
                    "e": "capture",
                    "trigger": "healthy",
                    "first_step": 7,
                    "last_step": 9,
                    "path": WATCH_HEALTHY,
                    "bytes": 1,
                }
            )
        if step == 40:
            lines.append({"e": "trigger", "step": 40, "trigger": "slow", "why": "3 steps over"})
        if step == 44:
            lines.append(
                {"e": "capture", "trigger": "slow", "first_step": 42, "last_step": 44, "path": WATCH_SLOW, "bytes": 1}
            )
    if ended:
        lines.append({"e": "end", "step": steps, "status": "finished"})
    (directory / "watch.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return directory


@pytest.fixture(autouse=True)
def _environment_kept():
    """What a test leaves in os.environ is undone.  cli.main sets variables for the workers it
    starts (--no-sidecars, --no-cache, --cache-size, --max-inflate-ratio): one test's
    --no-sidecars turned the sidecars off for every test after it in the same process."""
    before = dict(os.environ)
    yield
    if os.environ != before:
        os.environ.clear()
        os.environ.update(before)


@pytest.fixture(autouse=True)
def _no_user_keymap(monkeypatch, tmp_path_factory):
    """The explorer reads $XDG_CONFIG_HOME/tuiprof/keymap.toml: no test sees the developer's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "no-config"))


@pytest.fixture(scope="session", autouse=True)
def private_cache(tmp_path_factory):
    """Sidecars of read-only run directories (../shared/traces) go to the user's cache: a private one here.
    The decoded-trace cache is off, so every other test decodes what it opens
    (tests/unit/test_cache.py turns it on)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))
        # the registry of watched processes (tuiprof capture PID) lives there too, never the user's
        patch.setenv("XDG_RUNTIME_DIR", str(tmp_path_factory.mktemp("runtime")))
        patch.setenv("TUIPROF_NO_CACHE", "1")
        yield


@pytest.fixture
def cache_on(monkeypatch, tmp_path) -> Path:
    """The decoded-trace cache on (private_cache turned it off), in a folder of this test's own;
    returns the stores' folder (tests/unit/test_cache.py, tests/hostile/test_hostile_cache.py)."""
    from tuiprof.trace import cache

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv(cache.NO_CACHE_ENV, "0")
    monkeypatch.delenv(cache.CACHE_SIZE_ENV, raising=False)
    monkeypatch.setattr(cache, "_refusal", None)
    monkeypatch.setattr(cache, "_said", False)
    return tmp_path / "xdg" / "tuiprof" / "stores"


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


def _imports_torch(node: ast.AST) -> bool:
    return any(
        (isinstance(n, ast.Import) and any(a.name.split(".")[0] == "torch" for a in n.names))
        or (isinstance(n, ast.ImportFrom) and (n.module or "").split(".")[0] == "torch")
        for n in ast.walk(node)
    )


@functools.cache
def _torch_tests(path: Path) -> tuple[bool, frozenset[str]]:
    """Whether the file imports torch at its top, and the names of its functions that do."""
    tree = ast.parse(path.read_text())
    top = any(_imports_torch(n) for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom | ast.Try | ast.If))
    functions = frozenset(
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and _imports_torch(n)
    )
    return top, functions


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The ``capture`` marker (docs/development.md): every test in tests/capture/, and every other
    test whose file or own function imports torch; ``-m "not capture"`` runs the rest."""
    capture_folder = ROOT / "tests" / "capture"
    for item in items:
        path = Path(str(item.fspath))
        top, functions = _torch_tests(path)
        name = getattr(item, "originalname", item.name)
        if capture_folder in path.parents or top or name in functions:
            item.add_marker(pytest.mark.capture)
