"""The views palette (``V``): every view of the explorer by name, with its key, however many
there are (the header names only the tabs that fit; views past the tenth have no key)."""

from __future__ import annotations

from functools import partial

from textual.command import CommandPalette, DiscoveryHit, Hit, Hits, Provider

from tuiprof.tui.commands import shown_view_keys


class ViewsProvider(Provider):
    """One entry per view of the app (``app.view_keys``, keys as its keymap has them), in key
    order; typing narrows them."""

    def _entries(self) -> list[tuple[str, object]]:
        app = self.app  # a TableApp: the view host
        entries = []
        for key, view_id, view in shown_view_keys(app.view_keys, app.keymap):  # type: ignore[attr-defined]
            empty = app.loaded and view_id != app.current_view and not app.shows(view)  # type: ignore[attr-defined]
            name = f"{key or ' '} {view.title}" + (" (nothing in this trace)" if empty else "")
            entries.append((name, partial(app.action_show_view, view_id)))
        return entries

    async def discover(self) -> Hits:
        for name, show in self._entries():
            yield DiscoveryHit(name, show)  # type: ignore[arg-type]

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for name, show in self._entries():
            score = matcher.match(name)
            if score > 0:
                yield Hit(score, matcher.highlight(name), show)  # type: ignore[arg-type]


def views_palette() -> CommandPalette:
    return CommandPalette(providers=[ViewsProvider], placeholder="Go to view…")
