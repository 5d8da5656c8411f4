"""A watch folder's history as its lines (tests/capture/test_watch.py, tests/hostile/test_hostile_watch.py)."""

from __future__ import annotations

import json
from pathlib import Path


def history_lines(directory: Path) -> list[dict]:
    """watch.jsonl's lines, decoded: the header first, then steps and events as written."""
    return [json.loads(line) for line in (directory / "watch.jsonl").read_text().splitlines()]
