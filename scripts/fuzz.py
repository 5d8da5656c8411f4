#!/usr/bin/env python3
"""Fuzz ``tuiprof summary`` with mutated real traces: no crash, no hang, no raw control character.

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
  another type; chain python frames into a deep ``nn.Module`` nest;
- ``gzip``: compress the result, then maybe damage the compressed bytes
  (truncate, flip, garbage after it, a second member).

Each case runs ``tuiprof summary FILE --view V --format F`` in a worker process
(tuiprof imported once; the worker is killed and replaced on a timeout).
Outcome classes: ``clean`` (exit 0, or exit 2 with one ``tuiprof:`` line),
``crash`` (any other exit, a traceback, more than one line for an error, or a
raw control character on stdout/stderr) and ``hang`` (past ``--timeout``).
Each distinct crash (exception type and place) gets a minimised reproducer in
``--out``.

    python scripts/fuzz.py --cases 10000 [--jobs 2] [--timeout 60] [--seed 1] [--out fuzz-out]
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import multiprocessing
import os
import random
import re
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
SEED_EVENTS = 1500  # big traces are cut to this many events
SEED_BYTES = 2 << 20  # smaller documents are used byte for byte
VIEWS = ("operators", "modules", "kernels", "steps", "memory")
FORMATS = ("table", "csv", "json", "markdown")
_RAW_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\x80-\x9f]")

HOSTILE_STRINGS = [
    "\x1b]0;pwned\x07", "\x1b]52;c;cHduZWQ=\x07", "\x1b[2J", "[/]", "[@click=app.quit]x", "[bold]x[/bold]",
    "a\x00b", "\u202e\u2066rtl", "x" * 100_000, "", " ", "=cmd|' /C calc'!A0", "+1", "-1", "@SUM(1)",
    "nn.Module: ", "nn.Module: [/]_0", "ProfilerStep#", "ProfilerStep#99999999999999999999",
]
HOSTILE_VALUES: list[object] = [
    None, True, 0, -1, -5, 2**63, -(2**63), 2**64, 10**30, 0.5, "12", "", [], {}, [None], [[1, 2], [3]],
    {"a": [1, {"b": 2}]}, "x" * 100_000,
]
HOSTILE_TOKENS = [
    b"\x00", b"\x1b]0;pwned\x07", b"\x1b[2J", b"[/]", b"[@click=app.quit]", b"\xff\xfe", b"\xc3", b'"', b"\\",
    b"{", b"}", b"[", b"]", b",", b":", b"N/A", b"-", b"9" * 40, b"[" * 2000, b"{\"a\":" * 1200, b"\n", b"\t",
    b"null", b"true",
]
# Numbers no float64 time survives (x 1000 in ns): damage the ts/dur conversion reports.
EXTREME_VALUES: list[object] = [1e308, -1e308, "NaN", "inf", "-inf", "1e999", float("nan"), float("inf")]
EXTREME_TOKENS = [b"NaN", b"Infinity", b"-Infinity", b"1e999"]
MEMBERS = [
    "ts", "dur", "name", "ph", "cat", "pid", "tid", "args", "id", "s", "bp",
]
ARG_MEMBERS = [
    "Python id", "Python parent id", "External id", "external id", "correlation", "Input Dims", "Input type",
    "Concrete Inputs", "Sequence number", "Fwd thread id", "Bytes", "Total Allocated", "Total Reserved", "Addr",
    "Device Type", "Device Id", "device", "stream", "grid", "block", "est. achieved occupancy %", "Ev Idx",
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
    choice = rng.randrange(6)
    if choice == 0 and events:
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
            {"ph": "X", "cat": "python_function", "name": f"nn.Module: M_{i}", "pid": 1, "tid": 1,
             "ts": 1000 + i, "dur": 4 * depth - 2 * i,
             "args": {"Python id": 10**9 + i, "Python parent id": 10**9 + i - 1 if i else None}}
            for i in range(depth)
        )
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


def run_summary(path: str, view: str, fmt: str) -> Outcome:
    """``tuiprof summary`` in this process, classified."""
    from tuiprof.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["summary", path, "--view", view, "--format", fmt])
    except BaseException as exc:  # noqa: BLE001 - what we are looking for
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if "tuiprof" in f.filename]
        place = f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"
        return Outcome("crash", f"{type(exc).__name__} at {place}", traceback.format_exc()[-3000:])
    stderr, stdout = err.getvalue(), out.getvalue()
    lines = stderr.strip().splitlines()
    if _RAW_CONTROL.search(stdout) or _RAW_CONTROL.search(stderr):
        return Outcome("crash", "raw control character in output", (stderr + stdout)[:2000])
    if code == 0 and all(line.startswith("tuiprof: ") for line in lines):
        return Outcome("clean")
    if code == 2 and len(lines) == 1 and lines[0].startswith("tuiprof: "):
        return Outcome("clean")
    return Outcome("crash", f"exit {code}: {lines[-1][:80] if lines else ''}", stderr[-2000:])


def _worker(conn: Connection, seeds: list[bytes], folder: str) -> None:
    os.environ["TUIPROF_DEBUG"] = "1"  # tracebacks, not "internal error" lines
    while True:
        try:
            job = conn.recv()
        except EOFError:
            return
        if job[0] == "case":
            _, number, seed_index, case_seed = job
            rng = random.Random(case_seed)
            data, suffix = make_case(seeds[seed_index], rng)
            view, fmt = rng.choice(VIEWS), rng.choice(FORMATS)
        else:
            _, number, data, suffix, view, fmt = job
        path = os.path.join(folder, f"case-{os.getpid()}-{number}{suffix}")
        with open(path, "wb") as handle:
            handle.write(data)
        started = time.perf_counter()
        outcome = run_summary(path, view, fmt)
        os.unlink(path)
        conn.send((number, outcome, time.perf_counter() - started, data if outcome.kind != "clean" else b"", suffix, view, fmt))


class Pool:
    """Worker processes with a per-job timeout: a worker past it is killed and replaced."""

    def __init__(self, jobs: int, seeds: list[bytes], folder: str, timeout: float) -> None:
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
                    yield job, ("died", process.exitcode)
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


def minimise(pool: Pool, data: bytes, suffix: str, view: str, fmt: str, signature: str, budget_s: float) -> bytes:
    """Smaller bytes that still fail with ``signature`` (delta debugging on byte chunks, time-bounded)."""
    if suffix == ".json.gz":
        return data  # damage inside compressed bytes does not survive cutting
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
                jobs.append(("data", -counter, candidate, suffix, view, fmt))
            for job, result in pool.run(jobs):
                if result and not isinstance(result[0], str) and result[1].signature == signature:
                    if len(job[2]) < len(data):
                        data = job[2]
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
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("fuzz-out"))
    parser.add_argument("--minimise-seconds", type=float, default=60.0, help="time budget per distinct crash")
    args = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    paths = seed_paths()
    seeds = [load_seed(p) for p in paths]
    print(f"{len(seeds)} seeds ({', '.join(p.name for p in paths[:4])}...), {args.cases} cases, {args.jobs} jobs",
          file=sys.stderr)
    master = random.Random(args.seed)
    jobs = [("case", n, master.randrange(len(seeds)), master.getrandbits(64)) for n in range(args.cases)]
    counts = {"clean": 0, "crash": 0, "hang": 0}
    crashes: dict[str, tuple] = {}
    per_signature: dict[str, int] = {}
    hangs: list[tuple] = []
    slowest = 0.0
    with tempfile.TemporaryDirectory(prefix="tuiprof-fuzz-") as folder:
        pool = Pool(args.jobs, seeds, folder, args.timeout)
        started = time.monotonic()
        try:
            for done, (job, result) in enumerate(pool.run(jobs), 1):
                if result is None:
                    counts["hang"] += 1
                    hangs.append(job)
                elif isinstance(result[0], str):  # the worker died
                    counts["crash"] += 1
                    signature = f"worker died (exit {result[1]})"
                    crashes.setdefault(signature, (job, None))
                    per_signature[signature] = per_signature.get(signature, 0) + 1
                else:
                    _, outcome, seconds, data, suffix, view, fmt = result
                    slowest = max(slowest, seconds)
                    counts[outcome.kind] += 1
                    if outcome.kind == "crash":
                        crashes.setdefault(outcome.signature, (job, (outcome, data, suffix, view, fmt)))
                        per_signature[outcome.signature] = per_signature.get(outcome.signature, 0) + 1
                if done % 500 == 0:
                    rate = done / (time.monotonic() - started)
                    print(f"  {done} cases, {counts}, {rate:.1f} cases/s", file=sys.stderr)
            elapsed = time.monotonic() - started
            args.out.mkdir(parents=True, exist_ok=True)
            for number, (signature, (job, found)) in enumerate(sorted(crashes.items())):
                if found is None:
                    print(f"crash: {signature} x{per_signature[signature]}: case {job[1]} "
                          f"(seed {paths[job[2]].name}, case seed {job[3]})")
                    continue
                outcome, data, suffix, view, fmt = found
                small = minimise(pool, data, suffix, view, fmt, signature, args.minimise_seconds)
                target = args.out / f"crash-{number}{suffix}"
                target.write_bytes(small)
                (args.out / f"crash-{number}.txt").write_text(
                    f"{signature}\ntuiprof summary {target.name} --view {view} --format {fmt}\n\n{outcome.detail}\n"
                )
                print(f"crash: {signature} x{per_signature[signature]}: {target} "
                      f"({len(small):,} bytes; --view {view} --format {fmt})")
        finally:
            pool.close()
    for job in hangs[:20]:
        rng = random.Random(job[3])
        data, suffix = make_case(seeds[job[2]], rng)
        view, fmt = rng.choice(VIEWS), rng.choice(FORMATS)
        target = args.out / f"hang-{job[1]}{suffix}"
        target.write_bytes(data)
        print(f"hang: {target} ({len(data):,} bytes; --view {view} --format {fmt}; seed {paths[job[2]].name})")
    total = sum(counts.values())
    print(
        f"fuzz: {total} cases in {elapsed:.0f} s ({total / elapsed:.1f} cases/s, {args.jobs} jobs): "
        f"{counts['clean']} clean, {counts['crash']} crash ({len(crashes)} distinct), {counts['hang']} hang; "
        f"slowest case {slowest:.1f} s"
    )
    return 1 if counts["crash"] or counts["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
