"""Fifteen views at 80x24: every one is named and reachable by keys (docs/views.md, the rule:
keys 1-9 and 0 for the first ten, < and > for all, V for the views palette, and a header that
names the tabs around the current one).  The views are registered here only (``views=``):
the registry and every other test stay as they are."""

from __future__ import annotations

import re

from textual.app import ComposeResult
from textual.widgets import Static

from tests.conftest import SAMPLES
from tests.helpers.tui import plain_text
from tuiprof.analysis.model import TraceModel
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.views.base import ExplorerView
from tuiprof.tui.widgets.header import ExplorerHeader

RESNET = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")
# Names that are no part of another (Dummy1 is in Dummy10): a tab is named or it is not.
TITLES = (
    "Alpha",
    "Bravo",
    "Charlie",
    "Delta",
    "Echo",
    "Foxtrot",
    "Golf",
    "Hotel",
    "India",
    "Juliett",
    "Kilo",
    "Lima",
    "Mike",
    "November",
    "Oscar",
)
KEYS = "1234567890"  # by construction: the n-th view's key, none past the tenth


def _view(title: str) -> type[ExplorerView]:
    class Dummy(ExplorerView):
        view_id = title.lower()

        def compose(self) -> ComposeResult:
            yield Static(f"the {title} view", id=f"{title.lower()}-body")

        def show_model(self, model: TraceModel) -> None:
            pass

    Dummy.title = title
    return Dummy


FIFTEEN = tuple(_view(title) for title in TITLES)


def _tab_line(app: ExplorerApp) -> str:
    """The header's second line (the tabs) as printed at the header's width."""
    header = app.query_one(ExplorerHeader)
    return plain_text(header.content, header.size.width).splitlines()[1]


def _named_tabs(line: str) -> list[str]:
    """The titles the tab line names; a bare key (`` 2 ``, the old narrow header) names none."""
    return [word for word in re.findall(r"[A-Za-z]+", line) if word in TITLES]


async def _open(pilot, app: ExplorerApp) -> None:
    while app.model is None or len(app.query_one("#views").children) < len(FIFTEEN):
        await pilot.pause(0.01)
    await pilot.pause()


async def test_fifteen_views_each_reachable_by_its_key_or_by_next_and_named_in_the_header() -> None:
    app = ExplorerApp(FileSource(RESNET), views=FIFTEEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        for key, title in zip(KEYS, TITLES):  # the first ten: their digit
            await pilot.press(key)
            await pilot.pause()
            assert app.current_view == title.lower(), key
            line = _tab_line(app)
            assert f"{key} {title}" in line, line
        await pilot.press("1")
        for title in (*TITLES[1:], TITLES[0]):  # every one, keyed or not: > (wrapping at the end)
            await pilot.press("greater_than_sign")
            await pilot.pause()
            assert app.current_view == title.lower()
            line = _tab_line(app)
            assert title in _named_tabs(line), line
        await pilot.press("less_than_sign")
        assert app.current_view == TITLES[-1].lower()


async def test_at_80_columns_every_tab_shown_is_named_and_the_hidden_ones_are_counted() -> None:
    """The old header, past 80 columns, dropped every name but the current one (`` 1  2  3 ``)."""
    app = ExplorerApp(FileSource(RESNET), views=FIFTEEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        for title in TITLES:
            app.action_show_view(title.lower())
            await pilot.pause()
            line = _tab_line(app)
            named = _named_tabs(line)
            assert title in named and len(named) >= 3, line  # the current one and its neighbours
            labels = re.findall(r"(?:(\d) )?([A-Z][a-z]+)", line)
            for key, name in labels:  # each tab with its own key, or none past the tenth
                assert key == (KEYS[TITLES.index(name)] if TITLES.index(name) < len(KEYS) else ""), line
            first, last = TITLES.index(named[0]), TITLES.index(named[-1])
            assert named == list(TITLES[first : last + 1])  # consecutive, in key order
            left = re.search(r"‹\+(\d+)", line)
            right = re.search(r"\+(\d+)›", line)
            assert (int(left.group(1)) if left else 0) == first, line
            assert (int(right.group(1)) if right else 0) == len(TITLES) - 1 - last, line
            assert len(line.rstrip()) <= 80


async def test_the_tab_line_stays_put_while_the_current_tab_is_on_it() -> None:
    """Pages, not a window that slides with every key: the old header re-centred on each view,
    so every view past the seventh showed another set of tabs."""
    app = ExplorerApp(FileSource(RESNET), views=FIFTEEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        lines = []
        previous = ""
        for title in TITLES:
            app.action_show_view(title.lower())
            await pilot.pause()
            line = _tab_line(app)
            if title in _named_tabs(previous):
                assert line == previous, (previous, line)
            previous = line
            lines.append(line)
        pages = list(dict.fromkeys(lines))
        assert 2 <= len(pages) <= 3, pages
        named = [title for page in pages for title in _named_tabs(page)]
        assert set(named) == set(TITLES)  # every view is on a page


async def test_the_views_palette_lists_and_opens_every_view() -> None:
    app = ExplorerApp(FileSource(RESNET), views=FIFTEEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        for title in TITLES:
            await pilot.press("V")
            await pilot.pause()
            await pilot.press(*title.lower())
            await pilot.pause(0.3)
            await pilot.press("enter")
            await pilot.pause()
            assert app.current_view == title.lower()


async def test_help_names_every_view_and_how_to_reach_those_without_a_key() -> None:
    app = ExplorerApp(FileSource(RESNET), views=FIFTEEN)
    async with app.run_test(size=(80, 24)) as pilot:
        await _open(pilot, app)
        await pilot.press("question_mark")
        await pilot.pause()
        rows = dict(app.screen.keys)
        views = rows["1-9 0"]
        assert all(f"{key} {title}" in views for key, title in zip(KEYS, TITLES))
        assert "then Kilo, Lima, Mike, November, Oscar (< > or V)" in views
        assert {"<", ">", "V"} <= set(rows)
