"""The opcode scanner (tuiprof/trace/snapshot_kernel.py) against the restricted unpickler.

Oracle: the same file read by :class:`PlainDataUnpickler` and :func:`decode_snapshot` (the path
without numba); every column must be equal.  The scanner is forced on these small files with
``TUIPROF_SNAPSHOT_SCAN_BYTES=0``.  Hostile input: every cut and random byte damage of a small
snapshot ends in a Snapshot equal to the unpickler's or in one :class:`TraceError` line."""

from __future__ import annotations

import gzip
import os
import pickle
import pickletools
import random
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.pickle_variants import Style, variant
from tests.helpers.snapshot_gen import differences, distinct_stacks, every_action, make_snapshot
from tuiprof.errors import TraceError
from tuiprof.trace.snapshot import (
    PlainDataUnpickler,
    Snapshot,
    _open_snapshot,
    decode_snapshot,
    is_snapshot,
    read_snapshot,
)

pytest.importorskip("numba")
from tuiprof.trace.snapshot_scan import scan_snapshot  # noqa: E402  (needs numba to be worth testing)


@pytest.fixture(autouse=True)
def _scanner_always(monkeypatch):
    monkeypatch.setenv("TUIPROF_SNAPSHOT_SCAN_BYTES", "0")


def scanned(path: Path) -> Snapshot | None:
    """The scanner's Snapshot, or None where it leaves the file to the unpickler."""
    handle, head, size = _open_snapshot(path, str(path))
    with handle:
        return scan_snapshot(handle, head, size, str(path), None)


def unpickled(path: Path) -> Snapshot:
    raw = path.read_bytes()
    raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    return decode_snapshot(PlainDataUnpickler(__import__("io").BytesIO(raw)).load(), str(path), path.stat().st_size)


GENERATED = {
    "two devices, FX": lambda: make_snapshot(0, steps=300)[0],
    "frees awaiting": lambda: make_snapshot(1, steps=300, awaiting=True)[0],
    "no times": lambda: make_snapshot(2, steps=300, with_times=False)[0],
    "three devices, no FX": lambda: make_snapshot(3, steps=300, devices=3, fx=False)[0],
    "module stacks, epoch times": lambda: make_snapshot(4, steps=300, modules=True, time_origin_us=1 << 50)[0],
    "every action": every_action,
    "segments only": lambda: {"segments": make_snapshot(5, steps=100)[0]["segments"]},
    "traces only": lambda: {"device_traces": make_snapshot(6, steps=100)[0]["device_traces"]},
}


@pytest.mark.parametrize("compressed", [False, True], ids=["pickle", "gz"])
@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
@pytest.mark.parametrize("case", GENERATED, ids=list(GENERATED))
def test_the_scanner_gives_the_unpicklers_columns(tmp_path: Path, case: str, protocol: int, compressed: bool) -> None:
    payload = pickle.dumps(GENERATED[case](), protocol=protocol)
    path = tmp_path / ("snap.pickle.gz" if compressed else "snap.pickle")
    path.write_bytes(gzip.compress(payload) if compressed else payload)
    fast = scanned(path)
    assert fast is not None, "fell back to the unpickler"
    assert differences(fast, unpickled(path)) == []
    assert differences(read_snapshot(path), fast) == []


@pytest.mark.parametrize("count", [8_200, 100_000])
def test_no_limit_on_distinct_stacks_short_of_memory(tmp_path: Path, count: int) -> None:
    """8,200 distinct stacks, each with a new frame, crashed the scanner (its stack offsets grew
    apart from its stack hashes and overran them at 8,192): read by both paths, equal."""
    path = tmp_path / "stacks.pickle"
    path.write_bytes(pickle.dumps(distinct_stacks(count), protocol=4))
    fast = scanned(path)
    assert fast is not None, "fell back to the unpickler"
    slow = unpickled(path)
    assert len(slow.stacks) == count + 1 and len(slow.frames) == count + 1
    assert differences(fast, slow) == []


def test_torch_shares_frames_within_a_stack_and_the_scanner_follows(tmp_path: Path) -> None:
    """Torch's shape (tests/snapshot_gen.py): a nested module stack holds module.py's frame dicts
    several times, so the pickle refers back to a frame inside the batch that wrote it; the
    scanner fell back to the unpickler on every such stack (~5x pickle.load's time)."""
    raw = pickle.dumps(make_snapshot(4, steps=300, modules=True)[0], protocol=4)
    ops = list(pickletools.genops(raw))
    assert sum(op.name == "BINGET" for op, _, _ in ops) > sum(op.name == "EMPTY_DICT" for op, _, _ in ops)
    path = tmp_path / "torch.pickle"
    path.write_bytes(raw)
    fast = scanned(path)
    assert fast is not None, "fell back to the unpickler"
    assert differences(fast, unpickled(path)) == []
    repeated = [s for s in range(len(fast.stacks)) if len(set(ids := fast.stacks.frame_ids(s).tolist())) < len(ids)]
    assert repeated, "no stack holds a frame twice"


def _memo_facts(raw: bytes) -> set[str]:
    """What the memo opcodes of ``raw`` do that pickle.dumps never does (read by pickletools)."""
    facts, stored = set(), set()
    for op, arg, _ in pickletools.genops(raw):
        if op.name in ("PUT", "BINPUT", "LONG_BINPUT", "MEMOIZE"):
            key = len(stored) if op.name == "MEMOIZE" else arg
            if op.name == "MEMOIZE" and stored and max(stored) + 1 != len(stored):
                facts.add("MEMOIZE after a gap")
            if key in stored:
                facts.add("a key reused")
            elif key > len(stored):
                facts.add("a gap")
            stored.add(key)
        elif op.name == "FRAME":
            facts.add("FRAME")
    return facts


MEMO_STYLES = {
    "keys with gaps": (
        Style("gaps", ("BINPUT", "LONG_BINPUT"), ("BINGET", "LONG_BINGET"), 0.0, 0, None),
        {"a gap"},
    ),
    "MEMOIZE after gaps": (Style("gaps", ("MEMOIZE", "LONG_BINPUT"), ("LONG_BINGET",), 0.0, 4096, None), {"a gap"}),
    "keys reused": (Style("reuse", ("MEMOIZE", "BINPUT"), ("BINGET", "LONG_BINGET"), 0.5, 9, 5), {"a key reused"}),
    "frames of a byte": (Style("dense", ("MEMOIZE",), ("BINGET",), 1.0, 1, 4), {"FRAME"}),
}


@pytest.mark.parametrize("protocol", [2, 4])
@pytest.mark.parametrize("case", MEMO_STYLES, ids=list(MEMO_STYLES))
def test_legal_memo_keys_are_read_alike(tmp_path: Path, case: str, protocol: int) -> None:
    """Memo keys as no pickler writes them but pickle.loads reads them: the scanner called a gap
    "corrupt" while the unpickler read the file.  MEMOIZE stores at the count of keys stored."""
    style, facts = MEMO_STYLES[case]
    data = make_snapshot(11, steps=200, modules=True)[0]
    raw, _ = variant(pickle.dumps(data, protocol=protocol), protocol, random.Random(protocol), style)
    assert pickle.loads(raw) == data
    assert facts <= _memo_facts(raw), _memo_facts(raw)
    if protocol == 4 and "MEMOIZE" in style.stores and style.keys == "gaps":
        assert "MEMOIZE after a gap" in _memo_facts(raw)
    path = tmp_path / "memo.pickle"
    path.write_bytes(raw)
    fast = scanned(path)
    assert fast is not None, "fell back to the unpickler"
    assert differences(fast, unpickled(path)) == []


def _unpickler_path(path: Path) -> Snapshot | str:
    """read_snapshot without the scanner: a Snapshot or the one line."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TUIPROF_SNAPSHOT_SCAN_BYTES", str(1 << 62))
        try:
            return read_snapshot(path)
        except TraceError as exc:
            return str(exc)


@pytest.mark.parametrize("compressed", [False, True], ids=["pickle", "gz"])
def test_a_memo_key_past_the_pickle_is_the_same_line_on_both_paths(tmp_path: Path, compressed: bool) -> None:
    """A key at or past the pickle's size (no writer stores one): the unpickler read it (its memo
    fitted), the scanner called it corrupt; now both refuse in one line.  Just under: both read it."""
    raw = pickle.dumps(make_snapshot(3, steps=60)[0], protocol=2)
    assert raw[2:5] == b"}q\x00"  # the top dict stored at key 0, never fetched
    path = tmp_path / ("memo.pickle.gz" if compressed else "memo.pickle")
    for key, read in ((len(raw) + 3, False), (3 * len(raw), False), (len(raw) + 2, True)):
        bad = raw[:3] + b"r" + struct.pack("<I", key) + raw[5:]  # LONG_BINPUT: 3 bytes longer
        assert len(bad) == len(raw) + 3 and pickle.loads(bad)
        path.write_bytes(gzip.compress(bad) if compressed else bad)
        slow = _unpickler_path(path)
        try:
            fast: Snapshot | str = read_snapshot(path)
        except TraceError as exc:
            fast = str(exc)
        if read:
            assert isinstance(fast, Snapshot) and isinstance(slow, Snapshot) and differences(fast, slow) == []
        else:
            assert (
                fast == slow == f"{path}: the pickle claims more memory than there is (corrupt?); copy the file again"
            )


@pytest.mark.parametrize("protocol", [0, 1])
def test_protocols_0_and_1_are_snapshots_read_by_both_paths(tmp_path: Path, protocol: int) -> None:
    """pickle.loads reads them; tuiprof took them for JSON ("this is not JSON")."""
    path = tmp_path / "old.pickle"
    path.write_bytes(pickle.dumps(make_snapshot(5, steps=100, modules=True)[0], protocol=protocol))
    assert is_snapshot(path)
    path.with_suffix(".txt").write_bytes(b"(see the notes)")
    assert is_snapshot(path.with_suffix(".txt")) is False  # a text that starts "(" stays text
    if protocol == 1:  # binary opcodes, and INT, LONG, PUT as text: the scanner reads it itself
        assert scanned(path) is not None
    slow = _unpickler_path(path)
    assert isinstance(slow, Snapshot) and differences(read_snapshot(path), slow) == []
    assert differences(slow, unpickled(path)) == []
    result = subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path)], capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    assert result.returncode == 0 and "allocator snapshot" in result.stdout, result.stderr


def _entry_pickle(size: bytes, memo: bytes = b"") -> bytes:
    """{"device_traces": [[{"action": "alloc", "size": <size>}]]} at protocol 1, ``size`` an opcode."""
    text = lambda value: b"X" + struct.pack("<I", len(value)) + value  # noqa: E731
    return (
        (b"}" + memo + b"(" + text(b"device_traces") + b"]](}(" + text(b"action") + text(b"alloc") + text(b"size"))
        + size
        + b"ueau."
    )


TEXT_OPCODES = {
    "INT": (b"I5\n", True),
    "INT negative": (b"I-5\n", True),
    "INT 0": (b"I0\n", True),
    "INT 01 (True)": (b"I01\n", False),
    "LONG": (b"L140737488355328L\n", True),
    "LONG of 21 digits": (b"L-123456789012345678901L\n", False),
    "INT with a sign": (b"I+5\n", False),
    "INT in octal": (b"I010\n", False),
    "LONG in hex": (b"L0x10L\n", False),
    "LONG with underscores": (b"L1_000L\n", False),
    "INT -0 (False)": (b"I-0\n", False),
}


@pytest.mark.parametrize("case", TEXT_OPCODES, ids=list(TEXT_OPCODES))
def test_protocol_0_and_1_numbers_read_alike(tmp_path: Path, case: str) -> None:
    """INT and LONG lines as pickle.dumps writes them are the scanner's; spelt any other way the
    unpickler reads (strtol, base 0: 010 is 8; -0 is False) the scanner leaves them to it."""
    opcode, scanner_reads = TEXT_OPCODES[case]
    path = tmp_path / "text.pickle"
    path.write_bytes(_entry_pickle(opcode))
    pickle.loads(path.read_bytes())
    assert (scanned(path) is not None) is scanner_reads
    slow = _unpickler_path(path)
    try:
        fast: Snapshot | str = read_snapshot(path)
    except TraceError as exc:
        fast = str(exc)
    assert fast == slow if isinstance(slow, str) else differences(fast, slow) == []  # type: ignore[arg-type]


@pytest.mark.parametrize("put", [b"p0\n", b"p000\n", b"p 0\n"])
def test_text_memo_keys_read_alike(tmp_path: Path, put: bytes) -> None:
    path = tmp_path / "put.pickle"
    path.write_bytes(_entry_pickle(b"K\x05", put))
    pickle.loads(path.read_bytes())
    assert (scanned(path) is not None) is (b" " not in put)
    assert differences(read_snapshot(path), _unpickler_path(path)) == []  # type: ignore[arg-type]


def test_the_generated_oom_and_annotation_survive_the_scan(tmp_path: Path) -> None:
    """By construction, not by comparison: the generator's OOMs and annotations are in the columns."""
    data, expected = make_snapshot(0, steps=300)
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(data, protocol=4))
    snapshot = scanned(path)
    assert snapshot is not None
    ooms = snapshot.entries.action == 5
    assert sorted(snapshot.entries.size[ooms].tolist()) == sorted(o["requested"] for o in expected.ooms)
    assert sorted(snapshot.entries.device_free[ooms].tolist()) == sorted(o["device_free"] for o in expected.ooms)
    texts = [e["user_metadata"] for trace in data["device_traces"] for e in trace if e["action"] == "annotate"]
    assert sorted(snapshot.entries.annotations.values()) == sorted(texts) and texts


SHAPES = {
    "frames as a tuple": {"device_traces": [[{"action": "alloc", "addr": 1, "size": 1, "frames": ()}]]},
    "a dict as a user_metadata": {
        "device_traces": [[{"action": "annotate", "addr": 1, "size": 1, "user_metadata": {"a": 1}}]]
    },
    "a key twice (written by hand below)": None,
    "size as a bool": {"device_traces": [[{"action": "alloc", "addr": 1, "size": True}]]},
    "no action": {"device_traces": [[{"addr": 1, "size": 1}]]},
    "an entry shared": None,
    "a set": {"device_traces": [[{"action": "alloc", "addr": 1, "size": 1, "compile_context": {1, 2}}]]},
    "a list at the top": [1, 2, 3],
    "100,000 devices": {"segments": [], "device_traces": [[]] * 100_000},
}


def _shape_bytes(case: str) -> bytes:
    if case == "an entry shared":
        entry = {"action": "alloc", "addr": 1, "size": 1}
        return pickle.dumps({"device_traces": [[entry, entry]]}, protocol=4)
    if case.startswith("a key twice"):
        return (  # {"device_traces": [], "device_traces": [[]]}: the last one wins
            b"\x80\x04}(\x8c\rdevice_traces]\x8c\rdevice_traces]]au."
        )
    return pickle.dumps(SHAPES[case], protocol=4)


@pytest.mark.parametrize("case", SHAPES, ids=list(SHAPES))
def test_plain_data_in_another_shape_falls_back_to_the_unpickler(tmp_path: Path, case: str) -> None:
    path = tmp_path / "shape.pickle"
    path.write_bytes(_shape_bytes(case))
    assert scanned(path) is None
    try:
        expected: Snapshot | str = unpickled(path)
    except TraceError as exc:
        expected = str(exc)
    try:
        got: Snapshot | str = read_snapshot(path)
    except TraceError as exc:
        got = str(exc)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert isinstance(got, Snapshot) and differences(got, expected) == []


OPCODES = {
    "GLOBAL": (b"cos\nsystem\n(S'touch /tmp/x'\ntR", "refers to os.system"),
    "STACK_GLOBAL": (b"\x8c\x02os\x8c\x06system\x93", "refers to os.system"),
    "INST": (b"(K\x01ios\nsystem\n", "refers to os.system"),
    "REDUCE on plain data": (b"}(tR", "REDUCE opcode"),
    "BUILD on a dict": (b"}}b", "BUILD opcode"),
    "NEWOBJ": (b")\x81", "NEWOBJ opcode"),
    "EXT1": (b"\x82\x01", "EXT1 opcode"),
    "BINPERSID": (b"K\x01Q", "BINPERSID opcode"),
    "inside a real snapshot": (None, "refers to posix.system"),
}


class _Payload:
    def __reduce__(self):
        return (os.system, ("true",))


@pytest.mark.parametrize("case", OPCODES, ids=list(OPCODES))
def test_opcodes_that_reach_code_are_refused_by_the_scanner(tmp_path: Path, case: str) -> None:
    body, words = OPCODES[case]
    if body is None:
        data, _ = make_snapshot(0, steps=60)
        data["device_traces"][0][5]["user_metadata"] = _Payload()
        raw = pickle.dumps(data, protocol=4)
    else:
        raw = b"\x80\x04" + body + b"."
    path = tmp_path / "code.pickle"
    path.write_bytes(raw)
    with pytest.raises(TraceError) as caught:
        scanned(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    assert words in text and "nothing was executed" in text


MALFORMED = {
    "an invalid opcode": (b"\x80\x04}\xff.", "invalid opcode 0xff"),
    "APPENDS without a MARK": (b"\x80\x04]K\x01e.", "MARK is missing"),
    "SETITEM on an empty stack": (b"\x80\x04s.", "stack runs out"),
    "SETITEMS with an odd count": (b"\x80\x04}(K\x01u.", "odd number"),
    "BINGET before BINPUT": (b"\x80\x04h\x05.", "memo key 5"),
    "LONG_BINPUT of 2**31": (b"\x80\x04}r\xff\xff\xff\x7f.", "claims more memory than there is"),
    "a string that is not UTF-8": (b"\x80\x04\x8c\x02\xc3\x28.", "not UTF-8"),
    "a list as a key": (b"\x80\x04}]K\x01s.", "a list or dict"),
    "BINUNICODE8 of an exabyte": (b"\x80\x04\x8d" + struct.pack("<Q", 1 << 60) + b"x.", "truncated"),
    "LONG4 of a negative length": (b"\x80\x04\x8b\xff\xff\xff\xff.", "invalid opcode 0x8b"),
    "no STOP": (b"\x80\x04}", "truncated"),
    "STOP on an empty stack": (b"\x80\x04.", "STOP with nothing"),
    "a million MARKs": (b"\x80\x04" + b"(" * ((1 << 20) + 10) + b".", "more than 1,048,576 values at once"),
}


@pytest.mark.parametrize("case", MALFORMED, ids=list(MALFORMED))
def test_malformed_streams_are_one_line_from_the_scanner(tmp_path: Path, case: str) -> None:
    raw, words = MALFORMED[case]
    path = tmp_path / "bad.pickle"
    path.write_bytes(raw)
    with pytest.raises(TraceError) as caught:
        scanned(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and "\n" not in text and words in text, text


def test_deep_nesting_and_recursive_references_end_in_one_line_or_a_fallback(tmp_path: Path) -> None:
    path = tmp_path / "deep.pickle"
    path.write_bytes(b"\x80\x02" + b"]" * 200_000 + b"a" * 199_999 + b".")
    assert scanned(path) is None  # plain data, a list at the top: the unpickler says what is wrong
    loop: list = []
    loop.append(loop)
    path.write_bytes(pickle.dumps({"segments": [], "device_traces": loop}, protocol=4))
    assert scanned(path) is None
    with pytest.raises(TraceError, match="not an allocator snapshot"):
        read_snapshot(path)


def _damaged(raw: bytes, rng: random.Random) -> bytes:
    data = bytearray(raw)
    for _ in range(rng.randint(1, 4)):
        kind = rng.random()
        at = rng.randrange(2, len(data))
        if kind < 0.5:
            data[at] = rng.randrange(256)
        elif kind < 0.7:
            del data[at : at + rng.randint(1, 40)]
        elif kind < 0.85:
            data[at:at] = data[rng.randrange(len(data)) :][: rng.randint(1, 40)]
        else:
            data[at:at] = rng.choice([b"r\xff\xff\xff\x7f", b"\x8d" + struct.pack("<Q", 1 << 40), b"(", b"0", b"e"])
    return bytes(data)


@pytest.mark.parametrize("protocol", [2, 4])
def test_damaged_snapshots_read_alike_or_are_one_line(tmp_path: Path, protocol: int) -> None:
    """400 random damages of a small snapshot: the scanner's Snapshot equals the unpickler's, or it
    falls back, or it refuses in one line; never another exception, never a hang."""
    raw = pickle.dumps(make_snapshot(8, steps=40)[0], protocol=protocol)
    rng = random.Random(protocol)
    path = tmp_path / "damaged.pickle"
    outcomes = {"equal": 0, "fallback": 0, "refused": 0}
    for _ in range(400):
        path.write_bytes(_damaged(raw, rng))
        try:
            fast = scanned(path)
        except TraceError as exc:
            assert "\n" not in str(exc) and str(exc).startswith(f"{path}: ")
            outcomes["refused"] += 1
            continue
        if fast is None:
            outcomes["fallback"] += 1
            continue
        assert differences(fast, unpickled(path)) == []
        outcomes["equal"] += 1
    assert all(outcomes.values()), outcomes


def test_every_cut_of_a_snapshot_is_truncated(tmp_path: Path) -> None:
    raw = pickle.dumps(make_snapshot(9, steps=20)[0], protocol=4)
    path = tmp_path / "cut.pickle"
    for cut in range(2, len(raw), 7):
        path.write_bytes(raw[:cut])
        with pytest.raises(TraceError, match="truncated|corrupt"):
            scanned(path)


@pytest.mark.parametrize("compressed", [False, True], ids=["pickle", "gz"])
def test_the_scanner_tells_its_progress_up_to_the_whole_file(tmp_path: Path, compressed: bool) -> None:
    payload = pickle.dumps(make_snapshot(2, steps=100)[0], protocol=4)
    path = tmp_path / "snap.pickle"
    path.write_bytes(gzip.compress(payload) if compressed else payload)
    seen: list[tuple[int, int]] = []
    read_snapshot(path, lambda done, total: seen.append((done, total)))
    size = path.stat().st_size
    assert seen and seen[-1] == (size, size)


def test_a_memo_index_from_the_file_never_sizes_memory(tmp_path: Path) -> None:
    """LONG_BINPUT 0x05000000 made the C unpickler grow its memo to 2x that many slots and write
    each (1.3 GB for a 10-byte file; 0x40000000 was the fuzzer's OOM kill).  Both paths refuse it
    in one line and stay small: the scanner checks the index, the unpickler runs under RLIMIT_AS."""
    path = tmp_path / "memo.pickle"
    path.write_bytes(b"\x80\x04}r\x00\x00\x00\x05.")
    probe = (
        "import sys\n"
        "from tuiprof.errors import TraceError\n"
        "from tuiprof.trace.snapshot import read_snapshot\n"
        "try:\n    read_snapshot(sys.argv[1])\nexcept TraceError as exc:\n    print(exc)\n"
        # VmHWM, this image's own peak: ru_maxrss starts at the parent's peak after exec (a
        # pytest process of 2.4 GB late in a full run made the probe look 2.4 GB big)
        "print(next(line.split()[1] for line in open('/proc/self/status') if line.startswith('VmHWM:')))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "TUIPROF_NO_JIT": "1"},
    )
    message, peak_kb = result.stdout.splitlines()
    assert message == f"{path}: the pickle claims more memory than there is (corrupt?); copy the file again"
    assert int(peak_kb) < 600_000, peak_kb
    # The scanner refuses the key before any array is sized (its RSS would include a first compile),
    # in the same line.
    with pytest.raises(TraceError) as caught:
        scanned(path)
    assert str(caught.value) == message


def test_summary_with_a_window_is_the_same_on_both_paths(tmp_path: Path) -> None:
    """``--from``/``--to`` and the JSON summary read through the scanner and through the unpickler."""
    path = tmp_path / "snap.pickle"
    path.write_bytes(pickle.dumps(make_snapshot(7, steps=300)[0], protocol=4))
    outputs = []
    for env in ({"TUIPROF_SNAPSHOT_SCAN_BYTES": "0"}, {"TUIPROF_NO_JIT": "1"}):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "tuiprof",
                "summary",
                str(path),
                "--from",
                "500",
                "--to",
                "1400",
                "--format",
                "json",
            ],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=300,
            env={**os.environ, **env},
        )
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] and '"ooms"' in outputs[0]


def test_the_scanner_reads_from_32_mb_and_from_1_gb_before_its_first_compile(tmp_path: Path, monkeypatch) -> None:
    from tuiprof.trace import snapshot

    monkeypatch.delenv("TUIPROF_SNAPSHOT_SCAN_BYTES")
    path = tmp_path / "snap.pickle"
    path.write_bytes(b"\x80\x04}.")
    for cached, size, used in ((True, 31 << 20, False), (True, 32 << 20, True), (False, 512 << 20, False)):
        monkeypatch.setattr(snapshot, "_kernel_cached", lambda cached=cached: cached)
        assert snapshot._use_scanner(path, size) is used, (cached, size)
    monkeypatch.setattr(snapshot, "_kernel_cached", lambda: False)
    assert snapshot._use_scanner(path, 1 << 30)
