"""The kinds of input tuiprof reads, in the order they are told apart, and the one way every
command meets them: find the kind, refuse in one line what it does not take, call it.

Adding a kind is one module (a :class:`Kind`, as in ``snapshot.py``) and one line in
``KINDS``: ``summary``, ``open``, ``diff`` and ``timeline``, their refusals and ``--help``
read it from here (docs/kinds.md; tests/cli/test_kind_matrix.py runs every kind through every
command and option).  Each kind imports what it runs inside its functions: ``summary`` and
``open`` never import torch, ``summary`` never imports Textual, ``--help`` imports neither.
"""

from __future__ import annotations

from argparse import Namespace
from collections.abc import Sequence

from tuiprof.kinds import run, snapshot, trace, watch
from tuiprof.kinds.base import COMMANDS, DIFF, EXPLORER, SUMMARY, TIMELINE, Kind, Option, refusal

__all__ = ["COMMANDS", "DIFF", "EXPLORER", "KINDS", "SUMMARY", "TIMELINE", "Kind", "Option", "find_kind", "run_command"]

# The detection order: content sniffs first, a trace (what nothing else claims) last.
KINDS: list[Kind] = [snapshot.KIND, watch.KIND, run.KIND, trace.KIND]


def find_kind(path: str) -> Kind:
    """The first kind in ``KINDS`` that claims ``path`` (the last claims everything).  A path
    that cannot be looked at (too long a name, a loop of links) is claimed by none before the
    last, whose reader says what is wrong in one line."""
    return next(kind for kind in KINDS if _claims(kind, path))


def _claims(kind: Kind, path: str) -> bool:
    try:
        return kind.detect(path)
    except OSError:
        return False


def run_command(command: str, args: Namespace, offered: Sequence[Option], *paths: str) -> int:
    """Run ``command`` (one of ``COMMANDS``) on ``paths`` (diff's two, else one) as their kind
    does, after refusing in one line (exit 2) an option it does not take, or the command itself.
    The kind's function gets ``args`` with ``view`` set (its default when none was given) and
    ``given_options``, the options given (a trace's diff prints when one its explorer lacks is)."""
    given = tuple(find_kind(path) for path in paths)
    error = refusal(command, args, offered, given, KINDS, paths)
    if error is not None:
        raise error
    args.given_options = frozenset(option.dest for option in offered if option.given(args))
    if getattr(args, "view", None) is None and command in (SUMMARY, DIFF):
        args.view = given[0].default_view(command)
    function = given[0].function(command)
    assert function is not None  # refused above otherwise
    return function(*paths, args)


def path_help(command: str = SUMMARY) -> str:
    """What a PATH of ``command`` may be, for --help: every kind that has it, the catch-all first."""
    return ", ".join(kind.help for kind in reversed(KINDS) if kind.function(command) is not None)


def titles(command: str) -> str:
    """The kinds that have ``command``, by title (``a trace file, ... or an allocator snapshot``), for --help."""
    names = [kind.title for kind in reversed(KINDS) if kind.function(command) is not None]
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"


def views_help() -> str:
    """What ``summary --view`` shows of each kind, for --help (a kind that prints another's views
    and more says so, not the whole list again)."""
    parts: list[str] = []
    for kind in sorted(KINDS, key=lambda k: len(k.views())):
        views = kind.views()
        base = next(
            (
                other
                for other in KINDS
                if other is not kind
                and 0 < len(other.views()) < len(views)
                and views[: len(other.views())] == other.views()
            ),
            None,
        )
        if base is None:
            parts.append(f"{kind.title}: {', '.join(views)}")
        else:
            parts.append(f"{kind.title}: those of {base.title} and {', '.join(views[len(base.views()) :])}")
    return "; ".join(parts)
