"""The footer: the keys of the focused pane (from the command table's ``show``
entries), drawn as one line of text.

Textual's Footer recomposes a widget per key on every focus change; with the
views switching focus that cost most of a view switch.  This bar only redraws
a line.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class KeyBar(Static):
    DEFAULT_CSS = """
    KeyBar { dock: bottom; height: 1; background: $panel; color: $text; }
    """

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)
        self._bindings_changed(self.screen)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen) -> None:
        line = Text(no_wrap=True, overflow="ellipsis")
        seen: set[str] = set()
        active = list(screen.active_bindings.values())
        active.sort(key=lambda entry: entry[0] is not self.app)  # the app's keys first, then the pane's
        for _node, binding, enabled, _tooltip in active:
            if not binding.show or binding.action in seen:
                continue
            seen.add(binding.action)
            line.append(f" {self.app.get_key_display(binding)} ", style="bold reverse" if enabled else "dim reverse")
            line.append(f"{binding.description} ", style="" if enabled else "dim")
        palette = Text.assemble((" ^p ", "bold reverse"), "palette ")
        width = self.size.width or self.app.size.width
        if line.cell_len + palette.cell_len < width:
            line.append(" " * (width - line.cell_len - palette.cell_len))
            line.append_text(palette)
        self.update(line)

    def on_resize(self) -> None:
        self._bindings_changed(self.screen)
