"""The explorer driven by keys, as a user would, reading cells back."""

from __future__ import annotations

import csv
import io
import json
import re
import threading
from pathlib import Path

import pytest
from rich.console import Console

from tests.conftest import ROOT, SAMPLES, SHARED_TRACES
from tests.helpers.snapshot_views import SNAPSHOT_VIEWS
from tests.helpers.tui import loaded, plain_text
from tuiprof.tui.app import ExplorerApp
from tuiprof.tui.sources import FileSource
from tuiprof.tui.views import EXPLORER_VIEWS
from tuiprof.tui.widgets.key_bar import KeyBar
from tuiprof.tui.widgets.module_tree import ModuleTreeView
from tuiprof.tui.widgets.row_table import RowTable

RESNET = str(SAMPLES / "resnet18_cpu.pt.trace.json.gz")


def _names(table: RowTable) -> list[str]:
    return [str(row.get("name", row.get("path"))) for row in table.rows]


async def test_opens_on_overview_and_tree_filters_operators() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        assert app.current_view == "overview"
        await pilot.press("2")
        assert app.current_view == "modules"
        tree = app.query_one("#module-tree", ModuleTreeView)
        assert tree.cursor_node.data.name == "ResNet_0"
        all_ops = len(app.query_one("#module-ops", RowTable).rows)
        await pilot.press("down")  # the costliest child: layer4
        await pilot.pause()
        selected = tree.cursor_node.data
        assert selected.name.startswith("Sequential_")
        inside = app.query_one("#module-ops", RowTable)
        assert 0 < len(inside.rows) <= all_ops
        assert "aten::conv2d" in _names(inside)
        assert "Optimizer.step#SGD.step" not in _names(inside)
        assert selected.path in str(app.query_one("#module-detail").render())


async def test_the_first_frame_holds_one_view_and_keys_pressed_at_once_reach_the_others() -> None:
    """The views not shown first are mounted after the first frame (start-up): a key
    pressed the moment the model arrives must still open a complete view."""
    app = ExplorerApp(FileSource(RESNET))
    mounted_at_first_frame: list[list[str]] = []
    display = app._display

    def first_frame(screen, update) -> None:
        if app.model is not None and update is not None and not mounted_at_first_frame:
            mounted_at_first_frame.append([view.id for view in app.query_one("#views").children])
        display(screen, update)

    app._display = first_frame
    async with app.run_test(size=(80, 24)) as pilot:
        while app.model is None:
            await pilot.pause(0.01)
        await pilot.press("3")  # no pause: typed as the model appears
        assert app.current_view == "operators"
        assert "aten::convolution_backward" in _names(app.query_one("#operators-table", RowTable))
        assert mounted_at_first_frame == [["overview"]]
        assert [view.id for view in app.query_one("#views").children] == [view.view_id for view in EXPLORER_VIEWS]
        shown = [view.id for view in app.query_one("#views").children if view.display]
        assert shown == ["operators"]


class _HeldSource(FileSource):
    """The sample, loaded only once the test lets it: keys can be typed while it loads."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.go = threading.Event()

    def __call__(self, report, cancelled):
        self.go.wait(10)
        return super().__call__(report, cancelled)


async def test_keys_of_the_loaded_trace_wait_for_it_and_a_view_key_is_kept() -> None:
    source = _HeldSource(RESNET)
    app = ExplorerApp(source)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        bar = str(app.query_one(KeyBar).render())
        assert "Quit" in bar and "Filter" not in bar and "Export" not in bar  # nothing to filter yet
        await pilot.press("3")  # typed ahead
        source.go.set()
        await loaded(pilot)
        await pilot.pause()
        assert app.current_view == "operators"
        assert "aten::convolution_backward" in _names(app.query_one("#operators-table", RowTable))
        assert "Filter" in str(app.query_one(KeyBar).render())


async def test_memory_of_a_gpu_trace_leaves_room_for_its_table_in_a_short_terminal() -> None:
    """Two charts (device and CPU) take ~16 rows: at 60x20 the table had none left."""
    app = ExplorerApp(FileSource(str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz")))
    async with app.run_test(size=(60, 20)) as pilot:
        await loaded(pilot)
        await pilot.press("5")
        await pilot.pause()
        table = app.query_one("#memory-ops", RowTable)
        assert table.size.height >= 6 and len(table.rows) >= 5
        assert "CUDA:0 memory" in plain_text(app.query_one("#memory-chart").content) and "CPU memory" not in plain_text(
            app.query_one("#memory-chart").content
        )
        await pilot.resize_terminal(120, 40)
        await pilot.pause()
        assert "CPU memory" in plain_text(app.query_one("#memory-chart").content)  # room for both again


async def test_sort_keys_change_row_order() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        table = app.query_one("#operators-table", RowTable)
        assert table.sort_key == "self_cpu_us"
        selfs = [r["self_cpu_us"] for r in table.rows]
        assert selfs == sorted(selfs, reverse=True)
        await pilot.press("s")
        assert table.sort_key != "self_cpu_us"
        key = table.sort_key
        values = [r[key] for r in table.rows if r[key] is not None]
        assert values == sorted(values, reverse=table.descending)
        await pilot.press("r")
        values = [r[key] for r in table.rows if r[key] is not None]
        assert values == sorted(values, reverse=table.descending)


async def test_a_sort_shows_the_top_of_the_new_order() -> None:
    """The cursor followed its row through a sort: after ``r`` on Calls it sat on row 60 and
    the rows the sort was asked for were scrolled out of view.  Now s, r and a header click
    put the cursor and the scroll on the first row, the extreme of the sorted column."""
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3", "j", "j", "j", "j", "j")
        table = app.query_one("#operators-table", RowTable)

        def drawn(y: int) -> str:
            return "".join(segment.text for segment in table.render_line(y))

        async def sorted_and_at_top(*keys: str, click: str | None = None) -> None:
            await pilot.press(*keys)
            if click is not None:
                header = drawn(0)
                await pilot.click("#operators-table", offset=(header.index(click) + 1, 0))
            await pilot.pause()
            values = [row[table.sort_key] for row in table.all_rows if row[table.sort_key] is not None]
            extreme = max(values) if table.descending else min(values)  # the oracle: the column's own values
            assert (table.cursor, table.scroll_offset.y) == (0, 0)
            assert table.current_row[table.sort_key] == extreme
            assert drawn(1).startswith(str(table.current_row["name"])[:12])

        await sorted_and_at_top("s")
        await pilot.press("j", "j", "j", "j", "j")
        await sorted_and_at_top("s", "r")  # the calls column, fewest first
        await pilot.press("pagedown", "pagedown")
        await sorted_and_at_top(click="Self CPU")
        assert table.sort_key == "self_cpu_us"


async def test_filter_narrows_rows_and_escape_restores() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        table = app.query_one("#operators-table", RowTable)
        before = len(table.rows)
        await pilot.press("slash", *"conv", "enter")
        assert 0 < len(table.rows) < before
        assert all("conv" in name.lower() for name in _names(table))
        header = "".join(segment.text for segment in table.render_line(0))
        assert f"/conv {len(table.rows)}/{before}" in header  # the filter in force stays on screen
        await pilot.press("slash", *"zzz", "enter")  # typed over the kept "conv" (it is selected)
        first_line = "".join(segment.text for segment in table.render_line(1))
        assert not table.rows and "No row matches /zzz (esc clears the filter)" in first_line
        await pilot.press("escape")
        assert len(table.rows) == before
        assert "/" not in "".join(segment.text for segment in table.render_line(0))


async def test_group_by_shape_and_top_level_toggles() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3")
        table = app.query_one("#operators-table", RowTable)
        by_name = len(table.rows)
        await pilot.press("i")
        assert len(table.rows) > by_name
        assert any(c.key == "input_shapes" for c in table.columns)
        await pilot.press("i", "t")
        names = set(_names(table))
        assert "model_train" in names and "aten::conv2d" not in names


def _exported_csv(path: Path) -> list[dict[str, str]]:
    """An export's rows: its first line is the ``# tuiprof export:`` comment."""
    lines = path.read_text().splitlines(keepends=True)
    assert lines[0].startswith("# tuiprof export: ")
    return list(csv.DictReader(lines[1:]))


async def test_export_writes_the_table_as_shown_and_says_its_sort_and_filter(tmp_path) -> None:
    app = ExplorerApp(FileSource(RESNET), export_dir=tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3", "slash", *"batch", "enter", "r", "e")
        table = app.query_one("#operators-table", RowTable)
        path = tmp_path / "tuiprof-operators-resnet18_cpu.csv"
        written = _exported_csv(path)
        assert [r["name"] for r in written] == _names(table)
        assert float(written[0]["self_cpu_us"]) == pytest.approx(table.rows[0]["self_cpu_us"])
        total = len(table.all_rows)
        assert 0 < len(written) < total
        assert path.read_text().splitlines()[0] == (
            f"# tuiprof export: operators of resnet18_cpu; sorted by self_cpu_us, ascending; "
            f"filter /batch: {len(written)} of {total} rows"
        )
        await pilot.press("t", "E")
        exported = json.loads((tmp_path / "tuiprof-operators-resnet18_cpu.json").read_text())
        assert exported["export"] == {
            "view": "operators",
            "source": "resnet18_cpu",
            "sort": "self_cpu_us",
            "descending": False,
            "filter": "batch",
            "settings": ["top-level only"],
            "rows": len(table.rows),
            "total": len(table.all_rows),
        }
        assert [r["name"] for r in exported["rows"]] == _names(table)


async def test_help_opens_with_column_definitions() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("3", "question_mark")
        await pilot.pause()
        assert app.screen.__class__.__name__ == "HelpScreen"
        console = Console(record=True, width=200, file=io.StringIO())
        for widget in app.screen.query("Static"):
            console.print(widget.content)
        text = console.export_text()
        assert "Self CPU" in text and "children" in text
        await pilot.press("escape")
        assert app.screen.__class__.__name__ != "HelpScreen"


async def test_help_lists_the_current_views_own_keys_and_the_view_keys_as_bound() -> None:
    """? on Operators listed the module tree's keys (expand, collapse), and named the view
    keys "1-10" where they are 1 to 9 and 0."""
    app = ExplorerApp(FileSource(RESNET))
    # The oracle: the view bindings the app holds (TableApp.host_views binds them per app)
    by_id = {view.view_id: view for view in EXPLORER_VIEWS}
    bound = {
        b.key: by_id[b.action.removeprefix("show_view('").removesuffix("')")]
        for _, b in app._bindings
        if b.action.startswith("show_view(")
    }
    assert len(bound) == min(10, len(EXPLORER_VIEWS))

    async def help_of(key: str) -> dict[str, str]:
        await pilot.press(key, "question_mark")
        await pilot.pause()
        rows = dict(app.screen.keys)
        await pilot.press("escape")
        return rows

    def expanded(label: str) -> set[str]:
        keys = set()
        for part in label.split():
            first, _, last = part.partition("-")
            keys |= {str(k) for k in range(int(first), int(last) + 1)} if last else {first}
        return keys

    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        operators = await help_of("3")
        label, views = next((k, v) for k, v in operators.items() if v.startswith("views: "))
        assert expanded(label) == set(bound), label
        for key, view in bound.items():
            assert f"{key} {view.title}" in views
        assert "sort by the next column (or click a header)" in operators.values()
        assert not [what for what in operators.values() if "module" in what and "expand" in what or "zoom" in what]
        modules = await help_of("2")
        assert "expand the module, or step into its first child" in modules.values()
        assert "sort by the next column (or click a header)" in modules.values()  # its operators pane
        timeline = await help_of("7")
        assert "timeline: zoom in around the cursor" in timeline.values()
        assert not [what for what in timeline.values() if "sort by the next" in what or "expand the module" in what]


async def test_view_switching_keys() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        for key, view in (("1", "overview"), ("4", "kernels"), ("5", "memory"), ("6", "steps"), ("2", "modules")):
            await pilot.press(key)
            assert app.current_view == view
        await pilot.press("6")
        steps = app.query_one("#steps-table", RowTable)
        assert _names(steps) == ["ProfilerStep#2", "ProfilerStep#3"]
        await pilot.press("4")
        assert app.query_one("#kernels-table", RowTable).rows == []


@pytest.mark.parametrize(
    ("name", "content", "says"),
    [
        ("broken.json", b"this is not a trace", "not a trace: it starts"),
        ("truncated.json.gz", (SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()[:100_000], "truncated"),
    ],
)
async def test_a_trace_that_cannot_load_ends_the_app_with_exit_2(tmp_path, name, content, says) -> None:
    """A load error showed a full-screen page that waited for q; now the app ends by itself
    with exit 2, its error kept for one line on stderr (run_app prints it; test_terminal.py)."""
    import asyncio

    bad = tmp_path / name
    bad.write_bytes(content)
    app = ExplorerApp(FileSource(str(bad)))
    async with app.run_test(size=(80, 24)):
        for _ in range(200):  # no key pressed
            if app.return_value is not None:
                break
            await asyncio.sleep(0.05)
    assert app.return_value == 2
    assert name in app.error_text and says in app.error_text


@pytest.mark.skipif(not SHARED_TRACES.is_dir(), reason="../shared/traces not present")
async def test_gpu_trace_kernels_view() -> None:
    app = ExplorerApp(
        FileSource(str(SHARED_TRACES / "tracelens__h100__Falconsai_nsfw_image_detection__1016002.json.gz"))
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        kernels = app.query_one("#kernels-table", RowTable)
        totals = [r["device_total_us"] for r in kernels.rows]
        assert totals and totals == sorted(totals, reverse=True)
        assert "launched by" in plain_text(app.query_one("#kernels-detail").content)


async def test_enter_lists_every_call_of_an_operator(tmp_path) -> None:
    app = ExplorerApp(FileSource(RESNET), export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("3", "slash", *"aten::conv2d", "enter")
        table = app.query_one("#operators-table", RowTable)
        stats = table.current_row.item
        await pilot.press("enter")
        await pilot.pause()
        calls = app.screen.query_one("#event-table", RowTable)
        assert len(calls.rows) == stats.calls == 40
        assert sum(r["cpu_total_us"] for r in calls.rows) == pytest.approx(stats.cpu_total_us)
        assert all("Conv2d" in r["module"] for r in calls.rows)
        await pilot.press("escape")
        assert app.screen.query_one("#operators-table")


async def test_enter_drills_in_and_escape_goes_back() -> None:
    """Enter on a module -> its operators (backward ones included); enter on one
    -> that operator in the Operators view; esc -> back to Modules."""
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("2", "down", "enter")
        await pilot.pause()
        module_ops = app.query_one("#module-ops", RowTable)
        assert app.focused is module_ops
        names = _names(module_ops)
        assert "aten::convolution_backward" in names and "aten::mkldnn_convolution" in names
        first = module_ops.current_row["name"]
        await pilot.press("enter")
        await pilot.pause()
        assert app.current_view == "operators"
        assert app.query_one("#operators-table", RowTable).current_row["name"] == first
        await pilot.press("escape")
        assert app.current_view == "modules"


async def test_top_level_inside_a_module_and_toggles_shown_in_header() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("2", "down", "t")
        await pilot.pause()
        names = set(_names(app.query_one("#module-ops", RowTable)))
        assert "aten::conv2d" in names and "aten::mkldnn_convolution" not in names
        assert "[top-level]" in plain_text(app.query_one("#header").content)
        await pilot.press("i")
        assert "[by shape, top-level]" in plain_text(app.query_one("#header").content)


async def test_empty_states_say_why(tmp_path) -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        assert "CPU-only profile" in app.query_one("#kernels-table", RowTable).empty_message
        await pilot.press("0")
        assert app.current_view == "log"
        assert "No profiler log" in "".join(str(line.text) for line in app.query_one("#log-lines").lines)


async def test_a_trace_without_memory_events_says_so_with_its_brackets(tmp_path) -> None:
    from tests.helpers.gpu_trace import GpuTrace

    trace = GpuTrace()
    trace.op("aten::mm", 0, 10, **{"Input Dims": [[2, 3], [3, 4]]})
    app = ExplorerApp(FileSource(str(trace.write(tmp_path / "no_memory.json"))))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("5")
        await pilot.pause()
        assert "No [memory] events: profile with profile_memory=True." in plain_text(
            app.query_one("#memory-chart").content
        )


async def test_export_names_what_the_view_shows_and_survives_an_unwritable_directory(tmp_path) -> None:
    app = ExplorerApp(FileSource(RESNET), export_dir=tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("e")  # Overview: its findings
        findings = _exported_csv(tmp_path / "tuiprof-overview-findings-resnet18_cpu.csv")
        assert any(row["id"] == "memory-peak" for row in findings)
        await pilot.press("2", "e")  # Modules with the tree focused: every module
        modules = _exported_csv(tmp_path / "tuiprof-modules-resnet18_cpu.csv")
        assert modules[0]["path"] == "ResNet_0" and len(modules) > 50
        app.export_dir = tmp_path / "missing" / "dir"
        await pilot.press("e")
        await pilot.pause()
        assert app.is_running and app.return_value is None


async def test_help_explains_the_tree_rows() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("2", "question_mark")
        await pilot.pause()
        console = Console(record=True, width=200, file=io.StringIO())
        for widget in app.screen.query("Static"):
            console.print(widget.content)
        text = console.export_text()
        assert "Module tree rows" in text and "forward + backward" in text
        assert "command palette" in text  # keys come from the command table


async def test_a_narrow_tree_keeps_the_index_that_tells_siblings_apart() -> None:
    """At 60 columns a name has ~10 cells: cut at its end, ResNet's four Sequential_N
    children all read "Sequenti…"; cut in the middle they keep their index."""
    from rich.style import Style

    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(60, 20)) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        tree = app.query_one("#module-tree", ModuleTreeView)

        def rows() -> list[str]:
            nodes = [n for root in tree.root.children for n in (root, *root.children)]
            return [tree.render_label(n, Style(), Style()).plain for n in nodes]

        width = tree.scrollable_content_region.width
        children = [row for row in rows() if "Sequ" in row]
        assert len(children) == 4 and all(row.rstrip()[-2] == "_" for row in children), children
        assert len({row.rstrip()[-2:] for row in children}) == 4  # _5, _3, _0, _1
        assert all(row.count("…") == 1 and len(row) <= width for row in children)
        await pilot.press("slash", *"block", "enter")
        await pilot.pause()
        assert rows()[0].rstrip().endswith("_7") and rows()[0].count("…") == 1  # …/Sequential_5/BasicBlock_7, cut once


async def test_tree_leaves_line_up_with_their_expandable_siblings() -> None:
    """Tree gives a leaf no ``▶ `` slot: Conv2d_0's bar and share stood two columns left of
    Sequential_5's.  Read from the drawn lines: siblings' "%" in one column."""
    from rich.cells import cell_len

    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        tree = app.query_one("#module-tree", ModuleTreeView)

        def share_column(node) -> int:
            """Where the share ends: its "%", or the last "-" of (outside modules)' "--"."""
            line = "".join(segment.text for segment in tree.render_line(node.line - tree.scroll_offset.y))
            return cell_len(line[: line.index("%")]) if "%" in line else cell_len(line[: line.index("--") + 1])

        roots = tree.root.children
        children = roots[0].children
        assert {bool(node.allow_expand) for node in children} == {True, False}  # Sequential_N and Conv2d_0 ...
        assert {bool(node.allow_expand) for node in roots} == {True, False}  # ResNet_0 and CrossEntropyLoss_0
        assert roots[-1].data is app.model.modules.outside  # the last row, no module: "--" for its share
        assert len({share_column(node) for node in children}) == 1, [share_column(node) for node in children]
        assert len({share_column(node) for node in roots}) == 1


async def test_slash_filters_the_focused_pane_of_modules() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        await pilot.press("2", "slash", *"conv2d_1", "enter")
        await pilot.pause()
        tree = app.query_one("#module-tree", ModuleTreeView)
        shown = [node.data.name for node in tree.root.children]
        assert shown and all(name.lower().startswith("conv2d_1") for name in shown)
        assert tree.cursor_node.data.name == shown[0]
        ops = _names(app.query_one("#module-ops", RowTable))
        assert "aten::conv2d" in ops  # the operators of the matched module
        await pilot.press("escape")
        assert [node.data.name for node in tree.root.children][0] == "ResNet_0"


async def test_a_saved_capture_shows_its_profiler_log(tmp_path) -> None:
    import gzip

    from tuiprof.trace.live import MEMBER, LiveFacts, encode_live_facts

    document = json.loads(gzip.open(RESNET).read())
    document[MEMBER] = json.loads(
        encode_live_facts(LiveFacts(log_lines=["profiler_start", "[W] a [bracketed] warning"]))
    )
    saved = tmp_path / "saved.json"
    saved.write_text(json.dumps(document))
    app = ExplorerApp(FileSource(str(saved)), views=SNAPSHOT_VIEWS)  # the views this header was drawn with
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        header = plain_text(app.query_one("#header").content)
        assert " 0 Log" in header and " 2 Modules" in header  # eight tabs, all named at 80 columns
        await pilot.press("0")
        lines = [str(line.text) for line in app.query_one("#log-lines").lines]
        assert any("[bracketed]" in line for line in lines)


async def test_brackets_switch_rank_in_every_view() -> None:
    run = SAMPLES / "ddp_gloo_2ranks"
    app = ExplorerApp(FileSource(str(run)))
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot)
        assert app.model.info.rank == 0 and "rank 0 of 2" in plain_text(app.query_one("#header").content)
        await pilot.press("3", "right_square_bracket")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.model.info.rank == 1 and "rank 1 of 2" in plain_text(app.query_one("#header").content)
        assert app.current_view == "operators"
        assert app.query_one("#operators-table", RowTable).rows[0].item in app.model.operators()
        first = app.model
        await pilot.press("right_square_bracket")  # wraps to rank 0
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.model.info.rank == 0
        await pilot.press("left_square_bracket")  # rank 1 again, from the cache
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.model is first


async def test_brackets_on_a_single_trace_say_why_nothing_happens() -> None:
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        model = app.model
        await pilot.press("right_square_bracket")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.model is model
        assert any("Not a distributed run" in str(n.message) for n in app._notifications)
        # shown as written: as markup "[ and ]" was taken for a tag and the keys vanished
        assert all(not n.markup for n in app._notifications if "Not a distributed run" in str(n.message))


def test_operator_detail_lists_its_costliest_modules_first(resnet_model) -> None:
    from tuiprof.analysis.detail import operator_detail
    from tuiprof.report.details import operator_text

    stats = next(s for s in resnet_model.operators() if s.name == "aten::mkldnn_convolution")
    detail = operator_detail(resnet_model, stats)
    node_time = {n.path: n.cpu_total_us for n in resnet_model.modules.walk()}
    times = [node_time[path] for path, _, _ in detail.modules]
    assert times == sorted(times, reverse=True)  # a conv's time is its module's, roughly
    assert detail.module_count == 20
    text = operator_text(resnet_model, stats).plain
    assert f"+{detail.module_count - 3} more" in text and detail.modules[0][0] in text


async def test_q_during_a_load_quits_with_130_whatever_the_loader_does_next() -> None:
    """Stopped by the user before there was anything to show: 130, as the exit codes in docs/commands.md say
    (it exited 0; this test read ``return_code``, which is 0 whatever the result given to ``exit``,
    not the result that ``run_app`` returns)."""
    import time as clock

    from tuiprof.tui.sources import LoadCancelled

    class SlowSource:
        """A load that reports progress until it is cancelled (as a big file's load does)."""

        title = "slow"
        live = False

        def __call__(self, report, cancelled):
            while True:
                report("decoding", 0.5)
                if cancelled():
                    raise LoadCancelled
                clock.sleep(0.001)

    for _ in range(5):
        app = ExplorerApp(SlowSource())
        async with app.run_test() as pilot:
            await pilot.pause(0.1)
            await pilot.press("q")
            await pilot.pause(0.3)
        assert app.return_value == 130  # run_app's exit status


async def test_the_log_wraps_to_a_60_column_terminal() -> None:
    app = ExplorerApp(FileSource(str(RESNET)))
    async with app.run_test(size=(60, 20)) as pilot:
        await loaded(pilot)
        await pilot.press("0")
        await pilot.pause()
        lines = [str(line.text).rstrip() for line in app.query_one("#log-lines").lines]
        assert "tuiprof run" in " ".join(lines)  # the end of the sentence is on screen, not clipped
        assert max(map(len, lines)) <= 60


async def test_the_loading_clock_runs_between_reports() -> None:
    import time as clock

    from tuiprof.tui.sources import LoadCancelled

    class QuietSource:
        """One report, then a long silence (as the analysis of a big trace)."""

        title = "quiet"
        live = False

        def __call__(self, report, cancelled):
            report("analysing 4,742,000 events", None)
            while not cancelled():
                clock.sleep(0.01)
            raise LoadCancelled

    app = ExplorerApp(QuietSource())
    async with app.run_test() as pilot:
        await pilot.pause(0.2)
        first = plain_text(app.query_one("#loading-text").content)
        await pilot.pause(1.2)
        later = plain_text(app.query_one("#loading-text").content)
        await pilot.press("q")
    assert first.startswith("analysing 4,742,000 events · ") and later.startswith("analysing 4,742,000 events · ")
    assert float(later.split("· ")[-1].strip().rstrip("s")) >= float(first.split("· ")[-1].strip().rstrip("s")) + 0.9


async def test_a_source_says_it_is_live_with_a_field_and_the_first_q_stops_it() -> None:
    """``live`` is the source's explicit field (no ``hasattr(source, "stop")``): a live
    source without a ``stop`` attribute still gets the live hint, and q stops it first."""
    import time as clock

    from tuiprof.tui.sources import LoadCancelled

    class CaptureLike:
        title = "live capture"
        live = True

        def __call__(self, report, cancelled):
            give_up = clock.monotonic() + 5  # never a thread left waiting when an assert fails
            while not cancelled() and clock.monotonic() < give_up:
                clock.sleep(0.01)
            raise LoadCancelled

    app = ExplorerApp(CaptureLike())
    async with app.run_test() as pilot:
        await pilot.pause(0.1)
        assert plain_text(app.query_one("#loading-hint").content).strip() == "q: stop and show what was captured"
        await pilot.press("q")
        await pilot.pause(0.1)
        assert app.is_running and "stopping after this step" in plain_text(app.query_one("#loading-hint").content)
        await pilot.press("q")


def test_messages_are_dataclasses_of_what_they_carry() -> None:
    from dataclasses import fields

    from tuiprof.analysis.timeline import WindowTarget
    from tuiprof.tui.messages import JumpTo, LoadAdvanced, ShowInTimeline

    assert [f.name for f in fields(JumpTo)] == ["view", "name"]
    assert JumpTo(view="operators", name="aten::mm") == JumpTo("operators", "aten::mm")
    assert ShowInTimeline(WindowTarget(0, 10)).target == WindowTarget(start_ns=0, end_ns=10)
    assert LoadAdvanced("decoding", 0.5).can_replace(LoadAdvanced("decoding", 0.25))


ALL_KEY_TITLES = (
    "Quit",
    "Help",
    "Filter",
    "By shape",
    "Top-level",
    "Export",
    "Sort",
    "Reverse",
    "Back",
    "Zoom in",
    "Zoom out",
    "Fit step",
    "Idle gap",
    "Range",
    "Table",
)


def _key_bar_titles(app: ExplorerApp) -> tuple[str, list[str]]:
    """The key bar's line and the titles it shows whole (` k Title `: a title cut short is not one)."""
    bar = str(app.screen.query_one(KeyBar).render()).rstrip()
    shown = [title for title in ALL_KEY_TITLES if re.search(rf"(^| )\S+ {re.escape(title)}( |$)", bar)]
    return bar, shown


@pytest.mark.parametrize("width", [80, 60])
async def test_key_bar_keeps_quit_and_drops_whole_keys(width: int) -> None:
    """At 80 columns the drill-in bar lost `e Export` mid-key (`e`) and the Timeline's `- Zoom out`
    (`- Zoom`); Quit went first.  Every key shown is whole, and Quit (Back in a drill-in) stays."""
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(width, 24)) as pilot:
        await loaded(pilot)
        for keys, kept in ((("3",), "Quit"), (("3", "enter"), "Back"), (("7",), "Quit"), (("2",), "Quit")):
            for key in keys:
                await pilot.press(key)
                await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
            bar, shown = _key_bar_titles(app)
            assert kept in shown, bar
            assert len(bar) <= width, bar
            leftover = bar
            for title in shown:  # nothing but whole keys (and the palette hint) on the line
                leftover = re.sub(rf"\S+ {re.escape(title)}( |$)", "", leftover, count=1)
            assert leftover.replace("^p palette", "").strip() == "", bar
            if keys == ("7",):
                assert {"Zoom in", "Zoom out"} <= set(shown), bar  # the Timeline's own keys before the app's
            if keys[-1] == "enter":
                await pilot.press("escape")


async def test_empty_views_offer_no_keys_that_act_on_rows() -> None:
    """Kernels on a CPU trace, Ranks and Collectives on one trace, Log without a log: no Sort,
    Reverse, Export, By shape, Top-level or Filter on the key bar (nothing to act on)."""
    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(100, 24)) as pilot:
        await loaded(pilot)
        for key in ("4", "8", "9", "0"):
            await pilot.press(key)
            await pilot.pause()
            bar, shown = _key_bar_titles(app)
            assert set(shown) == {"Quit", "Help"}, (key, bar)
        await pilot.press("3")
        await pilot.pause()
        bar, shown = _key_bar_titles(app)
        assert {"Sort", "Export", "By shape", "Filter"} <= set(shown), bar


async def test_kernel_names_get_their_room_before_the_launching_operator() -> None:
    """At 80 columns the Kernel column was 22 cells (`Kerne…6_128x64…align8>`) while Launched by
    had 26: the name is what the row is, the launcher yields first."""
    app = ExplorerApp(FileSource(str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz")))
    async with app.run_test(size=(80, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        table = app.query_one("#kernels-table", RowTable)
        widths = dict(zip((c.header for c in table._shown), table._cell_widths()))
        assert widths["Kernel"] >= 30 and widths["Launched by"] < widths["Kernel"], widths
        lines = ["".join(segment.text for segment in table.render_line(y)) for y in range(1, 6)]
        assert "Kernel2…6_128x64_64x6_tn_align8>" in lines[0], lines  # cut once


async def test_at_60x20_the_kernel_detail_keeps_its_times_in_view() -> None:
    """The demangled signature took 4 of the pane's lines and pushed the launches and times out."""
    app = ExplorerApp(FileSource(str(ROOT / "tests" / "data" / "h100_vit_inference.json.gz")))
    async with app.run_test(size=(60, 20)) as pilot:
        await loaded(pilot)
        await pilot.press("4")
        await pilot.pause()
        pane = app.query_one("#kernels-detail")
        lines = ["".join(segment.text for segment in pane.render_line(y)) for y in range(pane.size.height)]
        shown = " ".join(lines)
        assert "48 launches" in shown and "total 399.136us" in shown, lines
        assert lines[0].strip().startswith("void cutlass::Kernel2<"), lines


@pytest.mark.parametrize("width", [60, 80, 120])
async def test_the_module_tree_shows_the_call_counts_on_every_row_or_on_none(width: int) -> None:
    """At 60 columns `ResNet_0 ×2` and `ReLU_0 ×2` kept their count while `Conv2d_0` and the
    cut `Sequen…_5` had none: every ResNet module ran twice (two steps)."""
    from rich.style import Style

    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(width, 24)) as pilot:
        await loaded(pilot)
        await pilot.press("2")
        await pilot.pause()
        tree = app.query_one("#module-tree", ModuleTreeView)
        modules = [root for root in tree.root.children if root.data is not app.model.modules.outside]
        nodes = [n for root in modules for n in (root, *root.children)]
        assert all(node.data.calls == 2 for node in nodes)  # (outside modules) counts its top-level calls
        outside = tree.root.children[-1]
        counted = [" ×2" in tree.render_label(node, Style(), Style()).plain for node in nodes]
        counted.append(f" ×{outside.data.calls}" in tree.render_label(outside, Style(), Style()).plain)
        assert all(counted) or not any(counted), counted
        if width == 120:
            assert all(counted)  # room for every name and its count


async def test_the_memory_table_titles_and_their_key_fit_a_narrow_terminal() -> None:
    """The one-line title ("Modules at the peak (their submodules included)  m: next table") was
    cut at 60 columns to "... m: next" (a walkthrough): every title keeps its key's name whole."""
    from textual.geometry import Region

    app = ExplorerApp(FileSource(RESNET))
    async with app.run_test(size=(60, 20)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("5")
        await pilot.pause()
        seen = []
        for _ in range(3):
            title = app.query_one("#memory-table-title")
            strips = title.render_lines(Region(0, 0, title.size.width, title.size.height))
            seen.append("".join(strip.text for strip in strips).strip())
            await pilot.press("m")
            await pilot.pause()
    assert len(set(seen)) == 3 and all(text.endswith("m: next table") for text in seen), seen
