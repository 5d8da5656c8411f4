"""The tests' own layout (docs/development.md, "Tests"): each test file in the folder of its
kind, helpers shared by import from tests/helpers or tests/conftest.py, never from another
test file and never written twice."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import ROOT

TESTS = ROOT / "tests"
KINDS = ("unit", "cli", "tui", "hostile", "capture", "project")


def _test_files() -> list[Path]:
    return sorted(TESTS.rglob("test_*.py"))


def test_every_test_file_is_in_the_folder_of_its_kind() -> None:
    misplaced = [
        str(path.relative_to(TESTS))
        for path in _test_files()
        if path.parent.parent != TESTS or path.parent.name not in KINDS
    ]
    assert misplaced == [], f"move them into tests/{{{','.join(KINDS)}}}/ (docs/development.md)"


def test_no_test_file_imports_another() -> None:
    """A helper two files need lives in tests/helpers/ (or a fixture in tests/conftest.py)."""
    found = []
    for path in _test_files():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tests."):
                if any(part.startswith("test_") for part in node.module.split(".")):
                    found.append(f"{path.relative_to(TESTS)}:{node.lineno} from {node.module}")
    assert found == []


def _body(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The function as written, its name and docstring aside."""
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    return ast.dump(ast.Module(body=[*body], type_ignores=[])) + ast.dump(node.args)


def test_no_helper_is_written_twice() -> None:
    """Two test files (or helper modules) that define the same function, by whatever name: one
    of them belongs in tests/helpers/ (`duplicates` finds the near copies)."""
    places = defaultdict(list)
    for path in sorted(TESTS.rglob("*.py")):
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and not node.name.startswith("test_"):
                places[_body(node)].append(f"{path.relative_to(TESTS)}::{node.name}")
    copies = [where for where in places.values() if len({place.split("::")[0] for place in where}) > 1]
    assert copies == []
