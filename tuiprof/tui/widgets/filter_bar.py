"""The ``/`` box: narrows one pane (a table, the module tree) while it is shown;
enter keeps the filter, esc clears it."""

from __future__ import annotations

from typing import Protocol

from textual.widgets import Input


class Filterable(Protocol):
    filter_text: str

    def set_filter(self, text: str) -> None: ...


class FilterBar(Input):
    def __init__(self, **kwargs) -> None:
        super().__init__(placeholder="filter by name (enter: keep, esc: clear)", **kwargs)
        self.table: Filterable | None = None
        self.close()

    @property
    def is_open(self) -> bool:
        return bool(self.display)

    def open_for(self, view) -> bool:
        """Open on what the view filters (its ``filter_target()``); False if nothing."""
        target = view.filter_target()
        if target is None:
            return False
        self.table = target
        self.value = target.filter_text
        self.display = True
        self.disabled = False  # hidden, it must not take focus (it would swallow keys)
        self.focus()
        return True

    def close(self) -> None:
        self.display = False
        self.disabled = True

    def clear_for(self, view) -> bool:
        """Close and clear the view's filter; False if there was none (esc then means "back")."""
        target = view.filter_target()
        if not self.is_open and (target is None or not target.filter_text):
            return False
        if target is not None:
            target.set_filter("")
        self.value = ""
        self.close()
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        if self.table is not None and self.is_open:
            self.table.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.close()
