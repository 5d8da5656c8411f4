"""A big gzip trace inflated into a temporary file by a thread while it is decoded.

Inflating one after the other with decoding made a ``.json.gz`` take up to
2x the plain file's time (zlib plus the writes: ~1.5 s a GB on one core; zlib-ng, used
where installed, inflates 2.4x as fast).
Here a thread inflates (zlib and file writes release the GIL) while the
loading thread cuts spans of whole events out of what is already written
(:func:`tuiprof.trace.decode.plan_growing_document`) and decode workers read
them from the file (:func:`tuiprof.trace.parallel.decode_file_span`).

The thread keeps every guard of :func:`tuiprof.trace.source.inflate_gzip`
(bounded pieces, the inflation ratio limit, the check of the first bytes);
its error is raised in whoever waits for bytes next.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import IO

from tuiprof.trace.source import TraceFile, gzip_to_file


class LoadStopped(Exception):
    """The load that wanted the inflated bytes was aborted."""


class InflatingFile:
    """The inflated document as it grows, in the open temporary file ``target``.

    A :class:`tuiprof.trace.decode.GrowingDocument`: slices of what is
    written, and :meth:`wait_for` more.  Use it as a context manager: leaving
    stops the thread (at its next piece) and waits for it.
    """

    def __init__(self, trace: TraceFile, target: IO[bytes]) -> None:
        self.path = target.name
        self._target = target
        self._reader = os.open(target.name, os.O_RDONLY)
        self._written = 0
        self._complete = False
        self._error: BaseException | None = None
        self._stopping = False
        self._changed = threading.Condition()
        self._map: mmap.mmap | None = None
        self._thread = threading.Thread(target=self._inflate, args=(trace,), name="tuiprof-inflate", daemon=True)
        self._thread.start()

    def __enter__(self) -> InflatingFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
        if self._map is not None:
            try:
                self._map.close()
            except BufferError:
                pass  # a view is held by an error's traceback: unmapped with it
        os.close(self._reader)

    def _inflate(self, trace: TraceFile) -> None:
        error: BaseException | None = None
        try:
            gzip_to_file(trace, self)
        except BaseException as exc:  # noqa: BLE001 - raised again in the waiting thread
            error = exc
        with self._changed:
            self._complete, self._error = True, error
            self._changed.notify_all()

    # gzip_to_file writes here
    def write(self, data: bytes) -> None:
        if self._stopping:
            raise LoadStopped
        self._target.write(data)
        self._target.flush()  # readers read the file: nothing may wait in a buffer
        with self._changed:
            self._written += len(data)
            self._changed.notify_all()

    def flush(self) -> None:
        self._target.flush()

    # what the planner and the loader read
    def wait_for(self, size: int) -> tuple[int, bool]:
        """Block until ``size`` bytes are written or the document is complete:
        (bytes written, complete).  Raises the inflation's error, or
        :class:`LoadStopped` once :meth:`stop` was called."""
        with self._changed:
            while self._written < size and not self._complete and not self._stopping:
                self._changed.wait()
            if self._stopping:
                raise LoadStopped
            if self._error is not None:
                raise self._error
            return self._written, self._complete

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(self._written)
        return os.pread(self._reader, max(0, stop - start), start)

    def __len__(self) -> int:
        return self._written

    @property
    def complete(self) -> bool:
        return self._complete

    def complete_bytes(self) -> mmap.mmap | bytes:
        """The whole document (mapped), once inflated: for layouts not planned while growing."""
        size, _ = self.wait_for(1 << 62)
        if size == 0:
            return b""
        if self._map is None:
            self._map = mmap.mmap(self._reader, 0, access=mmap.ACCESS_READ)
        return self._map

    def stop(self) -> None:
        """Stop inflating (the load is over or aborted) and wait for the thread."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        self._thread.join()
