"""What an input kind declares, and the refusals built from it.

A kind (:class:`Kind`) is data: how it is told apart, the views it prints, the options each
command takes for it, and the function that runs each command (None: the command refuses it,
saying what to do instead).  :func:`refusal` compares what was given on the command line (every
option whose value is not the parser's default) with that data, so an option added to a command
is refused for every kind that does not declare it: never ignored in silence.

Imports nothing heavy: ``--help`` reads the kinds' titles.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tuiprof.errors import TraceError

if TYPE_CHECKING:  # the apps load with the explorer, never with --help or summary
    from tuiprof.tui.table_app import TableApp

# The commands a kind runs (the explorer is ``open`` on a terminal; off one, ``open`` is summary).
SUMMARY, EXPLORER, DIFF, TIMELINE = "summary", "explorer", "diff", "timeline"
COMMANDS = (SUMMARY, EXPLORER, DIFF, TIMELINE)
SAID = {SUMMARY: "summary", EXPLORER: "the explorer (open on a terminal)", DIFF: "diff", TIMELINE: "timeline"}
NOUN = {SUMMARY: "summary", EXPLORER: "explorer", DIFF: "diff", TIMELINE: "timeline"}  # "a watch folder has no diff"

# Options that set how anything is read (a gzip's ratio limit, the caches): every kind takes them,
# one that reads no trace too (a limit or an opt-out with nothing to apply to is met).
READING = ("max_inflate_ratio", "no_sidecars", "no_cache", "cache_size")

Views = Callable[[], tuple[str, ...]]  # read at call time: a view added to a registry is offered at once
Apps = Callable[[], tuple["type[TableApp]", ...]]  # imported at call time
OnePath = Callable[[str, Namespace], int]
TwoPaths = Callable[[str, str, Namespace], int]


def no_views() -> tuple[str, ...]:
    return ()


def no_apps() -> tuple[type[TableApp], ...]:
    return ()


@dataclass(frozen=True)
class Kind:
    """One kind of input.  ``options``: command -> the option ``dest``s that command takes for
    this kind (``view`` is added from ``views``/``diff_views``); ``values``: the values an option
    is limited to (any command); ``view_options``: an option that only some of its views use
    (``summary``), to those views; ``without``: command -> what to do instead, for a command the
    kind has no function for (``{path}`` is the path given); ``hints``: option -> what to do
    instead when it is refused.  ``apps``: the apps of views its ``explorer`` and ``diff`` run
    (tui/): every id of each is one a keymap may name (tui/keymap.py ``every_app``, held equal to
    these by tests/tui/test_keymap.py, which also checks docs/views.md's id table against them)."""

    name: str
    title: str  # "a trace file": in refusals
    help: str  # what it is, in --help's list of what PATH may be
    detect: Callable[[str], bool]  # cheap: a stat or the first bytes; KINDS is tried in order
    options: Mapping[str, Collection[str]]
    summary: OnePath | None = None
    explorer: OnePath | None = None
    diff: TwoPaths | None = None
    timeline: OnePath | None = None
    views: Views = no_views  # summary --view, catalog names; the first is the default
    diff_views: Views = no_views  # diff --view (report/catalog.py DIFF_VIEWS); the first is the default
    apps: Apps = no_apps
    values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    view_options: Mapping[str, Views] = field(default_factory=dict)
    without: Mapping[str, str] = field(default_factory=dict)
    hints: Mapping[str, str] = field(default_factory=dict)

    def function(self, command: str) -> Callable[..., int] | None:
        return getattr(self, command)

    def takes(self, command: str) -> dict[str, tuple[str, ...] | None]:
        """The options ``command`` takes for this kind, each to the values it accepts (None: any)."""
        if self.function(command) is None:
            return {}
        taken: dict[str, tuple[str, ...] | None] = {
            dest: self.values.get(dest) for dest in self.options.get(command, ())
        }
        views = self.views() if command == SUMMARY else self.diff_views() if command == DIFF else ()
        if views:
            taken["view"] = views
        return taken

    def default_view(self, command: str) -> str | None:
        views = self.views() if command == SUMMARY else self.diff_views() if command == DIFF else ()
        return views[0] if views else None


@dataclass(frozen=True)
class Option:
    """An option of a command's parser, as a refusal names it."""

    dest: str
    flag: str  # its first spelling: --group-by-shape
    default: object
    flag_only: bool  # store_true: no value to show

    def given(self, args: Namespace) -> bool:
        return getattr(args, self.dest, self.default) != self.default

    def said(self, args: Namespace) -> str:
        """The option as given: ``--sort calls``, ``--wide``, ``--cluster ''``."""
        if self.flag_only:
            return self.flag
        value = getattr(args, self.dest)
        text = f"{value:g}" if isinstance(value, float) else str(value)
        return f"{self.flag} {text or repr(text)}"


def refusal(
    command: str,
    args: Namespace,
    offered: Sequence[Option],
    given: Sequence[Kind],
    every: Sequence[Kind],
    paths: Sequence[str],
) -> TraceError | None:
    """Why ``command`` cannot run on ``paths`` (one, or diff's two) of the ``given`` kinds with
    ``args``, as the one-line error to raise; None when it can.  ``every``: the registry, to say
    which kinds take an option refused here."""
    for kind, path in zip(given, paths):
        if kind.function(command) is None:
            what = kind.without.get(command, "see tuiprof --help").format(path=path)
            return TraceError(path, f"{kind.title} has no {NOUN[command]}", what)
    if len({kind.function(command) for kind in given}) > 1:  # diff: one function compares both sides
        return TraceError(
            " and ".join(paths),
            f"{_listed([k.title for k in given], 'and')} cannot be compared",
            "compare two of one kind",
        )
    takes = _merged([kind.takes(command) for kind in given])
    title = " and ".join(dict.fromkeys(kind.title for kind in given))
    view = args.view if getattr(args, "view", None) is not None else given[0].default_view(command)
    for option in offered:
        if not option.given(args):
            continue
        said, value = option.said(args), getattr(args, option.dest)
        others = [k.title for k in reversed(every) if k not in given and _offers(k.takes(command), option.dest, value)]
        elsewhere = f" (it does for {_listed(others, 'and')})" if others else ""
        if option.dest not in takes:
            hint = next((k.hints[option.dest].format(path=paths[0]) for k in given if option.dest in k.hints), None)
            if hint is None and command == EXPLORER and option.dest in given[0].takes(SUMMARY):
                hint = "tuiprof summary takes it (so does open with stdout not a terminal)"
            return TraceError(said, f"{SAID[command]} does not take it for {title}{elsewhere}", hint or "drop it")
        accepted = takes[option.dest]
        if accepted is not None and value not in accepted:
            return TraceError(
                said,
                f"{SAID[command]} does not offer it for {title}{elsewhere}",
                f"use {_listed(accepted, 'or', option.flag)}",
            )
        for kind in given:
            views = kind.view_options.get(option.dest)
            if command == SUMMARY and views is not None and view not in views():
                return TraceError(
                    said,
                    f"is for --view {_listed(views(), 'or')} of {kind.title}, not --view {view}",
                    f"drop it, or add --view {views()[0]}",
                )
    return None


def _offers(takes: dict[str, tuple[str, ...] | None], dest: str, value: object) -> bool:
    """Whether ``takes`` (a kind's options for a command) has the option ``dest`` with ``value``."""
    return dest in takes and (takes[dest] is None or value in (takes[dest] or ()))


def _merged(takes: list[dict[str, tuple[str, ...] | None]]) -> dict[str, tuple[str, ...] | None]:
    """What either of diff's two kinds takes (a run directory's --trace with a trace file beside it)."""
    merged: dict[str, tuple[str, ...] | None] = {}
    for taken in takes:
        for dest, accepted in taken.items():
            if dest not in merged:
                merged[dest] = accepted
            else:
                before = merged[dest]
                merged[dest] = (
                    None if before is None or accepted is None else tuple(dict.fromkeys((*before, *accepted)))
                )
    return merged


def _listed(items: Sequence[str], last: str, flag: str = "") -> str:
    """``a``, ``a or b``, ``a, b or c`` (``flag`` before the first: ``--format table or json``)."""
    words = list(items)
    text = words[0] if len(words) == 1 else f"{', '.join(words[:-1])} {last} {words[-1]}"
    return f"{flag} {text}" if flag else text
