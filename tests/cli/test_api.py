"""``tuiprof.load``: the read API gives the rows ``tuiprof summary --format json`` prints,
and bad input raises the project's error with the line the command line prints."""

from __future__ import annotations

import json
import subprocess
import sys
import traceback

import pytest

import tuiprof
from tests.conftest import ROOT, SAMPLES
from tuiprof.errors import TraceError

SHIPPED = sorted(p for p in SAMPLES.iterdir() if p.name.endswith(".pt.trace.json.gz") or p.is_dir())
CASES = [  # (sample, view, extra summary options)
    *((path, view, ()) for path in SHIPPED for view in ("operators", "modules")),
    # "ops": the old name, an alias on both sides (report/catalog.py)
    (SAMPLES / "resnet18_cpu.pt.trace.json.gz", "ops", ("--group-by-shape", "--sort", "calls", "--limit", "7")),
]

# The command line in another interpreter, each invocation's stdout (and stderr, exit code) kept.
CLI = """
import contextlib, io, json, sys
from tuiprof.cli import main
answers = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    answers.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(answers))
"""


def run_cli(*argvs: list[str]) -> list[tuple[int, str, str]]:
    result = subprocess.run(
        [sys.executable, "-c", CLI, json.dumps(argvs)], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0, result.stderr
    return [tuple(answer) for answer in json.loads(result.stdout)]


def test_load_gives_the_rows_summary_prints_as_json_for_every_shipped_sample() -> None:
    assert len(SHIPPED) == 5  # four traces and the two-rank run directory
    argvs = [["summary", str(path), "--view", view, "--format", "json", *extra] for path, view, extra in CASES]
    answers = run_cli(*argvs)
    loaded = {path: tuiprof.load(path) for path in SHIPPED}
    for (path, view, extra), (code, stdout, _) in zip(CASES, answers):
        assert code == 0
        expected = json.loads(stdout)
        options = {"group_by_shape": True, "sort": "calls", "limit": 7} if extra else {}
        rows = loaded[path].table(view, **options)
        assert expected and rows == expected, (path.name, view, extra)
    assert set(loaded[SHIPPED[0]].views) >= {"operators", "modules", "kernels", "steps", "memory"}


def test_a_bad_file_raises_the_line_the_command_line_prints(tmp_path) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text("these are not the profiler's events\n")
    ((code, _, stderr),) = run_cli(["summary", str(bad), "--format", "json"])
    assert code == 2
    with pytest.raises(TraceError) as raised:
        tuiprof.load(bad)
    assert stderr == f"tuiprof: {raised.value}\n"
    innermost = traceback.extract_tb(raised.value.__traceback__)[-1]
    assert innermost.filename.endswith("tuiprof/report/api.py")  # not a frame of the decoder
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_an_unknown_view_or_sort_key_raises_the_error(resnet_model) -> None:
    from tuiprof.report.api import LoadedTrace

    trace = LoadedTrace(resnet_model)
    with pytest.raises(TraceError, match="not a view of one trace; use one of: operators, modules"):
        trace.table("operations")
    with pytest.raises(TraceError, match="not a column of the operators view"):
        trace.table("operators", sort="self_cpu")
