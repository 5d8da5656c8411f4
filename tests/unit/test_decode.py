"""The decoder on the malformations real writers produce (TRACE_FORMAT.md)."""

from __future__ import annotations

import gzip

import pytest

from tuiprof.analysis import load_model
from tuiprof.trace import decode, load_trace


def _op(name: str, ts: float, dur: float, ext: int, tid: object = 1, extra: str = "") -> str:
    tid_text = f'"{tid}"' if isinstance(tid, str) else str(tid)
    return (
        f'{{"ph": "X", "cat": "cpu_op", "name": "{name}", "pid": 1, "tid": {tid_text}, "ts": {ts}, "dur": {dur},'
        f' "args": {{"External id": {ext}{extra}}}}}'
    )


def _document(events: list[str], tail: str = "") -> bytes:
    body = ",\n  ".join(events)
    return f'{{"schemaVersion": 1, "traceEvents": [\n  {body}\n]{tail}}}'.encode()


GOOD = [_op("aten::mm", 10, 5, 1), _op("aten::add", 20, 5, 2)]


def _load(tmp_path, data: bytes, name: str = "t.json"):
    path = tmp_path / name
    path.write_bytes(data)
    return load_trace(path)


@pytest.mark.parametrize(
    ("label", "bad_event"),
    [
        (
            "unescaped quotes",
            '{"ph": "X", "cat": "python_function", "name": "f("a"): g", "pid": 1, "tid": 1, "ts": 1, "dur": 1}',
        ),
        (
            "N/A",
            '{"ph": "X", "cat": "cpu_op", "name": "aten::x", "pid": 1, "tid": 1, "ts": 30, "dur": 1, "args": {"Fwd thread id": N/A}}',
        ),
        (
            "control chars",
            '{"ph": "X", "cat": "cpu_op", "name": "bad\x01name", "pid": 1, "tid": 1, "ts": 30, "dur": 1}',
        ),
        (
            "backslashes",
            '{"ph": "X", "cat": "cpu_op", "name": "C:\\Users\\me\\x.py", "pid": 1, "tid": 1, "ts": 30, "dur": 1}',
        ),
    ],
)
def test_malformed_event_is_repaired_and_the_rest_kept(tmp_path, label: str, bad_event: str) -> None:
    store = _load(tmp_path, _document([GOOD[0], bad_event, GOOD[1]]))
    assert store.event_count == 3, label
    assert store.report.repaired == 1 and store.report.skipped == 0
    assert store.report.problems


def test_invalid_utf8_is_replaced(tmp_path) -> None:
    bad = _op("aten::\xff", 30, 1, 3).encode("latin-1")
    data = _document(GOOD).replace(b"[\n", b"[\n  " + bad + b",\n", 1)
    store = _load(tmp_path, data)
    assert store.event_count == 3 and store.report.repaired == 1


def test_huge_integers_and_wild_window_end(tmp_path) -> None:
    events = GOOD + [
        '{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 1, "tid": 1, "ts": 40, "dur": 2,'
        ' "args": {"Comms Id": 10159970886766084423999}}',
        '{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": 9e30}',
    ]
    model = load_model(_write(tmp_path, _document(events)))
    assert model.report.skipped == 0
    assert model.info.duration_us == pytest.approx(32)


def _write(tmp_path, data: bytes, name: str = "t.json"):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_bare_array_legacy_names_and_string_tids(tmp_path) -> None:
    events = [
        '{"ph": "X", "cat": "Operator", "name": "aten::conv2d", "pid": 7, "tid": "7", "ts": 100, "dur": 50,'
        ' "args": {"external id": 5}}',
        '{"ph": "X", "cat": "Runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": "7", "ts": 110, "dur": 5,'
        ' "args": {"correlation": 99, "external id": 5}}',
        '{"ph": "X", "cat": "Kernel", "name": "conv_kernel", "pid": 0, "tid": "stream 7", "ts": 120, "dur": 30,'
        ' "args": {"correlation": 99}}',
        '{"ph": "i", "s": "t", "name": "[memory]", "pid": 7, "tid": 7, "ts": 105, "args": {"Device Type": 0, "Bytes": 64}}',
    ]
    data = ("[" + ",\n".join(events) + "]").encode()
    model = load_model(_write(tmp_path, data))
    conv = next(s for s in model.operators() if s.name == "aten::conv2d")
    assert conv.self_device_us == 30 and conv.cpu_mem_bytes == 64 and conv.self_cpu_us == 45
    assert model.kernels[0].launcher == "aten::conv2d"
    assert model.memory[0].peak_bytes == 64  # legacy: running sum of Bytes


def test_tids_of_digit_like_text_stay_text(tmp_path) -> None:
    """A tid "\u00b2" passes str.isdigit() but not int(): text, not a crash (found while
    typing the tid column for mypy; str.isdecimal() is what int() reads)."""
    events = [
        _op("aten::mm", 10, 5, 1, tid="\u00b2"),
        '{"ph": "i", "s": "t", "name": "[memory]", "pid": 1, "tid": "\u00b2", "ts": 12, "args": {"Device Type": 0, "Bytes": 64}}',
    ]
    model = load_model(_write(tmp_path, _document(events)))
    assert [s.name for s in model.operators()] == ["aten::mm"]
    assert model.memory[0].peak_bytes == 64


def test_members_after_the_event_array_are_read(tmp_path) -> None:
    tail = ', "traceName": "x", "INFO": ["a ], \\"b\\"]"], "baseTimeNanoseconds": 1700000000000000000'
    store = _load(tmp_path, _document(GOOD, tail))
    assert store.event_count == 2 and store.header.baseTimeNanoseconds == 1700000000000000000
    assert store.report.skipped == 0


def test_chunked_decode_equals_one_pass(tmp_path, monkeypatch) -> None:
    events = [_op(f"aten::op{i % 7}", 10 * i, 5, i, extra=', "Input Dims": [[1, 2], []]') for i in range(3000)]
    data = gzip.compress(_document(events))
    monkeypatch.setattr(decode, "CHUNK_BYTES", 4096)
    store = _load(tmp_path, data, "t.json.gz")
    assert store.event_count == 3000 and store.report.repaired == 0
    assert store.cpu.start_ns.tolist() == [10_000 * i for i in range(3000)]
