"""Hostile allocator snapshots: nothing in the pickle runs, nothing hangs, no traceback.

The command (``tuiprof summary FILE``) in a subprocess with a timeout for the
payloads that would run code, the bomb and deep nesting: one line on stderr
naming the file, exit 2.  The many malformed shapes in process, through
:func:`read_snapshot`: a :class:`TraceError` (the one line) naming the file."""

from __future__ import annotations

import gzip
import os
import pickle
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.helpers.snapshot_gen import make_snapshot
from tuiprof.errors import TraceError
from tuiprof.trace.snapshot import read_snapshot

GOOD, _ = make_snapshot(0, steps=40)


def run_summary(path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tuiprof", "summary", str(path), *extra],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, "COLUMNS": "80"},
    )


def refusal(path: Path) -> str:
    """The one line read_snapshot's TraceError makes (what the command prints after ``tuiprof: ``)."""
    with pytest.raises(TraceError) as caught:
        read_snapshot(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and "\n" not in text
    return text


def assert_refused(result: subprocess.CompletedProcess, path: Path, *words: str) -> None:
    assert result.returncode == 2, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tuiprof: {path}: "), result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    for word in words:
        assert word in lines[0]


class MakesADirectory:
    """Unpickled by a plain pickle.load, this would call os.mkdir(target)."""

    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (os.mkdir, (self.target,))


class RunsCode:
    def __init__(self, target: str) -> None:
        self.target = target

    def __reduce__(self):
        return (exec, (f"open({self.target!r}, 'w').write('ran')",))


@pytest.mark.parametrize("protocol", [2, 5])
@pytest.mark.parametrize("payload", [MakesADirectory, RunsCode], ids=["os.mkdir", "builtins.exec"])
def test_a_reduce_global_is_refused_and_never_runs(tmp_path: Path, protocol: int, payload: type) -> None:
    target = tmp_path / "pwned"
    data = {
        **GOOD,
        "device_traces": [[{"action": "alloc", "addr": 1, "size": 1, "frames": [{"filename": payload(str(target))}]}]],
    }
    path = tmp_path / "evil.pickle"
    path.write_bytes(pickle.dumps(data, protocol=protocol))
    pickle.loads(path.read_bytes())  # the payload is real: a plain pickle.load runs it
    assert target.exists()
    target.rmdir() if target.is_dir() else target.unlink()
    name = "mkdir" if payload is MakesADirectory else "exec"
    assert_refused(run_summary(path, "--view", "snapshot"), path, name, "nothing was executed")
    assert not target.exists()
    gz = tmp_path / "evil.pickle.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert_refused(run_summary(gz), gz, name)
    assert not target.exists()


def _opcodes(body: bytes, protocol: int = 2) -> bytes:
    return bytes([0x80, protocol]) + body + b"."


# Every opcode that reaches code, written by hand (the C unpickler takes any opcode in any protocol).
OPCODE_CASES = {
    "GLOBAL": _opcodes(b"cos\nsystem\n(S'touch /tmp/x'\ntR"),
    "STACK_GLOBAL": _opcodes(b"\x8c\x02os\x8c\x06system\x93", 4),
    "INST": _opcodes(b"(S'touch /tmp/x'\nios\nsystem\n"),
    "OBJ": _opcodes(b"(cos\nsystem\nS'x'\no"),
    "NEWOBJ": _opcodes(b"cbuiltins\nobject\n)\x81"),
    "REDUCE on plain data": _opcodes(b"}(tR"),
    "BUILD on a dict": _opcodes(b"}}b"),
    "EXT1 unregistered": _opcodes(b"\x82\x01"),
    "PERSID": _opcodes(b"P1\n"),
}


@pytest.mark.parametrize("case", OPCODE_CASES, ids=list(OPCODE_CASES))
def test_opcodes_that_reach_code_are_refused(tmp_path: Path, case: str) -> None:
    path = tmp_path / "opcodes.pickle"
    path.write_bytes(OPCODE_CASES[case])
    text = refusal(path)
    if "GLOBAL" in case or case in ("INST", "OBJ", "NEWOBJ"):
        assert "refers to os.system" in text or "refers to builtins.object" in text


def test_a_global_through_the_command_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "opcodes.pickle"
    path.write_bytes(OPCODE_CASES["STACK_GLOBAL"])
    assert_refused(run_summary(path), path, "os.system")


def _recursive_list() -> dict:
    loop: list = []
    loop.append(loop)
    return {"segments": [], "device_traces": loop}


def _recursive_frames() -> dict:
    frames: list = []
    frames.append(frames)
    return {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 1, "frames": frames}]]}


def _recursive_dict() -> dict:
    frame: dict = {"line": 1}
    frame["filename"] = frame
    return {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 1, "frames": [frame]}]]}


WRONG = {
    "a list at the top": [1, 2, 3],
    "a str at the top": "snapshot",
    "no segments nor traces": {"other": 1},
    "segments not a list": {"segments": 5, "device_traces": []},
    "an entry not a dict": {"segments": [], "device_traces": [[7]]},
    "action not text": {"segments": [], "device_traces": [[{"action": 3}]]},
    "size as text": {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": "big"}]]},
    "size a bool": {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": True}]]},
    "size past 64 bits": {"segments": [], "device_traces": [[{"action": "alloc", "addr": 1, "size": 1 << 100}]]},
    "a frame's line as float": {
        "segments": [],
        "device_traces": [[{"action": "alloc", "frames": [{"filename": "a", "line": 1.5}]}]],
    },
    "a block state unknown": {
        "segments": [{"address": 0, "total_size": 8, "blocks": [{"size": 8, "state": "x"}]}],
        "device_traces": [],
    },
    "a device number of 2**40": {
        "segments": [{"device": 1 << 40, "address": 0, "total_size": 8, "blocks": []}],
        "device_traces": [],
    },
    "a negative device number": {
        "segments": [{"device": -1, "address": 0, "total_size": 8, "blocks": []}],
        "device_traces": [],
    },
    "100,000 devices": {"segments": [], "device_traces": [[]] * 100_000},
    "a recursive trace list": _recursive_list(),
    "a frames list holding itself": _recursive_frames(),
    "a frame holding itself": _recursive_dict(),
}


@pytest.mark.parametrize("case", WRONG, ids=list(WRONG))
def test_wrong_types_and_recursive_structures_are_one_line(tmp_path: Path, case: str) -> None:
    path = tmp_path / "wrong.pickle"
    path.write_bytes(pickle.dumps(WRONG[case], protocol=4))
    assert "not an allocator snapshot" in refusal(path)


@pytest.mark.parametrize("cut", [2, 3, 11, 100, 0.5, -1])
def test_truncated_snapshots_are_one_line(tmp_path: Path, cut: float) -> None:
    whole = pickle.dumps(GOOD, protocol=4)
    keep = int(len(whole) * cut) if isinstance(cut, float) else cut if cut > 0 else len(whole) + cut
    path = tmp_path / "cut.pickle"
    path.write_bytes(whole[:keep])
    refusal(path)
    gz = tmp_path / "cut.pickle.gz"  # a whole gzip of a cut pickle
    gz.write_bytes(gzip.compress(whole[:keep]))
    refusal(gz)


def test_a_truncated_gzip_is_one_line(tmp_path: Path) -> None:
    packed = gzip.compress(pickle.dumps(GOOD, protocol=4))
    path = tmp_path / "cut.pickle.gz"
    path.write_bytes(packed[: len(packed) // 2])
    assert_refused(run_summary(path), path, "truncated")


def test_lengths_past_the_file_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "claims.pickle"
    path.write_bytes(b"\x80\x04\x8e" + struct.pack("<Q", 1 << 60) + b"x")  # BINBYTES8 of an exabyte
    refusal(path)


def test_a_gzip_bomb_that_starts_like_a_pickle_is_refused_by_ratio(tmp_path: Path) -> None:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [packer.compress(b"\x80\x04")]
    frames = (b"\x95" + bytes(8)) * ((16 << 20) // 9)  # empty FRAME opcodes: a pickle all along, for both readers
    parts += [packer.compress(frames) for _ in range(12)]  # 192 MB inflated from ~190 KB
    parts.append(packer.flush())
    path = tmp_path / "bomb.pickle.gz"
    path.write_bytes(b"".join(parts))
    assert_refused(run_summary(path), path, "decompression bomb")


def test_a_gzip_of_something_else_stops_at_its_first_bytes(tmp_path: Path) -> None:
    path = tmp_path / "zeros.pickle.gz"
    path.write_bytes(gzip.compress(bytes(1 << 20)))
    assert "not an allocator snapshot" in refusal(path)


def test_deep_nesting_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "deep.pickle"
    path.write_bytes(b"\x80\x02" + b"]" * 200_000 + b"a" * 199_999 + b".")  # 200,000 lists, each in the one before
    assert_refused(run_summary(path), path)


def test_a_protocol_past_5_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "p9.pickle"
    path.write_bytes(b"\x80\x09N.")
    assert "protocol 9" in refusal(path)


def test_huge_decimal_integers_are_one_line(tmp_path: Path) -> None:
    path = tmp_path / "digits.pickle"
    path.write_bytes(b"\x80\x02L" + b"9" * 1_000_000 + b"L\n.")  # the text LONG opcode: int() of a million digits
    refusal(path)


def test_an_annotation_nested_100000_deep_is_text(tmp_path: Path) -> None:
    """user_metadata is any plain data: shown through reprlib (bounded depth), never a RecursionError."""

    def text(value: str) -> bytes:
        return b"\x8c" + bytes([len(value)]) + value.encode()

    nested = b"]" * 100_000 + b"a" * 99_999  # 100,000 lists, each in the one before (pickle.dumps cannot write it)
    entry = (
        b"}("
        + text("action")
        + text("annotate")
        + text("addr")
        + b"K\x01"
        + text("size")
        + b"K\x00"
        + text("user_metadata")
        + nested
        + b"u"
    )
    body = b"}(" + text("segments") + b"]" + text("device_traces") + b"]]" + entry + b"aau"
    path = tmp_path / "deep-annotation.pickle"
    path.write_bytes(b"\x80\x04" + body + b".")
    shown = read_snapshot(path).entries.annotations[0]
    assert shown.startswith("[[[[[[") and "..." in shown and len(shown) < 100


def test_many_ooms_over_many_live_allocations_end_in_seconds() -> None:
    """20,000 OOMs with 20,000 allocations live: explaining each would be 4*10^8 steps; the first
    100 are explained, all are counted."""
    import time

    from tuiprof.analysis.snapshot import OOMS_EXPLAINED, analyze_snapshot
    from tuiprof.trace.snapshot import decode_snapshot

    allocs = [{"action": "alloc", "addr": 4096 * i, "size": 4096, "stream": 0} for i in range(20_000)]
    ooms = [{"action": "oom", "size": 1 << 30, "device_free": 0, "stream": 0}] * 20_000
    snapshot = decode_snapshot({"segments": [], "device_traces": [allocs + ooms]}, "many-ooms.pickle")
    started = time.perf_counter()
    model = analyze_snapshot(snapshot)
    assert time.perf_counter() - started < 20
    assert (len(model.ooms), model.oom_count) == (OOMS_EXPLAINED, 20_000)


def test_ooms_over_10000_segments_end_in_seconds() -> None:
    """The largest free gap at each OOM over 10,000 live segments (a loop per segment: 12 s)."""
    import time

    from tuiprof.analysis.snapshot import analyze_snapshot
    from tuiprof.trace.snapshot import decode_snapshot

    segments = [{"action": "segment_alloc", "addr": (1 << 20) * i, "size": 1 << 20} for i in range(10_000)]
    allocs = [{"action": "alloc", "addr": (1 << 20) * i + 4096, "size": 4096} for i in range(10_000)]
    ooms = [{"action": "oom", "size": 1 << 30, "device_free": 0}] * 100
    snapshot = decode_snapshot({"segments": [], "device_traces": [segments + allocs + ooms]}, "segments.pickle")
    started = time.perf_counter()
    model = analyze_snapshot(snapshot)
    assert time.perf_counter() - started < 5
    assert model.ooms[0].largest_free_block == (1 << 20) - 8192  # after the allocation at +4096


def test_a_bytearray_past_the_memory_bound_is_one_line_every_time(tmp_path, capsys) -> None:
    """A BYTEARRAY8 of 8.7e18 bytes (fuzz.py --surface snapshot, seed 20261206, 2 cases in 10,000):
    CPython 3.11 frees the bytearray it could not allocate with its export count unset and, when
    that memory held a number, printed ``SystemError: deallocated bytearray object has exported
    buffers`` before tuiprof's line.  The freed memory is filled with ones before each read (bytes
    objects of the bytearray's size), which made the old code print it in most of the reads."""
    path = tmp_path / "bytearray8.pickle"
    path.write_bytes(b"\x80\x05\x96" + struct.pack("<Q", 8_675_445_206_487_501_972) + b".")
    for _ in range(50):
        spray = [bytes([1]) * 23 for _ in range(2000)]  # 32-byte header + 24: a bytearray object's 56 bytes
        del spray
        with pytest.raises(TraceError, match="claims more memory than there is"):
            read_snapshot(path)
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""
