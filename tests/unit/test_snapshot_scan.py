"""The opcode scanner (tuiprof/trace/snapshot_kernel.py) against the restricted unpickler.

Oracle: the same file read by :class:`PlainDataUnpickler` and :func:`decode_snapshot` (the path
without numba); every column must be equal.  The scanner is forced on these small files with
``TUIPROF_SNAPSHOT_SCAN_BYTES=0``.  Hostile input: every cut and random byte damage of a small
snapshot ends in a Snapshot equal to the unpickler's or in one :class:`TraceError` line."""

from __future__ import annotations

import dataclasses
import gzip
import os
import pickle
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ROOT
from tests.helpers.snapshot_gen import make_snapshot
from tuiprof.errors import TraceError
from tuiprof.trace.snapshot import (
    PlainDataUnpickler,
    Snapshot,
    _open_snapshot,
    decode_snapshot,
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


def differences(a: Snapshot, b: Snapshot) -> list[str]:
    found = []
    for part in ("frames", "stacks", "entries", "segments"):
        for column in dataclasses.fields(getattr(b, part)):
            x, y = getattr(getattr(a, part), column.name), getattr(getattr(b, part), column.name)
            same = x.dtype == y.dtype and np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y
            if not same:
                found.append(f"{part}.{column.name}")
    for name in ("device_count", "file_bytes", "source"):
        if getattr(a, name) != getattr(b, name):
            found.append(name)
    return found


def every_action() -> dict:
    """Every action kind (the generator's eight, the two of expandable segments, one unknown), blocks
    without addresses or requested sizes, a frames list shared, an annotation of None."""
    frames = [{"filename": "/home/user/a.py", "line": 3, "name": "f"}]
    actions = [
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
        "future_action",
    ]
    trace = [{"action": a, "addr": 4096 * i, "size": 512, "stream": 0, "frames": frames} for i, a in enumerate(actions)]
    trace[5]["device_free"] = 1 << 20
    del trace[7]["frames"]
    trace.append({"action": "annotate", "addr": 0, "size": 0, "user_metadata": None})
    blocks = [{"size": 512, "state": "active_allocated", "frames": frames}, {"size": 1024, "state": "inactive"}]
    segment = {"device": 1, "address": 1 << 30, "total_size": 1536, "stream": 0, "blocks": blocks}
    return {"segments": [segment], "device_traces": [trace, []]}


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
    "LONG_BINPUT of 2**31": (b"\x80\x04}r\xff\xff\xff\x7f.", "memo key 2,147,483,647 is past"),
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
    # The scanner refuses the index before any array is sized (its RSS would include a first compile).
    with pytest.raises(TraceError, match="memo key 83,886,080 is past the objects stored so far"):
        scanned(path)


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
