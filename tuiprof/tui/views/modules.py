"""Modules: the module tree (forward + backward cost), the operators inside the
selected module, and a detail pane.  Enter on a module goes to its operators;
enter on an operator shows it in the Operators view."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.timer import Timer
from textual.widgets import Static, Tree

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.timeline import CallTarget
from tuiprof.report.details import module_text, operator_text
from tuiprof.report.views import MODULE_TREE_LEGEND, TRACE_VIEWS, OperatorRow, Row, View, ViewOptions
from tuiprof.tui.messages import JumpTo
from tuiprof.tui.views.base import ASYNC_CALLS, ExplorerView
from tuiprof.tui.widgets.module_tree import ModuleTreeView
from tuiprof.tui.widgets.row_table import RowTable

MODULE_SETTLE_S = 0.15  # big traces: how long the tree cursor rests before its operators are computed
NO_TREE = (
    "No module tree. torch.profiler records the nn.Module hierarchy only with with_stack=True "
    "(with_modules=True alone records nothing for eager models). The Operators view (3) has every operator."
)


class ModulesView(ExplorerView):
    view_id = "modules"
    title = "Modules"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.selected: ModuleNode | None = None
        self._settle: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Static(NO_TREE, id="modules-empty")
        with Horizontal(id="modules-panes"):
            yield ModuleTreeView(id="module-tree")
            with Vertical(id="module-side"):
                yield RowTable(id="module-ops")
                yield Static(id="module-detail", classes="detail")

    def timeline_target(self) -> CallTarget | None:
        return self.longest_call_of(self.query_one(RowTable).current_row)

    def help_columns(self) -> View:
        tree_focused = self.screen.focused is self.query_one(ModuleTreeView)
        return MODULE_TREE_LEGEND if tree_focused else TRACE_VIEWS["operators"]

    def focus_target(self):
        return self.query_one(ModuleTreeView) if self.model is not None and self.model.modules.roots else self

    def active_table(self) -> RowTable | None:
        return self.query_one(RowTable) if self.model is not None and self.model.modules.roots else None

    def filter_target(self):
        """/ filters the pane that has the focus: the module tree or the module's operators."""
        tree = self.query_one(ModuleTreeView)
        return tree if self.screen.focused is tree else self.active_table()

    def export_rows(self):
        """The tree (every module) when it has the focus, else the selected module's operators."""
        if self.model is None or not self.model.modules.roots:
            return None
        if self.screen.focused is self.query_one(ModuleTreeView):
            modules = TRACE_VIEWS["modules"]
            return (
                "modules",
                modules.build(self.model, ViewOptions()),
                modules.visible_columns(self.options, self.model),
            )
        return super().export_rows()

    def show_model(self, model: TraceModel) -> None:
        has_tree = bool(model.modules.roots)
        self.query_one("#modules-empty").display = not has_tree
        self.query_one("#modules-panes").display = has_tree
        if has_tree:
            self.query_one(ModuleTreeView).load(model)

    def show_options(self, model: TraceModel) -> None:
        if self.selected is not None:
            self._fill_selected()

    @on(Tree.NodeHighlighted, "#module-tree")
    def _module_highlighted(self, event: Tree.NodeHighlighted[ModuleNode]) -> None:
        module = event.node.data
        if module is None or self.model is None:
            return
        self.selected = module
        self.workers.cancel_group(self, f"detail-{self.id}")  # an operator's detail still being worked out
        self.query_one("#module-detail", Static).update(module_text(self.model, module))
        if self._settle is not None:
            self._settle.stop()
            self._settle = None
        if len(self.model.calls) > ASYNC_CALLS:
            # Big traces: fill the module's operators once the cursor rests, so j/k stay instant.
            self._settle = self.set_timer(MODULE_SETTLE_S, self._cursor_rested_on_module)
        else:
            self._fill_selected()

    def _cursor_rested_on_module(self) -> None:
        self._settle = None
        self._fill_selected()

    def detail_pending(self) -> bool:
        """Also while the selected module's operators wait for the tree cursor to rest."""
        return super().detail_pending() or self._settle is not None

    @on(Tree.NodeSelected, "#module-tree")
    def _module_selected(self, event: Tree.NodeSelected[ModuleNode]) -> None:
        """Enter on a module: into its operators."""
        self.query_one(RowTable).focus()

    def _fill_selected(self) -> None:
        options = ViewOptions(self.options.group_by_shape, self.options.top_level_only, self.selected)
        self.fill_table(self.query_one(RowTable), TRACE_VIEWS["operators"], options)

    def show_detail(self, table: RowTable, row: Row | None) -> None:
        model = self.model
        if model is None or not table.has_focus:
            return
        self.update_detail(
            self.query_one("#module-detail", Static),
            table,
            row,
            lambda row: operator_text(model, row.item) if isinstance(row, OperatorRow) else Text(),
        )

    @on(RowTable.Selected, "#module-ops")
    def _operator_selected(self, event: RowTable.Selected) -> None:
        """Enter on an operator of a module: show it in the Operators view."""
        if event.row is not None:
            self.post_message(JumpTo("operators", str(event.row["name"])))
