"""The pickle opcode scanner for big allocator snapshots: the file's bytes straight into columns.

The stdlib unpickler builds every trace entry as Python objects (~4x the file in memory, ~3 s
for 200 MB) before :mod:`tuiprof.trace.snapshot` turns them into columns.  This module reads the
opcode stream itself, in a numba kernel (:mod:`tuiprof.trace.jit`), and executes nothing: a small
stack machine for the opcodes protocols 2-5 write for plain data, which follows the snapshot
schema (top dict -> segments -> blocks -> frames; device_traces -> entries -> frames) and writes
integers into column arrays; strings are interned by a hash of their bytes (each distinct string
copied once, its UTF-8 checked once), so Python decodes only the distinct strings.

Decisions:

- **Refused, not run.** GLOBAL, STACK_GLOBAL, INST (one line naming the global), REDUCE, BUILD,
  OBJ, NEWOBJ(_EX), PERSID, BINPERSID and EXT1/2/4 (naming the opcode: the stream gives no global)
  stop the scan at once.
- **Malformed streams are the kernel's to refuse**: truncated, an unknown opcode, a stack
  underflow, a missing MARK, a memo key never stored, a string that is not UTF-8, an unhashable
  key; one line each (:data:`PROBLEMS`).  The restricted unpickler never sees them.
- **Plain data in another shape falls back.**  Where the stream is plain data but not the shape
  the kernel follows (a wrong type, a tuple where torch writes a list, a shared entry, a
  duplicate key, a set, protocol 0/1 opcodes...), the scan goes on to the end as a check only
  (so a code opcode or a truncation later in the file is still refused here), then
  :func:`scan_snapshot` returns None and the caller reads the file with the restricted
  unpickler, which names what is wrong.  The kernel's shape decisions are made when a value is
  pushed (its parent and key are on the stack); the one ambiguity of the stream (after a fresh
  container whose items are ignored, a string is its key or its parent's next key) is read as
  the parent's key, and a SETITEM that says otherwise makes it fall back.
- **Every allocation is bounded by bytes read.**  Arrays grow when the kernel asks (it stops
  before the opcode that needs room, Python grows, the opcode runs again): each new row, string,
  frame, stack or stack slot is paid for by at least one byte of the file.  A memo index may not
  exceed the memo stores seen so far (the pickler numbers them densely): ``LONG_BINPUT
  0x7fffffff`` is refused instead of sizing a 16 GB memo.  The file is read in pieces of
  :data:`PIECE_BYTES` (a ``.gz`` inflated piece by piece through
  :func:`tuiprof.trace.source.inflate_gzip`, no temporary file), so the file's pages are not
  held: resident memory is the columns, the memo (9 bytes per stored object) and one piece.
- **Ids as the Python decoder gives them.**  The kernel numbers frames and stacks in file order
  (segments before device_traces); :func:`finish` renumbers them in the decoder's order (stacks
  by first use in the entries, then the blocks; frames by first appearance in those stacks), so
  both paths give equal columns (tests/test_snapshot_scan.py checks every column).
- **Only where it pays** (``SCAN_MIN_BYTES`` in :mod:`tuiprof.trace.snapshot`, 32 MB): importing numba and loading the cached
  kernel take ~0.6 s (the first compile, once per install, ~25 s), the unpickler path reads
  ~60 MB/s; below that size the unpickler is as fast.  ``TUIPROF_SNAPSHOT_SCAN_BYTES`` overrides
  the threshold (the tests and ``scripts/fuzz.py --snapshot-scan`` set it to 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tuiprof.errors import TraceError
from tuiprof.trace.jit import numba_module
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
    refused_code,
)
from tuiprof.trace.source import ReadProgress, inflate_gzip

PIECE_BYTES = 8 << 20

_numba = numba_module()
_jit: Any = _numba.njit(boundscheck=True, cache=True, nogil=True) if _numba is not None else (lambda f: f)

# Stack slot kinds.
K_MARK, K_NONE, K_BOOL, K_INT, K_BADINT, K_FLOAT, K_STR, K_BYTES = 0, 1, 2, 3, 4, 5, 6, 7
K_OPAQUE = 8  # a complete value the schema ignores (a tuple, a closed container of ignored content)
K_CONT = 9  # an open container (EMPTY_DICT/EMPTY_LIST not yet taken by its parent)
K_FRAME = 10  # a complete frame dict: V is its frame id
K_STACK = 11  # a complete frames list: V is its stack id
K_DONE = 12  # a complete entry, block, segment or list of them (never shared in a snapshot)
K_EMPTY = -1  # memo: nothing stored

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
KNOWN_ACTIONS = (
    "alloc",
    "free_requested",
    "free_completed",
    "segment_alloc",
    "segment_free",
    "oom",
    "snapshot",
    "annotate",
    "segment_map",
    "segment_unmap",
)
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
    S_MEMOPUTS,
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
) = range(23)
N_SCALARS = 23

# Kernel results.
NEED_MORE, DONE, GROW_STACK, GROW_MEMO, GROW_STR, GROW_ROWS, GROW_FRAMES, GROW_STACKS = range(8)
REFUSE_GLOBAL, REFUSE_STACK_GLOBAL, REFUSE_OPCODE, CORRUPT, TRUNCATED, UNSUPPORTED = range(10, 16)

# CORRUPT's S_ERR codes.
E_OPCODE, E_UNDERFLOW, E_NOMARK, E_ODD, E_MEMO_MISSING, E_MEMO_INDEX, E_UTF8, E_UNHASHABLE, E_NOSTOP = range(9)
PROBLEMS = {
    E_OPCODE: "an invalid opcode {arg:#04x} at byte {pos:,}",
    E_UNDERFLOW: "the stack runs out at byte {pos:,}",
    E_NOMARK: "a MARK is missing at byte {pos:,}",
    E_ODD: "SETITEMS with an odd number of items at byte {pos:,}",
    E_MEMO_MISSING: "memo key {arg:,} read before it is stored (byte {pos:,})",
    E_MEMO_INDEX: "memo key {arg:,} is past the objects stored so far (byte {pos:,})",
    E_UTF8: "a string that is not UTF-8 at byte {pos:,}",
    E_UNHASHABLE: "a dict key that is a list or dict at byte {pos:,}",
    E_NOSTOP: "STOP with nothing on the stack at byte {pos:,}",
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


@_jit
def _mix(h: np.uint64, value: np.uint64) -> np.uint64:
    return (h ^ value) * np.uint64(0x100000001B3)


@_jit
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


@_jit
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


@_jit
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


@_jit
def _is_dict_role(role) -> bool:
    return (
        role == R_ODICT or role == R_TOP or role == R_SEGMENT or role == R_BLOCK or role == R_ENTRY or role == R_FRAME
    )


@_jit
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


@_jit
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


@_jit
def _push_value(st, sc, strs, kind, v) -> None:
    parent, key = _place(st, sc[S_SP], strs, kind == K_STR, kind == K_FRAME, kind == K_STACK)
    _push(st, sc, kind, v, parent, key)


@_jit
def _close(st, at, sc, memo_k, memo_v, kind, v) -> None:
    """A container taken by its parent: what its memo entry (if any) refers to from now on."""
    st[at, C_KIND] = kind
    st[at, C_V] = v
    m = st[at, C_MEMO]
    if m >= 0:
        memo_k[m] = kind
        memo_v[m] = v


@_jit
def _shape_fail(sc) -> None:
    sc[S_SHAPE_OK] = 0


@_jit
def _close_opaque(st, at, sc, memo_k, memo_v) -> None:
    if st[at, C_KIND] == K_CONT:
        role = st[at, C_ROLE]
        if role != R_ODICT and role != R_OLIST:
            _shape_fail(sc)  # a typed container taken by something else
        _close(st, at, sc, memo_k, memo_v, K_OPAQUE, 0)


@_jit
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


@_jit
def _int_value(st, at, sc) -> int:
    """An integer field's value; a wrong type makes the scan fall back."""
    if st[at, C_KIND] != K_INT:
        _shape_fail(sc)
        return 0
    return st[at, C_V]


@_jit
def _str_value(st, at, sc) -> int:
    if st[at, C_KIND] != K_STR:
        _shape_fail(sc)
        return 0
    return st[at, C_V]


@_jit
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


@_jit
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
    if trole == R_ENTRY:
        if code == KY_ACTION:
            sid = _str_value(st, v, sc)
            c = strs[3, sid] - FIRST_ACTION
            ent[1, row] = c if 0 <= c < OTHER_ACTION else OTHER_ACTION
        elif code == KY_ADDR:
            ent[2, row] = _int_value(st, v, sc)
        elif code == KY_SIZE:
            ent[3, row] = _int_value(st, v, sc)
        elif code == KY_STREAM:
            ent[4, row] = _int_value(st, v, sc)
        elif code == KY_TIME:
            if kind != K_NONE:
                ent[5, row] = _int_value(st, v, sc)
                st[target, C_SEEN] |= TIME_SEEN
        elif code == KY_FREE:
            ent[7, row] = -1 if kind == K_NONE else _int_value(st, v, sc)
        elif code == KY_FRAMES:
            ent[6, row] = _stack_value(st, v, sc, memo_k, memo_v, sk_off, sk_hash, sk_frames, sk_tab)
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
            st[target, C_REC + slot] = _str_value(st, v, sc)
        elif code == KY_LINE:
            st[target, C_REC + 1] = _int_value(st, v, sc)
        else:
            _close_opaque(st, v, sc, memo_k, memo_v)
    elif trole == R_BLOCK:
        if code == KY_ADDRESS:
            blk[1, row] = _int_value(st, v, sc)
            blk[6, row] |= 1
        elif code == KY_SIZE:
            blk[2, row] = _int_value(st, v, sc)
        elif code == KY_REQUESTED:
            blk[3, row] = _int_value(st, v, sc)
            blk[6, row] |= 2
        elif code == KY_STATE:
            c = strs[3, _str_value(st, v, sc)] - FIRST_STATE
            if 0 <= c < 4:
                blk[4, row] = 1 if c == 3 else c
            else:
                _shape_fail(sc)
        elif code == KY_FRAMES:
            blk[5, row] = _stack_value(st, v, sc, memo_k, memo_v, sk_off, sk_hash, sk_frames, sk_tab)
        else:
            _close_opaque(st, v, sc, memo_k, memo_v)
    elif trole == R_SEGMENT:
        if code == KY_DEVICE:
            d = _int_value(st, v, sc)
            if not 0 <= d < MAX_DEVICES:
                _shape_fail(sc)
            seg[0, row] = d
        elif code == KY_ADDRESS:
            seg[1, row] = _int_value(st, v, sc)
        elif code == KY_TOTAL:
            seg[2, row] = _int_value(st, v, sc)
        elif code == KY_STREAM:
            seg[3, row] = _int_value(st, v, sc)
        elif code == KY_STYPE:
            seg[4, row] = _str_value(st, v, sc)
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


@_jit
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


@_jit
def _find_mark(st, sp) -> int:
    i = sp - 1
    while i >= 0:
        if st[i, C_KIND] == K_MARK:
            return i
        i -= 1
    return -1


@_jit
def _uint(buf, at, n) -> int:
    value = 0
    for k in range(n - 1, -1, -1):
        value = (value << 8) | np.int64(buf[at + k])
    return value


@_jit
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
            return GROW_STACK
        op = buf[pos]
        at = pos + 1  # the opcode's argument
        nxt = at  # where the next opcode starts once this one is done
        if op == 0x80 or op == 0x4B or op == 0x68 or op == 0x71 or op == 0x43 or op == 0x8C:
            nxt = at + 1  # PROTO, BININT1, BINGET, BINPUT, SHORT_BINBYTES, SHORT_BINUNICODE
        elif op == 0x4D:
            nxt = at + 2  # BININT2
        elif op == 0x4A or op == 0x6A or op == 0x72 or op == 0x58 or op == 0x42 or op == 0x8B:
            nxt = at + 4  # BININT, LONG_BINGET, LONG_BINPUT, BINUNICODE, BINBYTES, LONG4
        elif op == 0x47 or op == 0x95 or op == 0x8D or op == 0x8E or op == 0x96:
            nxt = at + 8  # BINFLOAT, FRAME, BINUNICODE8, BINBYTES8, BYTEARRAY8
        elif op == 0x8A:
            nxt = at + 1  # LONG1
        if nxt > end:
            if final:
                return TRUNCATED
            return NEED_MORE
        length = -1  # bytes of payload after the fixed argument
        if op == 0x43 or op == 0x8C or op == 0x8A:
            length = np.int64(buf[at])
        elif op == 0x58 or op == 0x42 or op == 0x8B:
            length = _uint(buf, at, 4)
            if op == 0x8B and length >= 2**31:
                sc[S_ERR] = E_OPCODE  # LONG4's length is signed: negative is corrupt
                sc[S_ARG0] = op
                return CORRUPT
        elif op == 0x8D or op == 0x8E or op == 0x96:
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

        if op == 0x80 or op == 0x95:  # PROTO, FRAME: nothing to do
            pass
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
        elif op == 0x29:  # EMPTY_TUPLE
            _push_value(st, sc, strs, K_OPAQUE, 0)
        elif op == 0x4E:
            _push_value(st, sc, strs, K_NONE, 0)
        elif op == 0x88 or op == 0x89:
            _push_value(st, sc, strs, K_BOOL, 1 if op == 0x88 else 0)
        elif op == 0x4B:
            _push_value(st, sc, strs, K_INT, np.int64(buf[at]))
        elif op == 0x4D:
            _push_value(st, sc, strs, K_INT, _uint(buf, at, 2))
        elif op == 0x4A:
            value = _uint(buf, at, 4)
            if value >= 2**31:
                value -= 2**32
            _push_value(st, sc, strs, K_INT, value)
        elif op == 0x8A or op == 0x8B:
            value, fits = _long_value(buf, payload, length)
            _push_value(st, sc, strs, K_INT if fits else K_BADINT, value)
        elif op == 0x47:
            _push_value(st, sc, strs, K_FLOAT, 0)
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
            _push_value(st, sc, strs, K_STR, sid)
        elif op == 0x43 or op == 0x42 or op == 0x8E or op == 0x96:  # bytes, bytearray
            _push_value(st, sc, strs, K_BYTES, 0)
        elif op == 0x94 or op == 0x71 or op == 0x72:  # MEMOIZE, BINPUT, LONG_BINPUT
            if sp == 0 or st[sp - 1, C_KIND] == K_MARK:
                sc[S_ERR] = E_UNDERFLOW
                sc[S_ARG0] = 0
                return CORRUPT
            index = sc[S_MEMOPUTS] if op == 0x94 else np.int64(buf[at]) if op == 0x71 else _uint(buf, at, 4)
            if index > sc[S_MEMOPUTS]:
                sc[S_ERR] = E_MEMO_INDEX
                sc[S_ARG0] = index
                return CORRUPT
            if index >= memo_k.shape[0]:
                sc[S_NEED] = index + 1
                return GROW_MEMO
            sc[S_MEMOPUTS] += 1
            top = sp - 1
            kind = st[top, C_KIND]
            if kind == K_CONT:
                if st[top, C_MEMO] >= 0:
                    _shape_fail(sc)  # stored twice: only one memo entry follows it
                st[top, C_MEMO] = index
            memo_k[index] = kind
            memo_v[index] = st[top, C_V] if kind != K_CONT else top
        elif op == 0x68 or op == 0x6A:  # BINGET, LONG_BINGET
            index = np.int64(buf[at]) if op == 0x68 else _uint(buf, at, 4)
            if index >= memo_k.shape[0] or memo_k[index] == K_EMPTY:
                sc[S_ERR] = E_MEMO_MISSING
                sc[S_ARG0] = index
                return CORRUPT
            kind = memo_k[index]
            if kind == K_CONT:
                _shape_fail(sc)  # a container inside itself (or shared while open)
                _push_value(st, sc, strs, K_OPAQUE, 0)
            elif kind == K_DONE:
                _shape_fail(sc)  # an entry, block or segment twice
                _push_value(st, sc, strs, K_OPAQUE, 0)
            else:
                _push_value(st, sc, strs, kind, memo_v[index])
        elif op == 0x61:  # APPEND
            if sp < 2 or st[sp - 1, C_KIND] == K_MARK or st[sp - 2, C_KIND] == K_MARK:
                sc[S_ERR] = E_UNDERFLOW
                sc[S_ARG0] = 0
                return CORRUPT
            if sc[S_NFR] + 2 >= frs.shape[1] or 2 * (sc[S_NFR] + 2) > fr_tab.shape[0]:
                sc[S_NEED] = 2
                return GROW_FRAMES
            if sc[S_SKUSED] + sc[S_PEND_N] + 2 >= sk_frames.shape[0]:
                sc[S_NEED] = 2
                return GROW_FRAMES
            target = sp - 2
            _take_item(st, target, sp - 1, sc, memo_k, memo_v, frs, fr_tab, sk_frames, ent, dev)
            if st[target, C_KIND] == K_CONT and st[target, C_ROLE] == R_OLIST:
                st[target, C_SEEN] = 1
            elif st[target, C_KIND] != K_CONT or _is_dict_role(st[target, C_ROLE]):
                _shape_fail(sc)  # append to something that is not an open list
            sc[S_SP] = sp - 1
        elif op == 0x65:  # APPENDS
            mark = _find_mark(st, sp)
            if mark < 1:
                sc[S_ERR] = E_NOMARK if mark < 0 else E_UNDERFLOW
                sc[S_ARG0] = 0
                return CORRUPT
            count = sp - mark - 1
            if sc[S_NFR] + count + 2 >= frs.shape[1] or 2 * (sc[S_NFR] + count + 2) > fr_tab.shape[0]:
                sc[S_NEED] = count + 2
                return GROW_FRAMES
            if sc[S_SKUSED] + sc[S_PEND_N] + count + 2 >= sk_frames.shape[0]:
                sc[S_NEED] = count + 2
                return GROW_FRAMES
            target = mark - 1
            if st[target, C_KIND] != K_CONT or _is_dict_role(st[target, C_ROLE]):
                _shape_fail(sc)
            elif st[mark, C_V] != target and st[target, C_ROLE] != R_OLIST:
                _shape_fail(sc)
            for i in range(mark + 1, sp):
                _take_item(st, target, i, sc, memo_k, memo_v, frs, fr_tab, sk_frames, ent, dev)
            if st[target, C_KIND] == K_CONT and st[target, C_ROLE] == R_OLIST:
                st[target, C_SEEN] = count
            sc[S_SP] = mark
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
            if sc[S_NSK] + 2 >= sk_hash.shape[0] or 2 * (sc[S_NSK] + 2) > sk_tab.shape[0]:
                return GROW_STACKS
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
            _push_value(st, sc, strs, K_OPAQUE, 0)
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
            op == 0x49  # INT
            or op == 0x4C  # LONG
            or op == 0x46  # FLOAT
            or op == 0x53  # STRING
            or op == 0x54  # BINSTRING
            or op == 0x55  # SHORT_BINSTRING
            or op == 0x56  # UNICODE
            or op == 0x6C  # LIST
            or op == 0x64  # DICT
            or op == 0x70  # PUT
            or op == 0x67  # GET
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
def _rehash(hashes, first, count, size):
    """An open-addressing table of ``size`` slots (a power of 2) holding ids first..count-1."""
    table = np.full(size, -1, np.int64)
    mask = size - 1
    for i in range(first, count):
        slot = hashes[i] & mask
        while table[slot] != -1:
            slot = (slot + 1) & mask
        table[slot] = i
    return table


def _grown(array: np.ndarray, need: int, fill: int | None = None) -> np.ndarray:
    """``array`` with room for ``need`` along its last axis (at least doubled), used part copied."""
    size = array.shape[-1]
    if need <= size:
        return array
    bigger = max(2 * size, need)
    shape = (*array.shape[:-1], bigger)
    grown = np.empty(shape, array.dtype) if fill is None else np.full(shape, fill, array.dtype)
    grown[..., :size] = array
    return grown


def _table_size(count: int) -> int:
    return 1 << max(10, (4 * count).bit_length())


class SnapshotScan:
    """The kernel's arrays and scalars, fed the file piece by piece; grows what it asks for."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.buf = np.empty(2 * PIECE_BYTES, np.uint8)
        self.filled = 0
        self.base = 0  # the file offset of buf[0]
        self.result = NEED_MORE
        sc = self.sc = np.zeros(N_SCALARS, np.int64)
        sc[S_SHAPE_OK] = 1
        sc[S_NSTR] = 1  # string 0: ""
        sc[S_NSK] = 1  # stack 0: no frames
        sc[S_PEND_OWNER] = -1
        sc[S_TOP] = -1
        self.st = np.zeros((1024, N_COLS), np.int64)
        self.memo_k = np.full(1 << 12, K_EMPTY, np.int8)
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
            self.sc[S_POS] = 0
        self.buf = _grown(self.buf, self.filled + amount)
        return self.buf.data[self.filled : self.filled + amount]

    def feed(self, data: bytes) -> None:
        """More bytes of the pickle (of a gzip: inflated), scanned at once."""
        if self.done:
            return
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
            self.grow(result)

    def grow(self, result: int) -> None:
        sc, need = self.sc, int(self.sc[S_NEED])
        if result == GROW_STACK:
            self.st = _grown(self.st.T, 2 * self.st.shape[0]).T.copy()
        elif result == GROW_MEMO:
            self.memo_k = _grown(self.memo_k, need, K_EMPTY)
            self.memo_v = _grown(self.memo_v, need)
        elif result == GROW_STR:
            count = int(sc[S_NSTR])
            self.strs = _grown(self.strs, count + 2)
            self.arena = _grown(self.arena, int(sc[S_ARENA]) + need)
            if 2 * (count + 2) > len(self.str_tab):
                self.str_tab = _rehash(self.strs[2], 1, count, _table_size(count))
        elif result == GROW_ROWS:
            self.ent = _grown(self.ent, int(sc[S_NENT]) + 2)
            self.blk = _grown(self.blk, int(sc[S_NBLK]) + 2)
            self.seg = _grown(self.seg, int(sc[S_NSEG]) + 2)
            self.dev = _grown(self.dev, int(sc[S_NDEV]) + 2)
        elif result == GROW_FRAMES:
            count = int(sc[S_NFR]) + need
            self.frs = _grown(self.frs, count + 2)
            if 2 * (count + 2) > len(self.fr_tab):
                self.fr_tab = _rehash(self.frs[N_REC], 0, int(sc[S_NFR]), _table_size(count))
            self.sk_frames = _grown(self.sk_frames, int(sc[S_SKUSED] + sc[S_PEND_N]) + need + 2)
        elif result == GROW_STACKS:
            count = int(sc[S_NSK])
            self.sk_hash = _grown(self.sk_hash, count + 2)
            self.sk_off = _grown(self.sk_off, count + 3)
            if 2 * (count + 2) > len(self.sk_tab):
                self.sk_tab = _rehash(self.sk_hash, 1, count, _table_size(count))

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
        if result == TRUNCATED:
            raise TraceError(self.source, "the pickle is truncated", "copy the file again")
        where = PROBLEMS[int(sc[S_ERR])].format(arg=int(sc[S_ARG0]), pos=self.base + int(sc[S_POS]))
        raise TraceError(self.source, f"the pickle is corrupt ({where})", "copy the file again")

    def snapshot(self, file_bytes: int) -> Snapshot | None:
        """The columns, numbered as the Python decoder numbers them; None: read it with the unpickler."""
        sc = self.sc
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
            ent[2].copy(),
            ent[3].copy(),
            ent[4].copy(),
            ent[5].copy(),
            stack_map[ent[6]].astype(np.int32),
            ent[7].copy(),
            annotations,
            bool(self.dev[:ndev].all()),
        )
        segments = Segments(
            seg[0].astype(np.int32),
            seg[1].copy(),
            seg[2].copy(),
            seg[3].copy(),
            [text(s) for s in seg[4].tolist()],
            blk[0].astype(np.int32),
            blk[1].copy(),
            blk[2].copy(),
            blk[3].copy(),
            blk[4].astype(np.int8),
            stack_map[blk[5]].astype(np.int32),
        )
        devices = max(ndev, int(seg[0].max()) + 1 if nseg else 0)
        return Snapshot(self.source, frames, StackTable(offsets, frame_ids), entries, segments, devices, file_bytes)


def scan_snapshot(handle: Any, head: bytes, size: int, source: str, progress: ReadProgress | None) -> Snapshot | None:
    """Scan the open snapshot file (its first bytes ``head``; a gzip too) into a Snapshot, or
    None where the stream is plain data in a shape the kernel does not follow."""
    scanner = SnapshotScan(source)
    if head == b"\x1f\x8b":
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
    scanner.finish()
    return scanner.snapshot(size)
