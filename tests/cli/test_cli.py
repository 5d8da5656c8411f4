"""The command line as a user meets it: data on stdout, one line on stderr, exit codes."""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
import subprocess
import sys

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.helpers.cli import tuiprof

RESNET = SAMPLES / "resnet18_cpu.pt.trace.json.gz"


def test_summary_imports_neither_torch_nor_textual() -> None:
    code = (
        "import sys, runpy; sys.argv = ['tuiprof', 'summary', %r, '--limit', '3'];"
        "from tuiprof.cli import main; rc = main();"
        "print('HEAVY', sorted(m for m in ('torch', 'torchvision', 'textual') if m in sys.modules))"
    ) % str(RESNET)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "HEAVY []" in result.stdout, result.stdout + result.stderr


def test_open_without_terminal_prints_tables_without_torch() -> None:
    code = (
        "import sys; sys.argv = ['tuiprof', 'open', %r, '--limit', '2'];"
        "from tuiprof.cli import main; rc = main();"
        "print('HEAVY', sorted(m for m in ('torch', 'torchvision') if m in sys.modules))"
    ) % str(RESNET)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert "HEAVY []" in result.stdout and "aten::" in result.stdout, result.stdout + result.stderr


def test_json_rows_have_documented_keys() -> None:
    result = tuiprof("summary", str(RESNET), "--format", "json", "--group-by-shape", "--limit", "5")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    expected = {
        "name",
        "calls",
        "self_cpu_us",
        "cpu_total_us",
        "self_device_us",
        "device_total_us",
        "self_cpu_mem_bytes",
        "cpu_mem_bytes",
        "self_device_mem_bytes",
        "device_mem_bytes",
        "flops",
        "input_shapes",
    }
    assert len(rows) == 5 and expected <= set(rows[0])


@pytest.mark.parametrize(
    ("view", "keys"),
    [
        ("modules", {"path", "calls", "self_cpu_us", "cpu_total_us", "backward_cpu_us", "device_total_us", "flops"}),
        ("kernels", {"name", "calls", "device_total_us", "avg_us", "min_us", "max_us"}),
        ("steps", {"name", "duration_us"}),
        ("memory", {"device", "peak_bytes"}),
    ],
)
def test_views_as_json(view: str, keys: set[str]) -> None:
    result = tuiprof("summary", str(RESNET), "--view", view, "--format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    if view == "kernels":
        assert rows == []  # a CPU trace has no kernels
        return
    assert rows and keys <= set(rows[0])
    if view == "modules":
        assert rows[0]["path"] == "ResNet_0"
        assert any(r["path"].startswith("ResNet_0/Sequential_") and r["path"].count("/") == 3 for r in rows)


def test_sort_limit_and_formats() -> None:
    result = tuiprof("summary", str(RESNET), "--sort", "calls", "--limit", "3", "--format", "csv")
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("name,") and len(lines) == 4
    column = lines[0].split(",").index("calls")
    calls = [int(line.split(",")[column]) for line in lines[1:]]
    assert calls == sorted(calls, reverse=True)
    markdown = tuiprof("summary", str(RESNET), "--limit", "2", "--format", "markdown").stdout
    assert markdown.startswith("| Name |")
    table = tuiprof("summary", str(RESNET), "--limit", "2").stdout
    assert "aten::" in table and "\x1b[" not in table


def test_top_level_only_has_no_nested_calls() -> None:
    rows = json.loads(tuiprof("summary", str(RESNET), "--top-level-only", "--format", "json").stdout)
    names = {r["name"] for r in rows}
    assert "model_train" in names and "aten::conv2d" not in names


def test_bad_sort_column() -> None:
    result = tuiprof("summary", str(RESNET), "--sort", "nope")
    assert result.returncode == 2 and "nope" in result.stderr and "Traceback" not in result.stderr


def _write(path, data: bytes) -> str:
    path.write_bytes(data)
    return str(path)


def _bad_inputs(tmp_path):
    real = gzip.decompress(RESNET.read_bytes())
    empty_dir = tmp_path / "empty_run"
    empty_dir.mkdir()
    return {
        "missing path": str(tmp_path / "nope.json"),
        "directory without traces": str(empty_dir),
        "not JSON": _write(tmp_path / "notes.json", b"hello, this is text\n"),
        "truncated gzip": _write(tmp_path / "cut.json.gz", RESNET.read_bytes()[:5000]),
        "JSON that is not a trace": _write(tmp_path / "config.json", b'{"lr": 0.01, "layers": [1, 2]}'),
        "empty trace": _write(tmp_path / "empty.json", b'{"schemaVersion": 1, "traceEvents": []}'),
        "empty file": _write(tmp_path / "zero.json", b""),
        "gzip of garbage": _write(tmp_path / "g.json.gz", gzip.compress(b"\x00\x01garbage")),
        "binary": _write(tmp_path / "bin.json", bytes(range(256)) * 10),
        "truncated JSON": None if not real else _write(tmp_path / "half.json", b"{" + b" " * 10),
    }


@pytest.mark.parametrize(
    "case",
    [
        "missing path",
        "directory without traces",
        "not JSON",
        "truncated gzip",
        "JSON that is not a trace",
        "empty trace",
        "empty file",
        "gzip of garbage",
        "binary",
        "truncated JSON",
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, case: str) -> None:
    path = _bad_inputs(tmp_path)[case]
    result = tuiprof("summary", path)
    assert result.returncode == 2, (case, result.returncode, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert lines[0].startswith("tuiprof: ") and path.split("/")[-1] in lines[0]


@pytest.mark.parametrize(("command", "tuned"), [("summary", True), ("timeline", True), ("live", False), ("run", False)])
def test_only_trace_reading_commands_tune_the_allocator(monkeypatch, capsys, command: str, tuned: bool) -> None:
    from tuiprof import allocator, cli

    calls = []
    monkeypatch.setattr(allocator, "return_freed_memory", lambda: calls.append(1) or True)
    monkeypatch.setattr(
        cli,
        {"summary": "run_summary", "timeline": "run_timeline", "live": "run_live", "run": "run_script"}[command],
        lambda args: 0,
    )
    target = (
        "tiny"
        if command == "live"
        else "train.py"
        if command == "run"
        else str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
    )
    assert cli.main([command, target]) == 0
    assert bool(calls) == tuned  # a training process (live, run) keeps the allocator it would have


def test_the_allocator_is_tuned_where_glibc_is() -> None:
    from tuiprof.allocator import return_freed_memory

    assert return_freed_memory() == sys.platform.startswith("linux")


@pytest.mark.parametrize("width", [60, 80])
@pytest.mark.parametrize("sort", [None, "calls"])
def test_a_table_on_a_terminal_fits_it_and_names_what_it_left_out(monkeypatch, capsys, width, sort) -> None:
    from tuiprof import cli
    from tuiprof.report import summary
    from tuiprof.report.views import TRACE_VIEWS

    sample = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
    sorting = ["--sort", sort] if sort else []
    assert cli.main(["summary", sample, "--limit", "3", "--format", "csv", *sorting]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    headers = {c.key: c.header for c in TRACE_VIEWS["operators"].columns}
    assert cli.main(["summary", sample, "--limit", "3", *sorting]) == 0  # a pipe: every column the text shows
    piped = capsys.readouterr().out
    every = [h for h in headers.values() if f" {h} " in piped]
    monkeypatch.setattr(summary, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(width))  # rich's terminal width
    assert cli.main(["summary", sample, "--limit", "3", *sorting]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(map(len, lines)) <= width  # an 80-column SSH terminal does not wrap it
    header = next(line for line in lines if line.strip().startswith("Name"))
    said = lines[-1]
    assert said.startswith("hidden to fit: ") and "--wide" in said
    sort_header = headers[sort or "self_cpu_us"]
    assert re.search(rf"\b{re.escape(sort_header)}\b", header)  # the sorted column always stays
    shown = [h for h in every if re.search(rf"(^|  ){re.escape(h)}(  |$)", header.strip())]
    hidden = [h for h in every if h not in shown]
    assert hidden and said.startswith(f"hidden to fit: {hidden[0]}")  # named, in order, as many as the line holds
    body = lines[lines.index(next(line for line in lines if "───" in line)) + 1 :][: len(rows) - 1]
    for row, line in zip(rows[1:], body):  # each row in order, its name's end kept, its calls beside it
        assert row[0][-6:] in line, (row[0], line)
        assert row[rows[0].index("calls")] in line.split() or "Calls" not in shown

    assert cli.main(["summary", sample, "--limit", "3", "--wide", *sorting]) == 0
    wide = capsys.readouterr().out
    assert max(map(len, wide.splitlines())) > width and "hidden to fit" not in wide
    assert all(f" {h} " in wide for h in every)  # the pipe's columns, all of them


def test_a_live_captures_modules_are_named_as_the_explorer_names_them(monkeypatch, capsys) -> None:
    """At 80 columns, summary --view modules of a live capture keeps the qualified names (the
    explorer's tree shows them) beside the Class_k paths."""
    from tuiprof import cli
    from tuiprof.report import summary

    trace = str(ROOT / "tests" / "data" / "mlp_memory_categories.pt.trace.json.gz")
    monkeypatch.setattr(summary, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "80")
    assert cli.main(["summary", trace, "--view", "modules"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.strip().startswith("Module "))
    assert "Qualified name" in header and "blocks.1.0" in out


def test_the_steps_table_keeps_dev_idle_at_60_columns(monkeypatch, capsys) -> None:
    """Whether the device waited is what a GPU step table owes first: Dev idle stays at 60 columns."""
    from tuiprof import cli
    from tuiprof.report import summary

    trace = str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz")
    monkeypatch.setattr(summary, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["summary", trace, "--view", "steps"]) == 0
    header = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("Step "))
    assert "Dev idle" in header


def test_a_pipe_gets_every_column(capsys) -> None:
    from tuiprof import cli

    assert cli.main(["summary", str(SAMPLES / "resnet18_cpu.pt.trace.json.gz"), "--limit", "2"]) == 0
    text = capsys.readouterr().out
    for header in ("Self CPU %", "CPU total %", "CPU avg", "Calls", "Self CPU Mem", "FLOPs run", "Run FLOP/s"):
        assert header in text
    assert "hidden to fit" not in text


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b"root:x:0:0:root:/root:/bin/bash\n", "not JSON"),
        (b"", "empty"),
        (gzip.compress(b"\x00" * 4096, mtime=0), "not JSON"),
    ],
)
def test_open_in_a_terminal_refuses_a_non_trace_before_the_explorer(
    tmp_path, monkeypatch, capsys, content, says
) -> None:
    from tuiprof import cli
    from tuiprof.tui import app

    path = tmp_path / "passwd.json.gz" if content.startswith(b"\x1f\x8b") else tmp_path / "passwd"
    path.write_bytes(content)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(app, "run_explorer", lambda *a: pytest.fail("the explorer started"))
    assert cli.main(["open", str(path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and says in error[0] and str(path.name) in error[0]


def test_open_in_a_terminal_lets_a_trace_through(monkeypatch) -> None:
    from tuiprof import cli
    from tuiprof.tui import app

    opened = []
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(app, "run_explorer", lambda path, *a: opened.append(path) or 0)
    assert cli.main(["open", str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")]) == 0
    assert opened


# ------------------------------------------------------------------ summary fitted to 60 columns (walkthrough #12)


def test_an_empty_column_goes_before_one_with_values() -> None:
    """Two columns compete for the last place: the one that is ``--`` in every row goes,
    the one with values stays (whatever their order or wide-screen flags)."""
    from tuiprof.report.render import layout_table
    from tuiprof.report.views import Column

    columns = (
        Column("name", "Step", "text", ""),
        Column("comm", "Comm", "us", ""),
        Column("idle", "Dev idle", "us", ""),
    )
    rows = [{"name": "ProfilerStep#6", "idle": 6334.5, "comm": None}]
    # name 14 + idle 9 + rules: room for one of the two numbers only
    layout = layout_table(rows, columns, 14 + 3 + 9 + 3 + 1 + 2)
    assert [c.key for c in layout.columns] == ["name", "idle"] and [c.key for c in layout.dropped] == ["comm"]


def test_summary_title_is_cut_not_wrapped_and_an_empty_view_prints_no_header(monkeypatch, capsys, tmp_path) -> None:
    import shutil

    from tests.conftest import SAMPLES
    from tuiprof import cli
    from tuiprof.report import summary

    long_name = tmp_path / ("tracelens__h100__Falconsai_nsfw_image_detection_" + "x" * 20 + ".json.gz")
    shutil.copy(SAMPLES / "resnet18_cpu.pt.trace.json.gz", long_name)
    monkeypatch.setattr(summary, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "60")
    assert cli.main(["summary", str(long_name), "--view", "steps"]) == 0
    title = capsys.readouterr().out.splitlines()[0]
    assert title.strip().startswith("Steps - ") and title.strip().endswith(".json.gz") and "…" in title
    assert cli.main(["summary", str(long_name), "--view", "kernels"]) == 0  # a CPU trace: no kernels
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.strip() == "tuiprof: the kernels view of this trace is empty"


def test_ctrl_c_while_starting_is_one_line_and_exit_130(monkeypatch, capsys) -> None:
    """Ctrl-C in the first fraction of a second, before the command's own handler (while the
    signal handlers were being imported): a Python traceback, said a tmux walk-through."""
    from tuiprof import cleanup
    from tuiprof.cli import main

    def interrupted() -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(cleanup, "install_signal_handlers", interrupted)
    assert main(["summary", "x.json"]) == 130
    assert capsys.readouterr().err == "tuiprof: interrupted\n"
