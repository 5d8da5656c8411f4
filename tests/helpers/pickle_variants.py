"""One object's pickle rewritten the other ways ``pickle.loads`` accepts, for the snapshot readers'
differential checks (tests/test_snapshot_scan.py, ``scripts/fuzz.py --surface snapshot-diff``).

``pickle.dumps`` numbers its memo keys 0, 1, 2... and writes one way per protocol; a legal pickle
need not.  :func:`variant` re-encodes the memo opcodes of a ``pickle.dumps`` stream:

- keys: dense, with gaps (skipped numbers, now and then a jump of thousands), or reusing the key
  of an object never fetched again; now and then a key at the pickle's size or past it (both
  readers must refuse it alike);
- stores: MEMOIZE (only where it stores the key it should: the count of keys stored, as the
  unpickler's ``len(memo)``), BINPUT, LONG_BINPUT or the text PUT; some stores of objects never
  fetched dropped;
- fetches: BINGET, LONG_BINGET or the text GET;
- FRAME (protocol 4+): none, or frames of a random size around whole opcodes;
- the PROTO byte of a protocol 2+ stream set to another of 2-5.

Everything else is the original's bytes.
"""

from __future__ import annotations

import pickletools
import random
import struct
from dataclasses import dataclass

STORES = ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE")
FETCHES = ("GET", "BINGET", "LONG_BINGET")
FRAME_MAX = 1 << 16  # the pickler's frame target


@dataclass
class Style:
    """How one variant is written (its label is the reproducer's description)."""

    keys: str  # dense | gaps | reuse | past-end
    stores: tuple[str, ...]  # encodings drawn from, where each is possible
    fetches: tuple[str, ...]
    drop_unfetched: float  # share of the stores of objects never fetched left out
    frame_bytes: int  # 0: no FRAME; else each frame's target size
    proto: int | None  # the PROTO byte written, None: the original's

    def label(self) -> str:
        frames = f"frames of ~{self.frame_bytes} bytes" if self.frame_bytes else "no frames"
        proto = f", PROTO {self.proto}" if self.proto is not None else ""
        return (
            f"keys {self.keys}, stores {'/'.join(self.stores)}, fetches {'/'.join(self.fetches)}, "
            f"{self.drop_unfetched:.0%} of unfetched stores dropped, {frames}{proto}"
        )


def draw_style(rng: random.Random, protocol: int) -> Style:
    binary = protocol >= 1
    stores = [s for s in STORES if binary or s == "PUT"]
    if protocol < 4:
        stores = [s for s in stores if s != "MEMOIZE"]
    fetches = [f for f in FETCHES if binary or f == "GET"]
    text_too = rng.random() < 0.15  # text PUT/GET in a binary stream: legal, rarely written
    if binary and not text_too:
        stores = [s for s in stores if s != "PUT"]
        fetches = [f for f in fetches if f != "GET"]
    return Style(
        keys=rng.choices(("dense", "gaps", "reuse", "past-end"), (2, 5, 2, 0.3))[0],
        stores=tuple(rng.sample(stores, rng.randint(1, len(stores)))),
        fetches=tuple(rng.sample(fetches, rng.randint(1, len(fetches)))),
        drop_unfetched=rng.choice((0.0, 0.0, 0.5, 1.0)),
        frame_bytes=rng.choice((0, 1, 9, 100, 4096, FRAME_MAX)) if protocol >= 4 else 0,
        proto=rng.choice((None, 2, 3, 4, 5)) if protocol >= 2 else None,
    )


@dataclass
class _Op:
    name: str
    arg: object
    raw: bytes
    key: int = -1  # a store's or a fetch's memo key in the original


def _ops(raw: bytes) -> list[_Op]:
    """The original's opcodes, FRAMEs left out, memo keys resolved (MEMOIZE: the count stored)."""
    found = list(pickletools.genops(raw))
    ops, stored = [], set()
    for index, (opcode, arg, pos) in enumerate(found):
        end = found[index + 1][2] if index + 1 < len(found) else pos + 1
        if opcode.name == "FRAME":
            continue
        op = _Op(opcode.name, arg, raw[pos:end])
        if op.name in STORES:
            op.key = len(stored) if op.name == "MEMOIZE" else int(arg)  # type: ignore[call-overload]
            stored.add(op.key)
        elif op.name in FETCHES:
            op.key = int(arg)  # type: ignore[call-overload]
        ops.append(op)
    return ops


def _store(key: int, count: int, style: Style, rng: random.Random) -> bytes:
    """A store of ``key``: MEMOIZE stores at ``count`` (the keys stored so far), the others anywhere."""
    choices = [
        s
        for s in style.stores
        if (s != "MEMOIZE" or key == count) and (s != "BINPUT" or key < 256) and (s != "LONG_BINPUT" or key < 1 << 32)
    ] or ["PUT"]
    kind = rng.choice(choices)
    if kind == "MEMOIZE":
        return b"\x94"
    if kind == "BINPUT":
        return b"q" + bytes([key])
    if kind == "LONG_BINPUT":
        return b"r" + struct.pack("<I", key)
    return b"p%d\n" % key


def _fetch(key: int, style: Style, rng: random.Random) -> bytes:
    choices = [f for f in style.fetches if (f != "BINGET" or key < 256) and (f != "LONG_BINGET" or key < 1 << 32)]
    kind = rng.choice(choices or ["GET"])
    if kind == "BINGET":
        return b"h" + bytes([key])
    if kind == "LONG_BINGET":
        return b"j" + struct.pack("<I", key)
    return b"g%d\n" % key


def _framed(body: list[bytes], target: int) -> bytes:
    """FRAME opcodes around runs of whole opcodes of about ``target`` bytes (the last run too)."""
    out, run, size = [], [], 0
    for raw in body:
        run.append(raw)
        size += len(raw)
        if size >= target:
            out.append(b"\x95" + struct.pack("<Q", size) + b"".join(run))
            run, size = [], 0
    if run:
        out.append(b"\x95" + struct.pack("<Q", size) + b"".join(run))
    return b"".join(out)


def variant(raw: bytes, protocol: int, rng: random.Random, style: Style | None = None) -> tuple[bytes, Style]:
    """``raw`` (``pickle.dumps`` at ``protocol``) with its memo opcodes, frames and PROTO byte rewritten."""
    ops = _ops(raw)
    style = style or draw_style(rng, protocol)
    last_fetch: dict[int, int] = {}
    for position, op in enumerate(ops):
        if op.name in FETCHES:
            last_fetch[op.key] = position
    size_hint = len(raw)
    current: dict[int, int] = {}  # original key -> its key in the variant
    live: dict[int, int] = {}  # variant key -> position of its last fetch
    stored: set[int] = set()
    head: list[bytes] = []
    body: list[bytes] = []
    next_key = 0
    for position, op in enumerate(ops):
        out = head if op.name == "PROTO" else body
        if op.name == "PROTO":
            out.append(b"\x80" + bytes([style.proto if style.proto is not None else int(op.arg)]))  # type: ignore[call-overload]
            continue
        if op.name in STORES:
            fetched_until = last_fetch.get(op.key, -1)
            if fetched_until < position and rng.random() < style.drop_unfetched:
                continue
            dead = [k for k, until in live.items() if until < position]
            if style.keys == "reuse" and dead and rng.random() < 0.5:
                key = rng.choice(dead)
            elif "MEMOIZE" in style.stores and len(stored) not in stored and rng.random() < 0.3:
                key = len(stored)  # a hole below the highest key: what MEMOIZE fills
            elif style.keys == "gaps":  # below a quarter of the size: a pickler's keys never pass half
                jump = rng.choices((0, rng.randint(1, 5), rng.randint(6, 5000)), (6, 3, 1))[0]
                key = next_key + (jump if next_key + jump < size_hint // 4 else 0)
            elif style.keys == "past-end" and rng.random() < 0.02:
                key = max(next_key, size_hint * rng.choice((1, 2, 1000)) + rng.randint(0, 9))
            else:
                key = next_key
            next_key = max(next_key, key + 1)
            out.append(_store(key, len(stored), style, rng))
            stored.add(key)
            current[op.key] = key
            live[key] = fetched_until
            continue
        if op.name in FETCHES:
            out.append(_fetch(current[op.key], style, rng))
            continue
        out.append(op.raw)
    framed = _framed(body, style.frame_bytes) if style.frame_bytes else b"".join(body)
    return b"".join(head) + framed, style
