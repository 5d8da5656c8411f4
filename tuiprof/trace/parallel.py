"""Decoding spans of a trace file in worker processes.

JSON decoding is the one step of opening a trace that no library runs on
several cores, and on a big trace it is most of the time.  Each worker reads
its span from the file itself (nothing is sent to it but a path and two
offsets), decodes it with msgspec, turns it into columns (:func:`columns_from_events`)
and sends those back pickled: ~100 bytes an event instead of a struct.

Workers are plain ``python`` processes talking pickle over pipes, not
``multiprocessing``: its ``spawn`` re-runs the caller's main script (a user's
unguarded script would loop), and ``fork`` from the explorer's loader thread
is unsafe in a threaded process.

A worker is started isolated (``python -I``: no current directory, no
``PYTHON*`` variables, no user site on ``sys.path``) with the parent's
absolute ``sys.path`` minus the current directory, and tuiprof's own root
last: a ``numpy.py``, ``msgspec.py`` or ``tuiprof/`` in the directory the
user runs tuiprof from is never imported.  A worker ends when its request
pipe closes or its parent dies (it checks every half second), so none
outlives a killed parent.
"""

from __future__ import annotations

import gc
import mmap
import os
import pickle
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from tuiprof.cleanup import forget_process, register_process
from tuiprof.trace.columns import ChunkColumns, columns_from_events
from tuiprof.trace.decode import CHUNK_BYTES, DecodeReport, decode_span, decode_text

# Below this, starting workers (~0.2 s: a fresh interpreter importing msgspec
# and numpy) costs more than it saves on 2 cores (scripts/bench_load.py).
PARALLEL_MIN_BYTES = 64 << 20
MAX_WORKERS = 16
# Set by callers that already run one process per file (analysis/ranks.py): no workers inside workers.
WORKERS_ENV = "TUIPROF_DECODE_WORKERS"
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
Span = tuple[int, int]  # byte offsets of whole events in the file: [start, end)
_END = object()


def usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(size: int) -> int:
    """How many decode processes to start for a file (1: decode in this process)."""
    if size < PARALLEL_MIN_BYTES:
        return 1
    cap = int(os.environ.get(WORKERS_ENV) or MAX_WORKERS)
    return max(1, min(usable_cores(), -(-size // CHUNK_BYTES), MAX_WORKERS, cap))


def decode_columns(data, start: int, end: int) -> tuple[ChunkColumns, DecodeReport]:
    """One span of mapped (or in-memory) bytes -> columns; a mapped span's pages are released after."""
    report = DecodeReport()
    result = columns_from_events(decode_span(data, start, end, report)), report
    release_pages(data, start, end)
    return result


def decode_file_span(path: str, start: int, end: int) -> tuple[ChunkColumns, DecodeReport]:
    """One span of the file at ``path`` -> columns, read (not mapped) from the file.

    Read, so that the file may still be growing (a gzip trace being inflated
    into it, :mod:`tuiprof.trace.inflating`) and so that the span costs this
    process its copy only: decoding needs a copy with brackets around it anyway.
    """
    report = DecodeReport()
    text = bytearray(end - start + 2)
    text[0:1], text[-1:] = b"[", b"]"
    with open(path, "rb", buffering=0) as handle:
        handle.seek(start)
        view, done = memoryview(text)[1:-1], 0
        while done < len(view):
            count = handle.readinto(view[done:])
            if not count:
                raise EOFError(f"{path} ends before byte {end}")
            done += count
    return columns_from_events(decode_text(text, report)), report


def release_pages(data, start: int, end: int) -> None:
    """Drop the mapped pages of a decoded span from this process's memory (if mapped).

    They are clean file pages (the kernel reloads them if touched again);
    without this, a 1 GB file counts 1 GB towards peak RSS while decoding.
    """
    if not isinstance(data, mmap.mmap) or not hasattr(mmap, "MADV_DONTNEED"):
        return
    first = start - start % mmap.PAGESIZE
    last = end - end % mmap.PAGESIZE
    if last > first:
        data.madvise(mmap.MADV_DONTNEED, first, last - first)


class DecodeWorkers:
    """Worker processes, started before the file is planned (their start-up
    overlaps with it), then handed spans as they become free.

    Spans go to whichever worker has room (``IN_FLIGHT`` spans each), not in
    turn: handed in turn and read back in file order, workers ran in lockstep,
    each round as slow as its slowest span (a worker that finished early sat
    blocked on its full answer pipe).  A reader thread per worker takes its
    answers off the pipe as they come; the loader puts them back in file order.
    At most ``WINDOW`` spans per worker are out (handed and not yet merged), so
    a fast worker cannot pile up answers while a slow one holds the next span.
    """

    IN_FLIGHT = 2  # a worker's next span is waiting in its pipe when it finishes one
    # Spans out per worker (handed, not yet merged): a worker may run this far ahead of the
    # slowest, holding ~10 % of a span's bytes per answer (2.4 MB for a 16 MB span).
    WINDOW = 4

    def __init__(self, count: int) -> None:
        command = worker_command()
        self.processes: list[subprocess.Popen] = []
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._free: queue.SimpleQueue = queue.SimpleQueue()  # a worker's index per span it has room for
        self._answers: list[queue.SimpleQueue] = []
        self._dead: set[int] = set()  # workers whose pipe closed (the feeder hands them nothing more to do)
        self._window = threading.Semaphore(self.WINDOW * count)
        try:
            for _ in range(count):
                process = subprocess.Popen(
                    command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
                )
                register_process(process)  # killed on SIGTERM/SIGHUP/exit too
                self.processes.append(process)
        except OSError:
            self.close()
            raise

    def decode(self, path: str, spans: Iterable[Span]) -> Iterator[tuple[Span, ChunkColumns, DecodeReport]]:
        """Decoded spans of the file at ``path``, in file order.

        ``spans`` may block between spans (a file still being inflated): a
        feeder thread hands each span to a free worker as soon as it comes,
        while this thread merges answers in file order.  A span a worker
        failed on (or after it died) is decoded here.  An error raised by
        ``spans`` is raised here, after the spans before it.
        """
        handed: queue.SimpleQueue = queue.SimpleQueue()  # (span, worker) in file order, then _END or an error
        for worker, process in enumerate(self.processes):
            self._answers.append(queue.SimpleQueue())
            self._start(self._read_answers, worker, process)
            for _ in range(self.IN_FLIGHT):
                self._free.put(worker)
        self._start(self._feed, path, spans, handed)
        gone: set[int] = set()  # workers whose answers have all been read: their spans are decoded here
        while (item := handed.get()) is not _END:
            if isinstance(item, BaseException):
                raise item
            span, worker = item
            answer = _END if worker in gone else self._answers[worker].get()
            if answer is _END:
                gone.add(worker)
            yield (span, *answer) if isinstance(answer, tuple) else (span, *decode_file_span(path, *span))
            self._window.release()

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, name=f"tuiprof-decode-{target.__name__}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _read_answers(self, worker: int, process: subprocess.Popen) -> None:
        """A worker's answers (columns, or an error text), in the order it was handed its spans;
        _END once it is gone (then its spans are decoded by the loader)."""
        answers = self._answers[worker]
        while True:
            try:
                answers.put(pickle.load(process.stdout))  # type: ignore[arg-type]
            except (EOFError, pickle.UnpicklingError, OSError, ValueError):
                self._dead.add(worker)
                answers.put(_END)
                self._free.put(worker)  # never waited for again: the feeder must not block on it
                return
            self._free.put(worker)

    def _feed(self, path: str, spans: Iterable[Span], handed: queue.SimpleQueue) -> None:
        try:
            for span in spans:
                self._window.acquire()
                worker = self._free.get()
                if self._closed:
                    return
                if worker in self._dead:
                    self._free.put(worker)  # the loader decodes its spans: room again at once
                else:
                    pipe = self.processes[worker].stdin
                    try:
                        pickle.dump((path, *span), pipe)
                        pipe.flush()
                    except (OSError, ValueError):
                        pass  # that worker is gone: its reader says so, and the loader decodes the span
                handed.put((span, worker))
        except BaseException as exc:  # noqa: BLE001 - raised again by decode(), in the loading thread
            handed.put(exc)
        finally:
            for process in self.processes:
                try:
                    process.stdin.close()  # type: ignore[union-attr]
                except (OSError, ValueError):
                    pass
            handed.put(_END)

    def close(self) -> None:
        """Stop every worker (at once when a load is aborted), and the threads with them.

        The feeder may be waiting in ``spans`` (for bytes still being
        inflated): whoever made ``spans`` stops it first.
        """
        self._closed = True
        for _ in self.processes:
            self._window.release()  # a feeder waiting for room wakes up, and returns
        for process in self.processes:
            process.kill()
            process.wait()
            forget_process(process)
        for thread in self._threads:
            thread.join()
        for process in self.processes:
            for pipe in (process.stdin, process.stdout):
                if pipe is not None and not pipe.closed:
                    try:
                        pipe.close()
                    except OSError:
                        pass


def worker_command(module: str = __name__) -> list[str]:
    """An isolated interpreter that runs ``module``'s ``_serve()``, with a ``sys.path``
    holding no directory a user's current directory could plant a module in.

    Every worker process tuiprof starts is started with this command (decode
    workers here, rank workers in :mod:`tuiprof.analysis.ranks`).
    """
    cwd = os.getcwd()
    paths = [p for p in sys.path if p and os.path.isabs(p) and os.path.realpath(p) != os.path.realpath(cwd)]
    paths = [p for p in paths if p != _PACKAGE_ROOT] + [_PACKAGE_ROOT]
    code = f"import sys; sys.path[:] = {paths!r}; from {module} import _serve; _serve()"
    return [sys.executable, "-I", "-c", code]


def watch_parent() -> None:
    """In a worker: end this process as soon as its parent is gone (SIGKILLed), even mid-task."""
    threading.Thread(target=_exit_with_parent, args=(os.getppid(),), daemon=True).start()


def _exit_with_parent(parent: int) -> None:
    """A thread of the worker: end the process when its parent is gone (SIGKILLed)."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(0)


def _serve() -> None:
    """Worker loop: decode each requested span, answer with its columns (or an error text)."""
    requests, answers = sys.stdin.buffer, sys.stdout.buffer
    watch_parent()
    # glibc's allocator is left as it is here (not allocator.return_freed_memory()): a worker
    # reuses the same ~100 MB span after span, and fresh mappings for each span's buffers
    # cost it ~10 % more CPU in page faults for no smaller peak (scripts/bench_load.py).
    gc.disable()  # decoded structs hold no cycles: collections would only cost time (~15 %)
    while True:
        try:
            path, start, end = pickle.load(requests)
        except EOFError:
            return
        try:
            answer: object = decode_file_span(path, start, end)
        except Exception as exc:  # noqa: BLE001 - the parent decodes the span itself
            answer = f"{type(exc).__name__}: {exc}"
        try:
            pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
            answers.flush()
        except OSError:  # the parent closed the pipe (aborted, or died)
            return
