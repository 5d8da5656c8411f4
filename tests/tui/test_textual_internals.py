"""Textual's private API, used only from tuiprof/tui/textual_internals.py: each name still
exists in the pinned Textual, and a bug in the UI ends it with one line (a traceback in a
file only with TUIPROF_DEBUG=1), never Rich's traceback with every frame's locals."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import textual.app
import textual.keys

from tests.conftest import ROOT, SAMPLES
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource


def test_the_private_names_used_still_exist() -> None:
    assert callable(textual.keys._normalize_key_list)
    for name in ("_fatal_error", "_close_messages_no_wait", "_unnotify", "_exception"):
        assert hasattr(textual.app.App, name) or name == "_exception", name
    assert "_bindings" in textual.app.App.__init__.__code__.co_names or hasattr(textual.app.App, "_bindings")


def test_no_other_module_reaches_into_textual() -> None:
    """Private Textual names (an attribute of Textual's App, Screen or Widget that starts with
    ``_``, or ``from textual... import _x``) appear only in the quarantine module, so an
    upgrade has one place to check.  tuiprof's own private names (defined in tuiprof) are not
    Textual's."""
    from textual.screen import Screen
    from textual.widget import Widget

    ours = {
        name for path in (ROOT / "tuiprof").rglob("*.py") for name in re.findall(r"def (_\w+)", path.read_text("utf-8"))
    } | {
        name
        for path in (ROOT / "tuiprof").rglob("*.py")
        for name in re.findall(r"self\.(_\w+) =", path.read_text("utf-8"))
    }
    textual_private = {
        name
        for instance in (textual.app.App(), Screen(), Widget())  # instances: attributes set in __init__ too
        for name in dir(instance)
        if name.startswith("_") and not name.startswith("__") and name not in ours
    }
    attribute = re.compile(r"\.(_[a-z]\w*)\b")
    offenders = []
    for path in (ROOT / "tuiprof" / "tui").rglob("*.py"):
        if path.name == "textual_internals.py":
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            used = set(attribute.findall(code)) & textual_private
            if used or re.search(r"from textual[.\w]* import [^\n]*\b_[a-z]", code):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {sorted(used)}")
    assert offenders == []


class _Broken(Exception):
    pass


def _break(app: ExplorerApp) -> None:
    raise _Broken("a view's bug, and secret=trace-content")


@pytest.mark.parametrize("debug", [False, True])
async def test_a_bug_in_the_ui_is_one_line_and_a_traceback_file_only_on_request(monkeypatch, debug) -> None:
    if debug:
        monkeypatch.setenv("TUIPROF_DEBUG", "1")
    else:
        monkeypatch.delenv("TUIPROF_DEBUG", raising=False)
    app = ExplorerApp(FileSource(str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")))
    with pytest.raises(_Broken):  # Pilot re-raises what ended the app: the test harness still sees it
        async with app.run_test(size=(80, 24)) as pilot:
            await pilot.pause()
            app.call_later(_break, app)
            await pilot.pause()
    assert app.return_code == 1
    assert app._exit_renderables == []  # nothing for Textual to print: no traceback, no locals
    line = app.internal_error
    assert line.startswith("internal error: _Broken: a view's bug")
    if not debug:
        assert line.endswith("(set TUIPROF_DEBUG=1 for a traceback)")
        return
    where = Path(re.search(r"\(traceback in (.+)\)$", line).group(1))
    try:
        text = where.read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" in text and "_Broken: a view's bug" in text and "_break" in text
    finally:
        where.unlink()
