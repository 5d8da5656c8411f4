"""Terminal escapes in a trace never reach the terminal, on every surface added since the
single-trace path: diff's text, Markdown, CSV and stderr, and every pane of the explorer
(header, drill-in titles, detail panes, Memory, Ranks, the diff explorer).

One trace (tests/helpers/hostile_trace.py) carries OSC 52 (clipboard) and OSC 0 (title) in every
text field; a surface passes when no raw ESC or BEL comes out and the escaped form does."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.cli import tuiprof_bytes
from tests.helpers.hostile_trace import EVIL, OSC0, SHOWN, leaks, write_hostile_trace
from tests.helpers.tui import loaded, plain_text
from tuiprof.analysis import load_model
from tuiprof.report.details import kernel_text, module_text, operator_text
from tuiprof.report.header import header_line
from tuiprof.report.memory_chart import MemoryCurve
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.diff_app import DiffApp, DiffSource
from tuiprof.tui.sources import FileSource


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("hostile")
    return write_hostile_trace(folder / "a.json"), write_hostile_trace(folder / "b.json", scale=1.5)


@pytest.fixture(scope="module")
def run_directory(tmp_path_factory, pair) -> Path:
    """Two ranks whose file names carry escapes, as a run directory lists them."""
    folder = tmp_path_factory.mktemp("run")
    write_hostile_trace(folder / f"rank0{OSC0}.json", 1.0, rank=0)
    write_hostile_trace(folder / f"rank1{EVIL}.json", 1.5, rank=1)
    return folder


# ------------------------------------------------------------------ diff as text


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv"])
def test_diff_text_markdown_and_csv_show_names_escaped(pair, fmt) -> None:
    result = tuiprof_bytes("diff", str(pair[0]), str(pair[1]), "--format", fmt)
    out = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert not leaks(out) and not leaks(result.stderr)
    # every kind of name is there, escaped: operator, runtime, annotation, module, kernel, memcpy, NCCL
    for name in ("aten::mm", "cudaLaunchKernel", "## forward", "Linear", "gemm", "Memcpy HtoD", "ncclKernel_AllReduce"):
        assert name + SHOWN in out, name
    if fmt != "csv":
        assert "aten::mm" + SHOWN in out.split("biggest contributors", 1)[1].splitlines()[1]  # the verdict's lines too


def test_diff_on_a_terminal_shows_names_escaped(pair, monkeypatch, capsys) -> None:
    from tuiprof import cli
    from tuiprof.report import diff

    monkeypatch.setattr(diff, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "200")
    assert cli.main(["diff", str(pair[0]), str(pair[1]), "--format", "table"]) == 0
    captured = capsys.readouterr()
    assert not leaks(captured.out) and not leaks(captured.err) and "aten::mm" + SHOWN in captured.out


def test_diff_of_run_directories_names_their_files_escaped(run_directory) -> None:
    for ranks in ((), ("--ranks", "all")):
        result = tuiprof_bytes("diff", str(run_directory), str(run_directory), "--format", "markdown", *ranks)
        assert result.returncode == 0, result.stderr
        assert not leaks(result.stdout) and not leaks(result.stderr)
    plain_pair = tuiprof_bytes("diff", str(run_directory), str(run_directory), "--format", "markdown")
    assert b"rank0\\x1b]0;pwned\\x07.json" in plain_pair.stderr and b"rank0\\x1b]0;pwned\\x07.json" in plain_pair.stdout


def test_live_qualified_names_in_diff_are_escaped(tmp_path) -> None:
    """Both sides named by a live capture: modules are compared by qualified name."""
    import json

    paths = []
    for scale in (1.0, 1.5):
        path = write_hostile_trace(tmp_path / f"{scale}.json", scale)
        document = json.loads(path.read_text())
        region = f"[compiled 0:0{EVIL}]"  # every node named: the diff keys modules by qualified name
        document["tuiprofLive"]["modules"][region] = {
            "qualified_name": "compiled" + EVIL,
            "parameters": 0,
            "output_shape": "",
        }
        path.write_text(json.dumps(document))
        paths.append(path)
    for fmt in ("table", "markdown", "csv"):
        result = tuiprof_bytes("diff", *map(str, paths), "--format", fmt, "--view", "modules")
        assert result.returncode == 0 and not leaks(result.stdout), (fmt, result.stdout[:2000])
        assert ("layer" + SHOWN).encode() in result.stdout, fmt


# ------------------------------------------------------------------ the texts the explorer draws


def test_every_detail_pane_header_and_chart_legend_is_plain(pair) -> None:
    """Built in report/: every operator, kernel (Inductor's decoded ops too), module
    (compiled regions, live shape and qualified name), the header (device name) and the
    memory chart's peak label."""
    model = load_model(pair[0])
    texts = {"header": header_line(model).plain}
    texts |= {f"op {s.name!r}": operator_text(model, s).plain for s in model.operators()}
    texts |= {f"kernel {k.name!r}": kernel_text(k).plain for k in model.kernels}
    texts |= {f"module {m.path!r}": module_text(model, m).plain for m in model.modules.walk()}
    for timeline in model.memory:
        texts[f"memory {timeline.device}"] = plain_text(
            MemoryCurve(timeline, 0, 4, model.calls.name(max(timeline.peak_operator_row, 0)) + EVIL), 400
        )
    assert not [key for key, text in texts.items() if leaks(text)]
    joined = "\n".join(texts.values())
    for shown in (
        "GPU" + SHOWN,
        "float" + SHOWN,
        "8x4" + SHOWN,
        "[compiled 0:0" + SHOWN,
        "computes: pointwise: add" + SHOWN,
    ):
        assert shown in joined, shown


def _screen(app) -> str:
    """The screen as drawn (the SVG screenshot's text, entities decoded)."""
    svg = app.export_screenshot()
    return "\n".join(html.unescape(t).replace("\xa0", " ") for t in re.findall(r"<text[^>]*>([^<]*)</text>", svg))


async def test_explorer_views_drill_ins_and_details_are_plain(pair) -> None:
    app = ExplorerApp(FileSource(str(pair[0])))
    seen = []
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        seen.append(("overview", _screen(app)))
        for key, drills in (("2", False), ("3", True), ("4", True), ("5", False)):  # Enter drills into a row
            await pilot.press(key)
            await loaded(pilot)
            for step in range(4):
                seen.append((f"{app.current_view} row {step}", _screen(app)))
                if drills:
                    await pilot.press("enter")
                    await loaded(pilot)
                    seen.append((f"{app.current_view} row {step} drilled in", _screen(app)))
                    await pilot.press("escape")
                    await loaded(pilot)
                await pilot.press("j")
                await loaded(pilot)
    assert not [label for label, text in seen if leaks(text)]
    shown = "\n".join(text for _, text in seen)
    for text in ("GPU" + SHOWN, "float" + SHOWN, "8x4" + SHOWN, "in aten::mm" + SHOWN):
        assert text in shown, text
    titles = [line for line in shown.splitlines() if line.endswith(("calls (esc: back)", "launches (esc: back)"))]
    assert any(line.startswith("aten::mm" + SHOWN) and line.endswith(": 2 calls (esc: back)") for line in titles), (
        titles
    )
    assert any(line.startswith("gemm" + SHOWN) and line.endswith(": 2 launches (esc: back)") for line in titles), titles


async def test_ranks_view_names_files_escaped(run_directory) -> None:
    app = ExplorerApp(FileSource(str(run_directory)))
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        await pilot.press("8")
        await loaded(pilot)
        screens = [_screen(app)]
        await pilot.press("j")
        await loaded(pilot)
        screens.append(_screen(app))
    assert not any(leaks(text) for text in screens)
    assert "rank0\\x1b]0;pwned\\x07.json" in screens[0]


async def test_diff_explorer_is_plain(pair) -> None:
    app = DiffApp(DiffSource(str(pair[0]), str(pair[1])))
    seen = []
    async with app.run_test(size=(200, 50)) as pilot:
        await loaded(pilot)
        for key in "123456":
            await pilot.press(key)
            await loaded(pilot)
            for _ in range(3):
                seen.append((app.current_view, _screen(app)))
                await pilot.press("j")
                await loaded(pilot)
    assert not [view for view, text in seen if leaks(text)]
    shown = "\n".join(text for _, text in seen)
    assert "aten::mm" + SHOWN in shown and "gemm" + SHOWN in shown


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_in_a_real_terminal_neither_clipboard_nor_title_is_written(pair, tmp_path) -> None:
    """tmux as the terminal, with set-clipboard on: OSC 52 would fill its paste buffer and
    OSC 0 set the pane's title (both did, from the header and the drill-in title)."""
    server = ["tmux", "-L", f"tuiprof-{os.getpid()}", "-f", "/dev/null"]
    command = f"cd {ROOT} && PYTHONPATH={ROOT} {sys.executable} -m tuiprof open {pair[0]}; sleep 30"
    subprocess.run([*server, "new-session", "-d", "-x", "160", "-y", "45", command], check=True)
    try:
        subprocess.run([*server, "set", "-g", "set-clipboard", "on"], check=True)

        def screen() -> str:
            return subprocess.run([*server, "capture-pane", "-p"], capture_output=True, text=True).stdout

        def wait_for(text: str) -> None:
            deadline = time.monotonic() + 60
            while text not in screen() and time.monotonic() < deadline:
                time.sleep(0.2)
            assert text in screen(), screen()

        wait_for("Top module")
        subprocess.run([*server, "send-keys", "3"], check=True)
        wait_for("Self CPU")
        subprocess.run([*server, "send-keys", "Enter"], check=True)
        wait_for(" Start ")  # the drill-in list (its title line is what OSC 0 would take away)
        buffers = subprocess.run([*server, "list-buffers"], capture_output=True, text=True).stdout
        title = subprocess.run([*server, "display", "-p", "#{pane_title}"], capture_output=True, text=True).stdout
    finally:
        subprocess.run([*server, "kill-server"], capture_output=True)
    assert buffers == "" and "pwned" not in title
