"""Every process tuiprof starts: decode workers, rank workers and local Dask workers import
nothing planted in the current directory and never outlive tuiprof; a ``--cluster`` address
that is not a Dask scheduler is one line and exit 2, quickly (issue 30, items 7, 8, 9)."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, SAMPLES
from tests.helpers.processes import running

GLOO = SAMPLES / "ddp_gloo_2ranks"
PY = sys.executable
PLANTED = ("numpy.py", "msgspec.py", "pickle.py", "multiprocessing.py", "orjson.py")

# tuiprof as its installed script runs it: sys.path[0] is the script's folder, not the current
# directory; patches (inside the __main__ guard: a spawned Dask worker re-imports this file)
# make every kind of worker do all the work.
RUNNER = """
import sys

if __name__ == "__main__":
    from tuiprof.analysis import ranks
    from tuiprof.trace import decode, parallel

    parallel.usable_cores = lambda: 2  # rank workers: two, whatever this machine has
    parallel.PARALLEL_MIN_BYTES = 0  # decode workers for a small file...
    decode.CHUNK_BYTES = 1 << 18  # ...in several spans
    parallel.decode_file_span = None  # the parent may not decode a span itself
    ranks.summarise_one = lambda rank_file: "analysed in the parent"  # nor summarise a rank
    from tuiprof.cli import main

    sys.exit(main(sys.argv[1:]))
"""


def _runner(tmp_path: Path) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    (folder / "tuiprof_runner.py").write_text(RUNNER)
    return folder / "tuiprof_runner.py"


def _planted_directory(tmp_path: Path) -> tuple[Path, Path]:
    """A current directory whose every module records that it was imported."""
    cwd, marker = tmp_path / "cwd", tmp_path / "IMPORTED"
    cwd.mkdir()
    planted = f"open({str(marker)!r}, 'a').write(__name__ + '\\n')\n"
    for name in PLANTED:
        (cwd / name).write_text(planted)
    (cwd / "tuiprof").mkdir()
    (cwd / "tuiprof" / "__init__.py").write_text(planted)
    return cwd, marker


def _run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for source in GLOO.glob("*.pt.trace.json.gz"):  # not the sidecars a run may have left there
        shutil.copy(source, run)
    return run


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT), **extra)


@pytest.mark.parametrize("kind", ["decode", "ranks"])
def test_no_worker_imports_from_the_current_directory(tmp_path, kind: str) -> None:
    cwd, marker = _planted_directory(tmp_path)
    if kind == "decode":
        trace = tmp_path / "t.json"
        trace.write_bytes(__import__("gzip").decompress((SAMPLES / "resnet18_cpu.pt.trace.json.gz").read_bytes()))
        args = ["summary", str(trace), "--limit", "3"]
    else:
        args = ["summary", str(_run_dir(tmp_path)), "--view", "ranks", "--format", "csv"]
    result = subprocess.run(
        [PY, str(_runner(tmp_path)), *args], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=120
    )
    assert not marker.exists(), f"{kind} workers imported {marker.read_text()!r} from the current directory"
    assert result.returncode == 0, result.stderr
    assert "analysed in the parent" not in result.stderr
    if kind == "ranks":
        assert [line.split(",")[0] for line in result.stdout.splitlines()[1:]] == ["0", "1"]


def test_local_dask_workers_are_capped_private_and_import_nothing_planted(tmp_path) -> None:
    pytest.importorskip("dask.distributed")
    cwd, marker = _planted_directory(tmp_path)
    temp = tmp_path / "tmp"
    temp.mkdir()
    (temp / "dask-scratch-space").write_text("planted: Dask's default scratch space is a file")
    run = _run_dir(tmp_path)
    code = RUNNER.replace("ranks.summarise_one = ", "_ = ")  # Dask workers unpickle the real one by name
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "tuiprof_runner.py").write_text(code)
    started = time.monotonic()
    result = subprocess.run(
        [
            PY,
            str(tmp_path / "bin" / "tuiprof_runner.py"),
            "summary",
            str(run),
            "--view",
            "ranks",
            "--format",
            "csv",
            "--cluster",
            "local:1000",
        ],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=_env(TMPDIR=str(temp)),
        timeout=120,
    )
    assert not marker.exists(), f"Dask workers imported {marker.read_text()!r} from the current directory"
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["tuiprof: --cluster local:1000: 2 workers, one per usable core, not 1000"]
    assert [line.split(",")[0] for line in result.stdout.splitlines()[1:]] == ["0", "1"]
    assert [p.name for p in temp.iterdir()] == ["dask-scratch-space"]  # the planted file alone: nothing left behind
    assert time.monotonic() - started < 60


# ---------------------------------------------------------------- workers end with their parent


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _big_run_dir(tmp_path: Path, files: int = 4, events: int = 250_000) -> Path:
    """Files of 26 MB (2-3 s each for a rank worker), hard links of one: numbered by name."""
    run = tmp_path / "big"
    run.mkdir()
    event = '{"ph":"X","cat":"cpu_op","name":"aten::op%d","pid":1,"tid":1,"ts":%d,"dur":5,"args":{"External id":%d}}'
    text = (
        '{"schemaVersion":1,"traceEvents":[' + ",".join([event % (i % 50, i * 10, i + 1) for i in range(events)]) + "]}"
    )
    first = run / "rank0.json"
    first.write_text(text)
    for index in range(1, files):
        os.link(first, run / f"rank{index}.json")
    return run


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL])
def test_rank_workers_end_with_their_parent(tmp_path, signum: int) -> None:
    run = _big_run_dir(tmp_path)
    code = "import sys; from tuiprof.trace import parallel; parallel.usable_cores = lambda: 2; from tuiprof.cli import main; sys.exit(main(sys.argv[1:]))"
    parent = subprocess.Popen(
        [PY, "-c", code, "summary", str(run), "--view", "ranks"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=tmp_path,
        env=_env(),
    )
    try:
        deadline = time.monotonic() + 30
        while len(workers := _children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(workers) == 2, "no rank workers started"
        time.sleep(1.0)  # each is well into its first file
        assert parent.poll() is None, "the run ended before the signal"
        parent.send_signal(signum)
        signalled = time.monotonic()
        parent.wait(timeout=30)
        assert time.monotonic() - signalled < 1.0, "the parent waited for its workers to finish their files"
        # SIGTERM, SIGINT: killed in the handler, before the parent exits. SIGKILL: their watch of
        # getppid() every 0.5 s, which waits for the GIL a decode holds (seconds on a loaded machine:
        # over 5 s at a load average of 10 on 2 cores)
        deadline = time.monotonic() + (15 if signum == signal.SIGKILL else 0.5)
        while any(running(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in workers if running(pid)], "rank workers outlived their parent"
    finally:
        parent.kill()
        parent.wait()
        for pid in workers if "workers" in locals() else []:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


# ---------------------------------------------------------------- --cluster addresses


class _Servers:
    """Loopback services that are not Dask schedulers: an HTTP server, one that sends random
    bytes, and a port that refuses (bound, not listening)."""

    def __init__(self) -> None:
        self.http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.noise = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._send_noise, daemon=True).start()
        self.closed = socket.socket()
        self.closed.bind(("127.0.0.1", 0))

    def _send_noise(self) -> None:
        while True:
            try:
                client, _ = self.noise.accept()
            except OSError:
                return
            with client:
                client.sendall(os.urandom(4096))

    def port(self, name: str) -> int:
        return {
            "http": self.http.server_address[1],
            "noise": self.noise.getsockname()[1],
            "closed": self.closed.getsockname()[1],
        }[name]

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()
        self.noise.close()
        self.closed.close()


CLUSTER_CASES = {
    "": "the address is empty",
    "nonsense": "not HOST:PORT",
    "inproc://x": "unsupported scheme 'inproc'",
    "ucx://127.0.0.1:1": "unsupported scheme 'ucx'",
    "tcp://127.0.0.1:99999": "not an address",
    "tcp://127.0.0.1:{closed}": "nothing accepts connections there",
    "tcp://127.0.0.1:{http}": "not a Dask scheduler",
    "127.0.0.1:{noise}": "not a Dask scheduler",
}

# Each case through the command line in one process (Dask imported once), with the
# handshake's timeout at 1 s (an HTTP server waits for a request line for ever).
CLUSTER_RUNNER = """
import contextlib, io, json, sys, time
from tuiprof.analysis import cluster
from tuiprof.cli import main

cluster.HANDSHAKE_TIMEOUT_S = 1
results = {}
for address in json.loads(sys.argv[1]):
    stderr = io.StringIO()
    started = time.monotonic()
    with contextlib.redirect_stderr(stderr):
        code = main(["summary", sys.argv[2], "--view", "ranks", "--cluster", address])
    results[address] = [code, stderr.getvalue(), time.monotonic() - started]
print(json.dumps(results))
"""


def test_bad_cluster_addresses_are_one_line_and_exit_2_at_once(tmp_path) -> None:
    pytest.importorskip("dask.distributed")
    run = _run_dir(tmp_path)
    servers = _Servers()
    try:
        cases = {
            address.format(**{n: servers.port(n) for n in ("closed", "http", "noise")}): needle
            for address, needle in CLUSTER_CASES.items()
        }
        result = subprocess.run(
            [PY, "-c", CLUSTER_RUNNER, json.dumps(list(cases)), str(run)],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
    finally:
        servers.close()
    assert result.returncode == 0 and result.stderr == "", result.stderr  # nothing from Dask's loggers either
    answers = json.loads(result.stdout)
    for address, needle in cases.items():
        code, stderr, seconds = answers[address]
        lines = stderr.splitlines()
        assert code == 2 and len(lines) == 1 and lines[0].startswith("tuiprof: --cluster "), (address, stderr)
        assert needle in lines[0], (address, lines[0])
        assert seconds < 4, (address, seconds)  # a refused port waited Dask's 20 s before
    assert not list(run.glob("*.tuiprof-summary"))  # refused before any rank was analysed


def test_an_empty_cluster_address_is_refused_even_when_every_rank_has_a_sidecar(tmp_path) -> None:
    run = _run_dir(tmp_path)
    first = subprocess.run(
        [PY, "-m", "tuiprof", "summary", str(run), "--view", "ranks"], capture_output=True, env=_env(), timeout=120
    )
    assert first.returncode == 0 and len(list(run.glob("*.tuiprof-summary"))) == 2
    again = subprocess.run(
        [PY, "-m", "tuiprof", "summary", str(run), "--view", "ranks", "--cluster", ""],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=120,
    )
    assert again.returncode == 2 and again.stderr.splitlines() == [
        "tuiprof: --cluster '': the address is empty; write tcp://HOST:PORT (a scheduler listens on 8786 by default) or local:N"
    ]


def test_cluster_with_a_single_trace_view_is_refused_not_ignored() -> None:
    """A trace file has no run views; a run directory has, and --cluster is for them (the
    refusals are built from the kinds' data, tuiprof/kinds: a trace file was told to add
    --view ranks, which it cannot take)."""
    for path, said in (
        (
            SAMPLES / "resnet18_cpu.pt.trace.json.gz",
            "tuiprof: --cluster '': summary does not take it for a trace file (it does for a run directory); drop it",
        ),
        (
            SAMPLES / "ddp_gloo_2ranks",
            "tuiprof: --cluster '': is for --view ranks, rank-steps, spread, collectives or collective-types of a "
            "run directory, not --view operators; drop it, or add --view ranks",
        ),
    ):
        result = subprocess.run(
            [PY, "-m", "tuiprof", "summary", str(path), "--cluster", ""],
            capture_output=True,
            text=True,
            env=_env(),
            timeout=120,
        )
        assert result.returncode == 2 and result.stdout == "" and result.stderr.splitlines() == [said]
