"""The shipped compiled trace and plain-Python reads of its raw events (tests/unit/test_compiled.py,
tests/capture/test_compiled_run.py): the oracle never uses tuiprof's engine."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from tests.conftest import DATA

COMPILED_CPU = DATA / "compiled_mlp_cpu.json.gz"  # scripts/make_compiled_trace.py
REGION = "Torch-Compiled Region: "


def complete_events(path: Path) -> list[dict]:
    """The complete ("X") events of a gzipped trace."""
    with gzip.open(path, "rt") as handle:
        return [e for e in json.load(handle)["traceEvents"] if e.get("ph") == "X"]


def encloses(outer: dict, inner: dict) -> bool:
    """outer holds inner in time, on the same thread (exact times)."""
    return (
        outer is not inner
        and outer.get("tid") == inner.get("tid")
        and outer["ts"] <= inner["ts"]
        and inner["ts"] + inner["dur"] <= outer["ts"] + outer["dur"]
    )


def module_node(model, qualified: str):
    """The module node of ``model`` with this qualified name (``block.bn``)."""
    return next(n for n in model.modules.walk() if n.qualified_name == qualified)
