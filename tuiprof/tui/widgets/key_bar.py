"""The footer: the keys of the focused pane (from the command table's ``show``
entries), drawn as one line of text.

When the keys do not fit, whole keys are dropped, the least useful first (``fitting``).

Textual's Footer recomposes a widget per key on every focus change; with the
views switching focus that cost most of a view switch.  This bar only redraws
a line.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

# The keys a narrow bar drops first (the least useful first); the others go after them from the
# right (a pane's own keys, such as the Timeline's), then Help; Quit, or Back where q means back
# (a drill-in list), always stays: a key is dropped whole, never cut.
DROPPED_FIRST = ("toggle_top_level", "toggle_shapes", "reverse_sort", "export('csv')", "next_sort", "filter")
DROPPED_LAST = ("help",)
NEVER_DROPPED = ("quit", "dismiss")


def fitting(entries: list[tuple[str, Text]], width: int) -> list[tuple[str, Text]]:
    """The (action, text) ``entries`` that fit ``width`` cells, in their order, the least useful
    dropped first (``DROPPED_FIRST``, then the unlisted from the right, then ``DROPPED_LAST``)."""

    def usefulness(index: int) -> tuple[int, int]:
        action = entries[index][0]
        if action in DROPPED_FIRST:
            return (0, DROPPED_FIRST.index(action))
        if action in DROPPED_LAST:
            return (2, 0)
        return (1, -index)

    kept = list(range(len(entries)))
    droppable = sorted((i for i in kept if entries[i][0] not in NEVER_DROPPED), key=usefulness)
    while droppable and sum(entries[i][1].cell_len for i in kept) > width:
        kept.remove(droppable.pop(0))
    return [entries[i] for i in kept]


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
        width = self.size.width or self.app.size.width
        entries: list[tuple[str, Text]] = []  # (action, " k Desc ") in the order of the bindings
        active = list(screen.active_bindings.values())
        active.sort(key=lambda entry: entry[0] is not self.app)  # the app's keys first, then the pane's
        for _node, binding, enabled, _tooltip in active:
            if not binding.show or binding.action in {action for action, _ in entries}:
                continue
            entry = Text.assemble(
                (f" {self.app.get_key_display(binding)} ", "bold reverse" if enabled else "dim reverse"),
                (f"{binding.description} ", "" if enabled else "dim"),
            )
            entries.append((binding.action, entry))
        line = Text(no_wrap=True, overflow="ellipsis")
        for _action, entry in fitting(entries, width):
            line.append_text(entry)
        palette = Text.assemble((" ^p ", "bold reverse"), "palette ")
        if line.cell_len + palette.cell_len < width:
            line.append(" " * (width - line.cell_len - palette.cell_len))
            line.append_text(palette)
        self.update(line)

    def on_resize(self) -> None:
        self._bindings_changed(self.screen)
