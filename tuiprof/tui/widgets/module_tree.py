"""The module hierarchy as a lazily built tree, each node with its share of the time."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.widgets import Tree
from textual.widgets.tree import NodeID, TreeNode

from tuiprof.analysis.model import TraceModel
from tuiprof.analysis.modules import ModuleNode
from tuiprof.analysis.ranking import module_share
from tuiprof.report.names import fit_name, tree_label
from tuiprof.report.plain import DISPLAY_CHARS, plain
from tuiprof.report.units import format_us_short
from tuiprof.tui.commands import TREE_COMMANDS, bindings

BAR_WIDTH = 3  # cells; 24 levels
BAR_CELLS = " ▏▎▍▌▋▊▉█"


def share_bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A fixed-width bar with eighth-cell resolution."""
    eighths = round(max(0.0, min(1.0, fraction)) * width * 8)
    full, rest = divmod(eighths, 8)
    return ("█" * full + (BAR_CELLS[rest] if rest else "")).ljust(width)


class ModuleTreeView(Tree[ModuleNode]):
    """Children are added when a node is first expanded (never expand_all)."""

    PANE_COMMANDS = TREE_COMMANDS  # what ? lists in the Modules view
    BINDINGS = bindings(TREE_COMMANDS)

    def __init__(self, *, id: str | None = None) -> None:
        self._counts_dropped = False  # every row without its ×N: some row is too wide for the pane
        self._too_wide = False
        self._too_wide_at: tuple[int, int] | None = None  # (width, Tree._updates) _too_wide was worked out for
        self._resized_to: Size | None = None  # the size of the last Resize (_on_resize)
        super().__init__("modules", id=id)  # (set first: Tree's constructor draws the root)
        self.show_root = False
        self.guide_depth = 2
        self.auto_expand = False  # enter drills into the module's operators; space expands
        self._model: TraceModel | None = None
        self._names: dict[NodeID, str] = {}  # rows named other than their module's label (filtered: the path)
        self.filter_text = ""

    def _on_resize(self, event: events.Resize) -> None:
        """Textual's Tree drops every line it has built and lays the screen out again on each
        Resize, and one comes each time the Modules view is shown, at the size the tree had:
        then Tree's handler is skipped (the focus moving in rebuilds the lines once anyway)."""
        if event.size == self._resized_to:
            event.prevent_default()
        self._resized_to = event.size

    def load(self, model: TraceModel) -> None:
        self._model = model
        self.set_filter("")

    def set_filter(self, text: str) -> None:
        """Show the tree, or with ``text`` every module whose path or name holds it
        (a flat list, costliest first: a match deep in the tree is one key away)."""
        self.filter_text = text
        self.clear()
        self._names.clear()
        if self._model is None:
            return
        needle = text.lower()
        if needle:
            matches = [
                n
                for n in self._model.modules.rows()
                if needle in n.path.lower() or needle in (n.qualified_name or "").lower()
            ]
            for node in sorted(matches, key=lambda n: n.cost_us, reverse=True):
                self._add(
                    self.root,
                    node,
                    node.qualified_name or "…/" + "/".join(node.path.split("/")[-2:]) if node.depth > 1 else node.path,
                )
        else:
            for root in self._model.modules.roots:
                self._add(self.root, root)
            if self._model.modules.outside is not None:
                self._add(self.root, self._model.modules.outside)
        if self.root.children:
            first = self.root.children[0]
            if not needle:
                first.expand()
            self.move_cursor(first)

    def _add(self, parent: TreeNode[ModuleNode], module: ModuleNode, name: str | None = None) -> TreeNode[ModuleNode]:
        node = parent.add(self._label(module, name), data=module, allow_expand=bool(module.children))
        if name is not None:
            self._names[node.id] = name
        return node

    def _label(self, module: ModuleNode, name: str | None = None, cut: int | None = None) -> Text:
        """``█▌   42%  1.23s name ×2``: the numbers first, so a narrow pane cuts only the name
        (the legend is in ? help: report.views.MODULE_TREE_LEGEND).  ``cut``: cells to give
        up, the call count first (on every row, when one row needs a cut), then the name's
        middle (``Seque…_5``: siblings differ in their index); None: the whole label."""
        model = self._model
        text = Text(no_wrap=True, overflow="ellipsis")
        if model is not None and module is model.modules.outside:  # no module: no share of module time
            text.append(" " * (BAR_WIDTH + 1) + "  -- ")
        else:
            share = module_share(model, module) if model is not None else 0.0
            text.append(share_bar(share) + " ", style="cyan")  # the space: a full bar never runs into "100%"
            text.append(f"{100 * share:3.0f}% ", style="bold" if share >= 0.1 else "")
        text.append(f"{format_us_short(module.cost_us):>6} ", style="green")
        shown = plain(name or tree_label(module), DISPLAY_CHARS)
        calls = f" ×{module.calls}" if module.calls > 1 else ""
        if cut is not None and (cut > 0 or self._counts_dropped):
            cut, calls = cut - len(calls), ""
        if cut is not None and cut > 0:
            shown = fit_name(shown, cell_len(shown) - cut)
        text.append(shown)
        text.append(calls, style="dim")
        return text

    def render_label(self, node: TreeNode[ModuleNode], base_style, style) -> Text:
        """The label fitted to the pane (:meth:`_label`'s ``cut``): Tree crops a long module
        name at the edge with no sign that there is more (the whole path is in the detail pane).
        A leaf gets blanks where its expandable siblings have ``▶ ``: Tree gives it no prefix,
        and its bar and numbers stood two columns left of theirs."""
        label = super().render_label(node, base_style, style)
        if not node.allow_expand:
            label = Text.assemble((" " * cell_len(self.ICON_NODE), base_style), label)
        depth, above = 0, node.parent
        while above is not None and above is not self.root:
            depth, above = depth + 1, above.parent
        room = self.scrollable_content_region.width - depth * self.guide_depth
        self._counts_dropped = self._some_row_too_wide()
        if node.data is not None and (0 < room < label.cell_len or self._counts_dropped):
            icon = label.divide([len(label) - len(node.label)])[0]
            fitted = self._label(node.data, self._names.get(node.id), max(0, label.cell_len - room))
            fitted.stylize(style)
            label = Text.assemble(icon, fitted)
            label.truncate(room, overflow="ellipsis")  # a pane too narrow for the numbers
        return label

    def _some_row_too_wide(self) -> bool:
        """Whether a shown row is wider than the pane: then every row leaves out its ``×N``
        (at 60 columns some rows had it and others not, which read as a difference)."""
        width = self.scrollable_content_region.width
        key = (width, self._updates)
        if self._too_wide_at != key:
            lines = self._tree_lines  # the rows shown (expanded nodes), each with its depth
            self._too_wide = any(
                line.node.data is not None
                and cell_len(self.ICON_NODE) + (len(line.path) - 2) * self.guide_depth + _cells(line.node.label) > width
                for line in lines
            )
            self._too_wide_at = key
        return self._too_wide

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[ModuleNode]) -> None:
        node = event.node
        if node.data is not None and not node.children:
            for child in node.data.children:
                self._add(node, child)

    def action_expand(self) -> None:
        node = self.cursor_node
        if node is not None and node.allow_expand and not node.is_expanded:
            node.expand()
        elif node is not None and node.children:
            self.move_cursor(node.children[0])

    def action_collapse(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)


def _cells(label: str | Text) -> int:
    """A node's label's width (Textual keeps it as Text; ``TreeNode.label`` is typed either)."""
    return label.cell_len if isinstance(label, Text) else cell_len(label)
