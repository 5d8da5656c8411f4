#!/usr/bin/env python3
"""Time reading an allocator snapshot: ``pickle.load`` versus tuiprof to analysis-ready.

Each measurement runs in its own process (its peak RSS is its own), in the
same run, alternating; the ratio is what to trust on a noisy machine.
``pickle`` is the stdlib's ``pickle.load`` of the file (what memory_viz's
loaders and a plain script do; it would also run any code in the file);
``tuiprof`` is ``read_snapshot`` plus ``analyze_snapshot`` (analysis-ready): with numba, the
opcode scanner (tuiprof/trace/snapshot_kernel.py) from 32 MB; ``no-jit`` the same with
``TUIPROF_NO_JIT=1`` (restricted unpickler, then decode into columns).  Above 2 GB only
``tuiprof`` runs (the other two hold every entry as objects, ~4x the file).

    python scripts/bench_snapshot.py --size-mb 200 [--repeat 2] [--keep] [--dir /tmp]
    python scripts/bench_snapshot.py FILE.pickle [--repeat 2]

The generated file is shaped like a real ``_dump_snapshot`` of a training run:
alloc/free_requested/free_completed entries on one device, each with a stack of
``--depth`` frames drawn from 64 distinct stacks through nested ``nn.Module`` calls.  As
torch's ``_snapshot`` builds them (``py_symbolize``), the frame dicts are shared: each distinct
frame is written once and referred to after (BINGET), and module.py's two ``__call__`` frames
come back at every level of a stack; one frames list per allocation, shared by its alloc, its
frees and its block.  ``--shape unshared``: every frame once per stack and a list per entry
(what the scanner followed before it followed frames referred to within their own stack).
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

READY = (
    "from tuiprof.trace.snapshot import read_snapshot; from tuiprof.analysis.snapshot import analyze_snapshot; "
    "analyze_snapshot(read_snapshot(PATH))"
)
# kind -> (code, environment): the stdlib, tuiprof with the opcode scanner (numba), tuiprof without
MEASURE = {
    "pickle": ("import pickle; pickle.load(open(PATH, 'rb'))", {}),
    "tuiprof": (READY, {}),
    "no-jit": (READY, {"TUIPROF_NO_JIT": "1"}),
}
OBJECTS_LIMIT_MB = 2000  # above this, pickle.load and the unpickler path would need ~4x the file: not run
START = (
    "import os; os.environ['TUIPROF_SNAPSHOT_SCAN_BYTES'] = '0'; "
    "from tuiprof.trace.snapshot import read_snapshot; read_snapshot(PATH)"
)
PROBE = """
import resource, sys, time
PATH = sys.argv[1]
start = time.perf_counter()
{code}
usage = resource.getrusage(resource.RUSAGE_SELF)
print(time.perf_counter() - start, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024)
"""


class _Writer:
    """Pickle opcodes (protocol 4, as ``pickle.dump`` writes plain data) written by hand, so that a
    5 GB snapshot is written without holding it: strings and frame dicts stored in the memo once
    and referred to after (BINGET), every container memoized, APPENDS/SETITEMS in batches of 1000."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.memo: dict[object, bytes] = {}
        self.count = 0

    def memoize(self) -> bytes:
        self.count += 1
        return b"\x94"

    def ref(self, key: object) -> bytes | None:
        return self.memo.get(key)

    def remember(self, key: object) -> None:
        index = self.count - 1
        self.memo[key] = b"h" + bytes([index]) if index < 256 else b"j" + struct.pack("<I", index)

    def forget(self, key: object) -> None:
        """An object that is not referred to again (a freed allocation's frames list)."""
        self.memo.pop(key, None)

    def text(self, value: str) -> bytes:
        found = self.ref(("s", value))
        if found is not None:
            return found
        raw = value.encode()
        head = b"\x8c" + bytes([len(raw)]) if len(raw) < 256 else b"X" + struct.pack("<I", len(raw))
        out = head + raw + self.memoize()
        self.remember(("s", value))
        return out

    @staticmethod
    def integer(value: int) -> bytes:
        if 0 <= value < 256:
            return b"K" + bytes([value])
        if 0 <= value < 65536:
            return b"M" + struct.pack("<H", value)
        if -(2**31) <= value < 2**31:
            return b"J" + struct.pack("<i", value)
        raw = value.to_bytes((value.bit_length() + 8) // 8, "little", signed=True)
        return b"\x8a" + bytes([len(raw)]) + raw

    def record(self, items: list[tuple[str, Callable[[], bytes]]]) -> bytes:
        """A dict; each value made after its key (memo indices follow the bytes' order)."""
        parts = [b"}", self.memoize(), b"("]
        for key, value in items:
            parts.append(self.text(key))
            parts.append(value())
        parts.append(b"u")
        return b"".join(parts)

    def frames(self, frames: list[dict], keys: list[tuple], context: object = None) -> bytes:
        """A frames list, or a reference to it when ``context`` (its traceback) was written before."""
        if context is not None and (found := self.ref(context)) is not None:
            return found
        parts = [b"]", self.memoize(), b"("]
        if context is not None:
            self.remember(context)
        for frame, key in zip(frames, keys):
            found = self.ref(key)
            if found is None:
                head = b"}" + self.memoize()
                self.remember(key)
                body = (
                    b"("
                    + b"".join(
                        self.text(k) + (self.integer(v) if k == "line" else self.text(v)) for k, v in frame.items()
                    )
                    + b"u"
                )
                found = head + body
            parts.append(found)
        parts.append(b"e")
        return b"".join(parts)


MODULE_PY = "/usr/lib/python3.11/site-packages/torch/nn/modules/module.py"
STACKS = 64


def module_stacks(depth: int) -> tuple[list[list[dict]], list[list[tuple]]]:
    """``STACKS`` stacks of ``depth`` frames, innermost first, and each frame's identity: the
    allocator's and a library frame, then one forward per nested module, each called through
    module.py's ``_call_impl`` and ``_wrapped_call_impl`` (the same two frames at every level),
    then the training script."""
    call = [
        ({"name": "_call_impl", "filename": MODULE_PY, "line": 1750}, ("call",)),
        ({"name": "_wrapped_call_impl", "filename": MODULE_PY, "line": 1739}, ("wrapped",)),
    ]
    stacks, keys = [], []
    for s in range(STACKS):
        frames = [
            ({"name": "c10::cuda::CUDACachingAllocator::malloc", "filename": "??", "line": 0}, ("malloc",)),
            (
                {
                    "name": f"op{s % 5}",
                    "filename": "/usr/lib/python3.11/site-packages/torch/nn/functional.py",
                    "line": 2000 + s % 5,
                },
                ("op", s % 5),
            ),
        ]
        level = 0
        while len(frames) < depth - 1:
            forward = {"name": "forward", "filename": f"/home/user/model{level % 7}.py", "line": 10 + s + level}
            frames += [(forward, ("forward", s, level)), *call][: depth - 1 - len(frames)]
            level += 1
        frames.append(({"name": "main", "filename": "/home/user/train.py", "line": 100 + s}, ("main", s)))
        stacks.append([frame for frame, _ in frames])
        keys.append([key for _, key in frames])
    return stacks, keys


def unshared_stacks(depth: int) -> tuple[list[list[dict]], list[list[tuple]]]:
    """``STACKS`` stacks of ``depth`` frames, no frame twice in a stack."""
    stacks = [
        [
            {
                "filename": f"/usr/lib/python3.11/site-packages/torch/nn/modules/m{s % 7}.py"
                if f < depth - 4
                else "/home/user/train.py",
                "line": 10 * f + s,
                "name": f"fn_{s}_{f}",
            }
            for f in range(depth)
        ]
        for s in range(STACKS)
    ]
    return stacks, [[("f", s, f) for f in range(depth)] for s in range(STACKS)]


def make_snapshot_file(path: Path, size_mb: int, depth: int, seed: int = 0, shape: str = "torch") -> int:
    """Write a snapshot of about ``size_mb`` MB; returns its number of trace entries.  Written a
    batch at a time: a 5 GB file needs no more memory than a 100 MB one."""
    rng = random.Random(seed)
    shared = shape == "torch"
    stacks, frame_keys = module_stacks(depth) if shared else unshared_stacks(depth)
    target = size_mb * 1_000_000
    live: list[tuple[int, int, int]] = []
    clock, address, entries = 1_700_000_000_000_000, 0x7F0000000000, 0
    with open(path, "wb") as handle:
        out = _Writer(handle)

        def context(addr: int) -> tuple | None:
            return ("context", addr) if shared else None  # an allocation's traceback: one list

        def entry(action: str, addr: int, size: int, stack: int) -> bytes:
            return out.record(
                [
                    ("action", lambda: out.text(action)),
                    ("addr", lambda: out.integer(addr)),
                    ("size", lambda: out.integer(size)),
                    ("stream", lambda: out.integer(0)),
                    ("time_us", lambda: out.integer(clock)),
                    ("frames", lambda: out.frames(stacks[stack], frame_keys[stack], context(addr))),
                ]
            )

        head = b"\x80\x04}" + out.memoize() + b"(" + out.text("device_traces") + b"]" + out.memoize()
        head += b"]" + out.memoize()
        handle.write(head)
        written = len(head)
        while written < target:
            batch = []
            while len(batch) < 1000:
                clock += rng.randrange(1, 50)
                if live and (rng.random() < 0.45 or len(live) > 5000):
                    addr, size, stack = live.pop(rng.randrange(len(live)))
                    batch.append(entry("free_requested", addr, size, stack))
                    batch.append(entry("free_completed", addr, size, stack))
                    out.forget(context(addr))
                else:
                    size, stack = rng.randrange(1, 4096) * 512, rng.randrange(64)
                    address += size + 512
                    live.append((address, size, stack))
                    batch.append(entry("alloc", address, size, stack))
            chunk = b"(" + b"".join(batch) + b"e"
            handle.write(chunk)
            written += len(chunk)
            entries += len(batch)

        def block(a: int, s: int, k: int) -> bytes:
            return out.record(
                [
                    ("address", lambda: out.integer(a)),
                    ("size", lambda: out.integer(s)),
                    ("requested_size", lambda: out.integer(s)),
                    ("state", lambda: out.text("active_allocated")),
                    ("frames", lambda: out.frames(stacks[k], frame_keys[k], context(a))),
                ]
            )

        def block_list() -> bytes:
            parts = [b"]", out.memoize()]
            held = sorted(live)
            for start in range(0, len(held), 1000):
                parts.append(b"(" + b"".join(block(*b) for b in held[start : start + 1000]) + b"e")
            return b"".join(parts)

        # device_traces = [trace]: the trace list and the outer list closed; then segments = [segment]
        handle.write(b"a" + out.text("segments") + b"]" + out.memoize())
        segment = out.record(
            [
                ("device", lambda: out.integer(0)),
                ("address", lambda: out.integer(min(live)[0] if live else 0)),
                ("total_size", lambda: out.integer(sum(s for _, s, _ in live))),
                ("stream", lambda: out.integer(0)),
                ("segment_type", lambda: out.text("large")),
                ("blocks", block_list),
            ]
        )
        handle.write(segment + b"a" + b"u.")
    return entries


def measure(kind: str, path: Path) -> tuple[float, float, int]:
    """(wall seconds, CPU seconds, peak RSS bytes) of one reading in a fresh process: CPU time is
    what the machine would take idle (one thread), wall time what it took among other sessions."""
    code, env = MEASURE[kind] if kind in MEASURE else (START, {})
    result = subprocess.run(
        [sys.executable, "-c", PROBE.format(code=code), str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
        env={**os.environ, **env},
    )
    seconds, cpu, rss = result.stdout.split()
    return float(seconds), float(cpu), int(rss)


def kernel_start(directory: Path) -> tuple[float, float]:
    """Seconds to read a tiny snapshot with the scanner forced: the first run (compiles the kernel
    when the cache beside tuiprof/trace/snapshot_kernel.py is missing or stale) and a second."""
    path = directory / "bench-snapshot-tiny.pickle"
    make_snapshot_file(path, 1, 30)
    try:
        return measure("start", path)[0], measure("start", path)[0]  # wall seconds
    finally:
        os.unlink(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", type=Path)
    parser.add_argument("--size-mb", type=int, default=200)
    parser.add_argument("--depth", type=int, default=30, help="frames per stack (real snapshots: 20-80)")
    parser.add_argument(
        "--shape",
        choices=("torch", "unshared"),
        default="torch",
        help="torch: frames shared within and across stacks, a list per allocation (as torch writes)",
    )
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--dir", type=Path, default=Path("/tmp"))
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    first, warm = kernel_start(args.dir)
    print(f"kernel start (a 1 MB snapshot, scanner forced): {first:.2f} s first run, {warm:.2f} s cached")
    path = args.file
    if path is None:
        path = args.dir / f"bench-snapshot-{args.size_mb}mb-{args.shape}.pickle"
        started = time.perf_counter()
        entries = make_snapshot_file(path, args.size_mb, args.depth, shape=args.shape)
        print(
            f"made {path}: {path.stat().st_size / 1e6:.0f} MB, {entries:,} entries, {time.perf_counter() - started:.1f} s"
        )
    size = path.stat().st_size
    kinds = list(MEASURE)
    if size > OBJECTS_LIMIT_MB * 1_000_000:
        kinds = ["tuiprof"]
        print(f"pickle.load and no-jit (the restricted unpickler) not run: ~4x the file ({4 * size / 1e9:.0f} GB)")
    try:
        results: dict[str, list[tuple[float, float, int]]] = {kind: [] for kind in kinds}
        for _ in range(args.repeat):
            for kind in kinds:
                results[kind].append(measure(kind, path))
        print(f"{'':8} {'seconds':>8} {'CPU s':>7} {'peak RSS MB':>12} {'RSS / file':>10}")
        best = {kind: min(values) for kind, values in results.items()}
        for kind, (seconds, cpu, rss) in best.items():
            print(f"{kind:8} {seconds:8.2f} {cpu:7.2f} {rss / 1e6:12.0f} {rss / size:10.2f}")
        for kind in ("tuiprof", "no-jit"):
            if kind in best and "pickle" in best:
                print(
                    f"{kind} / pickle: {best[kind][0] / best['pickle'][0]:.2f}x the time, "
                    f"{best[kind][2] / best['pickle'][2]:.2f}x the peak RSS (best of {args.repeat})"
                )
    finally:
        if args.file is None and not args.keep:
            os.unlink(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
