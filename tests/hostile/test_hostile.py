"""Hostile and broken input: one clean line and exit 2, or a loaded trace with the damage reported;
nothing executed, nothing left behind, no control character reaching the terminal."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES, SHARED_TRACES, needs_shared
from tests.helpers.cli import one_line_exit_2, tuiprof_bytes
from tests.helpers.processes import running
from tuiprof.analysis import load_model
from tuiprof.errors import TraceError
from tuiprof.report.export import ExportError, write_export
from tuiprof.report.plain import plain
from tuiprof.report.render import render_rows
from tuiprof.report.views import TRACE_VIEWS, Column, ViewOptions
from tuiprof.trace import decode, load_trace, source

RESNET = SAMPLES / "resnet18_cpu.pt.trace.json.gz"
PY = sys.executable


def _op(name: str, ts: int, dur: int, ext: int, extra: str = "") -> str:
    return (
        json.dumps(
            {
                "ph": "X",
                "cat": "cpu_op",
                "name": name,
                "pid": 1,
                "tid": 1,
                "ts": ts,
                "dur": dur,
                "args": {"External id": ext},
            }
        )[:-2]
        + extra
        + "}}"
    )


def _document(events: list[str]) -> bytes:
    return ('{"schemaVersion": 1, "traceEvents": [\n' + ",\n".join(events) + "\n]}").encode()


# ---------------------------------------------------------------- plain text


def test_plain_escapes_control_characters_and_cuts() -> None:
    assert plain("a\x1b]0;pwned\x07b") == "a\\x1b]0;pwned\\x07b"
    assert plain("x\x9by\u202ez") == "x\\x9by\\u202ez"
    assert plain("tab\there\nline") == "tab\\x09here\\x0aline"
    assert plain("[/] [@click=app.quit]") == "[/] [@click=app.quit]"  # markup is the renderer's business
    assert plain("abcdef", 4) == "abc…" and len(plain("x" * 10_000_000, 80)) == 80
    assert plain("\x1b" * 10, 5) == "\\x1b…"  # never longer than the limit's worth of source text


def test_summary_table_shows_names_as_plain_text(tmp_path) -> None:
    names = [
        "[/]",
        "[@click=app.quit]x",
        "[bold red]loud[/]",
        "esc\x1b]0;pwned\x07",
        "clear\x1b[2J",
        "x" * 3000,
        "del\x7f c1\u009b[2J",
    ]
    path = tmp_path / "hostile[b]\x1b[2J.json"
    path.write_bytes(_document([_op(name, 10 * i, 5, i) for i, name in enumerate(names)]))
    for fmt in ("table", "markdown", "csv", "json"):
        result = tuiprof_bytes("summary", str(path), "--format", fmt)
        assert result.returncode == 0, result.stderr
        out, err = result.stdout.decode(), result.stderr.decode()
        assert not any(c in out for c in "\x1b\x07\x7f\u009b") and "\x1b" not in err, fmt
        if fmt in ("table", "markdown", "csv"):
            assert "[/]" in out and "[@click=app.quit]x" in out and "\\x1b]0;pwned\\x07" in out, fmt
    table = tuiprof_bytes("summary", str(path)).stdout.decode()
    assert "[bold red]loud[/]" in table and "Operators - hostile[b]\\x1b[2J.json" in table
    assert max(len(line) for line in table.splitlines()) < 1000  # the 3,000-character name is cut


def test_csv_cells_that_spreadsheets_would_run_are_neutralised() -> None:
    columns = (Column("name", "Name", "text", ""), Column("calls", "Calls", "int", ""))
    rows = [{"name": n, "calls": -3} for n in ("=cmd|'/C calc'!A0", "+1", "-x", "@SUM(A1)", "\tx", "plain")]
    lines = render_rows(rows, columns, "csv").splitlines()
    assert lines[1:] == ["'=cmd|'/C calc'!A0,-3", "'+1,-3", "'-x,-3", "'@SUM(A1),-3", "'\\x09x,-3", "plain,-3"]


def test_errors_and_file_names_reach_stderr_escaped(tmp_path) -> None:
    path = tmp_path / "evil\x1b]0;title\x07.json"
    path.write_bytes(b"not json")
    line = one_line_exit_2(tuiprof_bytes("summary", str(path)), "evil\\x1b]0;title\\x07.json")
    assert "\x1b" not in line
    run = tmp_path / "run"
    run.mkdir()
    for i in range(2):
        (run / f"w{i}\x1b[2J.pt.trace.json").write_bytes(_document([_op("aten::mm", 1, 2, 1)]))
    result = tuiprof_bytes("summary", str(run))
    assert result.returncode == 0 and b"\x1b" not in result.stderr and b"\\x1b[2J" in result.stderr


# ---------------------------------------------------------------- exports


def test_export_is_exclusive_and_never_follows_a_symlink(tmp_path) -> None:
    victim = tmp_path / "bashrc"
    victim.write_text("original\n")
    (tmp_path / "tuiprof-ops-t.csv").symlink_to(victim)
    written = write_export(tmp_path, "tuiprof-ops-t", ".csv", "a,b\n")
    assert written == tmp_path / "tuiprof-ops-t-1.csv" and written.read_text() == "a,b\n"
    assert victim.read_text() == "original\n"
    again = write_export(tmp_path, "tuiprof-ops-t", ".csv", "c\n")
    assert again.name == "tuiprof-ops-t-2.csv" and written.read_text() == "a,b\n"
    (tmp_path / "dangling.csv").symlink_to(tmp_path / "missing-target")
    assert write_export(tmp_path, "dangling", ".csv", "x").name == "dangling-1.csv"
    assert not (tmp_path / "missing-target").exists()
    assert write_export(tmp_path, "../../etc/x\x1b", ".csv", "y").parent == tmp_path


def test_export_into_an_unwritable_folder_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ExportError, match="cannot write an export into .*missing"):
        write_export(tmp_path / "missing", "t", ".csv", "x")
    if os.geteuid() != 0:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o500)
        with pytest.raises(ExportError, match="Permission denied"):
            write_export(locked, "t", ".csv", "x")


# ---------------------------------------------------------------- paths


def _fifo(tmp_path) -> str:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return str(path)


@pytest.mark.parametrize(
    ("label", "make", "needle"),
    [
        ("empty path", lambda tmp: "", "an empty path"),
        ("/dev/zero", lambda tmp: "/dev/zero", "not a file, a directory or a pipe"),
        ("/dev/urandom", lambda tmp: "/dev/urandom", "not a file, a directory or a pipe"),
        ("/dev/null", lambda tmp: "/dev/null", "not a file, a directory or a pipe"),
        ("300-character name", lambda tmp: str(tmp / ("a" * 300 + ".json")), "File name too long"),
        ("/proc/self/mem", lambda tmp: "/proc/self/mem", "cannot be read"),
        ("FIFO without a writer", _fifo, "a named pipe that nothing writes to"),
        ("missing", lambda tmp: str(tmp / "nope.json"), "no such file"),
    ],
)
def test_paths_that_are_not_traces(tmp_path, label: str, make, needle: str) -> None:
    result = tuiprof_bytes("summary", make(tmp_path), stdin=subprocess.DEVNULL, timeout=30)
    one_line_exit_2(result, needle)


def test_unreadable_directory(tmp_path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every directory")
    locked = tmp_path / "run"
    locked.mkdir()
    locked.chmod(0)
    try:
        one_line_exit_2(tuiprof_bytes("summary", str(locked)), "cannot be listed")
    finally:
        locked.chmod(0o700)


def test_dev_stdin_from_a_terminal_or_nothing_is_refused() -> None:
    one_line_exit_2(tuiprof_bytes("summary", "-", stdin=subprocess.DEVNULL), "standard input")


@pytest.mark.parametrize("compressed", [True, False])
def test_a_trace_from_stdin(compressed: bool) -> None:
    data = RESNET.read_bytes() if compressed else gzip.decompress(RESNET.read_bytes())
    result = tuiprof_bytes("summary", "-", "--format", "json", "--limit", "3", input=data)
    assert result.returncode == 0, result.stderr
    expected = tuiprof_bytes("summary", str(RESNET), "--format", "json", "--limit", "3")
    assert json.loads(result.stdout) == json.loads(expected.stdout)
    shown = tuiprof_bytes("summary", "-", "--limit", "1", input=data).stdout.decode()
    assert "Operators - stdin" in shown


def test_a_trace_from_a_process_substitution_and_a_fifo(tmp_path) -> None:
    script = f"{PY} -m tuiprof summary <(cat {RESNET}) --format csv --limit 2"
    result = subprocess.run(
        ["bash", "-c", script], capture_output=True, cwd=ROOT, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )
    assert result.returncode == 0 and result.stdout.count(b"\n") == 3, result.stderr
    fifo = _fifo(tmp_path)
    writer = subprocess.Popen(["bash", "-c", f"cat {RESNET} > {fifo}"])
    time.sleep(0.3)
    try:
        result = tuiprof_bytes("summary", fifo, "--format", "csv", "--limit", "2")
    finally:
        writer.wait(timeout=30)
    assert result.returncode == 0 and result.stdout.count(b"\n") == 3, result.stderr


def test_garbage_from_stdin_stops_at_its_first_bytes() -> None:
    started = time.monotonic()
    one_line_exit_2(tuiprof_bytes("summary", "-", input=b"y\n" * 5_000_000), "stdin", "not JSON")
    one_line_exit_2(tuiprof_bytes("summary", "-", input=b"\x00" * 1_000_000), "not JSON")
    assert time.monotonic() - started < 30


def test_no_file_sample_for_an_empty_path() -> None:
    one_line_exit_2(tuiprof_bytes("open", ""), "an empty path")


@needs_shared
def test_trace_selection_is_by_rank_number_or_a_clear_error() -> None:
    run = SHARED_TRACES / "dlrm_8ranks"
    line = one_line_exit_2(tuiprof_bytes("summary", str(run), "--trace", "9"), "no trace of rank 9")
    assert "0, 1, 2, 3, 4, 5, 6, 7" in line
    three = tuiprof_bytes("summary", str(run), "--trace", "3", "--limit", "1")
    assert three.returncode == 0 and b"showing rank 3, worker3_" in three.stderr
    by_name = tuiprof_bytes("summary", str(run), "--trace", "worker5", "--limit", "1")
    assert by_name.returncode == 0 and b"showing rank 5, worker5_" in by_name.stderr


# ---------------------------------------------------------------- decompression bombs


def _gzip_members(tmp_path, name: str, member: bytes, count: int) -> Path:
    path = tmp_path / name
    one = gzip.compress(member, compresslevel=9)
    path.write_bytes(one * count)
    return path


def test_gzip_of_zeros_stops_at_the_first_bytes(tmp_path) -> None:
    path = tmp_path / "zeros.json.gz"
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as handle:
        chunk = b"\x00" * (1 << 20)
        for _ in range(128):  # 128 MB inflated, 128 kB on disk
            handle.write(packer.compress(chunk))
        handle.write(packer.flush())
    started = time.monotonic()
    one_line_exit_2(tuiprof_bytes("summary", str(path)), "zeros.json.gz", "not JSON")
    assert time.monotonic() - started < 20


def test_multi_member_gzip_of_brackets_stops_at_the_first_bytes(tmp_path) -> None:
    path = _gzip_members(tmp_path, "brackets.json.gz", b"[" * (1 << 20), 200)  # 200 MB of "["
    one_line_exit_2(tuiprof_bytes("summary", str(path)), "not a trace: it starts `[[[[")


def test_a_bomb_that_starts_like_a_trace_is_refused_by_ratio(tmp_path, monkeypatch) -> None:
    body = b'{"traceEvents": [' + b" " * (100 << 20) + b"]}"
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(body, compresslevel=9))
    assert path.stat().st_size * 100 < len(body)
    line = one_line_exit_2(tuiprof_bytes("summary", str(path)), "bomb.json.gz", "times its compressed size")
    assert "--max-inflate-ratio 0" in line
    lifted = tuiprof_bytes("summary", str(path), "--max-inflate-ratio", "0")
    one_line_exit_2(lifted, "no events")  # inflated all the way: an empty trace, not a bomb error


def test_inflating_is_in_bounded_pieces(monkeypatch) -> None:
    biggest = []
    packed = gzip.compress(b'{"traceEvents": [' + b" " * (100 << 20) + b"]}")
    monkeypatch.setenv("TUIPROF_MAX_INFLATE_RATIO", "0")
    chunks = iter([packed[i : i + 4096] for i in range(0, len(packed), 4096)] + [b""])
    source.inflate_gzip(lambda n: next(chunks), len(packed), "t", lambda b: biggest.append(len(b)), None)
    assert max(biggest) <= source.INFLATE_PIECE and sum(biggest) == (100 << 20) + 19


def _inflaters() -> list:
    libs = [zlib]
    try:
        from zlib_ng import zlib_ng
    except ImportError:  # the stdlib's zlib is then the only one used
        return libs
    return [*libs, zlib_ng]


@pytest.mark.parametrize("lib", _inflaters(), ids=lambda lib: lib.__name__)
def test_both_inflaters_read_the_same_streams_and_refuse_the_same_damage(monkeypatch, lib) -> None:
    """zlib-ng is used where it is installed, the stdlib's zlib elsewhere: same bytes, same errors."""
    monkeypatch.setattr(source, "inflate_lib", lib)
    packed = RESNET.read_bytes()
    two_members = packed + gzip.compress(b" ")

    def inflate(data: bytes) -> bytes:
        parts, pieces = [], iter([data[i : i + 65536] for i in range(0, len(data), 65536)] + [b""])
        source.inflate_gzip(lambda n: next(pieces), len(data), "t.json.gz", parts.append, None)
        return b"".join(parts)

    assert inflate(two_members) == gzip.decompress(packed) + b" "
    with pytest.raises(TraceError, match="truncated"):
        inflate(packed[:5000])
    damaged = bytearray(packed)
    damaged[2000:2100] = bytes(100)
    with pytest.raises(TraceError, match="gzip data is corrupt"):
        inflate(bytes(damaged))


def test_real_traces_are_below_the_ratio_limit() -> None:
    for path in [*SAMPLES.glob("*.json.gz"), *SHARED_TRACES.glob("*.json.gz")]:
        assert len(gzip.decompress(path.read_bytes())) < source.DEFAULT_MAX_INFLATE_RATIO / 2 * path.stat().st_size


# ---------------------------------------------------------------- damaged events


def test_deeply_nested_json_is_damage_not_a_crash(tmp_path) -> None:
    good = [_op("aten::mm", 10, 5, 1), _op("aten::add", 20, 5, 2)]
    nested_args = _op("aten::deep", 30, 5, 3, ', "x": ' + "[" * 5000 + "]" * 5000)
    brackets = "[" * 1000
    path = tmp_path / "deep.json"
    path.write_bytes(_document([good[0], nested_args, brackets, good[1]]))
    store = load_trace(path)
    names = {store.names[i] for i in store.cpu.name}
    assert {"aten::mm", "aten::add"} <= names and store.report.skipped >= 1
    whole = tmp_path / "whole.json"
    whole.write_bytes(b'{"x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
    one_line_exit_2(tuiprof_bytes("summary", str(whole)), "whole.json")


def test_a_missing_brace_loses_one_event_not_the_next() -> None:
    report = decode.DecodeReport()
    data = (
        b'{"ph":"X","name":"a","ts":1,"dur":2},\n{"ph":"X","name":"b","ts":3,"dur":2,\n'
        b'{"ph":"X","name":"c","ts":5,"dur":2},\n{"ph":"X","name":"d","ts":7,"dur":1,"args":{"l":[{"x":1}, {"y":2}]}}'
    )
    events = decode.salvage_events(data, report)
    assert [e.name for e in events] == ["a", "c", "d"] and report.skipped == 1


def test_salvage_is_linear(monkeypatch) -> None:
    """Decode calls grow with the events, not with their square (the old salvage re-read every run)."""
    calls = []
    original = decode._decode_events

    def counting(text):
        calls.append(len(text))
        return original(text)

    monkeypatch.setattr(decode, "_decode_events", counting)
    work = []
    for count in (2000, 8000):
        events = [b'{"ph":"X","name":"e%d","ts":%d,"dur":1}' % (i, i) for i in range(count)]
        for i in range(0, count, 40):  # a damaged event every 40
            events[i] = events[i][:-1]
        calls.clear()
        found = decode.salvage_events(b",\n".join(events), decode.DecodeReport())
        assert len(found) == count - count // 40
        work.append(sum(calls))
    assert work[1] < 5 * work[0]  # 4x the events: ~4x the bytes decoded


def test_device_events_without_any_operator(tmp_path) -> None:
    path = tmp_path / "device_only.json"
    kernel = {
        "ph": "X",
        "cat": "kernel",
        "name": "k1",
        "pid": 0,
        "tid": 7,
        "ts": 10,
        "dur": 5,
        "args": {"correlation": 1, "External id": 1, "stream": 7, "device": 0},
    }
    copy = {
        "ph": "X",
        "cat": "gpu_memcpy",
        "name": "Memcpy HtoD",
        "pid": 0,
        "tid": 7,
        "ts": 20,
        "dur": 5,
        "args": {"correlation": 2, "stream": 7, "device": 0},
    }
    path.write_text(json.dumps({"traceEvents": [kernel, copy]}))
    model = load_model(path)
    for view in TRACE_VIEWS.values():
        render_rows(view.build(model, ViewOptions()), view.columns, "table")
    assert {r["name"] for r in TRACE_VIEWS["kernels"].build(model, ViewOptions())} == {"k1", "Memcpy HtoD"}


def test_a_kernel_grid_of_nested_lists_is_no_launch_shape(tmp_path) -> None:
    """Found by scripts/fuzz.py: ``"grid": [[1], 2]`` made the shape key unhashable (TypeError)."""
    kernel = {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": 0,
        "tid": 7,
        "ts": 1,
        "dur": 2,
        "args": {"grid": [[1], 2], "block": [[[3]]], "correlation": 1},
    }
    good = dict(kernel, name="k2", args={"grid": [4, 1, 1], "block": [128, 1, 1], "correlation": 2})
    path = tmp_path / "grid.json"
    path.write_text(json.dumps({"traceEvents": [kernel, good]}))
    rows = {r["name"]: r for r in TRACE_VIEWS["kernels"].build(load_model(path), ViewOptions())}
    assert rows["k"]["grid"] in ("", None) and rows["k2"]["grid"] == "4x1x1"


# The child's own peak RSS in kB: VmHWM starts afresh at exec (ru_maxrss keeps the forked parent's).
PEAK_KB = "re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read()).group(1)"


def test_one_huge_ts_text_does_not_widen_every_row(tmp_path) -> None:
    """Found by scripts/fuzz.py: one 100 kB ``ts`` made the exact-ns matrix 100 kB wide for every
    event (20,000 events: 80 s and 21 GB); now that event is damaged and the rest load."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "a", "pid": 1, "tid": 1, "ts": i, "dur": 1} for i in range(20_000)]
    events[5]["ts"] = "x" * 100_000
    path = tmp_path / "long_ts.json"
    path.write_text(json.dumps({"traceEvents": events}))
    code = (
        "import re; from tuiprof.analysis import load_model;"
        f"m = load_model({str(path)!r}); print(m.report.damaged, {PEAK_KB})"
    )
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    damaged, peak_kb = map(int, result.stdout.split())
    assert damaged == 1 and peak_kb < 500_000, result.stderr


def _module_chain(depth: int) -> bytes:
    frames = [
        {
            "ph": "X",
            "cat": "python_function",
            "name": f"nn.Module: M_{i}",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 2 * depth - 2 * i,
            "args": {"Python id": i + 1, "Python parent id": i if i else None},
        }
        for i in range(depth)
    ]
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": depth, "dur": 1, "args": {}}
    return json.dumps({"traceEvents": [*frames, op]}).encode()


def test_deep_module_nesting_is_cut_with_a_note(tmp_path) -> None:
    from tuiprof.analysis.modules import MAX_MODULE_DEPTH

    path = tmp_path / "deep.json"
    path.write_bytes(_module_chain(3000))
    model = load_model(path)
    nodes = list(model.modules.walk())
    assert len(nodes) == MAX_MODULE_DEPTH and max(n.depth for n in nodes) == MAX_MODULE_DEPTH - 1
    deepest = nodes[-1]
    assert deepest.path.count("/") == MAX_MODULE_DEPTH - 1 and deepest.calls == 1
    assert deepest.operator_rows  # the operator under frame 3,000 counts in the module at the cut
    cut = f"deeper than {MAX_MODULE_DEPTH:,} levels"
    assert any(cut in p and f"{3000 - MAX_MODULE_DEPTH:,} deeper module calls" in p for p in model.report.problems)
    result = tuiprof_bytes("summary", str(path), "--view", "modules", "--limit", "2")
    assert result.returncode == 0 and cut.encode() in result.stderr


def test_deep_module_nesting_costs_memory_linear_in_events(tmp_path) -> None:
    path = tmp_path / "deep.json"
    path.write_bytes(_module_chain(20_000))  # main: 1.6 GB for summary
    code = (
        "import re; from tuiprof.analysis import load_model;"
        f"m = load_model({str(path)!r}); rows = [n.path for n in m.modules.walk()]; print({PEAK_KB})"
    )
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) < 400_000  # KB; ~60 MB measured


def test_operators_nested_100000_deep_load_in_linear_time(tmp_path) -> None:
    depth = 100_000
    events = [
        {
            "ph": "X",
            "cat": "cpu_op",
            "name": f"op{i % 3}" if i else "root",
            "pid": 1,
            "tid": 1,
            "ts": i,
            "dur": 2 * depth - 2 * i,
            "args": {"External id": i + 1},
        }
        for i in range(depth)
    ]
    events += [
        {
            "ph": "X",
            "cat": "kernel",
            "name": "k",
            "pid": 0,
            "tid": 7,
            "ts": 10 * depth + i,
            "dur": 1,
            "args": {"External id": i + 1, "correlation": i + 1},
        }
        for i in range(0, depth, 100)
    ]
    path = tmp_path / "chain.json"
    path.write_text(json.dumps({"traceEvents": events}))
    started = time.monotonic()
    result = tuiprof_bytes("summary", str(path), "--format", "json", timeout=120)
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 30  # main: minutes (one full pass per nesting level)
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    assert rows["root"]["device_total_us"] == depth // 100  # every kernel, 1 us each, is below the root


# ---------------------------------------------------------------- workers and temporary files


def test_decode_workers_never_import_from_the_current_directory(tmp_path) -> None:
    marker = tmp_path / "IMPORTED"
    planted = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in ("msgspec.py", "numpy.py", "pickle.py"):
        (tmp_path / name).write_text(planted)
    (tmp_path / "tuiprof").mkdir()
    (tmp_path / "tuiprof" / "__init__.py").write_text(planted)
    plain_trace = tmp_path / "t.json"
    plain_trace.write_bytes(gzip.decompress(RESNET.read_bytes()))
    code = (
        "import sys; from tuiprof.trace import decode, parallel, load_trace;"
        "parallel.PARALLEL_MIN_BYTES = 0; parallel.usable_cores = lambda: 2; decode.CHUNK_BYTES = 1 << 18;"
        "parallel.decode_columns = None;"  # the parent may not decode a span itself: workers did it all
        "store = load_trace('t.json'); print('EVENTS', store.event_count)"
    )
    # -P: the parent itself does not put the current directory on sys.path (as an installed script)
    result = subprocess.run(
        [PY, "-P", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert result.returncode == 0 and "EVENTS" in result.stdout, result.stderr
    assert not marker.exists(), marker.read_text()


def test_workers_exit_when_their_parent_is_killed(tmp_path) -> None:
    code = (
        "import time; from tuiprof.trace.parallel import DecodeWorkers;"
        "pool = DecodeWorkers(2); print(*[p.pid for p in pool.processes], flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen(
        [PY, "-c", code], stdout=subprocess.PIPE, text=True, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT))
    )
    pids = [int(p) for p in parent.stdout.readline().split()]  # type: ignore[union-attr]
    assert len(pids) == 2
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(running(pid) for pid in pids):
        time.sleep(0.1)
    assert not any(running(pid) for pid in pids)


SLOW_LOAD = (
    "import sys, time; from tuiprof.trace import load; from tuiprof import cli;"
    "load.GZIP_TO_FILE_BYTES = 0;"
    "load._load = lambda *a, **k: (print('LOADING', flush=True), time.sleep(60));"
    "sys.exit(cli.main(sys.argv[1:]))"
)


@pytest.mark.parametrize(
    ("signum", "codes"), [(signal.SIGTERM, {-15, 143}), (signal.SIGHUP, {-1, 129}), (signal.SIGINT, {130})]
)
@pytest.mark.parametrize("from_stdin", [False, True])
def test_temporary_files_are_removed_on_signals(tmp_path, signum: int, codes: set[int], from_stdin: bool) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    args = ["summary", "-"] if from_stdin else ["summary", str(RESNET)]
    child = subprocess.Popen(
        [PY, "-c", SLOW_LOAD, *args],
        stdin=subprocess.PIPE if from_stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(temp)),
    )
    if from_stdin:
        child.stdin.write(RESNET.read_bytes())  # type: ignore[union-attr]
        child.stdin.close()  # type: ignore[union-attr]
    assert child.stdout.readline().strip() == b"LOADING"  # type: ignore[union-attr]
    assert [p.name for p in temp.iterdir() if p.name.startswith("tuiprof-")]
    child.send_signal(signum)
    child.wait(timeout=30)
    assert child.returncode in codes, child.stderr.read()  # type: ignore[union-attr]
    assert not list(temp.iterdir())


def test_a_signal_while_the_main_thread_registers_a_file_ends_the_process(tmp_path) -> None:
    """The handler cleans up under the registry's lock; a SIGTERM that came while the main thread
    held that lock (registering a temporary file) waited on it for ever: a hang, the file left."""
    code = (
        "import os, signal; from tuiprof import cleanup; cleanup.install_signal_handlers();"
        "f = cleanup.temporary_file(directory=os.environ['TMPDIR']).__enter__();"
        "cleanup._lock.acquire(); os.kill(os.getpid(), signal.SIGTERM); print('not ended')"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT), TMPDIR=str(tmp_path))
    result = subprocess.run([PY, "-c", code], capture_output=True, text=True, env=env, timeout=30)
    assert result.returncode in {-15, 143} and "not ended" not in result.stdout, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_temporary_file_removed_after_a_load_error(tmp_path, monkeypatch) -> None:
    from tuiprof.trace import load

    monkeypatch.setattr(load, "GZIP_TO_FILE_BYTES", 0)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": [{"ph": "X"'))
    with pytest.raises(TraceError):
        load_trace(path)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.json.gz"]
