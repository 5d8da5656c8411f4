"""The explorer: a Textual app over one TraceModel.

It never parses: a worker thread runs a :mod:`sources` callable that returns
the model, and every widget reads that model.  Views are switched with the
number keys (and the command palette); tables are :class:`RowTable`, which
renders only visible lines, so big traces stay instant.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import on, work
from textual.timer import Timer
from textual.worker import get_current_worker
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import ContentSwitcher, Footer, Input, ProgressBar, RichLog, Static, Tree

from tuiprof.analysis.detail import operator_detail
from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.report.findings import findings
from tuiprof.report.render import render_rows
from tuiprof.report.units import format_bytes, format_bytes_short, format_count, format_us, format_us_short
from tuiprof.report.views import (
    CALL_COLUMNS,
    LAUNCH_COLUMNS,
    VIEWS,
    Row,
    ViewOptions,
    build_call_rows,
    build_launch_rows,
    module_row,
)
from tuiprof.tui.messages import LoadFailed, LoadFinished, LoadProgress
from tuiprof.tui.screens.events import EventListScreen
from tuiprof.tui.screens.help import HelpScreen
from tuiprof.tui.sources import FileSource, LoadCancelled, ModelSource
from tuiprof.tui.widgets.memory_chart import MemoryCurve
from tuiprof.tui.widgets.module_tree import ModuleTreeView
from tuiprof.tui.widgets.row_table import RowTable

# view id -> (key, title, the RowTable that export and help use)
VIEW_KEYS = {
    "overview": ("1", "Overview", None),
    "modules": ("2", "Modules", "module-ops"),
    "operators": ("3", "Operators", "ops-table"),
    "kernels": ("4", "Kernels", "kernels-table"),
    "memory": ("5", "Memory", "memory-ops"),
    "steps": ("6", "Steps", "steps-table"),
    "log": ("7", "Log", None),
}
ASYNC_CALLS = 50_000  # operator calls above which tables are built off the UI thread
MODULE_SETTLE_S = 0.15  # big traces: how long the tree cursor rests before its operators are computed
TABLE_VIEWS = {"module-ops": "ops", "ops-table": "ops", "kernels-table": "kernels", "memory-ops": "ops", "steps-table": "steps"}
MEMORY_COLUMNS = ("name", "self_cpu_mem_bytes", "cpu_mem_bytes", "self_device_mem_bytes", "device_mem_bytes", "calls")


class ExplorerApp(App[int]):
    CSS_PATH = "explorer.tcss"
    TITLE = "tuiprof"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", key_display="?"),
        Binding("slash", "filter", "Filter", key_display="/"),
        Binding("escape", "clear_filter", "Back", show=False),
        Binding("i", "toggle_shapes", "By shape"),
        Binding("t", "toggle_top_level", "Top-level"),
        Binding("e", "export('csv')", "Export"),
        Binding("E", "export('json')", "Export JSON", show=False),
        *[Binding(key, f"show_view('{view}')", title, show=False) for view, (key, title, _) in VIEW_KEYS.items()],
    ]

    def __init__(self, source: ModelSource, export_dir: Path | None = None) -> None:
        super().__init__()
        self.source = source
        self.export_dir = export_dir or Path.cwd()
        self.model: TraceModel | None = None
        self.options = ViewOptions()
        self.selected_module: ModuleNode | None = None
        self.log_lines: list[str] = []
        self.exit_code = 0
        self.error_text = ""
        self._module_timer: Timer | None = None
        self._cancel = threading.Event()
        self.load_seconds: float | None = None

    # ------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static("tuiprof", id="header")
        with Vertical(id="loading"):
            yield Static(f"Opening {self.source.title}", id="loading-title")
            yield ProgressBar(id="loading-bar", show_eta=False)
            yield Static("", id="loading-text")
            yield Static("q: stop and show what was captured" if hasattr(self.source, "stop") else "q: cancel", id="loading-hint")
        with ContentSwitcher(initial="overview", id="views"):
            with VerticalScroll(id="overview"):
                yield Static(id="overview-body")
            with Horizontal(id="modules"):
                yield ModuleTreeView(id="module-tree")
                with Vertical(id="module-side"):
                    yield RowTable(id="module-ops")
                    yield Static(id="module-detail", classes="detail")
            with Vertical(id="operators"):
                yield RowTable(id="ops-table")
                yield Static(id="ops-detail", classes="detail")
            with Vertical(id="kernels"):
                yield RowTable(id="kernels-table")
                yield Static(id="kernel-detail", classes="detail")
            with Vertical(id="memory"):
                yield Static(id="memory-chart")
                yield RowTable(id="memory-ops")
            with Vertical(id="steps"):
                yield RowTable(id="steps-table")
                yield Static(id="step-detail", classes="detail")
            yield RichLog(id="log", wrap=True)
        yield Input(placeholder="filter by name (enter: keep, esc: clear)", id="filter")
        yield Footer()

    def on_mount(self) -> None:
        self.started = time.perf_counter()
        self.query_one("#views").display = False
        self._show_filter_box(False)
        self._load()

    # ------------------------------------------------------------ loading

    @work(thread=True, exclusive=True, group="load")
    def _load(self) -> None:
        last = 0.0

        def report(text: str, fraction: float | None) -> None:
            nonlocal last
            now = time.perf_counter()
            if now - last >= 0.05 or fraction is None:
                last = now
                self.post_message(LoadProgress(text, fraction))

        try:
            model, log_lines = self.source(report, self._cancel.is_set)
        except LoadCancelled:
            self.call_from_thread(self.exit, 130)
            return
        except Exception as exc:  # TraceError and friends: a message, not a crash
            from tuiprof.errors import TraceError

            code = getattr(exc, "exit_code", 2) if isinstance(exc, TraceError) else 1
            text = str(exc) if isinstance(exc, TraceError) else f"internal error: {type(exc).__name__}: {exc}"
            self.post_message(LoadFailed(text, code))
            return
        self.post_message(LoadFinished(model, log_lines))

    def on_load_progress(self, message: LoadProgress) -> None:
        bar = self.query_one("#loading-bar", ProgressBar)
        if message.fraction is None:
            bar.update(total=None)
        else:
            bar.update(total=100, progress=100 * message.fraction)
        self.query_one("#loading-text", Static).update(message.text)

    def on_load_failed(self, message: LoadFailed) -> None:
        self.exit_code = message.exit_code
        self.error_text = message.text
        self.query_one("#loading-bar").display = False
        self.query_one("#loading-title", Static).update(Text("Cannot open this trace", style="bold red"))
        self.query_one("#loading-text", Static).update(Text(message.text))
        self.query_one("#loading-hint", Static).update("q: quit")

    def on_load_finished(self, message: LoadFinished) -> None:
        self.load_seconds = time.perf_counter() - self.started
        self.model = message.model
        self.log_lines = message.log_lines
        self.query_one("#loading").display = False
        self.query_one("#views").display = True
        with self.batch_update():
            self._fill_header()
            self._fill_overview()
            self._fill_modules()
            self._fill_operators()
            self._fill_kernels()
            self._fill_memory()
            self._fill_steps()
            self._fill_log()
        first = "modules" if self.model.modules.roots else "overview"
        self.action_show_view(first)
        if len(self.model.calls) > ASYNC_CALLS:
            self.run_worker(self._prepare_other_groupings, thread=True, group="prepare")

    def _prepare_other_groupings(self) -> None:
        """Big traces: build the toggled operator tables ahead, so i and t answer from cache."""
        model = self.model
        assert model is not None
        for shapes, top in ((False, True), (True, False)):
            if get_current_worker().is_cancelled:
                return
            model.operators(group_by_shape=shapes, top_level_only=top)

    # ------------------------------------------------------------ views

    def action_show_view(self, view: str) -> None:
        if self.model is None:
            return
        self.query_one("#views", ContentSwitcher).current = view
        focus = {"modules": "#module-tree", "operators": "#ops-table", "kernels": "#kernels-table",
                 "memory": "#memory-ops", "steps": "#steps-table", "overview": "#overview", "log": "#log"}[view]
        self.screen.set_focus(self.query_one(focus))  # now, not after a refresh: keys typed right after go there
        self._fill_header()

    @property
    def current_view(self) -> str:
        return self.query_one("#views", ContentSwitcher).current or "overview"

    def _fill_header(self) -> None:
        model = self.model
        if model is None:
            return
        info = model.info
        parts = [info.trace_name.removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace")]
        parts.append(", ".join(dict.fromkeys(info.devices)) if info.devices else "CPU")
        if info.rank is not None:
            parts.append(f"rank {info.rank}/{info.world_size}")
        if model.steps:
            parts.append(f"{len(model.steps)} steps × {format_us_short(model.step_time_us)}")
        else:
            parts.append(f"{format_us_short(info.duration_us)} traced")
        peak = model.peak_memory
        if peak is not None:
            parts.append(f"peak {format_bytes_short(peak.peak_bytes)} {peak.device}")
        if model.total_flops:
            flops = f"{format_count(model.total_flops).replace(' ', '')}FLOP"
            busy = model.total_device_us or sum(r.cpu_total_us + r.backward_cpu_us for r in model.modules.roots)
            if busy:
                flops += f" {format_count(model.total_flops / (busy / 1e6)).replace(' ', '')}FLOP/s"
            parts.append(flops)
        tabs = Text()
        for view, (key, title, _) in VIEW_KEYS.items():
            if view == "log" and not self.log_lines:
                continue
            style = "reverse bold" if view == self.current_view else "dim"
            tabs.append(f" {key} {title} ", style=style)
        header = Text(" · ".join(parts), style="bold", overflow="ellipsis", no_wrap=True)
        self.query_one("#header", Static).update(Group(header, tabs))

    def _fill_overview(self) -> None:
        model = self.model
        assert model is not None
        blocks: list = []
        hints = [f.text for f in findings(model)]
        if hints:
            blocks.append(Text("Findings", style="bold underline"))
            blocks.extend(Text(f" • {hint}") for hint in hints)
            blocks.append(Text())
        if model.steps:
            steps = Table(title="Step time", title_justify="left", box=None, header_style="bold", pad_edge=False)
            headers = ["step", "duration", "data load"]
            if model.has_device:
                headers += ["kernels", "memcpy", "comm", "device idle"]
            for header in headers:
                steps.add_column(header, justify="left" if header == "step" else "right")
            for step in model.steps[:8]:
                cells = [step.name, format_us(step.duration_us), format_us(step.data_loading_us)]
                if model.has_device:
                    cells += [
                        format_us(step.kernel_us), format_us(step.memcpy_us), format_us(step.communication_us),
                        f"{step.idle_pct:.0f}%" if step.device_window_us else "--",
                    ]
                steps.add_row(*cells)
            blocks += [steps, Text()]
        if model.modules.roots:
            modules = Table(title="Top modules (forward + backward)", title_justify="left", box=None, header_style="bold", pad_edge=False)
            modules.add_column("module")
            headers = ["fwd", "bwd", "device", "FLOPs"] if model.has_device else ["fwd", "bwd", "FLOPs"]
            for header in headers:
                modules.add_column(header, justify="right")
            leaves = sorted(
                (n for n in model.modules.walk() if n.depth > 0 and not n.children), key=lambda n: n.cost_us, reverse=True
            )
            for node in leaves[:5]:
                name = node.qualified_name or "/".join(node.path.split("/")[-2:])
                cells = [name, format_us(node.cpu_total_us), format_us(node.backward_cpu_us)]
                if model.has_device:
                    cells.append(format_us(node.device_total_us + node.backward_device_us))
                cells.append(format_count(node.flops) if node.flops else "--")
                modules.add_row(*cells)
            blocks += [modules, Text()]
        operators = Table(title="Top operators", title_justify="left", box=None, header_style="bold", pad_edge=False)
        operators.add_column("operator")
        key = "self_device_us" if model.has_device else "self_cpu_us"
        for header in ("self device" if model.has_device else "self CPU", "calls", "FLOPs"):
            operators.add_column(header, justify="right")
        ranked = sorted((s for s in model.operators() if s.name != "ProfilerStep*"), key=lambda s: getattr(s, key), reverse=True)
        for stats in ranked[:5]:
            operators.add_row(stats.name, format_us(getattr(stats, key)), str(stats.calls), format_count(stats.flops) if stats.flops else "--")
        blocks.append(operators)
        if model.kernels:
            kernels = Table(title="Top kernels", title_justify="left", box=None, header_style="bold", pad_edge=False)
            kernels.add_column("kernel", no_wrap=True, overflow="ellipsis", max_width=70)
            for header in ("total", "calls", "launched by"):
                kernels.add_column(header, justify="right" if header != "launched by" else "left")
            for kernel in model.kernels[:5]:
                kernels.add_row(kernel.name, format_us(kernel.device_total_us), str(kernel.calls), kernel.launcher)
            blocks += [Text(), kernels]
        peak = model.peak_memory
        if peak is not None:
            origin = model.calls.start_ns[0] if len(model.calls) else 0
            blocks += [Text(), Text(f"{peak.device} memory", style="bold"), MemoryCurve(peak, origin, 3)]
        self.query_one("#overview-body", Static).update(Group(*blocks))

    def _fill_modules(self) -> None:
        model = self.model
        assert model is not None
        tree = self.query_one("#module-tree", ModuleTreeView)
        table = self.query_one("#module-ops", RowTable)
        if not model.modules.roots:
            tree.display = False
            table.empty_message = "no module tree: profile with with_stack=True"
            self._fill_table("module-ops", ViewOptions(group_by_shape=self.options.group_by_shape, top_level_only=self.options.top_level_only))
            self.query_one("#module-detail", Static).update(
                "This trace has no nn.Module frames. torch.profiler records the module hierarchy only with "
                "with_stack=True (with_modules alone records nothing for eager models). The table shows all operators."
            )
            return
        tree.load(model)

    def _fill_operators(self) -> None:
        self._fill_table("ops-table", self.options)

    def _fill_kernels(self) -> None:
        table = self.query_one("#kernels-table", RowTable)
        table.empty_message = "no device kernels in this trace (CPU-only profile)"
        self._fill_table("kernels-table", self.options)

    def _fill_steps(self) -> None:
        table = self.query_one("#steps-table", RowTable)
        table.empty_message = "no ProfilerStep#N spans: profile with a schedule and call prof.step()"
        self._fill_table("steps-table", self.options)

    def _fill_memory(self) -> None:
        model = self.model
        assert model is not None
        chart = self.query_one("#memory-chart", Static)
        if not model.memory:
            chart.update("No [memory] events: profile with profile_memory=True.")
        else:
            origin = model.calls.start_ns[0] if len(model.calls) else 0
            curves = []
            for timeline in model.memory[:2]:
                label = ""
                if timeline.peak_operator_row >= 0:
                    label = model.calls.name(timeline.peak_operator_row)
                    node = model.modules.by_frame.get(model.calls.module[timeline.peak_operator_row])
                    if node is not None:
                        label += f" ({node.label})"
                curves += [Text(f"{timeline.device} memory", style="bold"), MemoryCurve(timeline, origin, 4, label)]
            chart.update(Group(*curves))
        table = self.query_one("#memory-ops", RowTable)
        view = VIEWS["ops"]
        columns = tuple(view.column(key) for key in MEMORY_COLUMNS if key in {c.key for c in view.visible_columns(self.options, model)})
        sort = "self_device_mem_bytes" if any(not t.is_cpu for t in model.memory) else "self_cpu_mem_bytes"
        table.set_data(columns, view.build(model, self.options), sort)

    def _fill_log(self) -> None:
        log = self.query_one("#log", RichLog)
        log.clear()
        for line in self.log_lines:
            log.write(line)

    def _fill_table(self, table_id: str, options: ViewOptions) -> None:
        """Rows for a table: at once when cheap, else built in a worker.

        Operator tables of big traces (hundreds of thousands of calls) take
        longer than a key press may; the table says so and fills when ready.
        """
        model = self.model
        assert model is not None
        view = VIEWS[TABLE_VIEWS[table_id]]
        if view.name == "ops" and len(model.calls) > ASYNC_CALLS and not model.has_operator_table(
            group_by_shape=options.group_by_shape, top_level_only=options.top_level_only, module=options.module
        ):
            table = self.query_one(f"#{table_id}", RowTable)
            table.empty_message = "computing…"
            table.set_data(table.columns, [], table.sort_key, table.descending)
            self.run_worker(
                partial(self._build_rows_in_background, table_id, options),
                thread=True, exclusive=True, group=f"rows-{table_id}",
            )
            return
        self._show_rows(table_id, options, view.build(model, options))

    def _build_rows_in_background(self, table_id: str, options: ViewOptions) -> None:
        assert self.model is not None
        rows = VIEWS[TABLE_VIEWS[table_id]].build(self.model, options)
        if not get_current_worker().is_cancelled:  # a newer request for this table won
            self.call_from_thread(self._show_rows, table_id, options, rows)

    def _show_rows(self, table_id: str, options: ViewOptions, rows: list[Row]) -> None:
        model = self.model
        assert model is not None
        view = VIEWS[TABLE_VIEWS[table_id]]
        table = self.query_one(f"#{table_id}", RowTable)
        table.empty_message = "nothing to show"
        sort = table.sort_key or view.default_sort_for(model)
        table.set_data(view.visible_columns(options, model), rows, sort, table.descending if table.sort_key else True)

    # ------------------------------------------------------------ selection

    @on(Tree.NodeHighlighted, "#module-tree")
    def _module_highlighted(self, event: Tree.NodeHighlighted[ModuleNode]) -> None:
        module = event.node.data
        if module is None or self.model is None:
            return
        self.selected_module = module
        self.query_one("#module-detail", Static).update(self._module_text(module))
        if self._module_timer is not None:
            self._module_timer.stop()
        if len(self.model.calls) > ASYNC_CALLS:
            # Big traces: fill the module's operators once the cursor rests, so
            # walking the tree with j/k stays instant.
            self._module_timer = self.set_timer(MODULE_SETTLE_S, self._fill_selected_module)
        else:
            self._fill_selected_module()

    def _fill_selected_module(self) -> None:
        options = ViewOptions(self.options.group_by_shape, self.options.top_level_only, self.selected_module)
        self._fill_table("module-ops", options)

    def _module_text(self, module: ModuleNode) -> Text:
        model = self.model
        assert model is not None
        total = sum(r.cost_us for r in model.modules.roots) or 1.0
        text = Text()
        text.append(module.path, style="bold")
        if module.qualified_name:
            text.append(f"  {module.qualified_name}", style="cyan")
        text.append(f"  {100 * module.cost_us / total:.1f} % of module time\n")
        text.append(f"{module.calls} calls · fwd {format_us_short(module.cpu_total_us)} (self {format_us_short(module.self_cpu_us)})")
        if module.backward_cpu_us:
            text.append(f" · bwd {format_us_short(module.backward_cpu_us)}")
        if model.has_device:
            text.append(f" · device fwd {format_us_short(module.device_total_us)}")
            if module.backward_device_us:
                text.append(f" bwd {format_us_short(module.backward_device_us)}")
        text.append(f"\nFLOPs {format_count(module.flops) if module.flops else '--'} · mem {format_bytes(module.cpu_mem_bytes)}")
        if module.parameters is not None:
            text.append(f" · params {module.parameters:,} · output {module.output_shape or '--'}")
        return text

    @on(RowTable.Highlighted)
    def _row_highlighted(self, event: RowTable.Highlighted) -> None:
        if self.model is None:
            return
        table_id = event.table.id
        row = event.row
        if table_id == "ops-table":
            self.query_one("#ops-detail", Static).update(self._operator_text(row))
        elif table_id == "module-ops" and row is not None and self.selected_module is None:
            self.query_one("#module-detail", Static).update(self._operator_text(row))
        elif table_id == "kernels-table":
            self.query_one("#kernel-detail", Static).update(self._kernel_text(row))
        elif table_id == "steps-table":
            self.query_one("#step-detail", Static).update(self._step_text(row))

    @on(RowTable.Selected, "#module-ops")
    def _module_operator_selected(self, event: RowTable.Selected) -> None:
        """Enter on an operator of a module: show it in the Operators view."""
        if event.row is None:
            return
        self.action_show_view("operators")
        table = self.query_one("#ops-table", RowTable)
        name = event.row["name"]
        for index, row in enumerate(table.rows):
            if row["name"] == name:
                table.cursor = index
                break

    @on(RowTable.Selected, "#ops-table")
    def _operator_selected(self, event: RowTable.Selected) -> None:
        """Enter on an operator: every one of its calls."""
        if event.row is None or self.model is None or "_stats" not in event.row:
            return
        stats = event.row["_stats"]
        title = f"{stats.name}: {stats.calls:,} calls (esc: back)"
        self.push_screen(
            EventListScreen(title, CALL_COLUMNS, build_call_rows(self.model, stats.rows), "cpu_total_us", self._export_path("calls"))
        )

    @on(RowTable.Selected, "#kernels-table")
    def _kernel_selected(self, event: RowTable.Selected) -> None:
        """Enter on a kernel: every launch."""
        if event.row is None or self.model is None:
            return
        stats = event.row["_stats"]
        title = f"{stats.name}: {stats.calls:,} launches (esc: back)"
        self.push_screen(
            EventListScreen(title, LAUNCH_COLUMNS, build_launch_rows(self.model, stats.rows), "duration_us", self._export_path("launches"))
        )

    def _export_path(self, what: str) -> Path:
        assert self.model is not None
        stem = Path(self.model.info.trace_name).name.split(".")[0] or "trace"
        return self.export_dir / f"tuiprof-{what}-{stem}.csv"

    def _operator_text(self, row: Row | None) -> Text:
        model = self.model
        if row is None or model is None or "_stats" not in row:
            return Text("")
        stats = row["_stats"]
        detail = operator_detail(model, stats)
        text = Text()
        text.append(stats.name, style="bold")
        text.append(f"  calls {stats.calls}")
        if detail.share_of_step_pct is not None:
            text.append(f" · {detail.share_of_step_pct:.1f} % of step time")
        if detail.share_of_parent_pct is not None and detail.parents:
            text.append(f" · {detail.share_of_parent_pct:.0f} % of {detail.parents[0][0]}")
        text.append("\n")
        text.append(
            f"CPU self {format_us(stats.self_cpu_us)} total {format_us(stats.cpu_total_us)} avg {format_us(stats.cpu_avg_us)}"
        )
        if model.has_device:
            text.append(f" · device self {format_us(stats.self_device_us)} total {format_us(stats.device_total_us)}")
        text.append(f" · mem CPU {format_bytes(stats.cpu_mem_bytes)}")
        if stats.device_mem_bytes or model.has_device:
            text.append(f" dev {format_bytes(stats.device_mem_bytes)}")
        if stats.flops:
            text.append(f" · {format_count(stats.flops)}FLOP")
        text.append("\n")
        if detail.modules:
            text.append("in: ", style="dim")
            text.append(", ".join(f"{path} ({n})" for path, n in detail.modules[:3]) + "\n")
        if detail.input_shapes and detail.input_shapes[0][0] not in ("[]", "None"):
            text.append("shapes: ", style="dim")
            text.append(f"{detail.input_shapes[0][0]}" + (f" +{len(detail.input_shapes) - 1} more" if len(detail.input_shapes) > 1 else ""))
            if detail.input_types:
                text.append(f"  ({detail.input_types})", style="dim")
            text.append("\n")
        for name, launches, us in detail.kernels[:3]:
            text.append("kernel: ", style="dim")
            text.append(f"{format_us(us)} x{launches} {name}\n")
        return text

    def _kernel_text(self, row: Row | None) -> Text:
        if row is None:
            return Text("")
        k = row["_stats"]
        text = Text(k.name + "\n", style="bold")
        text.append(
            f"{k.kind} · {k.calls} launches · total {format_us(k.device_total_us)} · avg {format_us(k.avg_us)} "
            f"min {format_us(k.min_us)} max {format_us(k.max_us)}\n"
        )
        text.append(f"grid {k.grid or '--'} block {k.block or '--'} · occupancy "
                    f"{f'{k.occupancy_pct:.0f} %' if k.occupancy_pct is not None else '--'} · launched by {k.launcher or '--'}")
        return text

    def _step_text(self, row: Row | None) -> Text:
        if row is None:
            return Text("")
        s = row["_stats"]
        text = Text(f"{s.name}: {format_us(s.duration_us)}", style="bold")
        text.append(f"  data loading {format_us(s.data_loading_us)}\n")
        if s.device_window_us:
            text.append(
                f"device: kernels {format_us(s.kernel_us)} · memcpy {format_us(s.memcpy_us)} · memset {format_us(s.memset_us)}"
                f" · comm {format_us(s.communication_us)} · idle {format_us(s.device_idle_us)} ({s.idle_pct:.0f} %)"
            )
        else:
            text.append("CPU-only step: no device activity recorded.")
        return text

    # ------------------------------------------------------------ actions

    def focused_table(self) -> RowTable | None:
        view = self.current_view
        table_id = VIEW_KEYS.get(view, (None, None, None))[2]
        return self.query_one(f"#{table_id}", RowTable) if table_id else None

    def action_filter(self) -> None:
        if self.focused_table() is None:
            self.notify("This view has no table to filter.", severity="warning")
            return
        box = self._show_filter_box(True)
        box.value = self.focused_table().filter_text  # type: ignore[union-attr]
        box.focus()

    def _show_filter_box(self, shown: bool) -> Input:
        """The filter box takes focus only while shown (hidden, it would swallow keys)."""
        box = self.query_one("#filter", Input)
        box.display = shown
        box.disabled = not shown
        return box

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        table = self.focused_table()
        if table is not None:
            table.set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self, event: Input.Submitted) -> None:
        self._show_filter_box(False)
        table = self.focused_table()
        if table is not None:
            table.focus()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        table = self.focused_table()
        if box.display or (table is not None and table.filter_text):
            box.value = ""
            self._show_filter_box(False)
            if table is not None:
                table.set_filter("")
                table.focus()
        elif self.current_view != "overview" and self.model is not None:
            self.action_show_view("modules" if self.current_view == "operators" and self.model.modules.roots else "overview")

    def action_toggle_shapes(self) -> None:
        self.options = ViewOptions(not self.options.group_by_shape, self.options.top_level_only)
        self._refill_operator_tables()
        self.notify("Grouped by input shape" if self.options.group_by_shape else "Grouped by name", timeout=2)

    def action_toggle_top_level(self) -> None:
        self.options = ViewOptions(self.options.group_by_shape, not self.options.top_level_only)
        self._refill_operator_tables()
        self.notify("Top-level operators only" if self.options.top_level_only else "All operators", timeout=2)

    def _refill_operator_tables(self) -> None:
        if self.model is None:
            return
        self._fill_operators()
        if self.selected_module is not None:
            self._fill_table("module-ops", ViewOptions(self.options.group_by_shape, self.options.top_level_only, self.selected_module))
        elif not self.model.modules.roots:
            self._fill_table("module-ops", self.options)

    def action_export(self, fmt: str) -> None:
        if self.model is None:
            return
        table = self.focused_table()
        if table is not None:
            rows, columns = table.rows, table.columns
        elif self.current_view == "overview":
            view = VIEWS["ops"]
            rows, columns = view.build(self.model, self.options), view.visible_columns(self.options)
        else:
            self.notify("Nothing to export in this view.", severity="warning")
            return
        if self.current_view == "modules" and self.selected_module is None and not rows:
            rows = [module_row(n) for n in self.model.modules.walk()]
            columns = VIEWS["modules"].columns
        path = self._export_path(self.current_view).with_suffix(f".{fmt}")
        path.write_text(render_rows(rows, columns, fmt))
        self.notify(f"Wrote {len(rows)} rows to {path}", title="Export", timeout=6)

    def action_help(self) -> None:
        table = self.focused_table()
        view = VIEWS[TABLE_VIEWS[table.id]] if table is not None and table.id in TABLE_VIEWS else None
        if self.current_view == "modules" and self.focused and self.focused.id == "module-tree":
            view = VIEWS["modules"]
        self.push_screen(HelpScreen(self.current_view, view, self.BINDINGS))

    async def action_quit(self) -> None:
        """Quit; while a live capture runs, the first press stops it and shows what it has."""
        live = hasattr(self.source, "stop")
        if self.model is None and live and not self._cancel.is_set() and not self.error_text:
            self._cancel.set()
            self.query_one("#loading-hint", Static).update("stopping after this step… (q again: quit now)")
            return
        self._cancel.set()
        self.exit(self.exit_code)

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        for view, (key, title, _) in VIEW_KEYS.items():
            yield SystemCommand(f"View: {title}", f"Show the {title} view (key {key})", lambda v=view: self.action_show_view(v))
        yield SystemCommand("Operators: toggle group by input shape", "One row per name and input shapes (key i)", self.action_toggle_shapes)
        yield SystemCommand("Operators: toggle top-level only", "Only calls with no enclosing operator (key t)", self.action_toggle_top_level)
        yield SystemCommand("Export: current view as CSV", "Write the table as shown (key e)", lambda: self.action_export("csv"))
        yield SystemCommand("Export: current view as JSON", "Write the table as shown (key E)", lambda: self.action_export("json"))
        yield SystemCommand("Filter: by name", "Narrow the table (key /)", self.action_filter)
        yield SystemCommand("Help: keys and columns", "What every key and column means (key ?)", self.action_help)
        table = self.focused_table()
        if table is not None:
            for column in table.columns:
                yield SystemCommand(f"Sort: {column.header}", column.help, lambda k=column.key, t=table: t.sort_by(k))


def run_explorer(path: str, select: str | None = None) -> int:
    return run_app(ExplorerApp(FileSource(path, select)))


def run_app(app: ExplorerApp) -> int:
    """Run the explorer; a load error is also left on stderr, where scrollback keeps it."""
    result = app.run()
    if app.error_text:
        print(f"tuiprof: {app.error_text}", file=sys.stderr)
    return int(result or 0)
