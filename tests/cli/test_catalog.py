"""View names have one home (report/catalog.py): the CLI's ``summary --view`` choices, the
report registries and the explorer's registry agree, and a table added to a registry is
accepted by ``summary --view`` with no edit to the CLI."""

from __future__ import annotations

import argparse
import json

import pytest

import tuiprof.report.views as report_views
import tuiprof.tui.views as explorer_views
from tests.conftest import SAMPLES
from tuiprof.cli import build_parser, main
from tuiprof.report.catalog import SNAPSHOT, WATCH, summary_view_names
from tuiprof.report.findings import FINDINGS_VIEW
from tuiprof.report.views import RUN_VIEWS, TRACE_VIEWS, Column, View

RESNET = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")


def _view_choices() -> tuple[str, ...]:
    """The choices the parser offers for ``summary --view`` (read from argparse itself)."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return tuple(next(a for a in commands.choices["summary"]._actions if "--view" in a.option_strings).choices)


def test_the_cli_offers_every_registered_view_and_nothing_else() -> None:
    assert _view_choices() == (*TRACE_VIEWS, FINDINGS_VIEW.name, *RUN_VIEWS, WATCH, SNAPSHOT)
    assert _view_choices() == summary_view_names()


def test_explorer_views_named_like_summary_views_are_those_views() -> None:
    names = {**TRACE_VIEWS, FINDINGS_VIEW.name: FINDINGS_VIEW, **RUN_VIEWS}
    explorer = {view.view_id: view for view in explorer_views.EXPLORER_VIEWS}
    for name in TRACE_VIEWS:  # every table of a trace has its explorer view (same name, same title), or one shows it
        assert name in explorer or any(name in view.summary_views for view in explorer.values()), name
    for view_id, view in explorer.items():
        if view_id in names:
            assert view.title == names[view_id].title, view_id
    assert "ops" not in {*explorer, *names}  # one spelling: operators


def test_two_registries_are_not_both_called_views() -> None:
    assert not hasattr(report_views, "VIEWS") and not hasattr(explorer_views, "VIEWS")


def test_a_view_added_to_the_registry_is_accepted_by_summary(monkeypatch, capsys) -> None:
    """Adding a table is one registry line: the CLI reads the registry (it used to type the names)."""
    threads = View(
        "threads",
        "Threads",
        (Column("thread", "Thread", "text", "A thread."),),
        "",
        lambda model, options: [{"thread": "main"}, {"thread": "backward"}],
    )
    monkeypatch.setitem(TRACE_VIEWS, "threads", threads)
    assert main(["summary", RESNET, "--view", "threads", "--format", "json"]) == 0
    assert [row["thread"] for row in json.loads(capsys.readouterr().out)] == ["main", "backward"]


def test_ops_is_still_accepted_and_means_operators(capsys) -> None:
    assert main(["summary", RESNET, "--view", "ops", "--limit", "1", "--format", "csv"]) == 0
    by_ops = capsys.readouterr().out
    assert main(["summary", RESNET, "--view", "operators", "--limit", "1", "--format", "csv"]) == 0
    assert capsys.readouterr().out == by_ops


def test_an_unknown_view_is_one_usage_error(capsys) -> None:
    # not "threads": a view someone may add (tests/tui/test_adding_a_view.py adds it)
    with pytest.raises(SystemExit) as exit_:
        main(["summary", RESNET, "--view", "no-such-view"])
    assert exit_.value.code == 2
    assert "invalid choice: 'no-such-view'" in capsys.readouterr().err


def test_diff_views_name_the_diff_tables() -> None:
    """diff --view reads report/catalog.py's DIFF_VIEWS (literal table names, so --help loads no
    analysis): each names tables the diff has, and ``all`` is every one in order."""
    from tuiprof.analysis.diff import TABLES
    from tuiprof.report.catalog import DIFF_ALL, DIFF_VIEWS

    assert DIFF_VIEWS[DIFF_ALL] == TABLES
    assert all(set(tables) <= set(TABLES) for tables in DIFF_VIEWS.values())
    assert {name for name in DIFF_VIEWS if name in summary_view_names()} >= {"operators", "modules", "kernels"}
