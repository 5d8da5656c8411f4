#!/usr/bin/env python3
"""Time opening a trace: stdlib ``json.load`` versus tuiprof to analysis-ready.

Each measurement runs in its own process (so peak RSS is its own), in the
same run, alternating, and the ratios are what to trust: these machines are
noisy, single absolute times are not.  "worker MB" is the peak RSS of the
largest decode worker process tuiprof started (0 when it decoded in-process);
the workers run at the same time as the parent, one per core.  "decode" is
until the events are columns in the parent, "analysis" the rest.

Two ways to call it:

    # the trace shapes of issues 16 and 29, each made at --size-mb by make_big_trace.py
    python scripts/bench_load.py --shapes [--size-mb 1024] [--gzip] [--cores 1,2] [--dir /tmp] [--keep] [--reopen]
    # given files
    python scripts/bench_load.py /tmp/big.json [/tmp/big.json.gz] [--repeat 2] [--cache warm|cold|as-is]

Shapes (events differ in size and kind, and the engine's cost is per event):
``mi300`` a with_stack DDP training trace (326 bytes an event, 22 % python
frames, GPU kernels), ``ns`` small events with float timestamps on absolute
epoch microseconds (224 bytes an event), ``cpu`` the shipped resnet18 sample
(37 % python frames, 25 % instant events), ``pyflow`` the python-and-flow-heavy
inference shape (``make_big_trace.py --synthetic python-flow``: 56 % python frames,
16 % flows, 240 bytes an event).  ``--cores 1,2`` runs tuiprof once
per CPU set size (pinned with ``sched_setaffinity``: workers inherit it) and
prints the speed-up.

The cache (tuiprof/trace/cache.py) lives in a private ``XDG_CACHE_HOME`` made
for the run and emptied before every first open, so ``tuiprof`` is always a
first open (its cache look-up included).  ``--reopen`` adds, in the same run:
``nocache`` (``TUIPROF_NO_CACHE=1``: the first open without any cache code),
then ``tuiprof`` writes the cache after its clock stops, and ``reopen`` opens the
trace again from it ("decode" is then the store read back from the cache); it
prints the cache's size on disk against the file.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "traces"
SHAPES = {
    "mi300": SHARED / "tracelens__mi300__ddp_resnet18_no_pool__train_resnet18.json.gz",
    "ns": SHARED / "hta__ns_resolution_trace__rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz",
    "cpu": ROOT / "sample_traces" / "resnet18_cpu.pt.trace.json.gz",
    "pyflow": None,  # made by make_big_trace.py --synthetic python-flow
}

CHILD = r"""
import gc, gzip, json, os, resource, sys, time
path, mode, cpus, save = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "save"
if cpus:
    os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
started = time.perf_counter()
decoded = started
if mode == "json":
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        document = json.load(handle)
    events = len(document["traceEvents"] if isinstance(document, dict) else document)
else:
    sys.path.insert(0, ROOT)
    from tuiprof.allocator import return_freed_memory
    return_freed_memory()  # as the tuiprof command does
    from tuiprof.analysis.build import analyze
    from tuiprof.trace import load_trace
    store = load_trace(path)
    decoded = time.perf_counter()
    model = analyze(store)
    # analysis-ready: every table the explorer opens with
    model.operators()
    sum(1 for _ in model.modules.walk()); len(model.kernels); len(model.steps); len(model.memory)
    events = model.info.event_count
    if mode == "reopen" and store.cache_key is not None:
        raise SystemExit("reopen: the trace was not in the cache")
elapsed = time.perf_counter() - started
if save:  # after the clock: what the commands do after their output
    from tuiprof.trace.cache import save as save_store
    if not save_store(store):
        raise SystemExit("the cache was not written")
own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
print(json.dumps({"seconds": elapsed, "decode": decoded - started, "cpu_seconds": cpu,
                  "peak_rss_mb": own.ru_maxrss / 1024, "worker_rss_mb": workers.ru_maxrss / 1024,  # the largest worker
                  "events": events}))
""".replace("ROOT", repr(str(ROOT)))

HEADER = (
    f"{'file':<24} {'MB':>6} {'Mevents':>7} {'mode':<8} {'cpus':>4} {'seconds':>7} {'decode':>6} {'analysis':>8} "
    f"{'cpu s':>6} {'MB/s':>5} {'Mev/s':>5} {'RSS MB':>6} {'RSS/file':>8} {'worker MB':>9}"
)


def prepare_cache(path: Path, cache: str) -> None:
    """Start each run with the file in the same state, whichever tool ran before.

    ``warm``: read it once, so it is in the page cache (as after copying it
    over). ``cold``: drop the page cache (root only), so it comes from disk.
    Measured here: a cold read of 1 GB alone takes ~2 s, and the VM evicts
    the cache after memory-hungry runs (json.load peaks at 5 GB), so without
    this the tool that runs second is measured cold."""
    if cache == "warm":
        with open(path, "rb") as handle:
            while handle.read(16 << 20):
                pass
    elif cache == "cold":
        os.sync()
        try:
            Path("/proc/sys/vm/drop_caches").write_text("3\n")
        except OSError as exc:
            raise SystemExit(f"--cache cold needs root on Linux ({exc})") from None


CACHE_HOME = Path(os.environ.get("TMPDIR", "/tmp")) / f"tuiprof-bench-cache-{os.getpid()}"


def measure(path: Path, mode: str, cpus: str = "", save: bool = False) -> dict:
    """One run in its own process; the cache is a private one, emptied before a first open."""
    env = dict(os.environ, XDG_CACHE_HOME=str(CACHE_HOME), TUIPROF_NO_CACHE="1" if mode == "nocache" else "0")
    if mode != "reopen":
        shutil.rmtree(CACHE_HOME, ignore_errors=True)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path), mode, cpus, "save" if save else ""],
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        raise SystemExit(f"{mode} on {path} failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def uncompressed_size(path: Path) -> int:
    if not path.name.endswith(".gz"):
        return path.stat().st_size
    with open(path, "rb") as handle:  # gzip trailer: size mod 2**32
        handle.seek(-4, os.SEEK_END)
        trailer = int.from_bytes(handle.read(4), "little")
    size = trailer
    while size < path.stat().st_size:
        size += 1 << 32
    return size


def make_shape(shape: str, size_mb: float, directory: Path, with_gzip: bool) -> list[Path]:
    """The shape's big trace (made once, reused while it exists), and its ``gzip -1`` copy."""
    plain = directory / f"tuiprof-bench-{shape}-{size_mb:g}MB.json"
    if not plain.exists():
        partial = plain.with_suffix(".partial.json")
        source = SHAPES[shape]
        made_from = ["--from", str(source)] if source is not None else ["--synthetic", "python-flow"]
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "scripts" / "make_big_trace.py"),
                "--size-mb",
                str(size_mb),
                *made_from,
                "-o",
                str(partial),
            ],
            check=True,
        )
        partial.rename(plain)
    paths = [plain]
    if with_gzip:
        packed = plain.with_name(plain.name + ".gz")
        if not packed.exists():  # level 1, as torch's tensorboard_trace_handler(use_gzip=True) writes
            partial = packed.with_suffix(".partial")
            with open(plain, "rb") as source, gzip.open(partial, "wb", compresslevel=1) as target:
                shutil.copyfileobj(source, target, 16 << 20)
            partial.rename(packed)
        paths.append(packed)
    return paths


def bench_file(path: Path, modes: list[tuple[str, str]], repeat: int, cache: str) -> dict[tuple[str, str], dict]:
    """Best of ``repeat`` alternating runs per (mode, cpus); one table line each."""
    size_mb = uncompressed_size(path) / 1e6
    best: dict[tuple[str, str], dict] = {}
    reopen = ("reopen", "") in modes
    cache_bytes = 0
    for _ in range(repeat):
        for mode, cpus in modes:
            prepare_cache(path, cache)
            run = measure(path, mode, cpus, save=reopen and (mode, cpus) == ("tuiprof", ""))
            if reopen and (mode, cpus) == ("tuiprof", ""):
                cache_bytes = sum(f.stat().st_size for f in CACHE_HOME.rglob("*") if f.is_file())
            if (mode, cpus) not in best or run["seconds"] < best[(mode, cpus)]["seconds"]:
                best[(mode, cpus)] = run
    for (mode, cpus), run in best.items():
        seconds = run["seconds"]
        analysis = seconds - run["decode"] if mode != "json" else 0.0
        print(
            f"{path.name[-24:]:<24} {size_mb:6.0f} {run['events'] / 1e6:7.2f} {mode:<8} "
            f"{_cpu_count(cpus):>4} {seconds:7.2f} {run['decode']:6.2f} {analysis:8.2f} "
            f"{run['cpu_seconds']:6.2f} {size_mb / seconds:5.0f} {run['events'] / seconds / 1e6:5.2f} {run['peak_rss_mb']:6.0f} "
            f"{run['peak_rss_mb'] / size_mb:8.2f} {run['worker_rss_mb']:9.0f}",
            flush=True,
        )
    full = [key for key in best if key[0] == "tuiprof"]  # first opens
    fastest = min(full, key=lambda key: best[key]["seconds"])
    if ("json", "") in best:  # against tuiprof at its best (on a busy machine, fewer cores can win)
        speedup = best[("json", "")]["seconds"] / best[fastest]["seconds"]
        memory = best[fastest]["peak_rss_mb"] / best[("json", "")]["peak_rss_mb"]
        print(f"{'':<24} ratio: tuiprof is {speedup:.1f}x faster than json.load, with {memory:.2f}x its peak RSS")
    every = ("tuiprof", "")
    if reopen:
        first, again, plain = best[every], best[("reopen", "")], best[("nocache", "")]
        print(
            f"{'':<24} ratio: reopen analysis-ready in {again['seconds'] / first['seconds']:.2f}x the first open "
            f"(store from the cache at {again['decode']:.2f} s); first open {first['seconds'] / plain['seconds']:.2f}x "
            f"the one without cache code; cache {cache_bytes / 1e6:.0f} MB on disk, "
            f"{cache_bytes / path.stat().st_size:.2f}x the file"
        )
    for key in full:
        if key != every:
            print(
                f"{'':<24} ratio: {_cpu_count('')} cpus are {best[key]['seconds'] / best[every]['seconds']:.2f}x "
                f"faster than {_cpu_count(key[1])}"
            )
    return best


def _cpu_count(cpus: str) -> int:
    """CPUs a run may use: the pinned set, or all this process may use."""
    return len(cpus.split(",")) if cpus else len(os.sched_getaffinity(0))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument(
        "--shapes",
        nargs="?",
        const="mi300,ns,cpu,pyflow",
        default=None,
        help="bench the issues' trace shapes (comma list of mi300, ns, cpu, pyflow; default all)",
    )
    parser.add_argument("--size-mb", type=float, default=1024, help="size of each shape's trace (default 1024)")
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(os.environ.get("TMPDIR", "/tmp")),
        help="where the shapes' traces are made (default $TMPDIR or /tmp)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the shapes' traces for the next run")
    parser.add_argument("--gzip", action="store_true", help="also bench each shape's gzip -1 copy")
    parser.add_argument("--cores", default="", help="e.g. 1,2: also run tuiprof pinned to that many CPUs")
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs of each mode; the best is kept")
    parser.add_argument("--skip-json", action="store_true", help="tuiprof only (for sizes stdlib cannot hold)")
    parser.add_argument(
        "--reopen",
        action="store_true",
        help="also time the first open without cache code and the reopen from the cache",
    )
    parser.add_argument(
        "--cache",
        choices=("warm", "cold", "as-is"),
        default="warm",
        help="page-cache state of the file before each run (default: warm)",
    )
    args = parser.parse_args()
    if not args.files and not args.shapes:
        parser.error("give trace files or --shapes")
    modes = [] if args.skip_json else [("json", "")]
    if args.reopen:
        modes.append(("nocache", ""))
    modes.append(("tuiprof", ""))
    if args.reopen:
        modes.append(("reopen", ""))
    available = sorted(os.sched_getaffinity(0))
    for count in (int(c) for c in args.cores.split(",") if c):
        if count < len(available):
            modes.append(("tuiprof", ",".join(map(str, available[:count]))))
    print(HEADER, flush=True)
    made: list[Path] = []
    try:
        for path in args.files:
            bench_file(path, modes, args.repeat, args.cache)
        for shape in args.shapes.split(",") if args.shapes else []:
            paths = make_shape(shape, args.size_mb, args.dir, args.gzip)
            made += paths
            results = [
                bench_file(path, modes if i == 0 else [m for m in modes if not m[1]], args.repeat, args.cache)
                for i, path in enumerate(paths)
            ]
            if len(results) == 2:
                ratio = results[1][("tuiprof", "")]["seconds"] / results[0][("tuiprof", "")]["seconds"]
                print(f"{'':<24} ratio: {shape} .json.gz takes {ratio:.2f}x the plain file's time")
    finally:
        shutil.rmtree(CACHE_HOME, ignore_errors=True)
        if not args.keep:
            for path in made:
                path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
