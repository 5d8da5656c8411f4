"""Every kind of input through every command and every option (issue 38): each cell works (exit
0, sane output that shows the option was used) or is refused in one line on stderr with exit 2;
never a traceback, never an option ignored in silence.

The options are read from the parser (argparse's own actions), so an option added to a command
joins the matrix at once (and fails it until ``VALUES`` says what to try); a choice option tries
every choice.  The commands run in-process (``tuiprof.cli.main`` with capsys).  The explorer's
cells (``open`` on a terminal) stop where the TUI would start: its entry points are replaced by a
recorder, and a cell works when the explorer is reached.  The last tests register a scratch kind
(a Perfetto trace) in the test only: one kind and one registry line reach detection, refusals and
``--help`` with no other file touched.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import pickle
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.helpers.snapshot_gen import make_snapshot
from tuiprof.cli import build_parser, main

GPU_TRACE = ROOT / "tests" / "data" / "h100_vit_inference.json.gz"
RUN = SAMPLES / "ddp_gloo_2ranks"

KINDS = ("trace", "run", "watch", "snapshot")
# command column -> the parser it reads its options from; the explorer is open on a terminal
COMMANDS = {"summary": "summary", "open": "open", "explorer": "open", "diff": "diff", "timeline": "timeline"}
# How a refusal of a whole command names each kind.
KIND_WORDS = {"trace": "trace", "run": "run directory", "watch": "watch folder", "snapshot": "allocator snapshot"}

# The value tried for each option that takes one (by dest; a dict: by kind, for the kinds whose
# value must be valid; a kind that refuses the option gets the first).  Choices try each choice.
VALUES: dict[str, str | dict[str, str]] = {
    "trace": {"run": "1", "snapshot": "GPU_TRACE", "trace": "1", "watch": "1"},
    "max_inflate_ratio": "50",
    "cache_size": "100M",
    "cluster": "local:1",
    "sort": "calls",
    "limit": "1",
    "window_from": "300",
    "window_to": "100",
    "ranks": "all",
    "fail_if_slower": "1000%",
    "fail_if_memory": "1000%",
    "step": {"trace": "6", "run": "3", "watch": "6", "snapshot": "6"},
    "from_us": "1000",
    "to_us": "5000",
    "width": "40",
    "lanes": "cpu",
    "depth": "1",
}
MISSING = "MISSING-FROM-VALUES"
# diff --view takes the names summary gives the tables both print (issue 38: it had its own names).
SUMMARY_NAMED_DIFF_VIEWS = ("operators", "modules", "kernels", "steps", "memory")
# Options whose effect one run's output cannot show, and where it is tested instead.
UNSEEN = {
    "max_inflate_ratio": "a limit: only a bomb shows it (tests/hostile/test_hostile.py)",
    "no_sidecars": "the summaries kept beside a run's traces (tests/hostile/test_hostile_sidecars.py)",
    "no_cache": "the decoded-trace cache (tests/unit/test_cache.py)",
    "cache_size": "the decoded-trace cache (tests/unit/test_cache.py)",
    "fail_if_slower": "a gate shows when it fails (tests/cli/test_diff.py)",
    "fail_if_memory": "a gate shows when it fails (tests/cli/test_diff.py)",
    "cluster": "the same rows, summarised on Dask (tests/hostile/test_hostile_workers.py)",
}
# Shown only on a terminal: run on a 60-column one, the output must not fit it.
ON_A_TERMINAL = {"wide"}
COLUMNS = 60
# What each command does without the option (the kind's default view, diff's defaults): the same output.
DEFAULTS = {
    ("summary", "view"): {"trace": "operators", "run": "operators", "watch": "watch", "snapshot": "snapshot"},
    ("diff", "view"): {"trace": "all", "run": "all"},
    ("diff", "format"): {"trace": "table", "run": "table", "snapshot": "table"},
    ("diff", "metric"): {"trace": "device", "run": "cpu"},  # auto: device time where both sides have it
}


@dataclass(frozen=True)
class Cell:
    kind: str
    command: str
    dest: str | None  # None: the command alone, the baseline of its row
    argv: tuple[str, ...]  # the option as typed
    default: bool = False  # the value is the parser's default

    @property
    def id(self) -> str:
        return f"{self.kind}-{self.command}-{' '.join(self.argv) or '(alone)'}"


def _actions(command: str) -> list[argparse.Action]:
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return [a for a in commands.choices[command]._actions if a.option_strings and a.dest != "help"]


def _value(dest: str, kind: str) -> str:
    value = VALUES.get(dest, MISSING)
    return value.get(kind, next(iter(value.values()))) if isinstance(value, dict) else value


def _cells() -> list[Cell]:
    cells = []
    for kind in KINDS:
        for command, parser in COMMANDS.items():
            cells.append(Cell(kind, command, None, ()))
            for action in _actions(parser):
                flag = max(action.option_strings, key=len)
                if action.nargs == 0:
                    cells.append(Cell(kind, command, action.dest, (flag,)))
                    continue
                values = list(action.choices or ()) or [_value(action.dest, kind)]
                if (parser, action.dest) == ("diff", "view"):  # the tables a diff shares with summary, by their names
                    values += [name for name in SUMMARY_NAMED_DIFF_VIEWS if name not in values]
                cells.extend(
                    Cell(kind, command, action.dest, (flag, value), value == action.default) for value in values
                )
    return cells


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """Each kind's two inputs (diff's A and B), small: a GPU trace, a run of two ranks (a copy:
    its summaries are written beside it), a watch folder of three captures, two snapshots."""
    root = tmp_path_factory.mktemp("kinds")
    traces = root / "traces"
    traces.mkdir()
    for name in ("a.json.gz", "b.json.gz"):
        shutil.copy(GPU_TRACE, traces / name)
    run = root / "run"
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("*.tuiprof-summary"))
    watch = root / "watch"
    watch.mkdir()
    lines = ['{"format":"tuiprof-watch","version":1,"pid":1,"started":0,"what":"train.py","settings":{}}']
    lines += [f'{{"s":{s},"t":{s * 0.5},"w":{0.5 if s < 20 else 1.5},"d":0.1}}' for s in range(1, 31)]
    for trigger, first in (("healthy", 5), ("slow", 20), ("slow", 25)):
        name = f"step{first:06d}-{trigger}.pt.trace.json.gz"
        shutil.copy(GPU_TRACE, watch / name)
        lines.append(
            json.dumps(
                {
                    "e": "capture",
                    "trigger": trigger,
                    "first_step": first,
                    "last_step": first + 2,
                    "path": name,
                    "bytes": 1,
                }
            )
        )
    (watch / "watch.jsonl").write_text("\n".join(lines) + "\n")
    snapshots = []
    for seed in (1, 2):
        path = root / f"s{seed}.pickle"
        path.write_bytes(pickle.dumps(make_snapshot(seed, steps=30)[0]))
        snapshots.append(str(path))
    return {
        "trace": (str(traces / "a.json.gz"), str(traces / "b.json.gz")),
        "run": (str(run), str(run)),
        "watch": (str(watch), str(watch)),
        "snapshot": (snapshots[0], snapshots[1]),
    }


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str
    explored: tuple  # what the explorer was started with (entry point, its arguments), () if it was not


ENTRY_POINTS = (
    ("tuiprof.tui.app", "run_explorer"),
    ("tuiprof.tui.snapshot_app", "run_snapshot_explorer"),
    ("tuiprof.tui.watch_app", "run_watch_explorer"),
    ("tuiprof.tui.diff_app", "run_diff_explorer"),
)


def _run(argv: list[str], capsys, monkeypatch, terminal: bool) -> Outcome:
    import importlib

    explored: list[tuple] = []
    with monkeypatch.context() as patch:
        for module, name in ENTRY_POINTS:
            patch.setattr(
                importlib.import_module(module), name, lambda *a, _name=name: explored.append((_name, *a)) or 0
            )
        if terminal:
            patch.setattr(sys.stdout, "isatty", lambda: True)
            patch.setenv("COLUMNS", str(COLUMNS))
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse: a value it refuses
            code = exit_.code if isinstance(exit_.code, int) else 2
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, tuple(_seen(call) for call in explored))


def _seen(call: tuple) -> tuple:
    """An explorer call as compared: a loader (the snapshot app's) by what it loads."""
    return tuple(repr(arg(lambda *a: None)) if callable(arg) else str(arg) for arg in call)


def _argv(cell: Cell, inputs: dict[str, tuple[str, str]]) -> list[str]:
    a, b = inputs[cell.kind]
    paths = [a, b] if cell.command == "diff" else [a]
    option = [str(GPU_TRACE) if word == "GPU_TRACE" else word for word in cell.argv]
    return [COMMANDS[cell.command], *paths, *option]


_baselines: dict[tuple[str, str], Outcome] = {}


def _baseline(cell: Cell, inputs, capsys, monkeypatch) -> Outcome:
    key = (cell.kind, cell.command)
    if key not in _baselines:
        alone = Cell(cell.kind, cell.command, None, ())
        _baselines[key] = _run(_argv(alone, inputs), capsys, monkeypatch, cell.command == "explorer")
    return _baselines[key]


def _refused_in_one_line(outcome: Outcome) -> bool:
    lines = outcome.err.splitlines()
    return outcome.code == 2 and outcome.out == "" and len(lines) == 1 and lines[0].startswith("tuiprof: ")


CELLS = _cells()


@pytest.mark.parametrize("cell", CELLS, ids=[cell.id for cell in CELLS])
def test_each_cell_works_or_is_refused_in_one_line(cell: Cell, inputs, capsys, monkeypatch) -> None:
    if MISSING in cell.argv:
        pytest.fail(f"the option {cell.argv[0]} has no value in the matrix: add one to VALUES")
    baseline = _baseline(cell, inputs, capsys, monkeypatch)
    explorer = cell.command == "explorer"
    shown_on_terminal = cell.dest in ON_A_TERMINAL and cell.command in ("summary", "diff")
    outcome = _run(_argv(cell, inputs), capsys, monkeypatch, explorer or shown_on_terminal)
    assert "Traceback" not in outcome.err and "internal error" not in outcome.err, outcome.err
    if outcome.code != 0:  # refused: one line that names what is refused
        assert _refused_in_one_line(outcome), outcome
        if cell.dest is None or outcome.err == baseline.err:  # the command itself: the line names the kind
            assert KIND_WORDS[cell.kind] in outcome.err, outcome.err
        else:
            assert cell.argv[0] in outcome.err, outcome.err
        return
    assert baseline.code == 0, f"works with {cell.argv} but not without: {baseline.err}"
    if explorer:
        assert outcome.explored and outcome.out == "", outcome
    else:
        _assert_sane_output(cell, outcome, shown_on_terminal)
    if cell.dest is None or cell.dest in UNSEEN or (cell.dest in ON_A_TERMINAL and not shown_on_terminal):
        return
    if shown_on_terminal:
        assert max(map(len, outcome.out.splitlines())) > COLUMNS, f"{cell.argv[0]} ignored: the output fits"
        return
    value = cell.argv[-1]
    if (
        cell.default
        or DEFAULTS.get((COMMANDS[cell.command].replace("open", "summary"), cell.dest), {}).get(cell.kind) == value
    ):
        assert (outcome.out, outcome.explored) == (baseline.out, baseline.explored)  # the default, named
    else:
        assert (outcome.out, outcome.explored) != (baseline.out, baseline.explored), f"{cell.argv} ignored in silence"


def _assert_sane_output(cell: Cell, outcome: Outcome, terminal: bool) -> None:
    assert outcome.out or outcome.err.startswith("tuiprof: "), outcome  # rows, or a line saying why none
    if "json" in cell.argv:
        json.loads(outcome.out)
    if "csv" in cell.argv:
        rows = list(csv.reader(io.StringIO(outcome.out)))
        assert rows and len(rows[0]) > 1, outcome.out
    assert terminal or "\x1b[" not in outcome.out  # off a terminal: no escape sequences


def test_the_matrix_covers_every_kind_and_command_of_the_registry() -> None:
    """A kind added to the registry without inputs here fails at once (add them to ``inputs``)."""
    from tuiprof import kinds

    assert {kind.name for kind in kinds.KINDS} == set(KINDS)
    assert set(kinds.COMMANDS) == {COMMANDS[c] if c != "explorer" else c for c in COMMANDS} - {"open"}
    assert len(CELLS) >= 4 * 5 * 10


# ------------------------------------------------------------------ a fifth kind, in the test only


def _pftrace_summary(path: str, args) -> int:
    print(f"{Path(path).name}: {Path(path).stat().st_size} bytes of Perfetto protobuf, {args.limit} rows")
    return 0


@pytest.fixture
def scratch_kind(monkeypatch, tmp_path):
    """A Perfetto trace (``.pftrace``, told by its name and its first byte): one Kind and the registry line."""
    from tuiprof import kinds
    from tuiprof.kinds.base import READING, SUMMARY, TIMELINE, Kind

    kind = Kind(
        name="pftrace",
        title="a Perfetto trace",
        help="a Perfetto trace (.pftrace)",
        detect=lambda path: path.endswith(".pftrace") and Path(path).is_file() and Path(path).read_bytes()[:1] == b"\n",
        options={SUMMARY: (*READING, "limit")},
        summary=_pftrace_summary,
        views=lambda: ("operators",),
        without={
            "explorer": "open it in ui.perfetto.dev",
            TIMELINE: "open it in ui.perfetto.dev",
            "diff": "compare the traces it was made from",
        },
    )
    monkeypatch.setattr(kinds, "KINDS", [kind, *kinds.KINDS])  # the registry line
    path = tmp_path / "run.pftrace"
    path.write_bytes(b"\n\x05hello")
    return kind, str(path)


def test_a_scratch_kind_is_detected_and_run(scratch_kind, capsys) -> None:
    from tuiprof import kinds

    kind, path = scratch_kind
    assert kinds.find_kind(path) is kind
    assert kinds.find_kind(str(GPU_TRACE)).name == "trace"  # the others still find theirs
    assert main(["summary", path, "--limit", "3"]) == 0
    assert capsys.readouterr().out == "run.pftrace: 7 bytes of Perfetto protobuf, 3 rows\n"


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["summary", "PATH", "--sort", "calls"], "--sort calls: summary does not take it for a Perfetto trace"),
        (["summary", "PATH", "--view", "modules"], "--view modules: summary does not offer it for a Perfetto trace"),
        (["timeline", "PATH"], "PATH: a Perfetto trace has no timeline; open it in ui.perfetto.dev"),
        (["diff", "PATH", "PATH"], "PATH: a Perfetto trace has no diff; compare the traces it was made from"),
        (["diff", "PATH", str(GPU_TRACE)], "a Perfetto trace has no diff"),
        (["summary", str(GPU_TRACE), "--from", "5"], "(it does for an allocator snapshot)"),
    ],
)
def test_a_scratch_kind_is_refused_in_one_line_from_its_data(scratch_kind, capsys, argv, says) -> None:
    _, path = scratch_kind
    assert main([path if word == "PATH" else word for word in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and says.replace("PATH", path) in err, err


def test_a_scratch_kind_is_refused_by_the_explorer(scratch_kind, capsys, monkeypatch) -> None:
    _, path = scratch_kind
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["open", path]) == 2
    assert capsys.readouterr().err == f"tuiprof: {path}: a Perfetto trace has no explorer; open it in ui.perfetto.dev\n"


def test_a_scratch_kind_is_in_the_help(scratch_kind) -> None:
    def path_help(command: str) -> str:
        parser = build_parser()
        commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return " ".join(commands.choices[command].format_help().split())

    assert "a Perfetto trace (.pftrace)" in path_help("summary")
    assert "a Perfetto trace (.pftrace)" not in path_help("timeline")  # it has none
    assert "a Perfetto trace: operators" in path_help("summary")  # the views it prints


def test_diff_on_a_terminal_prints_when_an_option_of_the_printed_diff_is_given(inputs, capsys, monkeypatch) -> None:
    """--view, --limit and --wide shape printed tables: on a terminal they print (they were
    ignored by the explorer, which opened instead); without them the explorer opens."""
    a, b = inputs["trace"]
    alone = _run(["diff", a, b], capsys, monkeypatch, terminal=True)
    assert alone.code == 0 and [call[0] for call in alone.explored] == ["run_diff_explorer"] and alone.out == ""
    for option in (["--view", "kernels"], ["--limit", "1"], ["--metric", "cpu"]):
        printed = _run(["diff", a, b, *option], capsys, monkeypatch, terminal=True)
        assert printed.code == 0, printed
        assert bool(printed.explored) == (option[0] == "--metric"), option  # the explorer takes --metric
        assert bool(printed.out) != bool(printed.explored), option
