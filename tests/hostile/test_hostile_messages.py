"""Every line tuiprof prints on stderr is plain text, whatever path or file text it names (issue 42).

Two halves.  The source: every write to stderr outside the UI goes through
``report.render.print_notice``, which makes its whole line plain -- a ``print(..., file=sys.stderr)``
or ``sys.stderr.write`` of anything but a constant is a failure here, unless listed below with the
reason.  The behaviour: every message template, each run with a path (a folder, a registry, a cache
folder, a run directory, a watch folder) and a file's texts (a watch history's capture path and
failure) that carry OSC 0, OSC 52, a C1 CSI (``\\x9b``) and a byte that is no UTF-8; the output,
stdout and stderr, must hold no ESC, BEL or C1 control, and the escaped form must be there.
"""

from __future__ import annotations

import ast
import json
import os
import re
import threading
import time
from argparse import Namespace
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tuiprof.cli import main
from tuiprof.trace import cache

OSC0 = "\x1b]0;pwned\x07"
OSC52 = "\x1b]52;c;cHduZWQ=\x07"
CSI8 = "\x9b31m"  # the 8-bit CSI: red text on terminals that take C1 controls
NOT_UTF8 = os.fsdecode(b"\x9b")  # a raw byte of a file name, written back raw unless escaped
TEXT = f"x{OSC0}{OSC52}{CSI8}"  # what a file's text may hold (JSON, TOML: UTF-8)
HOSTILE = TEXT + NOT_UTF8  # what a path may hold
SHOWN = "x\\x1b]0;pwned\\x07"  # the start of what a plain surface shows of it
SAMPLE = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
_RAW = re.compile("[\x1b\x07\x80-\x9f\udc80-\udcff]")

# Writes to stderr that are not print_notice, and why each is safe.
ALLOWED = {
    ("kinds/snapshot.py", "progress"): "whole percents and megabytes, on one line it clears",
    ("kinds/snapshot.py", "_read_showing_progress"): "clears its own progress line (\\r, CSI K): no text",
    (
        "capture/watch_commands.py",
        "run_watched",
    ): "traceback.print_exc: the user's script's own error, as python shows it",
}


def _stderr_writes(tree: ast.AST) -> list[tuple[str, ast.Call]]:
    """(enclosing function, call) for each print to sys.stderr, sys.stderr.write and
    traceback.print_exc whose text is not a constant."""
    found = []
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        for node in ast.walk(function):
            if not isinstance(node, ast.Call):
                continue
            called = ast.unparse(node.func)
            to_stderr = any(k.arg == "file" and ast.unparse(k.value) == "sys.stderr" for k in node.keywords)
            text = node.args[0] if node.args else None
            constant = isinstance(text, ast.Constant)
            if (called == "print" and to_stderr and not constant) or called in (
                "sys.stderr.write",
                "traceback.print_exc",
            ):
                found.append((function.name, node))
    return found


def test_every_line_on_stderr_goes_through_the_plain_text_filter() -> None:
    package = ROOT / "tuiprof"
    unfiltered, allowed_seen = [], set()
    for path in sorted(package.rglob("*.py")):
        module = path.relative_to(package).as_posix()
        for function, call in _stderr_writes(ast.parse(path.read_text())):
            if (module, function) in ALLOWED:
                allowed_seen.add((module, function))
            else:
                unfiltered.append(f"{module}:{call.lineno} in {function}: {ast.unparse(call)[:100]}")
        for node in ast.walk(ast.parse(path.read_text())):  # a warning's text: each value made plain
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "warnings.warn" and node.args:
                values = [v.value for v in ast.walk(node.args[0]) if isinstance(v, ast.FormattedValue)]
                if any(not (isinstance(v, ast.Call) and ast.unparse(v.func) == "plain") for v in values):
                    unfiltered.append(f"{module}:{node.lineno}: warnings.warn of a value not made plain")
    assert unfiltered == [], "write these through print_notice (report/render.py):\n" + "\n".join(unfiltered)
    assert allowed_seen == set(ALLOWED), set(ALLOWED) - allowed_seen  # no stale exception


def test_print_notice_escapes_what_it_prints(capsys) -> None:
    from tuiprof.report.render import print_notice

    print_notice(f"tuiprof: {HOSTILE}")
    err = capsys.readouterr().err
    assert not _RAW.search(err) and err.startswith(f"tuiprof: {SHOWN}") and err.endswith("\\x9b31m\\x9b\n")


# ------------------------------------------------------------------ the templates, run


def _watch_folder(path: Path, pid: int, history: list[dict] = ()) -> Path:
    path.mkdir(mode=0o700)
    header = {"format": "tuiprof-watch", "version": 3, "pid": pid, "started": 1.0, "what": TEXT, "settings": {}}
    (path / "watch.jsonl").write_text("".join(json.dumps(line) + "\n" for line in [header, *history]))
    return path


def _answer_requests(directory: Path, lines: list[dict]) -> threading.Thread:
    """A job in a thread: takes the next capture request and appends ``lines`` to the history."""

    def job() -> None:
        deadline = time.monotonic() + 20
        while not (directory / "capture.request").exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        (directory / "capture.request").unlink()
        with open(directory / "watch.jsonl", "a") as history:
            history.write("".join(json.dumps(line) + "\n" for line in lines))

    thread = threading.Thread(target=job, daemon=True)
    thread.start()
    return thread


def _capture(directory: Path, timeout: float = 10) -> int:
    from tuiprof.capture.watch_commands import request_capture

    return request_capture(Namespace(directory=str(directory), timeout=timeout))


def _cache_refused(tmp_path: Path, monkeypatch) -> int:
    xdg = tmp_path / HOSTILE
    (xdg / "tuiprof" / "stores").mkdir(parents=True)
    (xdg / "tuiprof" / "stores").chmod(0o777)
    monkeypatch.setenv("XDG_CACHE_HOME", str(xdg))
    monkeypatch.setenv(cache.NO_CACHE_ENV, "0")
    monkeypatch.setattr(cache, "_refusal", None)
    monkeypatch.setattr(cache, "_said", False)
    return main(["summary", str(SAMPLE), "--limit", "1"])


def _run_directory(tmp_path: Path, command: str) -> int:
    run = tmp_path / HOSTILE
    run.mkdir()
    for rank in (0, 1):
        trace = json.loads(__import__("gzip").decompress(SAMPLE.read_bytes()))
        trace["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "gloo"}
        (run / f"rank{rank}{HOSTILE}.json").write_text(json.dumps(trace))
    if command == "diff":
        return main(["diff", str(run), str(run), "--format", "csv", "--limit", "1"])
    return main(["summary", str(run), "--view", "operators", "--limit", "1"])


def _watched_script(tmp_path: Path, monkeypatch) -> int:
    pytest.importorskip("torch")
    runtime = tmp_path / f"runtime{HOSTILE}"
    runtime.write_text("")  # a file where the registry's folder goes: the registry fails, said
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    script = tmp_path / f"job{HOSTILE}.py"
    script.write_text("print('done')\n")
    return main(["run", "--watch", str(tmp_path / f"w{HOSTILE}"), str(script)])


def _keymap(tmp_path: Path, monkeypatch) -> int:
    from tuiprof.tui.commands import APP_COMMANDS
    from tuiprof.tui.keymap import load_keymap

    config = tmp_path / HOSTILE
    (config / "tuiprof").mkdir(parents=True)
    (config / "tuiprof" / "keymap.toml").write_text(f'"{TEXT}" = "q"\n')
    monkeypatch.setenv("XDG_CONFIG_HOME", str(config))
    _, problem = load_keymap(APP_COMMANDS)
    return 2 if problem else 0


def _internal_error(monkeypatch) -> int:
    from tuiprof import kinds

    def broken(*args, **kwargs):
        raise RuntimeError(f"a bug about {HOSTILE}")

    monkeypatch.setattr(kinds, "run_command", broken)
    return main(["summary", str(SAMPLE)])


SCENARIOS = {
    # TraceError texts, through main
    "a missing trace": lambda t, m: main(["summary", str(t / f"{HOSTILE}.json")]),
    "an option a kind does not take": lambda t, m: main(["summary", str(SAMPLE), "--sort", HOSTILE]),
    "a snapshot window": lambda t, m: main(["summary", str(t / HOSTILE), "--from", "nan"]),
    "capture of a folder that is not watched": lambda t, m: (
        os.mkdir(t / HOSTILE),
        main(["capture", str(t / HOSTILE)]),
    )[1],
    "capture of a name too long": lambda t, m: main(["capture", HOSTILE * 300]),
    "capture of a pid without an entry": lambda t, m: (
        m.setenv("XDG_RUNTIME_DIR", str(t / HOSTILE)),
        main(["capture", str(os.getpid())]),
    )[1],
    "capture of an ended job": lambda t, m: main(
        ["capture", str(_watch_folder(t / HOSTILE, 1, [{"e": "end", "step": 0, "status": "finished"}]))]
    ),
    "capture over a planted request link": lambda t, m: (
        (_watch_folder(t / HOSTILE, 1) / "capture.request").symlink_to(t / "elsewhere"),
        main(["capture", str(t / HOSTILE)]),
    )[1],
    "a watch history's bad line": lambda t, m: main(
        ["summary", str(_watch_folder(t / HOSTILE, 1, [{"e": TEXT}])), "--view", "watch"]
    ),
    # notices
    "the cache folder refused": _cache_refused,
    "a run directory's trace chosen": lambda t, m: _run_directory(t, "summary"),
    "a run directory's trace compared": lambda t, m: _run_directory(t, "diff"),
    "capture: captured": lambda t, m: (
        _answer_requests(
            d := _watch_folder(t / HOSTILE, os.getpid(), [{"s": 1, "t": 0.1, "w": 0.1}]),
            [
                {"e": "trigger", "step": 1, "trigger": "demand", "why": TEXT},
                {"e": "capture", "trigger": "demand", "first_step": 3, "last_step": 5, "path": TEXT, "bytes": 1},
            ],
        ),
        _capture(d),
    )[1],
    "capture: the job could not": lambda t, m: (
        _answer_requests(
            d := _watch_folder(t / HOSTILE, os.getpid(), [{"s": 1, "t": 0.1, "w": 0.1}]),
            [
                {"e": "trigger", "step": 1, "trigger": "demand", "why": TEXT},
                {"e": "failure", "step": 2, "what": TEXT},
            ],
        ),
        _capture(d),
    )[1],
    "capture: not within the timeout": lambda t, m: _capture(_watch_folder(t / HOSTILE, os.getpid()), 0.2),
    "run --watch: watching, the registry, steps watched": _watched_script,
    "the keymap": _keymap,
    "an internal error": lambda t, m: _internal_error(m),
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_message_template_prints_an_escape_laden_path_escaped(tmp_path, monkeypatch, capsys, scenario) -> None:
    monkeypatch.chdir(tmp_path)
    code = SCENARIOS[scenario](tmp_path, monkeypatch)
    cache.wait_for_writes()
    out, err = capsys.readouterr()
    assert code is not None
    assert not _RAW.search(out) and not _RAW.search(err), (out[-400:], err)
    assert SHOWN in err or SHOWN in out, (code, err)
