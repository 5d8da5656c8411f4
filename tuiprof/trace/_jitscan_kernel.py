"""The numba kernel of :mod:`tuiprof.trace.jitscan` (imported only when numba is there).

Every byte is read through a check against ``end`` (the buffer may go on past
the span) and the arrays are bounds-checked (``jit.py``'s decisions).  A
function returns -1 for anything it does not accept; the scan then answers
status 1 (give the span up) and the caller decodes it the usual way.
"""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(cache=True, boundscheck=True, nogil=True)

ABSENT = np.iinfo(np.int64).min
_ABSURD_NS = np.int64(1 << 62)
_MAX_DEPTH = 64
_FNV_OFFSET = np.uint64(14695981039346656037)
_FNV_PRIME = np.uint64(1099511628211)


@_jit
def _at(buf, pos, end):
    """The byte at ``pos``, or -1 past the end of the span."""
    if pos < end:
        return np.int64(buf[pos])
    return -1


@_jit
def _ws(buf, pos, end):
    while pos < end:
        c = buf[pos]
        if c != 32 and c != 10 and c != 13 and c != 9:
            return pos
        pos += 1
    return pos


@_jit
def _string_end(buf, pos, end):
    """Just past the closing quote of the string at ``pos``; -1 for an escape, a control
    character or a byte >= 0x80 (left to msgspec)."""
    pos += 1
    while pos < end:
        c = buf[pos]
        if c == 34:
            return pos + 1
        if c == 92 or c < 32 or c >= 128:
            return -1
        pos += 1
    return -1


@_jit
def _digits_end(buf, pos, end):
    while pos < end and 48 <= buf[pos] <= 57:
        pos += 1
    return pos


@_jit
def _number_end(buf, pos, end):
    """Just past the JSON number at ``pos`` (its whole grammar), or -1."""
    if _at(buf, pos, end) == 45:
        pos += 1
    c = _at(buf, pos, end)
    if c == 48:
        pos += 1
    elif 49 <= c <= 57:
        pos = _digits_end(buf, pos, end)
    else:
        return -1
    if _at(buf, pos, end) == 46:
        after = _digits_end(buf, pos + 1, end)
        if after == pos + 1:
            return -1
        pos = after
    c = _at(buf, pos, end)
    if c == 101 or c == 69:
        pos += 1
        c = _at(buf, pos, end)
        if c == 43 or c == 45:
            pos += 1
        after = _digits_end(buf, pos, end)
        if after == pos:
            return -1
        pos = after
    return pos


@_jit
def _literal_end(buf, pos, end):
    """Just past ``true``, ``false`` or ``null`` at ``pos``, or -1."""
    c = _at(buf, pos, end)
    if c == 116 and _at(buf, pos + 1, end) == 114 and _at(buf, pos + 2, end) == 117 and _at(buf, pos + 3, end) == 101:
        return pos + 4
    if c == 110 and _at(buf, pos + 1, end) == 117 and _at(buf, pos + 2, end) == 108 and _at(buf, pos + 3, end) == 108:
        return pos + 4
    if (
        c == 102
        and _at(buf, pos + 1, end) == 97
        and _at(buf, pos + 2, end) == 108
        and _at(buf, pos + 3, end) == 115
        and _at(buf, pos + 4, end) == 101
    ):
        return pos + 5
    return -1


@_jit
def _key_colon(buf, pos, end):
    """Past ``"key" :`` and the whitespace after it, or -1."""
    if _at(buf, pos, end) != 34:
        return -1
    pos = _string_end(buf, pos, end)
    if pos < 0:
        return -1
    pos = _ws(buf, pos, end)
    if _at(buf, pos, end) != 58:
        return -1
    return _ws(buf, pos + 1, end)


@_jit
def _value_end(buf, pos, end, stack):
    """Just past the JSON value at ``pos`` (validated, nested at most _MAX_DEPTH), or -1."""
    depth = 0
    while True:
        pos = _ws(buf, pos, end)
        c = _at(buf, pos, end)
        if c == 123 or c == 91:
            close = 125 if c == 123 else 93
            pos = _ws(buf, pos + 1, end)
            if _at(buf, pos, end) == close:
                pos += 1
            else:
                if depth >= _MAX_DEPTH:
                    return -1
                stack[depth] = c
                depth += 1
                if c == 123:
                    pos = _key_colon(buf, pos, end)
                    if pos < 0:
                        return -1
                continue
        elif c == 34:
            pos = _string_end(buf, pos, end)
        elif c == 45 or 48 <= c <= 57:
            pos = _number_end(buf, pos, end)
        else:
            pos = _literal_end(buf, pos, end)
        if pos < 0:
            return -1
        # A value ended: close what it ends, or go on to the next member.
        more = False
        while depth > 0:
            pos = _ws(buf, pos, end)
            c = _at(buf, pos, end)
            top = stack[depth - 1]
            if c == 44:
                pos += 1
                if top == 123:
                    pos = _key_colon(buf, _ws(buf, pos, end), end)
                    if pos < 0:
                        return -1
                more = True
                break
            if (c == 125 and top == 123) or (c == 93 and top == 91):
                depth -= 1
                pos += 1
            else:
                return -1
        if not more:
            return pos


@_jit
def _int_value(buf, pos, end):
    """(just past, value) of an integer of at most 18 digits at ``pos``; (-1, 0) otherwise."""
    negative = _at(buf, pos, end) == 45
    if negative:
        pos += 1
    first = pos
    value = np.int64(0)
    while pos < end and 48 <= buf[pos] <= 57:
        value = value * 10 + (np.int64(buf[pos]) - 48)
        pos += 1
    digits = pos - first
    if digits == 0 or digits > 18 or (digits > 1 and buf[first] == 48):
        return -1, np.int64(0)
    c = _at(buf, pos, end)
    if c == 46 or c == 101 or c == 69:
        return -1, np.int64(0)
    return pos, -value if negative else value


@_jit
def _plain_ns(buf, pos, end):
    """(plain, ns) of the number text ``buf[pos:end]``: plain when it is ``-?digits[.d{1,3}]``
    with at most 16 integer digits (the 16th at most 4) and below 2**62 ns, as exact_ns reads them."""
    negative = _at(buf, pos, end) == 45
    if negative:
        pos += 1
    first = pos
    whole = np.int64(0)
    while pos < end and 48 <= buf[pos] <= 57:
        whole = whole * 10 + (np.int64(buf[pos]) - 48)
        pos += 1
    digits = pos - first
    if digits == 0 or digits > 16 or (digits == 16 and buf[first] > 52) or (digits > 1 and buf[first] == 48):
        return False, np.int64(0)
    fraction = np.int64(0)
    if pos < end and buf[pos] == 46:
        pos += 1
        decimals = 0
        while pos < end and 48 <= buf[pos] <= 57:
            fraction = fraction * 10 + (np.int64(buf[pos]) - 48)
            decimals += 1
            pos += 1
        if decimals == 0 or decimals > 3:
            return False, np.int64(0)
        for _ in range(3 - decimals):
            fraction *= 10
    if pos != end:
        return False, np.int64(0)
    value = whole * 1000 + fraction
    if value >= _ABSURD_NS:
        return False, np.int64(0)
    return True, -value if negative else value


@_jit
def _match(buf, start, stop, blob, offsets):
    """Which of the keys in ``blob`` (cut at ``offsets``, shortest first) ``buf[start:stop]``
    is; -1 for none."""
    length = stop - start
    for k in range(offsets.shape[0] - 1):
        a = offsets[k]
        n = offsets[k + 1] - a
        if n < length:
            continue
        if n > length:
            return -1
        same = True
        for j in range(length):
            if buf[start + j] != blob[a + j]:
                same = False
                break
        if same:
            return k
    return -1


@_jit
def _top_key(buf, start, stop):
    """Which of ph, cat, name, tid, ts, dur, args ``buf[start:stop]`` is; -1 for none."""
    n = stop - start
    c = buf[start] if n else 0
    if n == 2:
        d = buf[start + 1]
        if c == 112 and d == 104:
            return 0
        if c == 116 and d == 115:
            return 4
    elif n == 3:
        d, e = buf[start + 1], buf[start + 2]
        if c == 99 and d == 97 and e == 116:
            return 1
        if c == 116 and d == 105 and e == 100:
            return 3
        if c == 100 and d == 117 and e == 114:
            return 5
    elif n == 4:
        d, e, f = buf[start + 1], buf[start + 2], buf[start + 3]
        if c == 110 and d == 97 and e == 109 and f == 101:
            return 2
        if c == 97 and d == 114 and e == 103 and f == 115:
            return 6
    return -1


@_jit
def _arg_member(buf, pos, end, member, row, ids, raw, stack):
    """Read one ``args`` member's value at ``pos`` as msgspec would type it; just past it, or -1."""
    c = _at(buf, pos, end)
    if member < 0:
        return _value_end(buf, pos, end, stack)
    if c == 110:  # null: every member may be None
        return _literal_end(buf, pos, end)
    if member < 15:  # int
        after, value = _int_value(buf, pos, end)
        if after >= 0 and member < 6:
            ids[row, member] = value
        return after
    if member < 18:  # raw text (Input Dims, Input type, Concrete Inputs)
        after = _value_end(buf, pos, end, stack)
        if after >= 0:
            raw[row, 2 * (member - 15)] = pos
            raw[row, 2 * (member - 15) + 1] = after - pos
        return after
    if member < 22:  # int, float or str
        if c == 34:
            return _string_end(buf, pos, end)
        after = _number_end(buf, pos, end)
        if after < 0:
            return -1
        for j in range(pos, after):
            if buf[j] == 101 or buf[j] == 69:
                return -1
        if after - pos > 18:
            return -1
        return after
    if member < 24:  # list
        return _value_end(buf, pos, end, stack) if c == 91 else -1
    return _string_end(buf, pos, end) if c == 34 else -1  # str


@_jit
def _args(buf, pos, end, row, ids, raw, stack, arg_blob, arg_offsets, arg_members):
    """The ``args`` object at ``pos``; just past it, or -1."""
    pos = _ws(buf, pos + 1, end)
    if _at(buf, pos, end) == 125:
        return pos + 1
    seen = np.int64(0)
    while True:
        if _at(buf, pos, end) != 34:
            return -1
        key_end = _string_end(buf, pos, end)
        if key_end < 0:
            return -1
        member = _match(buf, pos + 1, key_end - 1, arg_blob, arg_offsets)
        if member >= 0:
            member = arg_members[member]
        if member >= 0:
            bit = np.int64(1) << member
            if seen & bit:
                return -1  # a duplicate member: left to msgspec
            seen |= bit
        pos = _ws(buf, key_end, end)
        if _at(buf, pos, end) != 58:
            return -1
        pos = _ws(buf, pos + 1, end)
        pos = _arg_member(buf, pos, end, member, row, ids, raw, stack)
        if pos < 0:
            return -1
        pos = _ws(buf, pos, end)
        c = _at(buf, pos, end)
        if c == 125:
            return pos + 1
        if c != 44:
            return -1
        pos = _ws(buf, pos + 1, end)


@_jit
def scan(buf, start, end, capacity, arg_blob, arg_offsets, arg_members, cat_blob, cat_offsets, cat_members):
    """Scan the events in ``buf[start:end]``.

    Returns (status, count, kind, object start, object end, name id, tid, ts ns, dur ns,
    ids, raw text spans, distinct name starts, distinct name lengths, distinct count);
    status 0: read, 1: given up, 2: more than ``capacity`` events.
    """
    kind = np.empty(capacity, np.int8)
    obj_start = np.empty(capacity, np.int64)
    obj_end = np.empty(capacity, np.int64)
    name_id = np.empty(capacity, np.int64)
    tid = np.empty(capacity, np.int64)
    ts = np.empty(capacity, np.int64)
    dur = np.empty(capacity, np.int64)
    ids = np.empty((capacity, 6), np.int64)
    raw = np.empty((capacity, 6), np.int64)
    distinct_at = np.empty(capacity, np.int64)
    distinct_len = np.empty(capacity, np.int64)
    table_size = 1 << 10
    while table_size < 2 * capacity:
        table_size <<= 1
    mask = np.uint64(table_size - 1)
    table = np.full(table_size, -1, np.int64)
    stack = np.empty(_MAX_DEPTH, np.int64)
    distinct = 0
    count = 0
    status = 0
    pos = _ws(buf, start, end)
    while pos < end:
        if count >= capacity:
            status = 2
            break
        if buf[pos] != 123:
            status = 1
            break
        row = count
        obj_start[row] = pos
        for j in range(6):
            ids[row, j] = ABSENT
            raw[row, j] = 0
        ph_s = ph_e = cat_s = cat_e = name_s = name_e = pos
        tid[row] = ts[row] = dur[row] = 0
        name_id[row] = -1
        tid_is_text = False
        ts_plain = dur_plain = True
        seen = 0
        pos = _ws(buf, pos + 1, end)
        if _at(buf, pos, end) == 125:
            pos += 1
        else:
            while True:
                if _at(buf, pos, end) != 34:
                    pos = -1
                    break
                key_end = _string_end(buf, pos, end)
                if key_end < 0:
                    pos = -1
                    break
                key = _top_key(buf, pos + 1, key_end - 1)
                if key >= 0:
                    if seen & (1 << key):
                        pos = -1
                        break
                    seen |= 1 << key
                pos = _ws(buf, key_end, end)
                if _at(buf, pos, end) != 58:
                    pos = -1
                    break
                pos = _ws(buf, pos + 1, end)
                c = _at(buf, pos, end)
                if 0 <= key <= 2:  # ph, cat, name: strings
                    if c != 34:
                        pos = -1
                        break
                    after = _string_end(buf, pos, end)
                    if key == 0:
                        ph_s, ph_e = pos + 1, after - 1
                    elif key == 1:
                        cat_s, cat_e = pos + 1, after - 1
                    else:
                        name_s, name_e = pos + 1, after - 1
                    pos = after
                elif key == 3:  # tid: int or str
                    if c == 34:
                        tid_is_text = True
                        pos = _string_end(buf, pos, end)
                    else:
                        pos, tid[row] = _int_value(buf, pos, end)
                elif key == 4 or key == 5:  # ts, dur: any value (msgspec.Raw)
                    after = _value_end(buf, pos, end, stack)
                    if after >= 0:
                        plain, ns = _plain_ns(buf, pos, after)
                        if key == 4:
                            ts_plain, ts[row] = plain, ns
                        else:
                            dur_plain, dur[row] = plain, ns
                    pos = after
                elif key == 6:  # args: an object or null
                    if c == 110:
                        pos = _literal_end(buf, pos, end)
                    elif c == 123:
                        pos = _args(buf, pos, end, row, ids, raw, stack, arg_blob, arg_offsets, arg_members)
                    else:
                        pos = -1
                else:
                    pos = _value_end(buf, pos, end, stack)
                if pos < 0:
                    break
                pos = _ws(buf, pos, end)
                c = _at(buf, pos, end)
                if c == 125:
                    pos += 1
                    break
                if c != 44:
                    pos = -1
                    break
                pos = _ws(buf, pos + 1, end)
        if pos < 0:
            status = 1
            break
        obj_end[row] = pos
        # Route as columns_from_events does: [memory] by name, then X events by category.
        event_kind = 7
        if (
            name_e - name_s == 8
            and buf[name_s] == 91
            and buf[name_s + 1] == 109
            and buf[name_s + 7] == 93
            and buf[name_s + 2] == 101
            and buf[name_s + 3] == 109
            and buf[name_s + 4] == 111
            and buf[name_s + 5] == 114
            and buf[name_s + 6] == 121
        ):
            event_kind = 8
        elif ph_e - ph_s == 1 and buf[ph_s] == 88 and cat_e > cat_s:
            category = _match(buf, cat_s, cat_e, cat_blob, cat_offsets)
            if category >= 0:
                category = cat_members[category]
                event_kind = category if category <= 6 else 8
        kind[row] = event_kind
        if event_kind <= 6:
            if tid_is_text or not ts_plain or not dur_plain or dur[row] < 0:
                status = 1
                break
            h = _FNV_OFFSET
            for j in range(name_s, name_e):
                h = (h ^ np.uint64(buf[j])) * _FNV_PRIME
            slot = np.int64(h & mask)
            length = name_e - name_s
            while True:
                d = table[slot]
                if d < 0:
                    table[slot] = distinct
                    distinct_at[distinct] = name_s
                    distinct_len[distinct] = length
                    name_id[row] = distinct
                    distinct += 1
                    break
                if distinct_len[d] == length:
                    a = distinct_at[d]
                    same = True
                    for j in range(length):
                        if buf[a + j] != buf[name_s + j]:
                            same = False
                            break
                    if same:
                        name_id[row] = d
                        break
                slot = (slot + 1) & (table_size - 1)
        count += 1
        pos = _ws(buf, pos, end)
        if pos >= end:
            break
        if buf[pos] != 44:
            status = 1
            break
        pos = _ws(buf, pos + 1, end)
        if pos >= end:  # a trailing comma
            status = 1
            break
    return (
        status,
        count,
        kind,
        obj_start,
        obj_end,
        name_id,
        tid,
        ts,
        dur,
        ids,
        raw,
        distinct_at,
        distinct_len,
        distinct,
    )
