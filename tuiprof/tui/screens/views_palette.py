"""The views palette (``V``): every view of the explorer by name, with its key, however many
there are (the header names only the tabs that fit; views past the tenth have no key)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from textual.command import CommandPalette, DiscoveryHit, Hit, Hits, Provider

from tuiprof.tui.commands import shown_view_keys


class ViewsProvider(Provider):
    """One entry per view of the app (``app.view_keys``, keys as its keymap has them), in key
    order; typing narrows them."""

    def _entries(self) -> list[tuple[str, Callable[[], None]]]:
        from tuiprof.tui.table_app import TableApp  # here: the host imports this module

        app = self.app
        if not isinstance(app, TableApp):  # the palette is the view host's (TableApp.action_views)
            return []
        entries: list[tuple[str, Callable[[], None]]] = []
        for key, view_id, view in shown_view_keys(app.view_keys, app.keymap):
            empty = app.loaded and view_id != app.current_view and not app.shows(view)
            name = f"{key or ' '} {view.title}" + (" (nothing in this trace)" if empty else "")
            entries.append((name, partial(app.action_show_view, view_id)))
        return entries

    async def discover(self) -> Hits:
        for name, show in self._entries():
            yield DiscoveryHit(name, show)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, show in self._entries():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), show)


def views_palette() -> CommandPalette:
    return CommandPalette(providers=[ViewsProvider], placeholder="Go to view…")
