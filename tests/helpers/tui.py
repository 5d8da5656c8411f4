"""Reading the Textual apps back in tests: an app once its loading is done, and what a
renderable (a widget's content, a rendered chart) shows, as plain text."""

from __future__ import annotations

import io

from rich.console import Console


async def loaded(pilot) -> None:
    """The app's workers done (the model loaded) and two refreshes drawn: the screen a user sees
    once loading ends.  Also a snapshot's ``run_before``."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.pause()


def plain_text(renderable, width: int = 200) -> str:
    """What ``renderable`` prints at ``width`` columns, without styles (a control sequence Rich
    itself emits is left out; characters from the data, escapes included, are kept)."""
    console = Console(record=True, width=width, color_system=None, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def screen_lines(app) -> list[str]:
    """The screen as the terminal shows it, one string a row: what is visible, not what a
    widget holds (Textual's compositor, private: 8.x)."""
    return ["".join(segment.text for segment in strip) for strip in app.screen._compositor.render_strips()]
