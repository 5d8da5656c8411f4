#!/usr/bin/env python3
"""Fuzz tuiprof's commands with mutated real traces: no crash, no hang, no raw control character.

Seeds are the shipped sample traces and ``../shared/traces`` (big ones cut to
their first events, so a case takes milliseconds).  Each case applies one to
three mutations, drawn from these classes:

- ``truncate``: cut the document at a boundary of a random kind (after or
  before ``{`` ``}`` ``[`` ``]`` ``,`` ``:`` ``"`` a newline, a digit, or any byte);
- ``flip``: flip bits in a few bytes;
- ``delete`` / ``duplicate``: remove or repeat a span of bytes (up to a few events);
- ``insert``: put a hostile token somewhere: NUL, terminal escapes (OSC 0/52,
  clear screen), rich markup (``[/]``, ``[@click=app.quit]``), invalid UTF-8,
  lone quotes/backslashes/braces, ``N/A``, ``NaN``, ``1e999``, 2,000 nested ``[``;
- ``member``: structure-aware: set a member of a random event (``ts``, ``dur``,
  ``name``, ``ph``, ``args``, ids, ``Input Dims``, ``Concrete Inputs``...) to a
  value of another type, an extreme number (1e308, 2^63, -2^63, NaN, inf),
  a hostile or 100 kB string, a deeply nested list, or delete it;
- ``events``: delete, duplicate or reorder events; swap ``traceEvents`` for
  another type; chain python frames into a deep ``nn.Module`` nest; make
  ``Python parent id`` links loop (2 -> 3 -> 2);
- ``gzip``: compress the result, then maybe damage the compressed bytes
  (truncate, flip, garbage after it, a second member).

Each case runs one command of a surface in a worker process (tuiprof
imported once; the worker is killed and replaced on a timeout).  ``--surface``
takes a comma-separated list; ``--cases`` is per surface, and each surface gets
its own summary line:

- ``summary`` (alias ``trace``): ``tuiprof summary FILE --view V --format F``;
- ``diff``: ``tuiprof diff A B --format F [--view V] [--metric M]``, A a mutated
  seed and B another mutation of it, the seed itself, or the seed with some
  operator names renamed (aligned rows), in either order;
- ``timeline``: ``tuiprof timeline FILE`` (mutated or not) with hostile
  arguments: ``--from``/``--to`` far out, NaN, tiny or inside the trace,
  ``--width``, ``--depth``, ``--step``, ``--lanes`` and ``--format``;
- ``run``: ``tuiprof summary DIR --view V --format F`` with V a run view, DIR a
  run directory (the 2-rank gloo sample, the first 4 ranks of
  ``../shared/traces/dlrm_8ranks``) with one rank's file mutated; the ranks are
  analysed in the worker's own process, so an exception is seen rather than
  turned into a skipped rank by a rank worker.

- ``snapshot``: ``tuiprof summary SNAP --format json|table`` or ``tuiprof diff A.pickle B.pickle``,
  an allocator snapshot (tests/helpers/snapshot_gen.py) truncated, flipped, re-protocoled, with members
  mutated, or with code-running opcodes (GLOBAL/REDUCE of ``os system``...) inserted; a case
  after which the payloads' marker file exists is a crash ("code from a pickle ran");
- ``snapshot-diff``: the two snapshot readers against each other on legal pickles (``pickle.loads``
  reads each): a snapshot of torch's shape (tests/helpers/snapshot_gen.py: frames shared within and across
  stacks, lists per allocation), sometimes with members set to wrong types, pickled at protocol 0-5
  and rewritten by tests/helpers/pickle_variants.py (memo keys with gaps, reused or past the end; MEMOIZE,
  BINPUT, LONG_BINPUT, PUT; BINGET, LONG_BINGET, GET; FRAMEs of any size; another PROTO byte), a
  fifth gzipped.  ``read_snapshot`` with the opcode scanner forced and without it must give equal
  columns or the same one line ("the readers disagree" is a crash); the summary says how many the
  scanner read itself, how many it left to the unpickler and how many both refused.  Needs numba;
- ``watch``: ``tuiprof summary DIR --view watch``, a tiny real watch history with ``watch.jsonl`` mutated;
- ``compiled``: a compiled capture's trace (a small CNN, captured with ``torch.compile`` when the run
  starts: needs torch) whose ``tuiprofLive.compiled`` member, the kernel -> module map, is mutated
  structurally (:func:`compiled_member`: module indices past the end, -1 or huge, node counts of 0,
  wrong types, NaN, deep nesting, members missing or added, kernels and graphs duplicated, module
  paths nested 1,500 deep, hostile strings), then ``summary FILE --view V --format F`` for the views
  the map feeds or ``diff A B`` (B the seed or another mutant, either order);
- ``sidecar``: the gloo run directory's signed sidecars, written by a first run, then mutated or
  replaced (:func:`plant_sidecars`), and ``summary DIR --view V`` run twice;
- ``cache``: a trace's decoded-store entry (its columns and what the analysis derived),
  written by a first run, then mutated (:func:`plant_cache`; a third of the cases with the
  CRC-32s recomputed, when only crashes and hangs count), and ``summary FILE`` run twice.
  For both, the output must equal a reference run without sidecars / cache (unless the sidecar
  was signed with the user's own key), else "a planted ... was believed".

Outcome classes: ``clean`` (exit 0, or exit 2 with one ``tuiprof:`` line),
``crash`` (any other exit, a traceback, more than one line for an error, or a
raw control character on stdout/stderr) and ``hang`` (past ``--timeout``).
Each distinct crash (surface, exception type and place) gets a minimised reproducer in
``--out`` (for ``run``, the whole run directory, the mutated rank minimised).

    python scripts/fuzz.py --cases 10000 [--surface summary,diff,timeline,run,snapshot,snapshot-diff,watch,sidecar,cache,compiled] [--jobs 2] [--timeout 60] [--seed 1] [--out fuzz-out]

Every crash and hang is also appended to ``--out``/findings.log the moment it is seen (its
surface, case number, seed and case seed, and the traceback), so a run stopped early keeps what
it found.  ``--run-only S`` replays part of an earlier run: the cases are drawn for every surface
of ``--surface`` with ``--seed``, as that run drew them, and only those of S run
(``--surface diff,run,sidecar,cache --run-only cache --seed 20261207`` gives that run's cache cases).

``--snapshot-scan``: snapshots are read by the opcode scanner (tuiprof/trace/snapshot_kernel.py)
instead of the restricted unpickler, which reads files under 32 MB (all the seeds).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import gzip
import hashlib
import hmac
import io
import json
import multiprocessing
import os
import pickle
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
import zlib
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
SEED_EVENTS = 1500  # big traces are cut to this many events
SEED_BYTES = 2 << 20  # smaller documents are used byte for byte
# Every view of one trace, the findings (the advice: analysis/advice.py) and the memory tables too.
VIEWS = (
    "operators",
    "modules",
    "kernels",
    "steps",
    "memory",
    "findings",
    "memory-categories",
    "memory-modules",
    "memory-allocations",
    "memory-what-ifs",
)
RUN_VIEWS = ("ranks", "rank-steps", "spread", "collectives", "collective-types", "findings")
RUN_SEED_RANKS = 4  # ranks kept of a bigger run: a case analyses each of them
FORMATS = ("table", "csv", "json", "markdown")
SURFACES = ("summary", "diff", "timeline", "run", "snapshot", "snapshot-diff", "watch", "sidecar", "cache", "compiled")
COMPILED_VIEWS = ("modules", "operators", "kernels", "steps", "findings", "memory-modules")  # those the map feeds
SURFACE_ALIASES = {"trace": "summary"}  # h/hostile2's name for the summary surface
DIFF_VIEWS = ("all", "verdict", "ops", "shapes", "modules", "kernels", "launchers", "steps", "memory")
# Timeline arguments (written --option=value, so that negative values parse): times in us
# from the trace's first event, far out, non-finite or tiny; widths and depths past their bounds.
TIMELINE_TIMES = [
    "0",
    "1",
    "-1",
    "1e-9",
    "0.0001",
    "250",
    "1e6",
    "1e12",
    "1e15",
    "1e16",
    "1.0000001e16",
    "1e18",
    "-1e18",
    "1e308",
    "-1e308",
    "nan",
    "inf",
    "-inf",
    "5e-324",
]
TIMELINE_WIDTHS = ["1", "2", "13", "100", "333", "10000", "10001", "0", "-5", "100000"]
TIMELINE_DEPTHS = ["1", "3", "40", "0", "-1"]
TIMELINE_STEPS = ["0", "1", "2", "7", "-1", "99999999999999999999"]
TIMELINE_LANES = ["cpu", "gpu,idle", "step,cpu,python,gpu,memory,idle", "python", "memory", "", "disk", "cpu,,cpu"]
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")

HOSTILE_STRINGS = [
    "\x1b]0;pwned\x07",
    "\x1b]52;c;cHduZWQ=\x07",
    "\x1b[2J",
    "[/]",
    "[@click=app.quit]x",
    "[bold]x[/bold]",
    "a\x00b",
    "\u202e\u2066rtl",
    "x" * 100_000,
    "",
    " ",
    "=cmd|' /C calc'!A0",
    "+1",
    "-1",
    "@SUM(1)",
    "nn.Module: ",
    "nn.Module: [/]_0",
    "ProfilerStep#",
    "ProfilerStep#99999999999999999999",
]
HOSTILE_VALUES: list[object] = [
    None,
    True,
    0,
    -1,
    -5,
    2**63,
    -(2**63),
    2**64,
    10**30,
    0.5,
    "12",
    "",
    [],
    {},
    [None],
    [[1, 2], [3]],
    {"a": [1, {"b": 2}]},
    "x" * 100_000,
]
HOSTILE_TOKENS = [
    b"\x00",
    b"\x1b]0;pwned\x07",
    b"\x1b[2J",
    b"[/]",
    b"[@click=app.quit]",
    b"\xff\xfe",
    b"\xc3",
    b'"',
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"N/A",
    b"-",
    b"9" * 40,
    b"[" * 2000,
    b'{"a":' * 1200,
    b"\n",
    b"\t",
    b"null",
    b"true",
]
# Numbers no float64 time survives (x 1000 in ns): damage the ts/dur conversion reports.
EXTREME_VALUES: list[object] = [1e308, -1e308, "NaN", "inf", "-inf", "1e999", float("nan"), float("inf")]
EXTREME_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999"]
MEMBERS = [
    "ts",
    "dur",
    "name",
    "ph",
    "cat",
    "pid",
    "tid",
    "args",
    "id",
    "s",
    "bp",
]
ARG_MEMBERS = [
    "Python id",
    "Python parent id",
    "External id",
    "external id",
    "correlation",
    "Input Dims",
    "Input type",
    "Concrete Inputs",
    "Sequence number",
    "Fwd thread id",
    "Bytes",
    "Total Allocated",
    "Total Reserved",
    "Addr",
    "Device Type",
    "Device Id",
    "device",
    "stream",
    "grid",
    "block",
    "est. achieved occupancy %",
    "Ev Idx",
]


# ---------------------------------------------------------------- seeds


def seed_paths() -> list[Path]:
    paths = sorted((ROOT / "sample_traces").glob("*.pt.trace.json*"))
    if SHARED.is_dir():
        paths += sorted(p for p in SHARED.rglob("*") if p.name.endswith((".json", ".json.gz")))
    return [p for p in paths if p.name.endswith((".json", ".json.gz"))]


def load_seed(path: Path) -> bytes:
    """The document of ``path``, or a valid document of its first SEED_EVENTS events if it is big."""
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    if len(raw) <= SEED_BYTES:
        return raw
    document = json.loads(raw)
    if isinstance(document, list):
        return kineto_layout({"traceEvents": document[:SEED_EVENTS]})
    document["traceEvents"] = document.get("traceEvents", [])[:SEED_EVENTS]
    return kineto_layout(document)


def run_seeds() -> list[tuple[str, list[tuple[str, bytes]]]]:
    """Run directories to damage one rank of: (folder name, [(file name, document)]), ranks in order."""
    seeds = []
    for folder in (ROOT / "sample_traces" / "ddp_gloo_2ranks", SHARED / "dlrm_8ranks"):
        if folder.is_dir():
            files = sorted(p for p in folder.iterdir() if p.name.endswith((".json", ".json.gz")))[:RUN_SEED_RANKS]
            seeds.append((folder.name, [(p.name.removesuffix(".gz"), load_seed(p)) for p in files]))
    return seeds


@dataclass
class Seeds:
    """What cases are made of: single traces (summary, diff, timeline, cache), run directories
    (run, sidecar), allocator snapshot pickles (snapshot), watch directories (watch) and compiled
    captures (compiled)."""

    traces: list[bytes]
    trace_names: list[str]
    runs: list[tuple[str, list[tuple[str, bytes]]]]
    snapshots: list[tuple[str, bytes]] = field(default_factory=list)
    watches: list[tuple[str, list[tuple[str, bytes]]]] = field(default_factory=list)
    compiled: list[tuple[str, bytes]] = field(default_factory=list)

    def _of(self, surface: str) -> list:
        named = {
            "run": self.runs,
            "sidecar": self.runs[:1],
            "snapshot": self.snapshots,
            "snapshot-diff": SNAPSHOT_KINDS,
            "watch": self.watches,
            "compiled": self.compiled,
        }
        return named.get(surface, self.traces)

    def count(self, surface: str) -> int:
        return len(self._of(surface))

    def label(self, surface: str, index: int) -> str:
        return (
            self.trace_names[index]
            if surface in ("summary", "diff", "timeline", "cache")
            else self._of(surface)[index][0]
        )


def snapshot_seeds() -> list[tuple[str, bytes]]:
    """Allocator snapshots in torch's format (tests/helpers/snapshot_gen.py), pickled at protocols 0 to 5
    (torch writes 2 or 4; pickle reads them all)."""
    from tests.helpers.snapshot_gen import make_snapshot

    seeds = []
    for number, protocol in enumerate((2, 3, 4, 5, 0, 1)):
        snapshot, _ = make_snapshot(seed=number, devices=1 + number % 2, steps=60, fx=number % 2 == 0)
        seeds.append((f"snapshot{number}-protocol{protocol}", pickle.dumps(snapshot, protocol=protocol)))
    return seeds


def watch_seeds(traces: list[bytes]) -> list[tuple[str, list[tuple[str, bytes]]]]:
    """A tiny real watch history (tuiprof/trace/watch.py's writers): steps with data and device
    times, a slow trigger, a healthy and a slow capture (the first trace seeds, small), a dropped
    capture, a failure and an end; ``watch.jsonl`` first (the file mutated and minimised)."""
    from tuiprof.trace import watch

    # flock: a history whose end line a mutation removes is ended ``killed`` by the reader (no job holds it)
    lines = [watch.header_line(4242, 1733350000.0, "train.py", {"slow": 2.0, "captures": 4}, flock=True)]
    for step in range(1, 13):
        wall = 0.02 if step < 8 else 0.09
        lines.append(watch.step_line(step, step * 0.1, wall, 0.004 if step % 3 else None, step in (3, 9)).encode())
        lines.append(watch.device_line(step, wall * 0.8).encode())
    lines += [
        watch.event_line(
            "capture",
            trigger="healthy",
            first_step=3,
            last_step=3,
            path="step000003-healthy.pt.trace.json",
            bytes=len(traces[0]),
        ),
        watch.event_line("trigger", step=8, trigger="slow", why="step 8 took 4.5x the median"),
        watch.event_line(
            "capture",
            trigger="slow",
            first_step=9,
            last_step=9,
            path="step000009-slow.pt.trace.json",
            bytes=len(traces[1]),
        ),
        watch.event_line("dropped", path="step000003-healthy.pt.trace.json.old", why="the capture limit"),
        watch.event_line("failure", step=11, what="profiler: could not start"),
        watch.event_line("end", step=12, status="finished"),
    ]
    history = (watch.HISTORY_NAME, b"".join(lines))
    captures = [("step000003-healthy.pt.trace.json", traces[0]), ("step000009-slow.pt.trace.json", traces[1])]
    return [("watch-history", [history, *captures]), ("watch-history-only", [history])]


def compiled_seeds() -> list[tuple[str, bytes]]:
    """A compiled capture of a small CNN (conv-bn-relu, a nested block, a linear head), one training
    step on CPU: its map has forward and backward graphs and kernels fused across modules.  Captured
    in a child process (torch stays out of the fuzzer and its workers); Inductor takes seconds."""
    with tempfile.TemporaryDirectory(prefix="tuiprof-fuzz-compiled-") as folder:
        path = Path(folder) / "compiled.json"
        child = multiprocessing.get_context("spawn").Process(target=_capture_compiled, args=(path,))
        child.start()
        child.join()
        if child.exitcode != 0 or not path.is_file():
            raise SystemExit(f"fuzz.py: the compiled seed's capture failed (exit {child.exitcode})")
        return [("compiled-cnn-cpu", path.read_bytes())]


def _capture_compiled(path: Path) -> None:
    import torch
    from torch import nn

    from tuiprof.capture.config import CaptureConfig
    from tuiprof.capture.session import profile_training

    torch.manual_seed(0)
    block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), block, nn.Flatten(), nn.Linear(8 * 8 * 8, 10)
    )
    config = CaptureConfig(
        model="FuzzCNN", device="cpu", batch_size=4, input_shape="3x8x8", wait=0, warmup=1, active=1, compile=True
    )
    profile_training(config, path, model=model)


def kineto_layout(document: dict) -> bytes:
    """A document written the way Kineto writes it: one event per line group."""
    events = document.get("traceEvents", [])
    if not isinstance(events, list):
        return json.dumps(document).encode()
    head = {k: v for k, v in document.items() if k != "traceEvents"}
    parts = ["{"]
    for key, value in head.items():
        parts.append(f"  {json.dumps(key)}: {json.dumps(value)},")
    parts.append('  "traceEvents": [')
    parts.append(",\n".join("  " + json.dumps(event) for event in events))
    parts.append("]}")
    return "\n".join(parts).encode()


# ---------------------------------------------------------------- mutations


def truncate(data: bytes, rng: random.Random) -> bytes:
    kind = rng.choice([b"{", b"}", b"[", b"]", b",", b":", b'"', b"\n", b"0123456789", b""])
    if not kind or not data:
        return data[: rng.randrange(len(data) + 1)]
    positions = [i for i in range(len(data)) if data[i] in kind] if len(data) < 200_000 else None
    if positions is None:
        start = rng.randrange(len(data))
        found = [data.find(bytes([c]), start) for c in kind]
        positions = [p for p in found if p >= 0]
    if not positions:
        return data[: rng.randrange(len(data) + 1)]
    at = rng.choice(positions)
    return data[: at + rng.choice((0, 1))]


def flip(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    out = bytearray(data)
    for _ in range(rng.randint(1, 10)):
        i = rng.randrange(len(out))
        out[i] ^= 1 << rng.randrange(8)
    return bytes(out)


def delete(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    start = rng.randrange(len(data))
    return data[:start] + data[start + int(rng.expovariate(1 / 300)) + 1 :]


def duplicate(data: bytes, rng: random.Random) -> bytes:
    if not data:
        return data
    start = rng.randrange(len(data))
    span = data[start : start + int(rng.expovariate(1 / 500)) + 1]
    at = rng.choice((start, rng.randrange(len(data) + 1)))
    return data[:at] + span + data[at:]


def insert(data: bytes, rng: random.Random) -> bytes:
    at = rng.randrange(len(data) + 1)
    return data[:at] + rng.choice(HOSTILE_TOKENS + EXTREME_TOKENS) + data[at:]


def _deep(depth: int) -> object:
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


def _value(rng: random.Random) -> object:
    pick = rng.random()
    if pick < 0.15:
        return rng.choice(HOSTILE_STRINGS)
    if pick < 0.2:
        return _deep(rng.choice((50, 900, 3000)))
    if pick < 0.3:
        return rng.choice(EXTREME_VALUES)
    return rng.choice(HOSTILE_VALUES)


def member(document: object, rng: random.Random) -> object:
    events = _events(document)
    if not events:
        return document
    for _ in range(rng.randint(1, 5)):
        event = rng.choice(events)
        if not isinstance(event, dict):
            continue
        target, keys = event, MEMBERS
        if rng.random() < 0.5:
            args = event.setdefault("args", {}) if isinstance(event.get("args", {}), dict) else None
            if args is not None:
                target, keys = args, ARG_MEMBERS
        key = rng.choice(keys)
        if rng.random() < 0.15:
            target.pop(key, None)
        else:
            target[key] = _value(rng)
    return document


def events_mutation(document: object, rng: random.Random) -> object:
    events = _events(document)
    choice = rng.randrange(7)
    if choice == 6 and events:
        _loop_parents(events, rng)
    elif choice == 0 and events:
        del events[rng.randrange(len(events)) :: rng.randint(1, 7)]
    elif choice == 1 and events:
        i = rng.randrange(len(events))
        events[i:i] = events[i : i + rng.randint(1, 50)]
    elif choice == 2 and events:
        rng.shuffle(events)
    elif choice == 3 and isinstance(document, dict):
        document["traceEvents"] = rng.choice([None, {}, "x", 5, [[]], [None, 1, "a"]])
    elif choice == 4 and isinstance(document, dict):
        key = rng.choice(["deviceProperties", "distributedInfo", "schemaVersion", "displayTimeUnit", "traceName"])
        document[key] = _value(rng)
    elif events is not None:
        depth = rng.choice((100, 1200, 5000))
        events.extend(
            {
                "ph": "X",
                "cat": "python_function",
                "name": f"nn.Module: M_{i}",
                "pid": 1,
                "tid": 1,
                "ts": 1000 + i,
                "dur": 4 * depth - 2 * i,
                "args": {"Python id": 10**9 + i, "Python parent id": 10**9 + i - 1 if i else None},
            }
            for i in range(depth)
        )
    return document


def _loop_parents(events: list, rng: random.Random) -> None:
    """Two python frames whose ``Python parent id`` point at each other (or one at itself)."""
    frames = [e for e in events if isinstance(e, dict) and isinstance(e.get("args"), dict) and "Python id" in e["args"]]
    if not frames:
        frames = [
            {
                "ph": "X",
                "cat": "python_function",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": 10,
                "dur": 5,
                "args": {"Python id": 7 + i},
            }
            for i, name in enumerate(("nn.Module: Looped", "f", "g"))
        ]
        events.extend(frames)
    first, second = rng.choice(frames), rng.choice(frames)
    first["args"]["Python parent id"] = second["args"]["Python id"]
    second["args"]["Python parent id"] = first["args"]["Python id"]


def rename(document: object, rng: random.Random) -> object:
    """Some operator names with a suffix: the other side of a diff, whose alignment then
    places each renamed name under its nearest ancestor both sides have."""
    suffix = rng.choice(["_v2", "\x1b]0;t\x07", "x" * 1000, "=1+1"])
    for event in _events(document) or []:
        if isinstance(event, dict) and isinstance(event.get("name"), str) and rng.random() < 0.3:
            event["name"] += suffix
    return document


def _events(document: object) -> list | None:
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("traceEvents"), list):
        return document["traceEvents"]
    return None


def structured(mutate):
    def apply(data: bytes, rng: random.Random) -> bytes:
        try:
            document = json.loads(data)
        except (ValueError, RecursionError):
            return insert(data, rng)
        document = mutate(document, rng)
        try:
            if isinstance(document, dict) and rng.random() < 0.7:
                return kineto_layout(document)
            return json.dumps(document).encode()
        except (ValueError, RecursionError):
            return data

    return apply


def gzip_damage(data: bytes, rng: random.Random) -> bytes:
    packed = gzip.compress(data, compresslevel=rng.choice((1, 6, 9)))
    choice = rng.randrange(5)
    if choice == 0:
        return packed[: rng.randrange(len(packed) + 1)]
    if choice == 1:
        return flip(packed, rng)
    if choice == 2:
        return packed + rng.choice([b"\x00" * 10, b"garbage", packed[:20]])
    if choice == 3:
        return packed + gzip.compress(data[: rng.randrange(len(data) + 1)])
    return packed


BYTE_MUTATIONS = [truncate, flip, delete, duplicate, insert]
MUTATIONS = BYTE_MUTATIONS + [structured(member), structured(member), structured(events_mutation)]


# Pickle opcodes that would run code if a reader let them: GLOBAL / STACK_GLOBAL naming a
# callable, then REDUCE (or INST / OBJ / NEWOBJ).  Each creates the file MARKER in the case's folder
# (the worker's current directory), which the worker checks after the command.
MARKER = "PWNED"
PICKLE_PAYLOADS = [
    b"cos\nsystem\n(S'touch " + MARKER.encode() + b"'\ntR",
    b"cposix\nsystem\n(S'touch " + MARKER.encode() + b"'\ntR",
    b"cbuiltins\nopen\n(S'" + MARKER.encode() + b"'\nS'w'\ntR",
    b"c__builtin__\neval\n(S\"open('" + MARKER.encode() + b"','w')\"\ntR",
    b"cbuiltins\nexec\n(S\"open('" + MARKER.encode() + b"','w')\"\ntR",
    b"\x8c\x02os\x8c\x06system\x93\x8c\x0btouch " + MARKER.encode() + b"\x85R",
    b"(cbuiltins\nopen\nS'" + MARKER.encode() + b"'\nS'w'\ni",
    b"cbuiltins\nopen\n)\x81",
    b"ccollections\nOrderedDict\n)R",
    b"ctorch._utils\n_rebuild_tensor_v2\n(tR",
    b"csubprocess\nPopen\n((S'touch'\nS'" + MARKER.encode() + b"'\nltR",
]


def pickle_payload(data: bytes, rng: random.Random) -> bytes:
    """A code-running opcode sequence in a pickle: the whole pickle, before the original (then
    POP), in place of the top object's first value, or at a random byte."""
    payload = rng.choice(PICKLE_PAYLOADS)
    choice = rng.randrange(4)
    if choice == 0:
        return payload + b"."
    if choice == 1:
        return payload + b"0" + data
    if choice == 2 and b"}" in data[:8]:  # PROTO, FRAME, EMPTY_DICT: the payload becomes a value
        at = data.index(b"}") + 1
        return data[:at] + b"X\x08segments" + payload + b"s" + data[at:]
    at = rng.randrange(len(data) + 1)
    return data[:at] + payload + data[at:]


def reprotocol(data: bytes, rng: random.Random) -> bytes:
    """The PROTO byte set to another protocol (0-5, or past the highest), or removed."""
    if data[:1] != b"\x80" or len(data) < 2:
        return insert(data, rng)
    if rng.random() < 0.2:
        return data[2:]
    return data[:1] + bytes([rng.choice((0, 1, 2, 3, 4, 5, 6, 255))]) + data[2:]


def snapshot_member(seed: bytes, rng: random.Random) -> bytes:
    """Members of a snapshot (a segment, a block, a trace entry, a frame...) set to hostile
    values or deleted, pickled again at the seed's protocol.  Only ever given a seed (ours:
    unpickling a mutated case here would run its payload in the fuzzer)."""
    snapshot = pickle.loads(seed)
    for _ in range(rng.randint(1, 4)):
        snapshot = record_member(snapshot, rng)
    try:
        return pickle.dumps(snapshot, protocol=seed[1] if seed[:1] == b"\x80" else 0)
    except (RecursionError, ValueError, OverflowError):
        return seed


SNAPSHOT_MUTATIONS = [truncate, flip, delete, duplicate, pickle_payload, pickle_payload, reprotocol]


def _generated(rng: random.Random) -> dict:
    from tests.helpers.snapshot_gen import make_snapshot

    return make_snapshot(
        seed=rng.getrandbits(32),
        devices=rng.randint(1, 3),
        steps=rng.randint(1, 150),
        with_times=rng.random() < 0.8,
        fx=rng.random() < 0.5,
        awaiting=rng.random() < 0.3,
        modules=rng.random() < 0.5,
        time_origin_us=rng.choice((0, 1_700_000_000_000_000)),
    )[0]


def _distinct_stacks(rng: random.Random) -> dict:
    from tests.helpers.snapshot_gen import distinct_stacks

    return distinct_stacks(rng.randint(0, 400))


def _every_action(rng: random.Random) -> dict:
    from tests.helpers.snapshot_gen import every_action

    return every_action()


def _part(rng: random.Random) -> dict:
    """Segments only or device_traces only."""
    key = rng.choice(("segments", "device_traces"))
    return {key: _generated(rng)[key]}


# The keys the readers read, by record: a member of a snapshot set to another type hits one of them.
SNAPSHOT_KEYS = {
    "top": ("segments", "device_traces"),
    "segment": ("device", "address", "total_size", "stream", "segment_type", "blocks"),
    "block": ("address", "size", "requested_size", "state", "frames"),
    "entry": ("action", "addr", "size", "stream", "time_us", "frames", "device_free", "user_metadata"),
    "frame": ("filename", "line", "name", "fx_node_op", "fx_node_name", "fx_original_trace"),
}
SWAPPED_VALUES: list[object] = [None, True, 1.5, "7", b"7", (), (1,), [], {}, 2**63, -(2**63), 2**63 - 1, "inactive"]


def _records(snapshot: dict) -> list[tuple[str, object]]:
    """(kind, record) of every dict of a generated snapshot the readers walk."""
    found: list[tuple[str, object]] = [("top", snapshot)]
    for segment in snapshot.get("segments", []):
        found.append(("segment", segment))
        found += [("block", block) for block in segment.get("blocks", [])]
    for trace in snapshot.get("device_traces", []):
        found += [("entry", entry) for entry in trace]
    frames = {id(f): f for kind, r in found if kind in ("block", "entry") for f in r.get("frames") or []}  # type: ignore[union-attr]
    return found + [("frame", f) for f in frames.values()]


def _members_set(rng: random.Random) -> object:
    """A generated snapshot with members the readers read set to another type or deleted (a frame
    is shared: every stack holding it changes), or some other member set: plain data of another
    shape, which both readers must refuse in the same line (or read alike)."""
    snapshot = _generated(rng)
    records = _records(snapshot)
    for _ in range(rng.randint(1, 3)):
        kind, record = rng.choice(records)
        if rng.random() < 0.2:
            record_member(record, rng)
            continue
        key = rng.choice(SNAPSHOT_KEYS[kind])
        if rng.random() < 0.15:
            record.pop(key, None)  # type: ignore[union-attr]
        else:
            record[key] = rng.choice(SWAPPED_VALUES) if rng.random() < 0.7 else _value(rng)  # type: ignore[index]
    return snapshot


# snapshot-diff's "seeds": what a case pickles, made from the case's own random numbers.
SNAPSHOT_KINDS = [
    ("torch-shaped", _generated),
    ("torch-shaped", _generated),
    ("torch-shaped", _generated),
    ("distinct stacks", _distinct_stacks),
    ("every action", _every_action),
    ("segments or traces only", _part),
    ("members set", _members_set),
    ("members set", _members_set),
]
SNAPSHOT_DIFF = "@snapshot-diff"
MEMO_PAST_END_LINE = "the pickle claims more memory than there is"


def snapshot_diff_case(kind: int, rng: random.Random) -> tuple[Files, list[str]]:
    """A legal pickle of a snapshot (or of plain data of another shape), written one of the ways
    tests/helpers/pickle_variants.py knows, and the command that reads it with both readers."""
    from tests.helpers.pickle_variants import variant

    protocol = rng.randrange(6)
    try:
        raw = pickle.dumps(SNAPSHOT_KINDS[kind][1](rng), protocol=protocol)
    except (RecursionError, ValueError, OverflowError):  # a member 3,000 lists deep
        raw = pickle.dumps({"segments": []}, protocol=protocol)
    data, style = variant(raw, protocol, rng)
    suffix = ".pickle"
    if rng.random() < 0.2:
        data, suffix = gzip.compress(data, compresslevel=1), ".pickle.gz"
    return _numbered([(data, suffix)]), [SNAPSHOT_DIFF, "{0}", f"protocol {protocol}, {style.label()}"]


def json_lines(mutate):
    """A mutation of one JSON line of a JSON-lines file (a line that is not JSON: inserted bytes)."""

    def apply(data: bytes, rng: random.Random) -> bytes:
        lines = data.split(b"\n")
        index = rng.randrange(len(lines))
        try:
            record = json.loads(lines[index])
        except (ValueError, RecursionError):
            return insert(data, rng)
        try:
            lines[index] = json.dumps(mutate(record, rng)).encode()
        except (ValueError, RecursionError):
            return data
        return b"\n".join(lines)

    return apply


def record_member(record: object, rng: random.Random) -> object:
    """A member of a record (a watch line, a sidecar, meta.json, nested ones too) set to a
    hostile value or deleted, or a member added."""
    target = record
    while isinstance(target, dict) and target and rng.random() < 0.5:
        inner = [v for v in target.values() if isinstance(v, (dict, list)) and v]
        if not inner:
            break
        target = rng.choice(inner)
        while isinstance(target, list) and target:
            target = rng.choice(target)
    if not isinstance(target, dict):
        return record
    keys = list(target) or ["s"]
    key = rng.choice(keys + ["e", "s", "g", "w", "t", "d", "p", "format", "version", "rank", "world_size", "path"])
    if rng.random() < 0.15:
        target.pop(key, None)
    else:
        target[key] = _value(rng)
    return record


WATCH_MUTATIONS = BYTE_MUTATIONS + [json_lines(record_member)] * 3

# Numbers a compiled map's indices, node counts and sizes could be: past the ends of their ranges, or not integers.
MAP_NUMBERS: list[object] = [
    0,
    -1,
    -2,
    1,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63),
    10**30,
    0.5,
    float("nan"),
    float("inf"),
    "1",
    None,
    True,
]


def compiled_member(cmap: object, rng: random.Random) -> object:
    """One structural damage to a compiled map (tuiprof/trace/compiled_map.py's JSON: modules as
    [path, class], kernels as [event, kernel, modules, nodes, bytes, FLOPs])."""
    if not isinstance(cmap, dict):
        return cmap
    modules = cmap.get("modules") if isinstance(cmap.get("modules"), list) else []
    graphs = cmap.get("graphs") if isinstance(cmap.get("graphs"), list) else []
    kernels = [k for g in graphs if isinstance(g, dict) and isinstance(g.get("kernels"), list) for k in g["kernels"]]
    kernel = rng.choice(kernels) if kernels else None
    choice = rng.randrange(11)
    if choice == 0 and isinstance(kernel, list) and len(kernel) > 2 and isinstance(kernel[2], list) and kernel[2]:
        kernel[2][rng.randrange(len(kernel[2]))] = rng.choice([len(modules), len(modules) + 1, -1, *MAP_NUMBERS])
    elif choice == 1 and isinstance(kernel, list) and len(kernel) > 3 and isinstance(kernel[3], list) and kernel[3]:
        kernel[3][rng.randrange(len(kernel[3]))] = rng.choice(MAP_NUMBERS)
        if rng.random() < 0.3:
            kernel[3][:] = [0] * len(kernel[3])
    elif choice == 2 and isinstance(kernel, list) and len(kernel) > 4:
        column = kernel[rng.choice((4, 5))] if len(kernel) > 5 else kernel[4]
        if isinstance(column, list) and column:
            if rng.random() < 0.3:
                column.pop()
            else:
                column[rng.randrange(len(column))] = rng.choice([*MAP_NUMBERS, 1e308, -1e308])
    elif choice == 3 and isinstance(kernel, list):  # members missing, added, or another shape
        pick = rng.randrange(4)
        if pick == 0:
            del kernel[rng.randrange(len(kernel) + 1) :]
        elif pick == 1:
            kernel.extend(rng.choice(([], [1], "x", None)) for _ in range(rng.randint(1, 3)))
        elif pick == 2:
            kernel[rng.randrange(len(kernel))] = _value(rng) if kernel else None
        else:
            kernel[2:4] = [list(range(len(modules))), [1] * len(modules)]  # every module, legal
    elif choice == 4 and kernels:  # kernels or graphs duplicated, reordered, directions swapped
        graph = rng.choice([g for g in graphs if isinstance(g, dict) and isinstance(g.get("kernels"), list)])
        pick = rng.randrange(4)
        if pick == 0:
            at = rng.randrange(len(graph["kernels"]) + 1)
            graph["kernels"][at:at] = [kernel] * rng.choice((1, 2, 50))  # shared: a later damage hits every copy
        elif pick == 1:
            graphs.append(graph)
        elif pick == 2:
            rng.shuffle(graph["kernels"])
        else:
            graph["backward"] = not graph.get("backward")
    elif choice == 5 and kernels:  # regions and event names: another graph's, hostile, or an eager op's
        graph = rng.choice([g for g in graphs if isinstance(g, dict)])
        if rng.random() < 0.5:
            graph["region"] = rng.choice(["1/0", "0/1", "", "0/0/0", "/", *HOSTILE_STRINGS])
        elif isinstance(kernel, list) and len(kernel) > 1:
            kernel[rng.randrange(2)] = rng.choice(["aten::mm", "aten::addmm", "ProfilerStep#1", *HOSTILE_STRINGS])
    elif choice == 6 and modules:  # module paths and classes: hostile, duplicated, odd dots
        module = rng.choice(modules)
        if isinstance(module, list) and module:
            module[rng.randrange(len(module))] = rng.choice(
                ["", ".", "a..b", "head.", ".head", "0", "head.0.0", rng.choice(modules)[0], *HOSTILE_STRINGS]
            )
    elif choice == 7:  # a chain of modules nested deep, a kernel in the deepest
        depth = rng.choice((50, 1500))
        first = len(modules)
        modules.extend([".".join(["m"] * (i + 1)), "Nest"] for i in range(depth))
        cmap["modules"] = modules
        if isinstance(kernel, list) and len(kernel) > 3:
            kernel[2:4] = [[first + depth - 1, rng.randrange(first + depth)], [1, 1]]
            del kernel[4:]
    elif choice == 8:  # top-level members
        key = rng.choice(["version", "root", "cost_s", "unread", "modules", "graphs", "extra"])
        if rng.random() < 0.15:
            cmap.pop(key, None)
        elif key == "root":
            cmap[key] = rng.choice(["head", "a.b", "x" * 5000, *HOSTILE_STRINGS])
        else:
            cmap[key] = rng.choice([*MAP_NUMBERS, *HOSTILE_VALUES, 1e308, _deep(3000)])
    elif choice == 9:
        modules.extend([[f"wide{i}", "Wide"] for i in range(rng.choice((1000, 100_000)))])
        cmap["modules"] = modules
    else:
        record_member(cmap, rng)
    return cmap


def compiled_case(seed: bytes, rng: random.Random) -> bytes:
    """The seed's document with its compiled map damaged 1 to 4 times (or the map replaced by
    another type), written back in Kineto's layout or as one line."""
    document = json.loads(seed)
    live = document["tuiprofLive"]
    if rng.random() < 0.05:
        live["compiled"] = rng.choice([None, [], "x", 5, {}, _deep(3000)])
    else:
        for _ in range(rng.randint(1, 4)):
            live["compiled"] = compiled_member(live["compiled"], rng)
    try:
        return kineto_layout(document) if rng.random() < 0.7 else json.dumps(document).encode()
    except (ValueError, RecursionError):  # a member nested too deep for json
        return seed


def mutate_bytes(data: bytes, rng: random.Random, mutations: list) -> bytes:
    for _ in range(rng.randint(1, 3)):
        data = rng.choice(mutations)(data, rng)
    return data


def timeline_arguments(rng: random.Random) -> list[str]:
    """Hostile ``tuiprof timeline`` options, each present or not."""
    args = []
    for option, values, chance in (
        ("--from", TIMELINE_TIMES, 0.4),
        ("--to", TIMELINE_TIMES, 0.4),
        ("--width", TIMELINE_WIDTHS, 0.7),
        ("--depth", TIMELINE_DEPTHS, 0.2),
        ("--step", TIMELINE_STEPS, 0.15),
        ("--lanes", TIMELINE_LANES, 0.3),
    ):
        if rng.random() < chance:
            value = rng.choice(values)
            if values is TIMELINE_TIMES and rng.random() < 0.3:
                value = f"{rng.uniform(-10, 3e6):.3f}"  # somewhere inside (or just past) most traces
            args.append(f"{option}={value}")
    return args + ["--format", rng.choice(("text", "json"))]


Files = list[tuple[str, bytes]]  # a case's files: (name in the case's folder, bytes); the first is minimised


def make_command(surface: str, seeds: Seeds, seed_index: int, rng: random.Random) -> tuple[Files, list[str]]:
    """The files of one case and its command line, ``{0}``/``{1}`` standing for the files'
    paths and ``{dir}`` for their folder (a run directory)."""
    if surface == "run":
        _, ranks = seeds.runs[seed_index]
        bad = rng.randrange(len(ranks))
        data, suffix = make_case(ranks[bad][1], rng)
        files = [(ranks[bad][0].removesuffix(".json") + suffix, data), *ranks[:bad], *ranks[bad + 1 :]]
        return files, ["summary", "{dir}", "--view", rng.choice(RUN_VIEWS), "--format", rng.choice(FORMATS)]
    if surface == "snapshot":
        data = seeds.snapshots[seed_index][1]
        if rng.random() < 0.5:  # loads past the unpickler, into the checks of what the pickle holds
            data = snapshot_member(data, rng)
            for _ in range(rng.randint(0, 1)):
                data = rng.choice(SNAPSHOT_MUTATIONS)(data, rng)
        else:
            data = mutate_bytes(data, rng, SNAPSHOT_MUTATIONS)
        suffix = ".pickle"
        if rng.random() < 0.2:
            data, suffix = gzip_damage(data, rng), ".pickle.gz"
        if rng.random() < 0.3:
            other = rng.choice(seeds.snapshots)[1]
            other = other if rng.random() < 0.5 else mutate_bytes(other, rng, SNAPSHOT_MUTATIONS)
            return _numbered([(data, suffix), (other, ".pickle")]), [
                "diff",
                "{0}",
                "{1}",
                "--format",
                rng.choice(FORMATS),
            ]
        return _numbered([(data, suffix)]), ["summary", "{0}", "--format", rng.choice(("json", "table"))]
    if surface == "snapshot-diff":
        return snapshot_diff_case(seed_index, rng)
    if surface == "watch":
        (name, history), *captures = seeds.watches[seed_index][1]
        formats = ["--format", rng.choice(FORMATS)] if rng.random() < 0.5 else []
        return [(name, mutate_bytes(history, rng, WATCH_MUTATIONS)), *captures], [
            "summary",
            "{dir}",
            "--view",
            "watch",
            *formats,
        ]
    if surface == "compiled":
        seed = seeds.compiled[seed_index][1]
        data = compiled_case(seed, rng)
        suffix = ".json"
        if rng.random() < 0.1:
            data, suffix = gzip.compress(data, compresslevel=1), ".json.gz"
        if rng.random() < 0.3:
            other = seed if rng.random() < 0.5 else compiled_case(seed, rng)
            files = [(data, suffix), (other, ".json")] if rng.random() < 0.5 else [(other, ".json"), (data, suffix)]
            args = ["diff", "{0}", "{1}", "--format", rng.choice(FORMATS)]
            if rng.random() < 0.5:
                args += ["--view", rng.choice(("modules", "kernels", "all"))]
            return _numbered(files), args
        return _numbered([(data, suffix)]), [
            "summary",
            "{0}",
            "--view",
            rng.choice(COMPILED_VIEWS),
            "--format",
            rng.choice(FORMATS),
        ]
    if surface == "sidecar":
        view = "ranks" if rng.random() < 0.6 else rng.choice(RUN_VIEWS)
        return list(seeds.runs[0][1]), [
            f"{PLANT_SIDECARS}:{rng.getrandbits(32)}",
            "summary",
            "{dir}",
            "--view",
            view,
            "--format",
            rng.choice(FORMATS),
        ]
    seed = seeds.traces[seed_index]
    if surface == "cache":
        return _numbered([(seed, ".json")]), [
            f"{PLANT_CACHE}:{rng.getrandbits(32)}",
            "summary",
            "{0}",
            "--view",
            rng.choice(VIEWS),
            "--format",
            rng.choice(FORMATS),
        ]
    data, suffix = make_case(seed, rng)
    if surface == "summary":
        return _numbered([(data, suffix)]), [
            "summary",
            "{0}",
            "--view",
            rng.choice(VIEWS),
            "--format",
            rng.choice(FORMATS),
        ]
    if surface == "timeline":
        files = [(data, suffix) if rng.random() < 0.7 else (seed, ".json")]
        return _numbered(files), ["timeline", "{0}", *timeline_arguments(rng)]
    pick = rng.random()
    other = (
        make_case(seed, rng)
        if pick < 0.4
        else (seed, ".json")
        if pick < 0.7
        else (structured(rename)(seed, rng), ".json")
    )
    files = [(data, suffix), other] if rng.random() < 0.5 else [other, (data, suffix)]
    args = ["diff", "{0}", "{1}", "--format", rng.choice(FORMATS)]
    if rng.random() < 0.3:
        args += ["--view", rng.choice(DIFF_VIEWS)]
    if rng.random() < 0.2:
        args += ["--metric", rng.choice(("auto", "cpu", "device"))]
    return _numbered(files), args


def _numbered(files: list[tuple[bytes, str]]) -> Files:
    """(bytes, suffix) pairs named ``0.json``, ``1.json.gz``... in their order."""
    return [(f"{index}{suffix}", data) for index, (data, suffix) in enumerate(files)]


def make_case(seed: bytes, rng: random.Random) -> tuple[bytes, str]:
    """Mutated bytes and the file suffix they are written under."""
    data = seed
    for _ in range(rng.randint(1, 3)):
        data = rng.choice(MUTATIONS)(data, rng)
    if rng.random() < 0.2:
        return gzip_damage(data, rng), ".json.gz"
    return data, ".json"


# ---------------------------------------------------------------- running one case


@dataclass
class Outcome:
    kind: str  # clean | crash | hang
    signature: str = ""
    detail: str = ""
    output: str = ""  # stdout of a clean command (compared with a reference run; not sent back)
    tag: str = ""  # what a clean case of a surface that counts them was (snapshot-diff: who read it)


def compare_readers(path: str) -> Outcome:
    """``read_snapshot`` with the opcode scanner (which may leave the file to the unpickler) and
    without it: equal columns or the same one line, else "the readers disagree"."""
    from tests.helpers.snapshot_gen import differences
    from tuiprof.errors import TraceError
    from tuiprof.trace.snapshot import SCAN_BYTES_ENV, _open_snapshot, read_snapshot
    from tuiprof.trace.snapshot_scan import scan_snapshot

    def scanner() -> object:
        handle, head, size = _open_snapshot(Path(path), path)
        with handle:
            return scan_snapshot(handle, head, size, path, None)

    def unpickler() -> object:
        before = os.environ.get(SCAN_BYTES_ENV)  # --snapshot-scan's, for the other surfaces
        os.environ[SCAN_BYTES_ENV] = str(1 << 62)
        try:
            return read_snapshot(path)
        finally:
            os.environ.pop(SCAN_BYTES_ENV)
            if before is not None:
                os.environ[SCAN_BYTES_ENV] = before

    answers = []
    for reader in (scanner, unpickler):
        try:
            answers.append(reader())
        except TraceError as exc:
            answers.append(str(exc))
        except BaseException as exc:  # noqa: BLE001 - what we are looking for
            frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tuiprof" in f.filename]
            place = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
            return Outcome(
                "crash", f"{type(exc).__name__} at {place} ({reader.__name__})", traceback.format_exc()[-3000:]
            )
    fast, slow = answers
    if fast is None:
        return Outcome("clean", tag="left to the unpickler")
    if isinstance(fast, str) or isinstance(slow, str):
        if fast == slow:
            return Outcome("clean", tag="refused alike")
        if isinstance(fast, str) and isinstance(slow, str) and MEMO_PAST_END_LINE in fast + slow:
            # Each reader names the first problem it checks: the scanner a memo key past the end
            # where it is stored, the unpickler after loading (docs/snapshots.md, "One contract").
            return Outcome("clean", tag="refused, a memo key past the end named by one")
        return Outcome("crash", "the readers disagree", f"scanner: {str(fast)[:800]}\nunpickler: {str(slow)[:800]}")
    different = differences(fast, slow)  # type: ignore[arg-type]
    if different:
        return Outcome("crash", "the readers disagree", f"columns: {', '.join(different)}")
    return Outcome("clean", tag="read by the scanner")


def run_command(argv: list[str]) -> Outcome:
    """One tuiprof command in this process, classified."""
    from tuiprof.cli import main

    for name in SWITCHES_ENV:  # --no-cache / --no-sidecars of an earlier command set them for the process
        os.environ.pop(name, None)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except BaseException as exc:  # noqa: BLE001 - what we are looking for
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tuiprof" in f.filename]
        place = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        return Outcome("crash", f"{type(exc).__name__} at {place}", traceback.format_exc()[-3000:])
    stderr, stdout = err.getvalue(), out.getvalue()
    lines = stderr.strip().splitlines()
    if _RAW_CONTROL.search(stdout) or _RAW_CONTROL.search(stderr):
        return Outcome("crash", "raw control character in output", (stderr + stdout)[:2000])
    if code == 0 and all(line.startswith("tuiprof: ") for line in lines):
        return Outcome("clean", output=stdout)
    if code == 2 and len(lines) == 1 and lines[0].startswith("tuiprof: "):
        return Outcome("clean", output=stdout)
    # The signature: the line that is not tuiprof's own (a stray second line), without the case's
    # folder (the worker's current directory), so that the minimiser's cases can match it.
    odd = next((line for line in lines if not line.startswith("tuiprof: ")), lines[-1] if lines else "")
    return Outcome("crash", f"exit {code}: {odd.replace(os.getcwd(), 'CASE')[:80]}", stderr[-2000:])


# A case whose files tuiprof writes itself (sidecars, a cache entry) starts its command line with
# one of these and a number (``@sidecars:123``): a reference run without them, a run that writes
# them, the written files mutated (random.Random(number)), then two runs that must be clean and,
# unless the files were signed with the user's own key, print what the reference printed.
PLANT_SIDECARS, PLANT_CACHE = "@sidecars", "@cache"
SWITCHES_ENV = ("TUIPROF_NO_CACHE", "TUIPROF_NO_SIDECARS", "TUIPROF_CACHE_SIZE")
SIDECAR_SUFFIX = ".tuiprof-summary"


def run_case(args: list[str], paths: list[str], directory: str) -> tuple[Outcome, Files]:
    """A case's command (or, for a planted case, its runs) in ``directory``, classified, with the
    files tuiprof wrote and the case mutated (for the reproducer); also a crash: a pickle's
    payload ran (it made MARKER in the current directory)."""
    plant, _, number = args[0].partition(":") if args[0].startswith("@") else ("", "", "")
    argv = [arg.format(*paths, dir=directory) for arg in args[1 if plant else 0 :]]
    planted: Files = []
    if plant == PLANT_SIDECARS:
        outcome, planted = run_planted(
            argv, "--no-sidecars", "sidecar", plant_sidecars, directory, random.Random(int(number))
        )
    elif plant == PLANT_CACHE:
        from tuiprof.trace import cache

        smallest, cache.MIN_BYTES = cache.MIN_BYTES, 0  # every trace cached: the seeds are small
        try:
            outcome, planted = run_planted(
                argv, "--no-cache", "cache entry", plant_cache, directory, random.Random(int(number))
            )
        finally:
            cache.MIN_BYTES = smallest
    elif plant == SNAPSHOT_DIFF:
        outcome = compare_readers(argv[0])
    else:
        outcome = run_command(argv)
    if os.path.exists(os.path.join(directory, MARKER)):
        outcome = Outcome("crash", "code from a pickle ran", f"{MARKER} was created by {' '.join(argv)}")
    outcome.output = ""
    return outcome, planted


def run_planted(
    argv: list[str], off: str, what: str, plant, directory: str, rng: random.Random
) -> tuple[Outcome, Files]:
    """The runs of a planted case (see PLANT_SIDECARS)."""
    from tuiprof.trace.cache import wait_for_writes

    reference = run_command([*argv, off])
    if reference.kind != "clean":
        return reference, []
    writing = run_command(argv)
    wait_for_writes()
    if writing.kind != "clean":
        return writing, []
    planted, believable = plant(Path(directory), rng)
    _keep_last_case(Path(directory))
    for _ in range(2):  # the second run reads what the first rebuilt
        outcome = run_command(argv)
        wait_for_writes()
        if outcome.kind != "clean":
            return outcome, planted
        if not believable and outcome.output != reference.output:
            return Outcome("crash", f"a planted {what} was believed", outcome.output[:2000]), planted
    return Outcome("clean"), []


def last_case_folder(folder: str | Path, pid: int) -> Path:
    """Where worker ``pid`` keeps the files of its planted case while it runs (see _keep_last_case)."""
    return Path(folder) / f"last-case-{pid}"


def _keep_last_case(directory: Path) -> None:
    """A copy of the case's folder as planted, before its runs: a planted cache entry is keyed by
    the trace's path and mtime, so the same mutation cannot be drawn again in another folder,
    and a worker that dies takes its folder's state with it.  The parent copies it into --out
    when the worker dies.  Special files are listed, not opened (a FIFO would block)."""
    keep = last_case_folder(directory.parent, os.getpid())
    shutil.rmtree(keep, ignore_errors=True)
    specials = []
    for path in sorted(directory.rglob("*")):
        target = keep / path.relative_to(directory)
        if path.is_symlink() or not (path.is_file() or path.is_dir()):
            specials.append(
                f"{path.relative_to(directory)}: {os.readlink(path) if path.is_symlink() else 'special file'}"
            )
        elif path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
    keep.mkdir(parents=True, exist_ok=True)
    (keep / "SPECIAL-FILES.txt").write_text("".join(line + "\n" for line in specials))


def _special(path: Path, rng: random.Random, others: list[Path]) -> None:
    """``path`` replaced by what a planted file could be: a FIFO, a link (to a device, another
    file, a loop, nowhere), a folder."""
    path.unlink()
    choice = rng.randrange(5)
    if choice == 0:
        os.mkfifo(path)
    elif choice == 1:
        path.symlink_to(rng.choice(["/dev/zero", "/dev/urandom", str(path), str(path) + ".nowhere"]))
    elif choice == 2 and others:
        path.symlink_to(rng.choice(others))
    else:
        path.mkdir()


def _planted_files(directory: Path, paths: list[Path]) -> Files:
    return [(str(p.relative_to(directory)), p.read_bytes()) for p in paths if p.is_file() and not p.is_symlink()]


def plant_sidecars(directory: Path, rng: random.Random) -> tuple[Files, bool]:
    """Mutate the run's signed sidecars: bytes, members (the old signature kept, or signed with
    the user's key: then believable), signed with another key, swapped between ranks, or made
    special files.  Returns the files and whether the output may differ from the reference."""
    paths = sorted(directory.glob("*" + SIDECAR_SUFFIX))
    if not paths:
        return [], False
    key = (directory / "cache" / "tuiprof" / "sidecar.key").read_bytes()
    believable = False
    targets = paths if rng.random() < 0.3 else [rng.choice(paths)]
    choice = rng.randrange(7)
    if choice == 0:
        first, second = paths[0].read_bytes(), paths[-1].read_bytes()
        paths[0].write_bytes(second)
        paths[-1].write_bytes(first)
    for path in targets if choice else []:
        if choice == 1:
            _special(path, rng, [p for p in paths if p != path])
            continue
        signature, _, body = path.read_bytes().partition(b"\n")
        if choice == 2:
            body, signature = mutate_bytes(body, rng, BYTE_MUTATIONS), signature
        elif choice in (3, 4, 5):
            try:
                record = json.loads(body)
            except ValueError:
                continue
            for _ in range(rng.randint(1, 3)):
                record = (
                    record_member(record, rng)
                    if choice != 5
                    else planted_numbers(record, rng.choice((0.001, 1000, -1, 1e300)))
                )
            try:
                body = json.dumps(record).encode()
            except (ValueError, RecursionError):
                continue  # a value nested too deep for json: this sidecar stays as written
            if choice == 4:  # the user's own key: a sidecar tuiprof could have written; believed if it fits
                signature = hmac.new(key, body, hashlib.sha256).hexdigest().encode()
                believable = True
            elif choice == 5:  # planted numbers, signed with another key
                signature = hmac.new(os.urandom(32), body, hashlib.sha256).hexdigest().encode()
        else:
            path.write_bytes(mutate_bytes(path.read_bytes(), rng, BYTE_MUTATIONS))
            continue
        path.write_bytes(signature + b"\n" + body)
    return _planted_files(directory, paths), believable


def planted_numbers(record: object, factor: float) -> object:
    """A sidecar whose steps, collectives and peak memory are ``factor`` times what was measured
    (its rank, file and size kept, so only the signature and content hash can tell)."""
    summary = record.get("summary") if isinstance(record, dict) else None
    if not isinstance(summary, dict):
        return _scaled(record, factor)
    for member in ("steps", "collectives", "peak_memory_bytes"):
        summary[member] = _scaled(summary.get(member), factor)
    return record


def _scaled(value: object, factor: float) -> object:
    """Every number under ``value`` times ``factor`` (planted step times, durations, bytes)."""
    if isinstance(value, dict):
        return {k: _scaled(v, factor) for k, v in value.items()}
    if isinstance(value, list):
        return [_scaled(v, factor) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value * factor
    return value


def _npy(header: dict, body: bytes) -> bytes:
    """A version 1.0 .npy file of ``header`` (padded as numpy pads it) and ``body``."""
    text = repr(header).encode("latin-1")
    text += b" " * (63 - (10 + len(text)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + body


def plant_cache(directory: Path, rng: random.Random) -> tuple[Files, bool]:
    """Mutate 1 to 3 files of the decoded-trace cache entry (its columns, or the arrays the analysis
    derived: ``derived.*.npy``): bytes, a .npy header's dtype or shape, a .npy holding a pickle
    payload, a meta.json member, a parent array made to loop; delete one or make it a special file.
    A third of the cases then recompute the CRC-32s in meta.json (a planter who knows the format):
    the output may then differ, but nothing may crash or hang.  Returns the files and whether
    the output may differ from the reference."""
    stores = directory / "cache" / "tuiprof" / "stores"
    paths = sorted(p for p in stores.rglob("*") if p.is_file())
    if not paths:
        return [], False
    for path in rng.sample(paths, min(len(paths), rng.randint(1, 3))):
        data, choice = path.read_bytes(), rng.randrange(7)
        if choice == 6 and path.name.startswith("derived.") and path.name.endswith("parent.npy"):
            _plant_loop(path, rng)
        elif choice == 0:
            if rng.random() < 0.5:
                path.unlink()
            else:
                _special(path, rng, [p for p in paths if p != path])
        elif choice == 1 and path.suffix == ".npy" and data[6:8] == b"\x01\x00":
            length = int.from_bytes(data[8:10], "little")
            try:
                header = ast.literal_eval(data[10 : 10 + length].decode("latin-1"))
                key, value = rng.choice(
                    [
                        ("descr", rng.choice(["|O", "<f8", "<i2", ">i8", "|b1", "<U9", "V3", "<i8"])),
                        ("shape", rng.choice([(0,), (10**11,), (2, 3), (-1,), ()])),
                        ("fortran_order", True),
                    ]
                )
                header[key] = value
            except (ValueError, SyntaxError, TypeError):
                header = {"descr": "<i8", "fortran_order": False, "shape": (3,)}
            path.write_bytes(_npy(header, data[10 + length :]))
        elif choice == 2 and path.suffix == ".npy":
            path.write_bytes(
                _npy({"descr": "|O", "fortran_order": False, "shape": (1,)}, rng.choice(PICKLE_PAYLOADS) + b".")
            )
        elif choice == 3 and path.name == "meta.json":
            path.write_bytes(json_lines(record_member)(data, rng))
        else:
            path.write_bytes(mutate_bytes(data, rng, BYTE_MUTATIONS))
    resealed = rng.random() < 1 / 3 and _reseal_cache(stores)
    return _planted_files(directory, paths), resealed


def _plant_loop(path: Path, rng: random.Random) -> None:
    """A parent array (calls' or module nodes') whose links loop: two rows each other's parent."""
    import numpy as np  # only this surface needs it

    parent = np.load(path, allow_pickle=False)
    if len(parent) >= 2:
        i, j = rng.sample(range(len(parent)), 2)
        parent[i], parent[j] = j, i
        np.save(path, parent, allow_pickle=False)


def _reseal_cache(stores: Path) -> bool:
    """The CRC-32 of every file of each entry recomputed into its meta.json, and meta.json's own
    seal (True if any was)."""
    from tuiprof.trace.cache import seal as cache_seal

    resealed = False
    for meta_path in stores.glob("*/meta.json"):
        if meta_path.is_symlink() or not meta_path.is_file():
            continue  # a planted special file (a link to /dev/zero would be read forever)
        try:
            meta = json.loads(meta_path.read_bytes())
            for name in meta["checksums"]:
                file = meta_path.parent / name
                if file.is_file() and not file.is_symlink():  # never read a planted FIFO
                    meta["checksums"][name] = zlib.crc32(file.read_bytes())
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            continue  # a member, file or special file the mutation broke (a list 3,000 deep): left as it is
        meta.pop("seal", None)
        meta_path.write_bytes(cache_seal(json.dumps(meta).encode()))
        resealed = True
    return resealed


def _worker(conn: Connection, seeds: Seeds, folder: str) -> None:
    os.environ["TUIPROF_DEBUG"] = "1"  # tracebacks, not "internal error" lines
    from tuiprof.analysis import ranks
    from tuiprof.trace.cache import wait_for_writes

    # A run's ranks analysed here, one after the other: a rank worker would turn an exception into a skipped rank.
    analyse = ranks.summarise_locally
    ranks.summarise_locally = lambda pending, _workers, progress: analyse(pending, 1, progress)
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job[0] == "case":
            _, number, surface, seed_index, case_seed = job
            files, args = make_command(surface, seeds, seed_index, random.Random(case_seed))
        else:
            _, number, files, args = job
        directory = os.path.join(folder, f"case-{os.getpid()}-{number}")
        os.mkdir(directory)
        shutil.rmtree(last_case_folder(folder, os.getpid()), ignore_errors=True)  # an earlier case's
        os.environ["XDG_CACHE_HOME"] = os.path.join(directory, "cache")  # the case's own cache, sidecar key
        os.chdir(directory)  # where a pickle's payload would make MARKER
        paths = [os.path.join(directory, name) for name, _ in files]
        for path, (_, data) in zip(paths, files):
            with open(path, "wb") as handle:
                handle.write(data)
        started = time.perf_counter()
        try:
            outcome, planted = run_case(args, paths, directory)
        except BaseException as exc:  # noqa: BLE001 - tuiprof's own are caught in run_command: this is the fuzzer's
            frames = traceback.extract_tb(exc.__traceback__)
            place = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
            outcome, planted = (
                Outcome("crash", f"the fuzzer's own {type(exc).__name__} at {place}", traceback.format_exc()[-3000:]),
                [],
            )
        wait_for_writes()  # a command's cache entry is written after its output, as the CLI's exit waits for it
        os.chdir(folder)
        shutil.rmtree(directory)  # with the sidecars and cache a run leaves
        failed = outcome.kind != "clean"
        conn.send((number, outcome, time.perf_counter() - started, [*files, *planted] if failed else [], args))


class Pool:
    """Worker processes with a per-job timeout: a worker past it is killed and replaced."""

    def __init__(self, jobs: int, seeds: Seeds, folder: str, timeout: float) -> None:
        self.seeds, self.folder, self.timeout = seeds, folder, timeout
        self.context = multiprocessing.get_context("spawn")
        self.workers: dict[Connection, tuple[multiprocessing.Process, float, tuple]] = {}
        self.idle: list[tuple[multiprocessing.Process, Connection]] = [self._start() for _ in range(jobs)]

    def _start(self) -> tuple[multiprocessing.Process, Connection]:
        parent, child = self.context.Pipe()
        process = self.context.Process(target=_worker, args=(child, self.seeds, self.folder), daemon=True)
        process.start()
        child.close()
        return process, parent

    def run(self, jobs: list[tuple]):
        """Yield ``(job, result or None for a hang)`` for every job."""
        pending = list(reversed(jobs))
        while pending or self.workers:
            while pending and self.idle:
                process, conn = self.idle.pop()
                job = pending.pop()
                conn.send(job)
                self.workers[conn] = (process, time.monotonic(), job)
            ready = wait(list(self.workers), timeout=0.2)
            for conn in ready:
                process, _, job = self.workers.pop(conn)
                try:
                    result = conn.recv()
                except EOFError:  # the worker died (a crash of the interpreter itself)
                    process.join(timeout=5)
                    yield job, ("died", process.exitcode, process.pid)
                    self.idle.append(self._start())
                    continue
                self.idle.append((process, conn))
                yield job, result
            now = time.monotonic()
            for conn, (process, started, job) in list(self.workers.items()):
                if now - started > self.timeout:
                    process.kill()
                    process.join()
                    del self.workers[conn]
                    self.idle.append(self._start())
                    yield job, None

    def close(self) -> None:
        for process, conn in self.idle:
            conn.close()
            process.join(timeout=5)
            if process.is_alive():
                process.kill()


# ---------------------------------------------------------------- minimising


def minimise(pool: Pool, files: Files, args: list[str], signature: str, budget_s: float) -> bytes:
    """Smaller bytes of the first file that still fail with ``signature`` (delta debugging
    on byte chunks, time-bounded; the other file of a diff, the other ranks of a run stay as they are)."""
    name, data = files[0]
    if name.endswith(".gz") or args[0].startswith("@"):
        return data  # damage inside compressed bytes does not survive cutting; planted files come from a run
    deadline = time.monotonic() + budget_s
    chunk = max(1, len(data) // 2)
    counter = 0
    while chunk >= 1 and time.monotonic() < deadline:
        candidates = []
        for start in range(0, len(data), chunk):
            candidates.append(data[:start] + data[start + chunk :])
        reduced = False
        for batch_start in range(0, len(candidates), 8):
            if time.monotonic() > deadline:
                break
            batch = candidates[batch_start : batch_start + 8]
            jobs = []
            for candidate in batch:
                counter += 1
                jobs.append(("data", -counter, [(name, candidate), *files[1:]], args))
            for job, result in pool.run(jobs):
                if result and not isinstance(result[0], str) and result[1].signature == signature:
                    if len(job[2][0][1]) < len(data):
                        data = job[2][0][1]
                        reduced = True
            if reduced:
                break
        if not reduced:
            chunk //= 2
        else:
            chunk = min(chunk, max(1, len(data) // 2))
    return data


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000, help="cases per surface")
    parser.add_argument(
        "--surface",
        default="summary",
        help=f"the commands the cases run, comma-separated, of: {', '.join(SURFACES)} (trace: summary)",
    )
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"))
    parser.add_argument(
        "--run-only",
        default="",
        help="run only the cases of these surfaces, drawn as a run of all of --surface draws them",
    )
    parser.add_argument("--minimise-seconds", type=float, default=60.0, help="time budget per distinct crash")
    parser.add_argument(
        "--snapshot-scan",
        action="store_true",
        help="read every snapshot with the opcode scanner (numba), whatever its size: the seeds are small",
    )
    args = parser.parse_args()
    if args.snapshot_scan:  # inherited by the workers
        os.environ["TUIPROF_SNAPSHOT_SCAN_BYTES"] = "0"
    try:
        drawn = surface_list(args.surface)
        surfaces = surface_list(args.run_only) if args.run_only else drawn
    except ValueError as exc:
        parser.error(str(exc))
    if not set(surfaces) <= set(drawn):
        parser.error("--run-only names a surface that --surface does not draw")
    sys.path.insert(0, str(ROOT))
    from tuiprof.trace.jit import jit_enabled

    if "snapshot-diff" in surfaces and not jit_enabled():
        parser.error("--surface snapshot-diff compares the opcode scanner with the unpickler: it needs numba")
    paths = seed_paths()
    traces = [load_seed(p) for p in paths]
    seeds = Seeds(
        traces,
        [p.name for p in paths],
        run_seeds() if {"run", "sidecar"} & set(drawn) else [],
        snapshot_seeds() if "snapshot" in drawn else [],
        watch_seeds(traces) if "watch" in drawn else [],
        compiled_seeds() if "compiled" in drawn else [],
    )
    print(
        f"{len(seeds.traces)} trace seeds ({', '.join(seeds.trace_names[:4])}...), "
        f"run seeds {', '.join(label for label, _ in seeds.runs) or '-'}, {len(seeds.snapshots)} snapshot seeds, "
        f"{len(seeds.watches)} watch seeds, {len(seeds.compiled)} compiled seeds; "
        f"{args.cases} cases per surface ({', '.join(surfaces)}), {args.jobs} jobs"
        + (", snapshots read by the opcode scanner" if args.snapshot_scan else ""),
        file=sys.stderr,
    )
    master = random.Random(args.seed)
    jobs = [
        ("case", index * args.cases + n, surface, master.randrange(seeds.count(surface)), master.getrandbits(64))
        for index, surface in enumerate(drawn)
        for n in range(args.cases)
    ]
    jobs = [job for job in jobs if job[2] in surfaces]
    args.out.mkdir(parents=True, exist_ok=True)
    findings_log = args.out / "findings.log"
    counts = {surface: {"clean": 0, "crash": 0, "hang": 0} for surface in surfaces}
    tags: dict[str, dict[str, int]] = {surface: {} for surface in surfaces}  # clean cases by what they were
    case_seconds = dict.fromkeys(surfaces, 0.0)
    slowest = dict.fromkeys(surfaces, 0.0)
    crashes: dict[tuple[str, str], tuple] = {}  # (surface, signature) -> its first case
    per_signature: dict[tuple[str, str], int] = {}
    hangs: list[tuple] = []
    with tempfile.TemporaryDirectory(prefix="tuiprof-fuzz-") as folder:
        pool = Pool(args.jobs, seeds, folder, args.timeout)
        started = time.monotonic()
        try:
            for done, (job, result) in enumerate(pool.run(jobs), 1):
                surface = job[2]
                if result is None:
                    counts[surface]["hang"] += 1
                    hangs.append(job)
                    _log_finding(findings_log, job, seeds, f"hang (past {args.timeout:.0f} s)", "")
                elif isinstance(result[0], str):  # the worker died
                    counts[surface]["crash"] += 1
                    key = (surface, f"worker died (exit {result[1]})")
                    crashes.setdefault(key, (job, None))
                    per_signature[key] = per_signature.get(key, 0) + 1
                    kept = last_case_folder(folder, result[2])
                    if kept.is_dir():  # a planted case: its files as planted, before the runs
                        shutil.copytree(kept, args.out / f"died-{job[1]}", dirs_exist_ok=True)
                    _log_finding(
                        findings_log,
                        job,
                        seeds,
                        key[1],
                        f"its planted files: {args.out / f'died-{job[1]}'}" if kept.is_dir() else "",
                    )
                else:
                    _, outcome, seconds, files, command = result
                    slowest[surface] = max(slowest[surface], seconds)
                    case_seconds[surface] += seconds
                    counts[surface][outcome.kind] += 1
                    if outcome.tag:
                        tags[surface][outcome.tag] = tags[surface].get(outcome.tag, 0) + 1
                    if outcome.kind == "crash":
                        key = (surface, outcome.signature)
                        crashes.setdefault(key, (job, (outcome, files, command)))
                        per_signature[key] = per_signature.get(key, 0) + 1
                        _log_finding(findings_log, job, seeds, outcome.signature, outcome.detail)
                if done % 500 == 0:
                    rate = done / (time.monotonic() - started)
                    print(f"  {done} cases, {counts}, {rate:.1f} cases/s", file=sys.stderr)
            wall = time.monotonic() - started
            for number, ((surface, signature), (job, found)) in enumerate(sorted(crashes.items())):
                seed_label = seeds.label(surface, job[3])
                if found is None:
                    print(
                        f"crash: {surface}: {signature} x{per_signature[surface, signature]}: case {job[1]} "
                        f"(seed {seed_label}, case seed {job[4]})"
                    )
                    continue
                outcome, files, command = found
                small = minimise(pool, files, command, signature, args.minimise_seconds)
                shown = _write_case(args.out, f"crash-{number}", [(files[0][0], small), *files[1:]], command)
                where = f"{files[0][0]}: {len(small):,} bytes; seed {seed_label}"
                (args.out / f"crash-{number}.txt").write_text(f"{signature}\n{shown}\n{where}\n\n{outcome.detail}\n")
                print(f"crash: {surface}: {signature} x{per_signature[surface, signature]}: {shown} ({where})")
        finally:
            pool.close()
    for job in hangs[:20]:
        files, command = make_command(job[2], seeds, job[3], random.Random(job[4]))
        shown = _write_case(args.out, f"hang-{job[1]}", files, command)
        print(f"hang: {job[2]}: {shown} (in {args.out}; seed {seeds.label(job[2], job[3])})")
    for surface in surfaces:
        tally = counts[surface]
        distinct = sum(1 for crashed, _ in crashes if crashed == surface)
        print(
            f"fuzz {surface}: {sum(tally.values())} cases ({case_seconds[surface]:.0f} s of case time, {args.jobs} jobs, "
            f"{wall:.0f} s wall for all): {tally['clean']} clean, {tally['crash']} crash ({distinct} distinct), "
            f"{tally['hang']} hang; slowest case {slowest[surface]:.1f} s"
            + (f" ({', '.join(f'{n} {tag}' for tag, n in sorted(tags[surface].items()))})" if tags[surface] else "")
        )
    return 1 if any(tally["crash"] or tally["hang"] for tally in counts.values()) else 0


def _log_finding(log: Path, job: tuple, seeds: Seeds, what: str, detail: str) -> None:
    """One finding appended to the run's findings.log as it is seen: a run stopped early keeps it."""
    _, number, surface, seed_index, case_seed = job
    with log.open("a") as handle:
        handle.write(
            f"{surface} case {number} (seed {seeds.label(surface, seed_index)}, case seed {case_seed}): {what}\n"
        )
        if detail:
            handle.write(detail.rstrip() + "\n")
        handle.write("\n")


def surface_list(text: str) -> list[str]:
    """``--surface``'s comma-separated names, aliases resolved, each once, in their order."""
    surfaces = list(dict.fromkeys(SURFACE_ALIASES.get(name, name) for name in text.split(",") if name))
    unknown = [name for name in surfaces if name not in SURFACES]
    if unknown or not surfaces:
        raise ValueError(f"unknown surface {', '.join(unknown) or repr(text)}; choose among {', '.join(SURFACES)}")
    return surfaces


def _write_case(folder: Path, stem: str, files: Files, args: list[str]) -> str:
    """The files of a case in ``folder`` (``stem-0.json``, ``stem-1.json.gz``..., or a run
    directory ``stem/`` of the rank files) and its command line on them, relative to ``folder``."""
    if args[0] == SNAPSHOT_DIFF:
        target = folder / f"{stem}-{files[0][0]}"
        target.write_bytes(files[0][1])
        return f"python scripts/fuzz.py's compare_readers on {target.relative_to(folder)} ({args[2]})"
    run = any("{dir}" in arg for arg in args) or args[0].startswith("@")
    (folder / stem if run else folder).mkdir(parents=True, exist_ok=True)
    targets = [folder / stem / name if run else folder / f"{stem}-{name}" for name, _ in files]
    for target, (_, data) in zip(targets, files):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    shown = [
        arg.format(*(str(t.relative_to(folder)) for t in targets), dir=stem) for arg in args if not arg.startswith("@")
    ]
    planted = (
        f" (files it wrote then mutated, {args[0]}: in {stem}/; signed for the fuzzer's path)"
        if args[0].startswith("@")
        else ""
    )
    return "tuiprof " + " ".join(shown) + planted


if __name__ == "__main__":
    sys.exit(main())
