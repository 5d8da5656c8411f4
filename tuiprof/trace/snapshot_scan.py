"""Reading a big allocator snapshot with the opcode scanner (:mod:`tuiprof.trace.snapshot_kernel`).

:class:`SnapshotScan` holds the kernel's arrays, feeds it the file piece by piece (a plain file
read :data:`PIECE_BYTES` at a time, a ``.gz`` inflated piece by piece through
:func:`tuiprof.trace.source.inflate_gzip`: no temporary file, and the file's pages are not held),
grows what the kernel stops for, turns its refusals into one line, and builds the
:class:`~tuiprof.trace.snapshot.Snapshot`, numbered as the Python decoder numbers it.  The kernel
lives in its own module so that its compiled code (cached beside it) survives edits here.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuiprof.errors import TraceError
from tuiprof.trace.snapshot import (
    ACTIONS,
    FX_FIELDS,
    FrameTable,
    PickleStart,
    Segments,
    Snapshot,
    StackTable,
    TraceEntries,
    check_pickle_header,
    memory_claim,
    refused_code,
)
from tuiprof.trace.snapshot_kernel import (
    CODE_OPCODES,
    DONE,
    GROW_FRAMES,
    GROW_MEMO,
    GROW_ROWS,
    GROW_STACK,
    GROW_STACKS,
    GROW_STR,
    KNOWN,
    MAX_STACK,
    MEMO_PAST_END,
    N_COLS,
    N_REC,
    N_SCALARS,
    NEED_MORE,
    PROBLEMS,
    REFUSE_GLOBAL,
    REFUSE_OPCODE,
    REFUSE_STACK_GLOBAL,
    S_ARENA,
    S_ARG0,
    S_ARG1,
    S_ARG3,
    S_BASE,
    S_ERR,
    S_FRAME_END,
    S_MEMO_FINAL,
    S_MEMO_LIMIT,
    S_NBLK,
    S_NDEV,
    S_NEED,
    S_NENT,
    S_NFR,
    S_NSEG,
    S_NSK,
    S_NSTR,
    S_PEND_N,
    S_PEND_OWNER,
    S_POS,
    S_SHAPE_OK,
    S_SKUSED,
    S_TOP,
    TRUNCATED,
    UNSUPPORTED,
    finish,
    rehash,
    scan,
)
from tuiprof.trace.source import ReadProgress, inflate_gzip

PIECE_BYTES = 8 << 20


def _grown(array: np.ndarray, need: int, zeroed: bool = False) -> np.ndarray:
    """``array`` with room for ``need`` along its last axis (at least doubled), used part copied;
    ``zeroed``: the rest is zeros, which the OS gives as pages are first written (a memo grown
    to a key far past the others costs address space, not memory)."""
    size = array.shape[-1]
    if need <= size:
        return array
    bigger = max(2 * size, need)
    shape = (*array.shape[:-1], bigger)
    grown = np.zeros(shape, array.dtype) if zeroed else np.empty(shape, array.dtype)
    grown[..., :size] = array
    return grown


def _table_size(count: int) -> int:
    return 1 << max(10, (4 * count).bit_length())


class SnapshotScan:
    """The kernel's arrays and scalars, fed the file piece by piece; grows what it asks for.

    ``pickle_bytes``: the pickle's size when it is known before the scan (a plain file): a memo
    key from there up is refused as the unpickler path refuses it (``memory_claim``).  Unknown (a
    gzip), a key past the bytes fed so far leaves the file to the unpickler, which knows the size."""

    def __init__(self, source: str, pickle_bytes: int | None = None) -> None:
        self.source = source
        self.buf = np.empty(2 * PIECE_BYTES, np.uint8)
        self.filled = 0
        self.base = 0  # the file offset of buf[0]
        self.total = 0  # bytes of the pickle fed (a gzip's: inflated)
        self.result = NEED_MORE
        sc = self.sc = np.zeros(N_SCALARS, np.int64)
        sc[S_SHAPE_OK] = 1
        sc[S_NSTR] = 1  # string 0: ""
        sc[S_NSK] = 1  # stack 0: no frames
        sc[S_PEND_OWNER] = -1
        sc[S_TOP] = -1
        sc[S_MEMO_FINAL] = pickle_bytes is not None
        sc[S_MEMO_LIMIT] = pickle_bytes or 0
        self.st = np.zeros((1024, N_COLS), np.int64)
        self.memo_k = np.zeros(1 << 12, np.int8)
        self.memo_v = np.zeros(1 << 12, np.int64)
        self.strs = np.zeros((4, 1 << 10), np.int64)
        self.strs[3, 0] = -1
        self.arena = np.empty(1 << 16, np.uint8)
        self.str_tab = np.full(1 << 12, -1, np.int64)
        self.frs = np.zeros((N_REC + 1, 1 << 10), np.int64)
        self.fr_tab = np.full(1 << 12, -1, np.int64)
        self.sk_off = np.zeros((1 << 10) + 1, np.int64)
        self.sk_hash = np.zeros(1 << 10, np.int64)
        self.sk_frames = np.zeros(1 << 14, np.int64)
        self.sk_tab = np.full(1 << 12, -1, np.int64)
        self.ent = np.empty((9, 1 << 12), np.int64)
        self.blk = np.empty((7, 1 << 10), np.int64)
        self.seg = np.empty((5, 1 << 8), np.int64)
        self.dev = np.empty(1 << 4, np.int64)
        names = [name.encode() for name in KNOWN]
        self.known = np.frombuffer(b"".join(names), np.uint8)
        self.known_off = np.concatenate([[0], np.cumsum([len(n) for n in names])]).astype(np.int64)

    @property
    def done(self) -> bool:
        return self.result != NEED_MORE

    def room(self, amount: int) -> memoryview:
        """Where the next ``amount`` bytes go: the bytes already scanned dropped first."""
        pos = int(self.sc[S_POS])
        if pos:
            rest = self.filled - pos
            self.buf[:rest] = self.buf[pos : self.filled]
            self.filled = rest
            self.base += pos
            self.sc[S_BASE] = self.base
            self.sc[S_POS] = 0
        self.buf = _grown(self.buf, self.filled + amount)
        return self.buf.data[self.filled : self.filled + amount]

    def feed(self, data: bytes) -> None:
        """More bytes of the pickle (of a gzip: inflated), scanned at once."""
        self.total += len(data)
        if self.done:
            return
        if not self.sc[S_MEMO_FINAL]:
            self.sc[S_MEMO_LIMIT] = self.total
        self.room(len(data))[:] = data
        self.added(len(data))

    def added(self, amount: int) -> None:
        self.filled += amount
        self.run(final=False)

    def finish(self) -> None:
        if not self.done:
            self.run(final=True)

    def run(self, final: bool) -> None:
        sc = self.sc
        asked = (-1, -1)
        while True:
            result = scan(
                self.buf,
                self.filled,
                final,
                sc,
                self.st,
                self.memo_k,
                self.memo_v,
                self.strs,
                self.arena,
                self.str_tab,
                self.frs,
                self.fr_tab,
                self.sk_off,
                self.sk_hash,
                self.sk_frames,
                self.sk_tab,
                self.ent,
                self.blk,
                self.seg,
                self.dev,
                self.known,
                self.known_off,
            )
            if result == NEED_MORE:
                return
            if result in (DONE, UNSUPPORTED):
                self.result = result
                return
            if result >= REFUSE_GLOBAL:
                self.refuse(result)
            if asked == (result, int(sc[S_POS])):  # grown, and still short: a bug, never a hang
                raise TraceError(self.source, "the snapshot scanner stalled", "read it with TUIPROF_NO_JIT=1")
            asked = (result, int(sc[S_POS]))
            self.grow(result)

    def grow(self, result: int) -> None:
        """Room for what the kernel stopped for (each request leaves it more than it asked)."""
        sc, need = self.sc, int(self.sc[S_NEED])
        if result == GROW_STACK:
            self.st = _grown(self.st.T, min(2 * self.st.shape[0], MAX_STACK)).T.copy()
        elif result == GROW_MEMO:
            self.memo_k = _grown(self.memo_k, need, zeroed=True)
            self.memo_v = _grown(self.memo_v, need)
        elif result == GROW_STR:
            count = int(sc[S_NSTR])
            self.strs = _grown(self.strs, count + 8)
            self.arena = _grown(self.arena, int(sc[S_ARENA]) + need)
            if 2 * (count + 2) > len(self.str_tab):
                self.str_tab = rehash(self.strs[2], 1, count, _table_size(count))
        elif result == GROW_ROWS:
            self.ent = _grown(self.ent, int(sc[S_NENT]) + 8)
            self.blk = _grown(self.blk, int(sc[S_NBLK]) + 8)
            self.seg = _grown(self.seg, int(sc[S_NSEG]) + 8)
            self.dev = _grown(self.dev, int(sc[S_NDEV]) + 8)
        elif result == GROW_FRAMES:
            count = int(sc[S_NFR]) + need
            self.frs = _grown(self.frs, count + 8)
            if 2 * (count + 2) > len(self.fr_tab):
                self.fr_tab = rehash(self.frs[N_REC], 0, int(sc[S_NFR]), _table_size(count))
            self.sk_frames = _grown(self.sk_frames, int(sc[S_SKUSED] + sc[S_PEND_N]) + need + 2)
        elif result == GROW_STACKS:
            count = int(sc[S_NSK])
            self.sk_hash = _grown(self.sk_hash, count + 8)
            self.sk_off = _grown(self.sk_off, len(self.sk_hash) + 1)  # each grown for itself: 8,200 stacks overran it
            if 2 * (count + 2) > len(self.sk_tab):
                self.sk_tab = rehash(self.sk_hash, 1, count, _table_size(count))

    def text(self, sid: int) -> str:
        off, length = int(self.strs[0, sid]), int(self.strs[1, sid])
        return self.arena[off : off + length].tobytes().decode("utf-8", "surrogatepass") if sid else ""

    def refuse(self, result: int) -> None:
        sc = self.sc
        if result == REFUSE_GLOBAL:
            a0, a1, a2, a3 = (int(v) for v in sc[S_ARG0 : S_ARG3 + 1])
            module = self.buf[a0 : a0 + a1].tobytes().decode("utf-8", "backslashreplace")
            name = self.buf[a2 : a2 + a3].tobytes().decode("utf-8", "backslashreplace")
            raise refused_code(self.source, f"{module}.{name}")
        if result == REFUSE_STACK_GLOBAL:
            raise refused_code(self.source, f"{self.text(int(sc[S_ARG0]))}.{self.text(int(sc[S_ARG1]))}")
        if result == REFUSE_OPCODE:
            raise refused_code(self.source, f"the {CODE_OPCODES.get(int(sc[S_ARG0]), 'GLOBAL')} opcode")
        if result == MEMO_PAST_END:
            raise memory_claim(self.source)
        if result == TRUNCATED:
            raise TraceError(self.source, "the pickle is truncated", "copy the file again")
        where = PROBLEMS[int(sc[S_ERR])].format(arg=int(sc[S_ARG0]), pos=self.base + int(sc[S_POS]))
        raise TraceError(self.source, f"the pickle is corrupt ({where})", "copy the file again")

    def snapshot(self, file_bytes: int) -> Snapshot | None:
        """The columns, numbered as the Python decoder numbers them; None: read it with the unpickler."""
        sc = self.sc
        if self.result == DONE and sc[S_FRAME_END] > self.total:
            raise TraceError(self.source, "the pickle is truncated (a FRAME runs past its end)", "copy the file again")
        if self.result != DONE or not sc[S_SHAPE_OK]:
            return None
        nent, nblk, nseg, ndev = (int(sc[i]) for i in (S_NENT, S_NBLK, S_NSEG, S_NDEV))
        stack_map, frame_map, kept, kept_frames = finish(
            sc, self.ent, self.blk, self.seg, self.dev, self.sk_off, self.sk_frames, int(sc[S_NFR])
        )
        if stack_map[0] < 0:
            return None
        ent, blk, seg = self.ent[:, :nent], self.blk[:, :nblk], self.seg[:, :nseg]
        used = np.flatnonzero(stack_map >= 0)
        order = np.empty(kept, np.int64)
        order[stack_map[used]] = used
        starts, lengths = self.sk_off[order], self.sk_off[order + 1] - self.sk_off[order]
        offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        gather = np.repeat(starts - offsets[:-1], lengths) + np.arange(int(offsets[-1]), dtype=np.int64)
        frame_ids = frame_map[self.sk_frames[gather]].astype(np.int32)
        frame_order = np.empty(kept_frames, np.int64)
        known = np.flatnonzero(frame_map >= 0)
        frame_order[frame_map[known]] = known
        texts: dict[int, str] = {}

        def text(sid: int) -> str:
            found = texts.get(sid)
            if found is None:
                found = texts[sid] = self.text(sid)
            return found

        frs = self.frs[:, frame_order]
        frames = FrameTable(
            [text(s) for s in frs[0].tolist()],
            frs[1].tolist(),
            [text(s) for s in frs[2].tolist()],
            {key: [text(s) for s in frs[3 + k].tolist()] for k, key in enumerate(FX_FIELDS)},
        )
        annotate = np.flatnonzero(ent[1] == ACTIONS.index("annotate")).tolist()
        annotations = {row: text(int(ent[8, row])) if ent[8, row] >= 0 else "None" for row in annotate}
        entries = TraceEntries(
            ent[0].astype(np.int32),
            ent[1].astype(np.int8),
            ent[2],  # rows of the kernel's arrays: views, no copies
            ent[3],
            ent[4],
            ent[5],
            stack_map[ent[6]].astype(np.int32),
            ent[7],
            annotations,
            bool(self.dev[:ndev].all()),
        )
        segments = Segments(
            seg[0].astype(np.int32),
            seg[1],
            seg[2],
            seg[3],
            [text(s) for s in seg[4].tolist()],
            blk[0].astype(np.int32),
            blk[1],
            blk[2],
            blk[3],
            blk[4].astype(np.int8),
            stack_map[blk[5]].astype(np.int32),
        )
        devices = max(ndev, int(seg[0].max()) + 1 if nseg else 0)
        return Snapshot(self.source, frames, StackTable(offsets, frame_ids), entries, segments, devices, file_bytes)


def scan_snapshot(handle: Any, head: bytes, size: int, source: str, progress: ReadProgress | None) -> Snapshot | None:
    """Scan the open snapshot file (its first bytes ``head``; a gzip too) into a Snapshot, or
    None where the stream is plain data in a shape the kernel does not follow."""
    gzipped = head == b"\x1f\x8b"
    scanner = SnapshotScan(source, None if gzipped else size)
    if gzipped:
        inflate_gzip(handle.read, size, source, scanner.feed, progress, start=PickleStart(source))
    else:
        check_pickle_header(head, source)
        done = 0
        while not scanner.done:
            try:
                amount = handle.readinto(scanner.room(PIECE_BYTES))
            except OSError as exc:
                raise TraceError(source, f"cannot be read ({exc.strerror})", "check the path") from None
            if not amount:
                break
            done += amount
            if progress:
                progress(done, size)
            scanner.added(amount)
        scanner.total = size  # bytes after STOP are not read, but there
    scanner.finish()
    return scanner.snapshot(size)
