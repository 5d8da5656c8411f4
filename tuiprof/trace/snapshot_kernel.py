"""The pickle opcode scanner for big allocator snapshots: the file's bytes straight into columns (the kernel).

The stdlib unpickler builds every trace entry as Python objects (~4x the file in memory, ~3 s
for 200 MB) before :mod:`tuiprof.trace.snapshot` turns them into columns.  This module reads the
opcode stream itself, in a numba kernel (:mod:`tuiprof.trace.jit`), and executes nothing: a small
stack machine for the opcodes protocols 1-5 write for plain data, which follows the snapshot
schema (top dict -> segments -> blocks -> frames; device_traces -> entries -> frames) and writes
integers into column arrays; strings are interned by a hash of their bytes (each distinct string
copied once, its UTF-8 checked once), so Python decodes only the distinct strings.

Decisions:

- **Refused, not run.** GLOBAL, STACK_GLOBAL, INST (one line naming the global), REDUCE, BUILD,
  OBJ, NEWOBJ(_EX), PERSID, BINPERSID and EXT1/2/4 (naming the opcode: the stream gives no global)
  stop the scan at once.
- **Malformed streams are the kernel's to refuse**: truncated, an unknown opcode, a stack
  underflow, a missing MARK, a memo key never stored, a string that is not UTF-8, an unhashable
  key; one line each (:data:`PROBLEMS`).  The restricted unpickler never sees them.  A memo key
  at or past the pickle's size (:data:`MEMO_PAST_END`) is the unpickler path's own line.
- **One contract with the unpickler** (docs/snapshots.md): equal columns or the same line for
  any input; what the kernel does not follow, the unpickler reads.
- **Plain data in another shape falls back.**  Where the stream is plain data but not the shape
  the kernel follows (a wrong type, a tuple where torch writes a list, a shared entry, a
  duplicate key, a set, protocol 0's text opcodes, INT/LONG/PUT/GET lines spelt otherwise than
  ``pickle.dumps`` does...), the scan goes on to the end as a check only
  (so a code opcode or a truncation later in the file is still refused here), then
  :func:`scan_snapshot` returns None and the caller reads the file with the restricted
  unpickler, which names what is wrong.  The kernel's shape decisions are made when a value is
  pushed (its parent and key are on the stack); the one ambiguity of the stream (after a fresh
  container whose items are ignored, a string is its key or its parent's next key) is read as
  the parent's key, and a SETITEM that says otherwise makes it fall back.
- **Torch's shared frames.**  torch pickles each distinct frame dict once and refers to it after
  (BINGET), within a stack too (a nested module stack holds module.py's frames once per level).
  A frame referred to inside the batch that wrote it, with nothing of its own above it on the
  stack, is complete: it is interned there (:func:`_frame_done`).  A frame or stack interned is
  never changed after: SETITEM(S)/APPEND(S) on one falls back.
- **Every allocation is bounded by bytes read.**  Arrays grow when the kernel asks (it stops
  before the opcode that needs room, Python grows, the opcode runs again): each new row, string,
  frame, stack or stack slot is paid for by at least one byte of the file.  The memo is indexed
  by key and may have gaps (MEMOIZE stores at the count of keys stored, as the unpickler does),
  up to the pickle's size (``S_MEMO_LIMIT``: a plain file's size; a gzip's bytes inflated so far,
  past which the unpickler decides): ``LONG_BINPUT 0x7fffffff`` in a small file is refused
  instead of sizing a 16 GB memo, and a gap costs address space only (grown zeroed).  The file
  is read in pieces of
  :data:`tuiprof.trace.snapshot_scan.PIECE_BYTES` (a ``.gz`` inflated piece by piece through
  :func:`tuiprof.trace.source.inflate_gzip`, no temporary file), so the file's pages are not
  held: resident memory is the columns, the memo (9 bytes per stored object) and one piece.
- **Ids as the Python decoder gives them.**  The kernel numbers frames and stacks in file order
  (segments before device_traces); :func:`finish` renumbers them in the decoder's order (stacks
  by first use in the entries, then the blocks; frames by first appearance in those stacks), so
  both paths give equal columns (tests/unit/test_snapshot_scan.py checks every column).
- **Only where it pays** (``SCAN_MIN_BYTES`` in :mod:`tuiprof.trace.snapshot`): from 32 MB when
  the compiled kernel is cached (beside this module, or where :func:`tuiprof.trace.jit.kernel_cache_dir`
  says), from 1 GB when it is not.  Measured on the
  2-core dev VM: importing numba and loading the cached kernel ~0.4 s, then ~9 ms a MB (1 GB:
  ~7 s of CPU to columns, ~9 s to analysis-ready); the unpickler path ~30 ms a MB, so the
  break-even is ~15 MB; the first compile takes ~30-40 s, which the first open pays back from
  ~1 GB.  ``TUIPROF_SNAPSHOT_SCAN_BYTES`` overrides both (the tests and
  ``scripts/fuzz.py --snapshot-scan`` set 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuiprof.trace.jit import numba_module
from tuiprof.trace.snapshot import ACTIONS

_numba = numba_module()
_jit: Any = _numba.njit(boundscheck=True, cache=True, nogil=True) if _numba is not None else (lambda f: f)
# The helpers of the opcode loop are inlined into it: a call passes each array with its reference
# count raised and lowered (atomic), which made the loop 3x slower.
_inline: Any = (
    _numba.njit(boundscheck=True, cache=True, nogil=True, inline="always") if _numba is not None else (lambda f: f)
)

# Stack slot kinds.
K_MARK, K_NONE, K_BOOL, K_INT, K_BADINT, K_FLOAT, K_STR, K_BYTES = 0, 1, 2, 3, 4, 5, 6, 7
K_OPAQUE = 8  # a complete value the schema ignores (a tuple, a closed container of ignored content)
K_CONT = 9  # an open container (EMPTY_DICT/EMPTY_LIST not yet taken by its parent)
K_FRAME = 10  # a complete frame dict: V is its frame id
K_STACK = 11  # a complete frames list: V is its stack id
K_DONE = 12  # a complete entry, block, segment or list of them (never shared in a snapshot)
K_EMPTY = K_MARK  # memo: nothing stored (a MARK never is): a zeroed memo is empty

# Container roles.
R_ODICT, R_OLIST, R_TOP, R_SEGMENTS, R_SEGMENT, R_BLOCKS, R_BLOCK, R_TRACES, R_TRACE, R_ENTRY, R_FRAMES, R_FRAME = (
    range(12)
)

# Stack columns.
C_KIND, C_ROLE, C_V, C_PARENT, C_KEY, C_MEMO, C_SEEN, C_REC = 0, 1, 2, 3, 4, 5, 6, 7
N_REC = 6  # a frame's filename, line, name, fx_node_op, fx_node_name, fx_original_trace
N_COLS = C_REC + N_REC
KEYPOS, LISTITEM, NOKEY = -2, -3, -4  # C_KEY besides a value's key code (-1: a key the schema ignores)

# Known strings: keys, then actions (code - FIRST_ACTION), then block states.
KNOWN_KEYS = (
    "segments",
    "device_traces",
    "device",
    "address",
    "total_size",
    "stream",
    "segment_type",
    "blocks",
    "size",
    "requested_size",
    "state",
    "frames",
    "filename",
    "line",
    "name",
    "fx_node_op",
    "fx_node_name",
    "fx_original_trace",
    "action",
    "addr",
    "time_us",
    "device_free",
    "user_metadata",
)
(
    KY_SEGMENTS,
    KY_TRACES,
    KY_DEVICE,
    KY_ADDRESS,
    KY_TOTAL,
    KY_STREAM,
    KY_STYPE,
    KY_BLOCKS,
    KY_SIZE,
    KY_REQUESTED,
    KY_STATE,
    KY_FRAMES,
    KY_FILENAME,
    KY_LINE,
    KY_NAME,
    KY_FXOP,
    KY_FXNAME,
    KY_FXTRACE,
    KY_ACTION,
    KY_ADDR,
    KY_TIME,
    KY_FREE,
    KY_META,
) = range(len(KNOWN_KEYS))
KNOWN_ACTIONS = ACTIONS  # the action codes are the columns' (trace/snapshot.py)
FIRST_ACTION = len(KNOWN_KEYS)
OTHER_ACTION = len(KNOWN_ACTIONS)
ANNOTATE = KNOWN_ACTIONS.index("annotate")
KNOWN_STATES = ("active_allocated", "active_pending_free", "inactive", "active_awaiting_free")
STATE_CODES = (0, 1, 2, 1)
FIRST_STATE = FIRST_ACTION + len(KNOWN_ACTIONS)
KNOWN = KNOWN_KEYS + KNOWN_ACTIONS + KNOWN_STATES
TIME_SEEN = 1 << 40  # C_SEEN bit: an entry's time_us is an integer (not None)
MAX_DEVICES = 1 << 12

# Scalars.
(
    S_POS,
    S_SP,
    S_NSTR,
    S_ARENA,
    S_NFR,
    S_NSK,
    S_SKUSED,
    S_NENT,
    S_NBLK,
    S_NSEG,
    S_NDEV,
    S_MEMOLEN,
    S_SHAPE_OK,
    S_NEED,
    S_ERR,
    S_ARG0,
    S_ARG1,
    S_ARG2,
    S_ARG3,
    S_PEND_OWNER,
    S_PEND_N,
    S_TOP,
    S_TOPKEYS,
    S_FRAME_END,
    S_BASE,
    S_MEMO_LIMIT,
    S_MEMO_FINAL,
) = range(27)
N_SCALARS = 27

# Kernel results.
NEED_MORE, DONE, GROW_STACK, GROW_MEMO, GROW_STR, GROW_ROWS, GROW_FRAMES, GROW_STACKS = range(8)
REFUSE_GLOBAL, REFUSE_STACK_GLOBAL, REFUSE_OPCODE, CORRUPT, TRUNCATED, UNSUPPORTED, MEMO_PAST_END = range(10, 17)

# CORRUPT's S_ERR codes.
E_OPCODE, E_UNDERFLOW, E_NOMARK, E_ODD, E_MEMO_MISSING, E_UTF8, E_UNHASHABLE, E_NOSTOP, E_DEEP = range(9)
# Values on the stack at once: a snapshot has ~1,000 (a batch) plus its nesting.  A slot is 104
# bytes: unbounded, 1 GB of MARK opcodes would ask for 100 GB; past this the pickle is refused.
MAX_STACK = 1 << 20
PROBLEMS = {
    E_OPCODE: "an invalid opcode {arg:#04x} at byte {pos:,}",
    E_UNDERFLOW: "the stack runs out at byte {pos:,}",
    E_NOMARK: "a MARK is missing at byte {pos:,}",
    E_ODD: "SETITEMS with an odd number of items at byte {pos:,}",
    E_MEMO_MISSING: "memo key {arg:,} read before it is stored (byte {pos:,})",
    E_UTF8: "a string that is not UTF-8 at byte {pos:,}",
    E_UNHASHABLE: "a dict key that is a list or dict at byte {pos:,}",
    E_NOSTOP: "STOP with nothing on the stack at byte {pos:,}",
    E_DEEP: "more than {arg:,} values at once on its stack at byte {pos:,}, nested or unbatched",
}
CODE_OPCODES = {
    ord("c"): "GLOBAL",
    0x93: "STACK_GLOBAL",
    ord("i"): "INST",
    ord("o"): "OBJ",
    ord("R"): "REDUCE",
    ord("b"): "BUILD",
    0x81: "NEWOBJ",
    0x92: "NEWOBJ_EX",
    ord("P"): "PERSID",
    ord("Q"): "BINPERSID",
    0x82: "EXT1",
    0x83: "EXT2",
    0x84: "EXT4",
}
# Bytes of argument after each opcode, and of those, how many hold the length of a payload after it.
ARG_BYTES = np.zeros(256, np.int64)
LENGTH_BYTES = np.zeros(256, np.int64)
for _ops, _bytes in (
    (
        (0x80, 0x4B, 0x68, 0x71, 0x43, 0x8C, 0x8A),
        1,
    ),  # PROTO BININT1 BINGET BINPUT SHORT_BINBYTES SHORT_BINUNICODE LONG1
    ((0x4D,), 2),  # BININT2
    ((0x4A, 0x6A, 0x72, 0x58, 0x42, 0x8B), 4),  # BININT LONG_BINGET LONG_BINPUT BINUNICODE BINBYTES LONG4
    ((0x47, 0x95, 0x8D, 0x8E, 0x96), 8),  # BINFLOAT FRAME BINUNICODE8 BINBYTES8 BYTEARRAY8
):
    ARG_BYTES[list(_ops)] = _bytes
LENGTH_BYTES[[0x43, 0x8C, 0x8A]] = 1
LENGTH_BYTES[[0x58, 0x42, 0x8B]] = 4
LENGTH_BYTES[[0x8D, 0x8E, 0x96]] = 8
LINE_MAX = 24  # a text PUT, GET, INT or LONG line the kernel reads: up to 19 digits, a sign, L, newline
T_OTHER, T_INT, T_BIG, T_BOOL = range(4)  # what _decimal read
BATCH = 1000  # the pickler's batch of APPENDS/SETITEMS: a container after a full batch may get more


@_jit
def _utf8_ok(buf: np.ndarray, start: int, length: int) -> bool:
    """UTF-8 as the unpickler decodes it (``surrogatepass``: encoded surrogates are allowed)."""
    i, end = start, start + length
    while i < end:
        c = buf[i]
        if c < 0x80:
            i += 1
            continue
        if 0xC2 <= c <= 0xDF:
            n, lo, hi = 1, 0x80, 0xBF
        elif c == 0xE0:
            n, lo, hi = 2, 0xA0, 0xBF
        elif 0xE1 <= c <= 0xEF:
            n, lo, hi = 2, 0x80, 0xBF
        elif c == 0xF0:
            n, lo, hi = 3, 0x90, 0xBF
        elif 0xF1 <= c <= 0xF3:
            n, lo, hi = 3, 0x80, 0xBF
        elif c == 0xF4:
            n, lo, hi = 3, 0x80, 0x8F
        else:
            return False
        if i + n >= end + 1:
            return False
        if not lo <= buf[i + 1] <= hi:
            return False
        for k in range(2, n + 1):
            if not 0x80 <= buf[i + k] <= 0xBF:
                return False
        i += n + 1
    return True


@_inline
def _mix(h: np.uint64, value: np.uint64) -> np.uint64:
    return (h ^ value) * np.uint64(0x100000001B3)


@_inline
def _positive(h: np.uint64) -> int:
    return np.int64(h & np.uint64(0x7FFFFFFFFFFFFFFF))


@_jit
def _intern_str(buf, start, length, sc, strs, arena, str_tab, known, known_off) -> int:
    """The id of the string ``buf[start:start+length]`` (id 0: the empty string); -1: not UTF-8."""
    if length == 0:
        return 0
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, start + length):
        h = _mix(h, np.uint64(buf[i]))
    hp = _positive(h)
    mask = len(str_tab) - 1
    slot = hp & mask
    while str_tab[slot] != -1:
        sid = str_tab[slot]
        if strs[2, sid] == hp and strs[1, sid] == length:
            off = strs[0, sid]
            same = True
            for i in range(length):
                if arena[off + i] != buf[start + i]:
                    same = False
                    break
            if same:
                return sid
        slot = (slot + 1) & mask
    if not _utf8_ok(buf, start, length):
        return -1
    sid = sc[S_NSTR]
    off = sc[S_ARENA]
    arena[off : off + length] = buf[start : start + length]
    sc[S_ARENA] = off + length
    sc[S_NSTR] = sid + 1
    strs[0, sid] = off
    strs[1, sid] = length
    strs[2, sid] = hp
    code = -1
    for k in range(len(known_off) - 1):
        a, b = known_off[k], known_off[k + 1]
        if b - a == length:
            same = True
            for i in range(length):
                if known[a + i] != buf[start + i]:
                    same = False
                    break
            if same:
                code = k
                break
    strs[3, sid] = code
    str_tab[slot] = sid
    return sid


@_inline
def _frame_done(st, at, sp) -> bool:
    """Whether the open container at slot ``at`` is a frame dict with nothing of its own above it
    (no MARK of its items, no key or value of it): the next value is its sibling, not its part."""
    if st[at, C_ROLE] != R_FRAME:
        return False
    if at + 1 >= sp:
        return True
    if st[at + 1, C_KIND] == K_MARK:
        return st[at + 1, C_V] != at
    return st[at + 1, C_PARENT] != at


@_inline
def _intern_frame(st, at, sc, frs, fr_tab) -> int:
    h = np.uint64(0xCBF29CE484222325)
    for k in range(N_REC):
        h = _mix(h, np.uint64(st[at, C_REC + k]))
    hp = _positive(h)
    mask = len(fr_tab) - 1
    slot = hp & mask
    while fr_tab[slot] != -1:
        fid = fr_tab[slot]
        if frs[N_REC, fid] == hp:
            same = True
            for k in range(N_REC):
                if frs[k, fid] != st[at, C_REC + k]:
                    same = False
                    break
            if same:
                return fid
        slot = (slot + 1) & mask
    fid = sc[S_NFR]
    sc[S_NFR] = fid + 1
    for k in range(N_REC):
        frs[k, fid] = st[at, C_REC + k]
    frs[N_REC, fid] = hp
    fr_tab[slot] = fid
    return fid


@_inline
def _intern_stack(sc, sk_off, sk_hash, sk_frames, sk_tab) -> int:
    """The pending frames (``sk_frames[used:used+n]``) as a stack id; 0 for no frames."""
    start, n = sc[S_SKUSED], sc[S_PEND_N]
    sc[S_PEND_N] = 0
    sc[S_PEND_OWNER] = -1
    if n == 0:
        return 0
    h = np.uint64(0xCBF29CE484222325)
    for i in range(start, start + n):
        h = _mix(h, np.uint64(sk_frames[i]))
    hp = _positive(h)
    mask = len(sk_tab) - 1
    slot = hp & mask
    while sk_tab[slot] != -1:
        sid = sk_tab[slot]
        a, b = sk_off[sid], sk_off[sid + 1]
        if sk_hash[sid] == hp and b - a == n:
            same = True
            for i in range(n):
                if sk_frames[a + i] != sk_frames[start + i]:
                    same = False
                    break
            if same:
                return sid
        slot = (slot + 1) & mask
    sid = sc[S_NSK]
    sc[S_NSK] = sid + 1
    sk_hash[sid] = hp
    sk_off[sid + 1] = start + n
    sc[S_SKUSED] = start + n
    sk_tab[slot] = sid
    return sid


@_inline
def _is_dict_role(role) -> bool:
    return (
        role == R_ODICT or role == R_TOP or role == R_SEGMENT or role == R_BLOCK or role == R_ENTRY or role == R_FRAME
    )


@_inline
def _place(st, sp, strs, x_str, x_dict, x_list):
    """(parent slot, key) of a value pushed at ``sp``: its typed parent container (-1: inside a
    value the schema ignores) and KEYPOS, LISTITEM or the key code it is the value of."""
    if sp == 0:
        return -1, NOKEY
    b = sp - 1
    kind = st[b, C_KIND]
    if kind == K_MARK:
        owner = st[b, C_V]
        if owner < 0:
            return -1, NOKEY
        return owner, KEYPOS if _is_dict_role(st[owner, C_ROLE]) else LISTITEM
    if kind == K_CONT:
        role = st[b, C_ROLE]
        parent = st[b, C_PARENT]
        if role == R_ODICT or role == R_OLIST:
            if x_str and parent >= 0 and st[b, C_KEY] >= -1 and st[b, C_SEEN] != BATCH:
                return parent, KEYPOS  # the ignored container is done: its parent's next key
            return -1, NOKEY
        if _is_dict_role(role):
            if x_dict and parent >= 0:
                return parent, LISTITEM  # the next entry, block, segment or frame
            return b, KEYPOS
        if x_str or (x_list and role != R_TRACES):  # the list is done: its parent's next key or item
            if parent < 0:
                return -1, NOKEY
            return parent, KEYPOS if _is_dict_role(st[parent, C_ROLE]) else LISTITEM
        return b, LISTITEM
    parent = st[b, C_PARENT]
    if parent < 0:
        return -1, NOKEY
    if not _is_dict_role(st[parent, C_ROLE]):
        return parent, LISTITEM
    if st[b, C_KEY] == KEYPOS:
        if kind == K_STR:
            code = strs[3, st[b, C_V]]
            return parent, code if code < FIRST_ACTION else -1
        return parent, -1
    return parent, KEYPOS


@_inline
def _push(st, sc, kind, v, parent, key) -> None:
    sp = sc[S_SP]
    st[sp, C_KIND] = kind
    st[sp, C_ROLE] = -1
    st[sp, C_V] = v
    st[sp, C_PARENT] = parent
    st[sp, C_KEY] = key
    st[sp, C_MEMO] = -1
    st[sp, C_SEEN] = 0
    sc[S_SP] = sp + 1


@_inline
def _push_value(st, sc, strs, kind, v) -> None:
    parent, key = _place(st, sc[S_SP], strs, kind == K_STR, kind == K_FRAME, kind == K_STACK)
    _push(st, sc, kind, v, parent, key)


@_inline
def _close(st, at, sc, memo_k, memo_v, kind, v) -> None:
    """A container taken by its parent: what its memo entry (if any) refers to from now on."""
    st[at, C_KIND] = kind
    st[at, C_V] = v
    m = st[at, C_MEMO]
    if m >= 0:
        memo_k[m] = kind
        memo_v[m] = v


@_inline
def _shape_fail(sc) -> None:
    sc[S_SHAPE_OK] = 0


@_jit
def _close_opaque(st, at, sc, memo_k, memo_v) -> None:
    if st[at, C_KIND] == K_CONT:
        role = st[at, C_ROLE]
        if role != R_ODICT and role != R_OLIST:
            _shape_fail(sc)  # a typed container taken by something else
        _close(st, at, sc, memo_k, memo_v, K_OPAQUE, 0)


@_inline
def _take_item(st, target, at, sc, memo_k, memo_v, frs, fr_tab, sk_frames, ent, dev) -> None:
    """The value at ``at`` appended to the list at ``target``."""
    kind = st[at, C_KIND]
    trole = st[target, C_ROLE]
    if trole == R_OLIST or trole == R_ODICT or st[target, C_KIND] != K_CONT:
        if st[at, C_PARENT] >= 0:
            _shape_fail(sc)
        _close_opaque(st, at, sc, memo_k, memo_v)
        return
    if st[at, C_PARENT] != target:
        _shape_fail(sc)
        _close_opaque(st, at, sc, memo_k, memo_v)
        return
    role = st[at, C_ROLE] if kind == K_CONT else -1
    if trole == R_FRAMES:
        if kind == K_CONT and role == R_FRAME:
            fid = _intern_frame(st, at, sc, frs, fr_tab)
            _close(st, at, sc, memo_k, memo_v, K_FRAME, fid)
        elif kind == K_FRAME:
            fid = st[at, C_V]
        else:
            _shape_fail(sc)
            _close_opaque(st, at, sc, memo_k, memo_v)
            return
        if sc[S_PEND_OWNER] == target:
            sk_frames[sc[S_SKUSED] + sc[S_PEND_N]] = fid
            sc[S_PEND_N] += 1
        return
    want = (
        R_SEGMENT
        if trole == R_SEGMENTS
        else R_BLOCK
        if trole == R_BLOCKS
        else R_TRACE
        if trole == R_TRACES
        else R_ENTRY
    )
    if trole == R_TRACE and kind == K_CONT and role == R_ENTRY:
        row = st[at, C_V]
        if ent[1, row] < 0:
            _shape_fail(sc)  # no action
        elif ent[1, row] == ANNOTATE and ent[8, row] == -3:
            _shape_fail(sc)  # an annotation that is not text: the decoder shows it with reprlib
        if st[at, C_SEEN] & TIME_SEEN == 0:
            dev[ent[0, row]] = 0
        _close(st, at, sc, memo_k, memo_v, K_DONE, 0)
    elif kind == K_CONT and role == want:
        _close(st, at, sc, memo_k, memo_v, K_DONE, 0)
    else:
        _shape_fail(sc)
        _close_opaque(st, at, sc, memo_k, memo_v)


@_inline
def _stack_value(st, at, sc, memo_k, memo_v, sk_off, sk_hash, sk_frames, sk_tab) -> int:
    kind = st[at, C_KIND]
    if kind == K_NONE:
        return 0
    if kind == K_STACK:
        return st[at, C_V]
    if kind == K_CONT and st[at, C_ROLE] == R_FRAMES and sc[S_PEND_OWNER] == at:
        sid = _intern_stack(sc, sk_off, sk_hash, sk_frames, sk_tab)
        _close(st, at, sc, memo_k, memo_v, K_STACK, sid)
        return sid
    _shape_fail(sc)
    _close_opaque(st, at, sc, memo_k, memo_v)
    return 0


@_inline
def _take_pair(st, target, k, v, sc, memo_k, memo_v, strs, sk_off, sk_hash, sk_frames, sk_tab, ent, blk, seg) -> None:
    """``target[key] = value`` for the key at ``k`` and the value at ``v``."""
    trole = st[target, C_ROLE]
    typed = st[target, C_KIND] == K_CONT and trole != R_ODICT and trole != R_OLIST and _is_dict_role(trole)
    if not typed:
        if st[k, C_PARENT] >= 0 or st[v, C_PARENT] >= 0:
            _shape_fail(sc)
        _close_opaque(st, v, sc, memo_k, memo_v)
        return
    if st[k, C_PARENT] != target or st[v, C_PARENT] != target or st[k, C_KIND] != K_STR:
        _shape_fail(sc)
        _close_opaque(st, v, sc, memo_k, memo_v)
        return
    code = strs[3, st[k, C_V]]
    if code < 0 or code >= FIRST_ACTION:
        _close_opaque(st, v, sc, memo_k, memo_v)
        return
    bit = np.int64(1) << code
    if st[target, C_SEEN] & bit:
        _shape_fail(sc)  # a key twice: the last value wins in Python, rows were written for the first
    st[target, C_SEEN] |= bit
    row = st[target, C_V]
    kind = st[v, C_KIND]
    intv = st[v, C_V] if kind == K_INT else 0
    strv = st[v, C_V] if kind == K_STR else 0
    want_int = want_str = False
    stack = 0
    if code == KY_FRAMES and (trole == R_ENTRY or trole == R_BLOCK):
        stack = _stack_value(st, v, sc, memo_k, memo_v, sk_off, sk_hash, sk_frames, sk_tab)
    if trole == R_ENTRY:
        if code == KY_ACTION:
            want_str = True
            sid = strv
            c = strs[3, sid] - FIRST_ACTION
            ent[1, row] = c if 0 <= c < OTHER_ACTION else OTHER_ACTION
        elif code == KY_ADDR:
            want_int = True
            ent[2, row] = intv
        elif code == KY_SIZE:
            want_int = True
            ent[3, row] = intv
        elif code == KY_STREAM:
            want_int = True
            ent[4, row] = intv
        elif code == KY_TIME:
            if kind != K_NONE:
                want_int = True
                ent[5, row] = intv
                st[target, C_SEEN] |= TIME_SEEN
        elif code == KY_FREE:
            want_int = kind != K_NONE
            ent[7, row] = -1 if kind == K_NONE else intv
        elif code == KY_FRAMES:
            ent[6, row] = stack
        elif code == KY_META:
            ent[8, row] = st[v, C_V] if kind == K_STR else -1 if kind == K_NONE else -3
            _close_opaque(st, v, sc, memo_k, memo_v)
        else:
            _close_opaque(st, v, sc, memo_k, memo_v)
    elif trole == R_FRAME:
        slot = -1
        if code == KY_FILENAME:
            slot = 0
        elif code == KY_NAME:
            slot = 2
        elif code == KY_FXOP:
            slot = 3
        elif code == KY_FXNAME:
            slot = 4
        elif code == KY_FXTRACE:
            slot = 5
        if slot >= 0:
            want_str = True
            st[target, C_REC + slot] = strv
        elif code == KY_LINE:
            want_int = True
            st[target, C_REC + 1] = intv
        else:
            _close_opaque(st, v, sc, memo_k, memo_v)
    elif trole == R_BLOCK:
        if code == KY_ADDRESS:
            want_int = True
            blk[1, row] = intv
            blk[6, row] |= 1
        elif code == KY_SIZE:
            want_int = True
            blk[2, row] = intv
        elif code == KY_REQUESTED:
            want_int = True
            blk[3, row] = intv
            blk[6, row] |= 2
        elif code == KY_STATE:
            want_str = True
            c = strs[3, strv] - FIRST_STATE
            if 0 <= c < 4:
                blk[4, row] = 1 if c == 3 else c
            else:
                _shape_fail(sc)
        elif code == KY_FRAMES:
            blk[5, row] = stack
        else:
            _close_opaque(st, v, sc, memo_k, memo_v)
    elif trole == R_SEGMENT:
        if code == KY_DEVICE:
            want_int = True
            d = intv
            if not 0 <= d < MAX_DEVICES:
                _shape_fail(sc)
            seg[0, row] = d
        elif code == KY_ADDRESS:
            want_int = True
            seg[1, row] = intv
        elif code == KY_TOTAL:
            want_int = True
            seg[2, row] = intv
        elif code == KY_STREAM:
            want_int = True
            seg[3, row] = intv
        elif code == KY_STYPE:
            want_str = True
            seg[4, row] = strv
        elif code == KY_BLOCKS:
            if kind == K_CONT and st[v, C_ROLE] == R_BLOCKS:
                _close(st, v, sc, memo_k, memo_v, K_DONE, 0)
            else:
                _shape_fail(sc)
                _close_opaque(st, v, sc, memo_k, memo_v)
        else:
            _close_opaque(st, v, sc, memo_k, memo_v)
    else:  # the top level
        want = R_SEGMENTS if code == KY_SEGMENTS else R_TRACES if code == KY_TRACES else -1
        if want < 0:
            _close_opaque(st, v, sc, memo_k, memo_v)
        elif kind == K_CONT and st[v, C_ROLE] == want:
            _close(st, v, sc, memo_k, memo_v, K_DONE, 0)
            sc[S_TOPKEYS] |= 1 if want == R_SEGMENTS else 2
        else:
            _shape_fail(sc)
            _close_opaque(st, v, sc, memo_k, memo_v)
    if (want_int and kind != K_INT) or (want_str and kind != K_STR):
        _shape_fail(sc)  # a wrong type: the decoder names it


@_inline
def _open(st, sc, strs, is_dict, ent, blk, seg, dev) -> None:
    """EMPTY_DICT / EMPTY_LIST: a container whose role its place gives."""
    sp = sc[S_SP]
    parent, key = _place(st, sp, strs, False, is_dict, not is_dict)
    role = R_ODICT if is_dict else R_OLIST
    if parent < 0:
        if sp == 0 and is_dict:
            role = R_TOP
            sc[S_TOP] = 0
    elif key == LISTITEM:
        prole = st[parent, C_ROLE]
        if is_dict:
            if prole == R_SEGMENTS:
                role = R_SEGMENT
            elif prole == R_BLOCKS:
                role = R_BLOCK
            elif prole == R_TRACE:
                role = R_ENTRY
            elif prole == R_FRAMES:
                role = R_FRAME
        elif prole == R_TRACES:
            role = R_TRACE
    elif key >= 0 and not is_dict:
        prole = st[parent, C_ROLE]
        if prole == R_TOP and key == KY_SEGMENTS:
            role = R_SEGMENTS
        elif prole == R_TOP and key == KY_TRACES:
            role = R_TRACES
        elif prole == R_SEGMENT and key == KY_BLOCKS:
            role = R_BLOCKS
        elif (prole == R_BLOCK or prole == R_ENTRY) and key == KY_FRAMES:
            role = R_FRAMES
    if sc[S_SHAPE_OK] == 0 and role != R_TOP:
        role = R_ODICT if is_dict else R_OLIST  # only checking from here: no rows written
    _push(st, sc, K_CONT, 0, parent, key)
    st[sp, C_ROLE] = role
    if role == R_ENTRY:
        row = sc[S_NENT]
        sc[S_NENT] = row + 1
        ent[0, row] = st[parent, C_V]
        ent[1, row] = -1
        for c in range(2, 6):
            ent[c, row] = 0
        ent[6, row] = 0
        ent[7, row] = -1
        ent[8, row] = -1
        st[sp, C_V] = row
    elif role == R_BLOCK:
        row = sc[S_NBLK]
        sc[S_NBLK] = row + 1
        blk[0, row] = st[st[parent, C_PARENT], C_V]
        blk[1, row] = 0
        blk[2, row] = 0
        blk[3, row] = 0
        blk[4, row] = 2  # inactive
        blk[5, row] = 0
        blk[6, row] = 0
        st[sp, C_V] = row
    elif role == R_SEGMENT:
        row = sc[S_NSEG]
        sc[S_NSEG] = row + 1
        for c in range(5):
            seg[c, row] = 0
        st[sp, C_V] = row
    elif role == R_TRACE:
        d = sc[S_NDEV]
        sc[S_NDEV] = d + 1
        dev[d] = 1
        st[sp, C_V] = d
    elif role == R_FRAMES:
        if sc[S_PEND_OWNER] >= 0:
            _shape_fail(sc)  # two frames lists open at once: not a snapshot's shape
            st[sp, C_ROLE] = R_OLIST
        else:
            sc[S_PEND_OWNER] = sp
            sc[S_PEND_N] = 0
    elif role == R_FRAME:
        for c in range(N_REC):
            st[sp, C_REC + c] = 0


@_inline
def _find_mark(st, sp) -> int:
    i = sp - 1
    while i >= 0:
        if st[i, C_KIND] == K_MARK:
            return i
        i -= 1
    return -1


@_inline
def _newline(buf, start, stop) -> int:
    """Where the first newline in ``buf[start:stop]`` is; -1: none."""
    for i in range(start, stop):
        if buf[i] == 0x0A:
            return i
    return -1


@_inline
def _decimal(buf, start, stop, op):
    """(value, T_ code) of the line ``buf[start:stop]`` of PUT or GET (digits), INT (a decimal;
    ``00``/``01``: False/True) or LONG (a decimal, then ``L``).  Only those spellings: the
    unpickler's parsers also take signs, spaces, ``_`` and (INT, LONG) 0x/0o/0b, which it is left to
    read (T_OTHER).  A decimal past 64 bits is T_BIG (the decoder refuses it, as LONG1's)."""
    number = op == 0x49 or op == 0x4C
    if op == 0x4C and stop > start and buf[stop - 1] == 0x4C:
        stop -= 1
    if op == 0x49 and stop - start == 2 and buf[start] == 0x30 and (buf[start + 1] == 0x30 or buf[start + 1] == 0x31):
        return np.int64(buf[start + 1] - 0x30), T_BOOL
    negative = number and stop > start and buf[start] == 0x2D
    first = start + 1 if negative else start
    digits = stop - first
    if digits <= 0 or (number and digits > 1 and buf[first] == 0x30) or (negative and buf[first] == 0x30):
        return np.int64(0), T_OTHER  # empty; a leading zero (base 0: octal); -0
    for i in range(first, stop):
        if not 0x30 <= buf[i] <= 0x39:
            return np.int64(0), T_OTHER
    if digits > 18:  # 19 digits may pass int64: the unpickler (or, past 64 bits, the decoder) says
        return np.int64(0), T_BIG if number and digits > 19 else T_OTHER
    value = np.int64(0)
    for i in range(first, stop):
        value = value * 10 + np.int64(buf[i] - 0x30)
    return (-value if negative else value), T_INT


@_inline
def _uint(buf, at, n) -> int:
    value = 0
    for k in range(n - 1, -1, -1):
        value = (value << 8) | np.int64(buf[at + k])
    return value


@_inline
def _long_value(buf, at, n):
    """LONG1/LONG4: (value, fits) for ``n`` bytes of little-endian two's complement.  -2**63 does
    not fit: the decoder's 64-bit range is symmetric."""
    if n == 0:
        return 0, True
    negative = buf[at + n - 1] >= 0x80
    if n > 8:
        fill = 0xFF if negative else 0
        for k in range(8, n):
            if buf[at + k] != fill:
                return 0, False
        if (buf[at + 7] >= 0x80) != negative:
            return 0, False
        n = 8
    value = np.uint64(0)
    for k in range(n - 1, -1, -1):
        value = (value << np.uint64(8)) | np.uint64(buf[at + k])
    if negative and n < 8:
        value |= ~np.uint64(0) << np.uint64(8 * n)
    result = np.int64(value)
    if result == -(2**63):
        return 0, False
    return result, True


@_jit
def scan(
    buf,
    end,
    final,
    sc,
    st,
    memo_k,
    memo_v,
    strs,
    arena,
    str_tab,
    frs,
    fr_tab,
    sk_off,
    sk_hash,
    sk_frames,
    sk_tab,
    ent,
    blk,
    seg,
    dev,
    known,
    known_off,
) -> int:
    """Run opcodes from ``sc[S_POS]`` while they lie wholly before ``end``; a result code."""
    while True:
        pos = sc[S_POS]
        sp = sc[S_SP]
        if pos >= end:
            if final:
                return TRUNCATED
            return NEED_MORE
        if sp + 2 > st.shape[0]:
            if st.shape[0] >= MAX_STACK:
                sc[S_ERR] = E_DEEP
                sc[S_ARG0] = MAX_STACK
                return CORRUPT
            return GROW_STACK
        op = buf[pos]
        if (
            (op == 0x68 or op == 0x6A)
            and sp > 0
            and st[sp - 1, C_KIND] == K_MARK
            and st[sp - 1, C_V] == sc[S_PEND_OWNER] >= 0
        ):
            # A frames list's batch, nothing pushed since its MARK: frames already stored (torch
            # shares each frame dict) go straight to the pending stack, no slot pushed (2/3 of the
            # opcodes of a snapshot).  Anything else ends the run; APPENDS adds the rest after.
            p = pos
            while p < end:
                o = buf[p]
                if o == 0x68 and p + 2 <= end:
                    index, step = np.int64(buf[p + 1]), 2
                elif o == 0x6A and p + 5 <= end:
                    index, step = _uint(buf, p + 1, 4), 5
                else:
                    break
                slot = sc[S_SKUSED] + sc[S_PEND_N]
                if index >= memo_k.shape[0] or memo_k[index] != K_FRAME or slot + 1 >= sk_frames.shape[0]:
                    break
                sk_frames[slot] = memo_v[index]
                sc[S_PEND_N] += 1
                p += step
            if p > pos:
                sc[S_POS] = p
                continue
        push_kind = -1  # a value to push once the opcode is read
        push_v = 0
        at = pos + 1  # the opcode's argument
        nxt = at + ARG_BYTES[op]  # where the next opcode starts once this one is done
        if nxt > end:
            if final:
                return TRUNCATED
            return NEED_MORE
        length = -1  # bytes of payload after the fixed argument
        size_bytes = LENGTH_BYTES[op]
        if size_bytes == 1:
            length = np.int64(buf[at])
        elif size_bytes == 4:
            length = _uint(buf, at, 4)
            if op == 0x8B and length >= 2**31:
                sc[S_ERR] = E_OPCODE  # LONG4's length is signed: negative is corrupt
                sc[S_ARG0] = op
                return CORRUPT
        elif size_bytes == 8:
            length = _uint(buf, at, 8)
            if length < 0:
                length = 2**62  # past any file
        if length >= 0:
            if length > end - nxt:
                if final:
                    return TRUNCATED
                sc[S_NEED] = nxt + length - pos
                return NEED_MORE
            payload = nxt
            nxt = nxt + length
        else:
            payload = nxt
        text_value, text_kind = np.int64(0), T_OTHER
        if op == 0x70 or op == 0x67 or op == 0x49 or op == 0x4C:  # PUT, GET, INT, LONG: a decimal line
            nl = _newline(buf, at, min(end, at + LINE_MAX))
            if nl < 0:
                if final or end - at >= LINE_MAX:
                    return UNSUPPORTED
                return NEED_MORE
            text_value, text_kind = _decimal(buf, at, nl, op)
            if text_kind == T_OTHER:
                return UNSUPPORTED  # spelt another way: the unpickler reads it
            nxt = nl + 1

        if op == 0x68 or op == 0x6A or op == 0x67:  # BINGET, LONG_BINGET, GET
            index = np.int64(buf[at]) if op == 0x68 else _uint(buf, at, 4) if op == 0x6A else text_value
            if index >= memo_k.shape[0] or memo_k[index] == K_EMPTY:
                sc[S_ERR] = E_MEMO_MISSING
                sc[S_ARG0] = index
                return CORRUPT
            kind = memo_k[index]
            if kind == K_CONT and _frame_done(st, memo_v[index], sp):
                # A frame dict referred to again before its list's APPENDS (torch shares frame
                # dicts: a nested module stack holds module.py's frames more than once): it is
                # complete, so it is interned now; anything added to it later falls back.
                if sc[S_NFR] + 2 >= frs.shape[1] or 2 * (sc[S_NFR] + 2) > fr_tab.shape[0]:
                    sc[S_NEED] = 2
                    return GROW_FRAMES
                at = memo_v[index]
                fid = _intern_frame(st, at, sc, frs, fr_tab)
                _close(st, at, sc, memo_k, memo_v, K_FRAME, fid)
                push_kind, push_v = K_FRAME, fid
            elif kind == K_CONT:
                _shape_fail(sc)  # a container inside itself (or shared while open)
                push_kind, push_v = K_OPAQUE, 0
            elif kind == K_DONE:
                _shape_fail(sc)  # an entry, block or segment twice
                push_kind, push_v = K_OPAQUE, 0
            else:
                push_kind, push_v = kind, memo_v[index]
        elif op == 0x94 or op == 0x71 or op == 0x72 or op == 0x70:  # MEMOIZE, BINPUT, LONG_BINPUT, PUT
            if sp == 0 or st[sp - 1, C_KIND] == K_MARK:
                sc[S_ERR] = E_UNDERFLOW
                sc[S_ARG0] = 0
                return CORRUPT
            # MEMOIZE stores at the count of keys stored (the unpickler's len(memo)): with gaps or
            # a key stored twice, that is not the highest key + 1.
            if op == 0x94:
                index = sc[S_MEMOLEN]
            elif op == 0x70:
                index = text_value
            else:
                index = np.int64(buf[at]) if op == 0x71 else _uint(buf, at, 4)
            if index >= sc[S_MEMO_LIMIT]:
                sc[S_ARG0] = index
                return MEMO_PAST_END if sc[S_MEMO_FINAL] else UNSUPPORTED
            if index >= memo_k.shape[0]:
                sc[S_NEED] = index + 1
                return GROW_MEMO
            old = memo_k[index]
            if old == K_EMPTY:
                sc[S_MEMOLEN] += 1
            elif old == K_CONT:
                st[memo_v[index], C_MEMO] = -1  # the key now holds another object: its close must not touch it
            top = sp - 1
            kind = st[top, C_KIND]
            if kind == K_CONT:
                if st[top, C_MEMO] >= 0:
                    _shape_fail(sc)  # stored under two keys: only one memo entry follows it
                st[top, C_MEMO] = index
            memo_k[index] = kind
            memo_v[index] = st[top, C_V] if kind != K_CONT else top
        elif op == 0x8C or op == 0x58 or op == 0x8D:  # strings
            if (
                sc[S_NSTR] + 2 >= strs.shape[1]
                or sc[S_ARENA] + length > arena.shape[0]
                or 2 * (sc[S_NSTR] + 2) > str_tab.shape[0]
            ):
                sc[S_NEED] = length
                return GROW_STR
            sid = _intern_str(buf, payload, length, sc, strs, arena, str_tab, known, known_off)
            if sid < 0:
                sc[S_ERR] = E_UTF8
                sc[S_ARG0] = 0
                return CORRUPT
            push_kind, push_v = K_STR, sid
        elif op == 0x28:  # MARK
            owner = -1
            if sp > 0 and st[sp - 1, C_KIND] == K_CONT:
                role = st[sp - 1, C_ROLE]
                if role != R_ODICT and role != R_OLIST:
                    owner = sp - 1
            _push(st, sc, K_MARK, owner, -1, NOKEY)
        elif op == 0x7D or op == 0x5D:  # EMPTY_DICT, EMPTY_LIST
            if (
                sc[S_NENT] + 1 >= ent.shape[1]
                or sc[S_NBLK] + 1 >= blk.shape[1]
                or sc[S_NSEG] + 1 >= seg.shape[1]
                or sc[S_NDEV] + 1 >= dev.shape[0]
            ):
                return GROW_ROWS
            _open(st, sc, strs, op == 0x7D, ent, blk, seg, dev)
        elif op == 0x4B:
            push_kind, push_v = K_INT, np.int64(buf[at])
        elif op == 0x4D:
            push_kind, push_v = K_INT, _uint(buf, at, 2)
        elif op == 0x4A:
            value = _uint(buf, at, 4)
            if value >= 2**31:
                value -= 2**32
            push_kind, push_v = K_INT, value
        elif op == 0x8A or op == 0x8B:
            value, fits = _long_value(buf, payload, length)
            push_kind, push_v = K_INT if fits else K_BADINT, value
        elif op == 0x49 or op == 0x4C:  # INT, LONG (protocols 0 and 1)
            push_v = text_value
            push_kind = K_BOOL if text_kind == T_BOOL else K_INT if text_kind == T_INT else K_BADINT
        elif op == 0x73 or op == 0x75:  # SETITEM, SETITEMS
            if op == 0x73:
                if (
                    sp < 3
                    or st[sp - 1, C_KIND] == K_MARK
                    or st[sp - 2, C_KIND] == K_MARK
                    or st[sp - 3, C_KIND] == K_MARK
                ):
                    sc[S_ERR] = E_UNDERFLOW
                    sc[S_ARG0] = 0
                    return CORRUPT
                first, target, count = sp - 2, sp - 3, 1
            else:
                mark = _find_mark(st, sp)
                if mark < 1:
                    sc[S_ERR] = E_NOMARK if mark < 0 else E_UNDERFLOW
                    sc[S_ARG0] = 0
                    return CORRUPT
                if (sp - mark - 1) % 2:
                    sc[S_ERR] = E_ODD
                    sc[S_ARG0] = 0
                    return CORRUPT
                first, target, count = mark + 1, mark - 1, (sp - mark - 1) // 2
                if st[mark, C_V] != target and st[target, C_KIND] == K_CONT and st[target, C_ROLE] != R_ODICT:
                    _shape_fail(sc)
            if (
                sc[S_NSK] + 2 >= sk_hash.shape[0]
                or sc[S_NSK] + 3 >= sk_off.shape[0]
                or 2 * (sc[S_NSK] + 2) > sk_tab.shape[0]
            ):
                return GROW_STACKS  # room for one new stack: its hash, its end offset, its table slot
            for i in range(first, sp, 2):
                kk = st[i, C_KIND]
                if kk == K_CONT or kk == K_FRAME or kk == K_STACK or kk == K_DONE:
                    sc[S_ERR] = E_UNHASHABLE
                    sc[S_ARG0] = 0
                    return CORRUPT
                if kk == K_OPAQUE:
                    _shape_fail(sc)  # a tuple (hashable or not): the unpickler decides
            if st[target, C_KIND] != K_CONT or not _is_dict_role(st[target, C_ROLE]):
                _shape_fail(sc)
            for i in range(first, sp, 2):
                _take_pair(
                    st, target, i, i + 1, sc, memo_k, memo_v, strs, sk_off, sk_hash, sk_frames, sk_tab, ent, blk, seg
                )
            if st[target, C_KIND] == K_CONT and st[target, C_ROLE] == R_ODICT:
                st[target, C_SEEN] = count
            sc[S_SP] = first - 1 if op == 0x75 else sp - 2
        elif op == 0x61 or op == 0x65:  # APPEND, APPENDS
            if op == 0x61:
                if sp < 2 or st[sp - 1, C_KIND] == K_MARK or st[sp - 2, C_KIND] == K_MARK:
                    sc[S_ERR] = E_UNDERFLOW
                    sc[S_ARG0] = 0
                    return CORRUPT
                first = sp - 1
                target = sp - 2
            else:
                mark = _find_mark(st, sp)
                if mark < 1:
                    sc[S_ERR] = E_NOMARK if mark < 0 else E_UNDERFLOW
                    sc[S_ARG0] = 0
                    return CORRUPT
                first = mark + 1
                target = mark - 1
            count = sp - first
            if sc[S_NFR] + count + 2 >= frs.shape[1] or 2 * (sc[S_NFR] + count + 2) > fr_tab.shape[0]:
                sc[S_NEED] = count + 2
                return GROW_FRAMES
            if sc[S_SKUSED] + sc[S_PEND_N] + count + 2 >= sk_frames.shape[0]:
                sc[S_NEED] = count + 2
                return GROW_FRAMES
            if st[target, C_KIND] != K_CONT or _is_dict_role(st[target, C_ROLE]):
                _shape_fail(sc)  # append to something that is not an open list
            elif op == 0x65 and st[first - 1, C_V] != target and st[target, C_ROLE] != R_OLIST:
                _shape_fail(sc)
            for i in range(first, sp):
                _take_item(st, target, i, sc, memo_k, memo_v, frs, fr_tab, sk_frames, ent, dev)
            if st[target, C_KIND] == K_CONT and st[target, C_ROLE] == R_OLIST:
                st[target, C_SEEN] = count
            sc[S_SP] = first if op == 0x61 else first - 1
        elif op == 0x80:  # PROTO
            pass
        elif op == 0x95:  # FRAME: the unpickler reads it whole (truncated if the file is shorter)
            sc[S_FRAME_END] = max(sc[S_FRAME_END], sc[S_BASE] + at + 8 + _uint(buf, at, 8))
        elif op == 0x2E:  # STOP
            if sp == 0 or st[sp - 1, C_KIND] == K_MARK:
                sc[S_ERR] = E_NOSTOP
                sc[S_ARG0] = 0
                return CORRUPT
            top = sp - 1
            if not (st[top, C_KIND] == K_CONT and st[top, C_ROLE] == R_TOP and sc[S_TOPKEYS] != 0):
                _shape_fail(sc)
            if sc[S_NDEV] > MAX_DEVICES:
                _shape_fail(sc)
            sc[S_POS] = nxt
            return DONE
        elif op == 0x29:  # EMPTY_TUPLE
            push_kind, push_v = K_OPAQUE, 0
        elif op == 0x4E:
            push_kind, push_v = K_NONE, 0
        elif op == 0x88 or op == 0x89:
            push_kind, push_v = K_BOOL, 1 if op == 0x88 else 0
        elif op == 0x47:
            push_kind, push_v = K_FLOAT, 0
        elif op == 0x43 or op == 0x42 or op == 0x8E or op == 0x96:  # bytes, bytearray
            push_kind, push_v = K_BYTES, 0
        elif op == 0x85 or op == 0x86 or op == 0x87 or op == 0x74:  # TUPLE1-3, TUPLE
            if op == 0x74:
                mark = _find_mark(st, sp)
                if mark < 0:
                    sc[S_ERR] = E_NOMARK
                    sc[S_ARG0] = 0
                    return CORRUPT
                first = mark
                items = mark + 1
            else:
                n = op - 0x84
                items = sp - n
                if items < 0:
                    sc[S_ERR] = E_UNDERFLOW
                    sc[S_ARG0] = 0
                    return CORRUPT
                for i in range(items, sp):
                    if st[i, C_KIND] == K_MARK:
                        sc[S_ERR] = E_UNDERFLOW
                        sc[S_ARG0] = 0
                        return CORRUPT
                first = items
            for i in range(items, sp):
                if st[i, C_PARENT] >= 0 and st[i, C_KIND] == K_CONT:
                    _shape_fail(sc)
                _close_opaque(st, i, sc, memo_k, memo_v)
            sc[S_SP] = first
            push_kind, push_v = K_OPAQUE, 0
        elif op == 0x63 or op == 0x69:  # GLOBAL, INST: module\nname\n
            first_nl = -1
            second_nl = -1
            i = at
            limit = min(end, at + 4096)  # a name longer than that is refused without it
            while i < limit:
                if buf[i] == 0x0A:
                    if first_nl < 0:
                        first_nl = i
                    else:
                        second_nl = i
                        break
                i += 1
            if second_nl < 0:
                if final or limit < end:
                    sc[S_ARG0] = op
                    return REFUSE_OPCODE
                return NEED_MORE
            sc[S_ARG0] = at
            sc[S_ARG1] = first_nl - at
            sc[S_ARG2] = first_nl + 1
            sc[S_ARG3] = second_nl - first_nl - 1
            return REFUSE_GLOBAL
        elif op == 0x93:  # STACK_GLOBAL
            if sp >= 2 and st[sp - 1, C_KIND] == K_STR and st[sp - 2, C_KIND] == K_STR:
                sc[S_ARG0] = st[sp - 2, C_V]
                sc[S_ARG1] = st[sp - 1, C_V]
                return REFUSE_STACK_GLOBAL
            sc[S_ARG0] = op
            return REFUSE_OPCODE
        elif (
            op == 0x6F
            or op == 0x52
            or op == 0x62
            or op == 0x81
            or op == 0x92
            or op == 0x50
            or op == 0x51
            or op == 0x82
            or op == 0x83
            or op == 0x84
        ):
            sc[S_ARG0] = op
            return REFUSE_OPCODE
        elif (
            op == 0x46  # FLOAT
            or op == 0x53  # STRING
            or op == 0x54  # BINSTRING
            or op == 0x55  # SHORT_BINSTRING
            or op == 0x56  # UNICODE
            or op == 0x6C  # LIST
            or op == 0x64  # DICT
            or op == 0x30  # POP
            or op == 0x31  # POP_MARK
            or op == 0x32  # DUP
            or op == 0x8F  # EMPTY_SET
            or op == 0x90  # ADDITEMS
            or op == 0x91  # FROZENSET
            or op == 0x97  # NEXT_BUFFER
            or op == 0x98  # READONLY_BUFFER
        ):
            return UNSUPPORTED  # plain data a snapshot never holds: the unpickler reads it
        else:
            sc[S_ERR] = E_OPCODE
            sc[S_ARG0] = op
            return CORRUPT
        if push_kind >= 0:
            _push_value(st, sc, strs, push_kind, push_v)
        sc[S_POS] = nxt


@_jit
def finish(sc, ent, blk, seg, dev, sk_off, sk_frames, n_frames):
    """After STOP: block addresses placed from their segment's, stacks and frames renumbered in
    the decoder's order, times made indices when a device has none.  Returns (stack map, frame
    map, kept stacks, kept frames) or a -1 first element: fall back."""
    nent, nblk, nsk = sc[S_NENT], sc[S_NBLK], sc[S_NSK]
    int64_max = 2**63 - 1
    current = -1
    offset = 0
    overflow = False
    for b in range(nblk):
        s = blk[0, b]
        if s != current:
            current = s
            offset = seg[1, s]
            overflow = False
        size = blk[2, b]
        if blk[6, b] & 1 == 0:
            if overflow or offset == -int64_max - 1:
                return np.full(1, -1, np.int64), np.zeros(0, np.int64), 0, 0
            blk[1, b] = offset
        if blk[6, b] & 2 == 0:
            blk[3, b] = size
        if (size > 0 and offset > int64_max - size) or (size < 0 and offset < -int64_max - 1 - size):
            overflow = True
        else:
            offset += size
    stack_map = np.full(nsk, -1, np.int64)
    stack_map[0] = 0
    kept = 1
    for i in range(nent + nblk):
        s = ent[6, i] if i < nent else blk[5, i - nent]
        if stack_map[s] < 0:
            stack_map[s] = kept
            kept += 1
    order = np.zeros(kept, np.int64)
    for s in range(nsk):
        if stack_map[s] > 0:
            order[stack_map[s]] = s
    frame_map = np.full(n_frames, -1, np.int64)
    kept_frames = 0
    for new in range(1, kept):
        s = order[new]
        for i in range(sk_off[s], sk_off[s + 1]):
            f = sk_frames[i]
            if frame_map[f] < 0:
                frame_map[f] = kept_frames
                kept_frames += 1
    if nent > 0:
        all_times = True
        for d in range(sc[S_NDEV]):
            if dev[d] == 0:
                all_times = False
        if not all_times:
            d = -1
            index = 0
            for i in range(nent):
                if ent[0, i] != d:
                    d = ent[0, i]
                    index = 0
                ent[5, i] = index
                index += 1
    return stack_map, frame_map, kept, kept_frames


@_jit
def rehash(hashes, first, count, size):
    """An open-addressing table of ``size`` slots (a power of 2) holding ids first..count-1."""
    table = np.full(size, -1, np.int64)
    mask = size - 1
    for i in range(first, count):
        slot = hashes[i] & mask
        while table[slot] != -1:
            slot = (slot + 1) & mask
        table[slot] = i
    return table
