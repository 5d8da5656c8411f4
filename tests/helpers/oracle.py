"""A test oracle: torch's ``key_averages`` rules recomputed in plain Python, with exact decimals.

Independent of tuiprof's engine (no numpy, no tuiprof import): the file is
read with the standard ``json`` module, every ``ts``/``dur`` as a
:class:`decimal.Decimal` from its text, and torch's own algorithms are
followed literally (``torch/autograd/profiler_util.py``):

- CPU nodes are ``X`` events of the operator, runtime and python_function
  categories (``[memory]`` and the names torch filters dropped from the
  operators); python frames take part in nesting but are no operator rows.
- ``_populate_cpu_children``: per thread, sorted by (start, -end), a stack;
  the top is popped while the event starts at or after its end or ends after it.
- ``_remove_dup_nodes``: repeated until nothing changes, a node whose parent
  has its name and only this child is deleted; its children and its kernels
  move to the parent (torch replaces the parent's kernels with the child's).
- Device events join the operator named by their ``External id`` when it
  encloses their runtime launch (same ``correlation``) on the launch's
  thread, else the operator enclosing the launch; files whose launches all
  carry External id == correlation are joined through launches only.
- Self CPU = total - the children's totals; device total = own kernels + the
  children's device totals.  ``ProfilerStep#N`` rows share ``ProfilerStep*``.

Run as a script to print the per-trace comparison table:
``python -m tests.helpers.oracle [TRACE...]``.
"""

from __future__ import annotations

import gzip
import json
import sys
from dataclasses import dataclass, field
from decimal import ROUND_HALF_EVEN, Decimal
from pathlib import Path

OPERATOR_CATS = {"cpu_op", "user_annotation", "Operator"}
RUNTIME_CATS = {"cuda_runtime", "cuda_driver", "Runtime"}
FRAME_CAT = "python_function"
DEVICE_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
FILTERED = {
    "[memory]",
    "[OutOfMemory]",
    "profiler::_record_function_enter",
    "profiler::_record_function_enter_new",
    "profiler::_record_function_exit",
    "aten::is_leaf",
    "aten::output_nr",
    "aten::_version",
}
LIMIT_NS = 2**62


@dataclass(eq=False)
class Node:
    name: str
    kind: str  # "op" | "runtime" | "frame"
    thread: object
    start: int
    end: int
    external_id: int | None
    correlation: int | None
    parent: Node | None = None
    children: list[Node] = field(default_factory=list)
    kernels: list[int] = field(default_factory=list)  # device durations (ns)
    deleted: bool = False

    def encloses(self, other: Node) -> bool:
        return self.thread == other.thread and self.start <= other.start and other.end <= self.end


@dataclass
class Row:
    calls: int = 0
    self_cpu_ns: int = 0
    cpu_total_ns: int = 0
    self_device_ns: int = 0
    device_total_ns: int = 0


@dataclass
class Oracle:
    operators: dict[str, Row]
    device: list[tuple[int, int]]  # (start, end) ns of every device event


def to_ns(value) -> int | None:
    """Exact ns of a JSON number read as Decimal (None: unusable, as tuiprof counts damage)."""
    if isinstance(value, str):
        try:
            value = Decimal(value)
        except ArithmeticError:
            return None
    if isinstance(value, bool) or not isinstance(value, (int, Decimal)):
        return None
    number = Decimal(value)
    if not number.is_finite() or number.adjusted() > 18:
        return None
    ns = int((number * 1000).to_integral_value(ROUND_HALF_EVEN))
    return ns if abs(ns) < LIMIT_NS else None


def _thread(tid):
    return int(tid) if isinstance(tid, str) and tid.isdigit() else tid


def _read(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as handle:
        document = json.load(handle, parse_float=Decimal)
    return document if isinstance(document, list) else document.get("traceEvents", [])


def _args_id(args: dict, *keys: str) -> int | None:
    for key in keys:
        value = args.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def recompute(path: Path) -> Oracle:
    """torch's operator table and the device intervals of the trace at ``path``."""
    operators: list[Node] = []
    runtime: list[Node] = []
    frames: list[Node] = []
    device: list[tuple[int, int, int | None, int | None]] = []
    for event in _read(path):
        if not isinstance(event, dict) or event.get("ph") != "X" or event.get("name") == "[memory]":
            continue
        cat = event.get("cat")
        start, duration = to_ns(event.get("ts", 0)), to_ns(event.get("dur", 0))
        if start is None or duration is None or duration < 0:
            continue
        args = event.get("args") or {}
        external = _args_id(args, "External id", "external id")
        correlation = _args_id(args, "correlation")
        if cat in DEVICE_CATS:
            device.append((start, start + duration, external, correlation))
            continue
        kind = (
            "op"
            if cat in OPERATOR_CATS
            else "runtime"
            if cat in RUNTIME_CATS
            else "frame"
            if cat == FRAME_CAT
            else None
        )
        if kind is None or (kind != "frame" and event.get("name") in FILTERED):
            continue
        node = Node(
            event.get("name", ""), kind, _thread(event.get("tid", 0)), start, start + duration, external, correlation
        )
        {"op": operators, "runtime": runtime, "frame": frames}[kind].append(node)
    nodes = operators + runtime + frames  # ties in (start, end) keep this order, as tuiprof reads them
    _populate_children(nodes)
    _attach_kernels(operators, runtime, device)
    living = _remove_duplicates(nodes)
    return Oracle(_aggregate(living), [(s, e) for s, e, _, _ in device])


def _populate_children(nodes: list[Node]) -> None:
    by_thread: dict[object, list[Node]] = {}
    for node in nodes:
        by_thread.setdefault(node.thread, []).append(node)
    for events in by_thread.values():
        stack: list[Node] = []
        for event in sorted(events, key=lambda e: (e.start, -e.end)):
            while stack:
                parent = stack[-1]
                if event.start >= parent.end or event.end > parent.end:
                    stack.pop()
                else:
                    parent.children.append(event)
                    event.parent = parent
                    break
            stack.append(event)


def _operator_above(node: Node | None) -> Node | None:
    while node is not None and node.kind == "frame":
        node = node.parent
    return node


def _attach_kernels(operators: list[Node], runtime: list[Node], device) -> None:
    by_external: dict[int, Node] = {}
    for node in operators:
        if node.external_id is not None:
            by_external.setdefault(node.external_id, node)
    by_correlation: dict[int, Node] = {}
    for node in runtime:
        if node.correlation is not None:
            by_correlation.setdefault(node.correlation, node)
    paired = [n for n in runtime if n.external_id is not None and n.correlation is not None]
    fake = bool(paired) and all(n.external_id == n.correlation for n in paired)
    for start, end, external, correlation in device:
        launch = by_correlation.get(correlation) if correlation is not None else None
        named = None if fake or external is None else by_external.get(external)
        if named is not None and (launch is None or named.encloses(launch)):
            owner = named
        else:
            owner = _operator_above(launch.parent) if launch is not None else None
        if owner is not None:
            owner.kernels.append(end - start)


def _remove_duplicates(nodes: list[Node]) -> list[Node]:
    events = [n for n in nodes if n.kind != "frame"]
    while True:
        deleted = []
        for event in events:
            parent = event.parent
            if (
                parent is not None
                and parent.kind != "frame"
                and parent.name == event.name
                and len(parent.children) == 1
            ):
                parent.children = event.children
                parent.kernels = event.kernels  # torch: "lift kernels up"
                for child in event.children:
                    child.parent = parent
                deleted.append(event)
        if not deleted:
            return events
        for event in deleted:
            event.deleted = True
        events = [e for e in events if not e.deleted]


def _device_total(node: Node, memo: dict[int, int]) -> int:
    found = memo.get(id(node))
    if found is None:
        found = memo[id(node)] = sum(node.kernels) + sum(_device_total(c, memo) for c in node.children)
    return found


def _aggregate(events: list[Node]) -> dict[str, Row]:
    rows: dict[str, Row] = {}
    memo: dict[int, int] = {}
    for event in events:
        total = event.end - event.start
        row = rows.setdefault("ProfilerStep*" if event.name.startswith("ProfilerStep#") else event.name, Row())
        row.calls += 1
        row.cpu_total_ns += total
        row.self_cpu_ns += total - sum(c.end - c.start for c in event.children)
        row.self_device_ns += sum(event.kernels)
        row.device_total_ns += _device_total(event, memo)
    return rows


def covered_ns(intervals: list[tuple[int, int]], low: int, high: int) -> int:
    """How much of [low, high] the union of the intervals covers."""
    clipped = sorted((max(s, low), min(e, high)) for s, e in intervals if s < high and e > low)
    covered, reach = 0, low
    for start, end in clipped:
        if end > reach:
            covered += end - max(start, reach)
            reach = end
    return covered


def compare(model, oracle: Oracle) -> dict[str, float]:
    """Largest differences between tuiprof's model and the oracle (us; calls: rows that differ)."""
    ours = {s.name: s for s in model.operators() if s.name != "[memory]"}
    worst = {
        "rows": len(oracle.operators),
        "calls": 0,
        "self_cpu_us": 0.0,
        "cpu_total_us": 0.0,
        "self_device_us": 0.0,
        "device_total_us": 0.0,
        "step_idle_us": 0.0,
    }
    if set(ours) != set(oracle.operators):
        worst["calls"] += len(set(ours) ^ set(oracle.operators))
    for name, row in oracle.operators.items():
        stats = ours.get(name)
        if stats is None:
            continue
        worst["calls"] += stats.calls != row.calls
        for key, value in (
            ("self_cpu_us", row.self_cpu_ns),
            ("cpu_total_us", row.cpu_total_ns),
            ("self_device_us", row.self_device_ns),
            ("device_total_us", row.device_total_ns),
        ):
            worst[key] = max(worst[key], abs(getattr(stats, key) - value / 1000))
    for step in model.steps:
        low = step.device_window_start_ns
        high = low + round(step.device_window_us * 1000)
        idle = (high - low - covered_ns(oracle.device, low, high)) / 1000 if high > low else 0.0
        worst["step_idle_us"] = max(worst["step_idle_us"], abs(step.device_idle_us - idle))
    return worst


STEP_PREFIX = "ProfilerStep#"


def step_device_windows(path: Path) -> dict[str, tuple[int, int] | None]:
    """Each ``ProfilerStep#N``'s device window, by the rule docs/columns.md states: its
    ``gpu_user_annotation`` span, else its CPU span, widened to the first start and the
    last end of the device work launched inside its CPU span (runtime launches joined to
    device events by ``correlation``).  None: no device work and no annotation."""
    steps, annotations, launches, device = [], {}, [], {}
    for event in _read(path):
        if not isinstance(event, dict) or event.get("ph") != "X":
            continue
        cat, name = event.get("cat"), str(event.get("name", ""))
        start, end = to_ns(event.get("ts", 0)), to_ns(event.get("ts", 0)) + to_ns(event.get("dur", 0))
        correlation = _args_id(event.get("args") or {}, "correlation")
        if cat in OPERATOR_CATS and name.startswith(STEP_PREFIX):
            steps.append((name, start, end))
        elif cat == "gpu_user_annotation" and name.startswith(STEP_PREFIX):
            annotations[name] = (start, end)
        elif cat in RUNTIME_CATS and correlation is not None:
            launches.append((start, correlation))
        elif cat in DEVICE_CATS and correlation is not None:
            device.setdefault(correlation, []).append((start, end))
    windows: dict[str, tuple[int, int] | None] = {}
    for name, low, high in steps:
        own = [span for at, correlation in launches if low <= at < high for span in device.get(correlation, [])]
        base = annotations.get(name, (low, high))
        windows[name] = (
            (min([base[0]] + [s for s, _ in own]), max([base[1]] + [e for _, e in own]))
            if own or name in annotations
            else None
        )
    return windows


def trace_files(root: Path) -> list[Path]:
    """Every trace file under ``root`` (the files of run directories too)."""
    return sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and p.name.endswith((".json", ".json.gz")) and "key_averages" not in p.name
    )


def main(argv: list[str]) -> int:
    from tuiprof.analysis import load_model  # the system under test, only for the comparison

    root = Path(__file__).resolve().parents[2]  # the checkout
    paths = [Path(a) for a in argv] or trace_files(root.parent / "shared" / "traces") + trace_files(
        root / "sample_traces"
    )
    keys = ("rows", "calls", "self_cpu_us", "cpu_total_us", "self_device_us", "device_total_us", "step_idle_us")
    print("| trace | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for path in paths:
        worst = compare(load_model(path), recompute(path))
        print(f"| {path.name[:60]} | " + " | ".join(f"{worst[k]:g}" for k in keys) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
