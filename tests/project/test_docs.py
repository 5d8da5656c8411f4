"""The docs a newcomer reads (issue 38 item 6): a README short enough to read to the end, whose
links all lead somewhere, and whose test line is the one CI runs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

README = ROOT / "README.md"
MAX_README_LINES = 250
DOC_MENTION = re.compile(r"docs/[\w./-]*\.md")  # `docs/x.md` in text, backticks or links
LOCAL_LINK = re.compile(r"\]\((?!https?:)([^)#\s]+)")  # [text](path): relative to the file


def _dangling(page: Path) -> list[str]:
    text = page.read_text()
    mentioned = [name for name in DOC_MENTION.findall(text) if not (ROOT / name).exists()]
    linked = [target for target in LOCAL_LINK.findall(text) if not (page.parent / target).exists()]
    return mentioned + linked


def test_the_readme_is_at_most_250_lines() -> None:
    lines = README.read_text().count("\n")
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines: move details into docs/"


def test_every_doc_the_readme_names_exists() -> None:
    assert DOC_MENTION.search(README.read_text()), "the README links into docs/"
    assert _dangling(README) == []


def test_every_doc_a_doc_names_exists() -> None:
    pages = sorted((ROOT / "docs").rglob("*.md"))
    assert {page: _dangling(page) for page in pages if _dangling(page)} == {}


def test_the_readme_test_line_is_what_ci_runs() -> None:
    """The README's second command installs the test extra and runs pytest; .ci/run does the same
    (quietly), so a newcomer's run and CI's are one."""
    block = README.read_text().split("```sh\n", 1)[1].split("```", 1)[0]
    test_line = next(line for line in block.splitlines() if '".[test]"' in line)
    steps = [step.strip() for step in test_line.split("#", 1)[0].split("&&")]
    assert steps == [
        "python3 -m venv .venv",
        ". .venv/bin/activate",
        'pip install -e ".[test]"',
        "python -m pytest -q -n auto",
    ]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert "python3 -m venv .venv" in ci and ". .venv/bin/activate" in ci
    assert 'python -m pip install -q -e ".[test]"' in ci
    assert "python -m pytest -q -n auto" in ci
