"""A trace big enough for the decoded-trace cache, and the cache's entries
(tests/unit/test_cache.py, tests/hostile/test_hostile_cache.py; the ``cache_on`` fixture is in
tests/conftest.py)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

EVENTS = 50_000  # ~9.6 MB: over cache.MIN_BYTES, so the real threshold is exercised
NAMES = [f"aten::op_{k}" for k in range(7)]


def write_trace(path: Path, last_name: str = "aten::last") -> Counter:
    """A Kineto-layout trace of EVENTS back-to-back operators on two threads; returns calls per name.
    ``last_name`` names the final operator (same length: a change in place of the same size)."""
    lines, calls = [], Counter()
    for i in range(EVENTS):
        name = last_name if i == EVENTS - 1 else NAMES[i % len(NAMES)]
        calls[name] += 1
        lines.append(
            '  {\n    "ph": "X", "cat": "cpu_op", "name": "%s", "pid": 1, "tid": %d,\n'
            '    "ts": %d.500, "dur": 1.250,\n    "args": {\n      "External id": %d, "Sequence number": %d\n    }\n  }'
            % (name, 1 + i % 2, 1_000_000 + 2 * i, i + 1, i)
        )
    text = '{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(lines) + "\n]}\n"
    path.write_text(text)
    return calls


def entries(stores: Path) -> list[Path]:
    return sorted(stores.iterdir()) if stores.is_dir() else []
