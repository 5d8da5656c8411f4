"""Summarising a run's ranks on a Dask cluster (``--cluster ADDRESS`` or ``--cluster local:N``).

A 256-rank run of 2 GB traces is 512 GB: no single machine should read it.
Each rank's summary needs only its own file, so the per-rank work
(:func:`tuiprof.analysis.ranks.summarise_one`: load, analyse, summarise) runs
on the cluster's workers, next to the traces (a shared filesystem path), and
only the summaries (a few KB each) come back.  Dask is an optional extra
(``pip install "tuiprof[cluster]"``), imported only here and only with
``--cluster``.

An address is untrusted input, checked before Dask sees it, each problem one
line (exit 2) and quick:

- only ``tcp://HOST:PORT``, ``tls://HOST:PORT``, ``HOST:PORT`` (tcp) and
  ``local:N``; any other scheme (``inproc://``, ``ucx://``...) or an empty
  address is refused by name;
- a port nothing listens on is refused at once (a plain TCP connect first:
  Dask would retry for its whole timeout);
- whatever listens must complete Dask's handshake within
  :data:`HANDSHAKE_TIMEOUT_S` (an HTTP server, an SSH daemon or random bytes do
  not: Dask reads their first bytes as a frame length);
- ``local:N`` starts at most one worker per usable core (a note says so when
  N was more), in a private scratch folder removed afterwards (Dask's default,
  ``$TMPDIR/dask-scratch-space``, is shared and can be planted), and the
  processes it starts get ``PYTHONSAFEPATH=1`` (``python -P``, as tuiprof's
  own workers are isolated): a ``multiprocessing.py`` or ``numpy.py`` in the
  current directory is never imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

from tuiprof.analysis.ranks import Progress, RankSummary, summarise_one
from tuiprof.analysis.stages import THREADS_ENV
from tuiprof.cleanup import temporary_directory
from tuiprof.errors import TraceError
from tuiprof.trace.parallel import WORKERS_ENV, usable_cores
from tuiprof.trace.run import RankFile

LOCAL_PREFIX = "local:"
SCHEMES = ("tcp", "tls")
CONNECT_TIMEOUT_S = 20  # to reach the host: a slow network may need it
# For Dask's handshake once connected: a scheduler answers in milliseconds, and an HTTP
# server waiting for a request line would otherwise hold the connection for ever.
HANDSHAKE_TIMEOUT_S = 5
ADDRESS_FORMS = "write tcp://HOST:PORT (a scheduler listens on 8786 by default) or local:N"


@dataclass(frozen=True)
class Scheduler:
    """A scheduler's address, checked: ``scheme://host:port``."""

    scheme: str
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.port}"


@dataclass(frozen=True)
class LocalWorkers:
    count: int  # as asked for; at most one per core is started


def parse_cluster(address: str) -> Scheduler | LocalWorkers:
    """What ``--cluster ADDRESS`` asks for, or a :class:`TraceError` that says what is wrong with it."""
    where = f"--cluster {address!r}" if not address.strip() else f"--cluster {address}"
    if not address.strip():
        raise TraceError(where, "the address is empty", ADDRESS_FORMS)
    if address.startswith(LOCAL_PREFIX):
        count = address[len(LOCAL_PREFIX) :]
        if not count.isdigit() or int(count) < 1:
            raise TraceError(where, "local:N needs a worker count", "write e.g. --cluster local:2")
        return LocalWorkers(int(count))
    scheme, separator, _ = address.partition("://")
    if not separator:
        scheme, address = "tcp", f"tcp://{address}"
    if scheme not in SCHEMES:
        raise TraceError(
            where, f"unsupported scheme {scheme!r}: tuiprof connects over {' or '.join(SCHEMES)}", ADDRESS_FORMS
        )
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError as exc:
        raise TraceError(where, f"not an address ({exc})", ADDRESS_FORMS) from None
    if not parts.hostname or port is None or parts.path or parts.query or parts.fragment:
        raise TraceError(where, "not HOST:PORT", ADDRESS_FORMS)
    return Scheduler(scheme, parts.hostname, port)


def summarise_on_cluster(
    pending: list[RankFile], address: str, progress: Progress | None = None
) -> tuple[list[RankSummary | str], list[str]]:
    """One summary (or problem line) per file of ``pending``, in order, computed on Dask
    workers; and the notes on how (one line each)."""
    where = f"--cluster {address}"
    target = parse_cluster(address)  # a bad address, or a closed port, is refused before Dask is imported
    if isinstance(target, Scheduler):
        _check_listening(target, where)
    try:
        import dask
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise TraceError(where, "Dask is not installed", 'pip install "tuiprof[cluster]"') from None
    logging.getLogger("distributed").setLevel(logging.CRITICAL)  # stderr is for our one-line diagnostics
    notes: list[str] = []
    with contextlib.ExitStack() as stack:  # closed in reverse: client, cluster, config, scratch folder
        try:
            scratch = stack.enter_context(temporary_directory("tuiprof-dask-"))
        except OSError as exc:
            raise TraceError(
                where, f"no scratch folder for Dask in TMPDIR ({exc.strerror})", "set TMPDIR to a writable folder"
            ) from None
        stack.enter_context(dask.config.set({"temporary-directory": scratch}))
        if isinstance(target, LocalWorkers):
            count = min(target.count, usable_cores())
            if count < target.count:
                notes.append(f"{where}: {count} worker{'s' * (count > 1)}, one per usable core, not {target.count}")
            # One process per worker, one task at a time, and no decode workers inside: the cores are the workers'.
            stack.enter_context(_safe_path_in_children())
            try:
                cluster = LocalCluster(
                    n_workers=count,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    local_directory=scratch,
                    env={WORKERS_ENV: "1", THREADS_ENV: "1"},
                )
            except (OSError, RuntimeError) as exc:  # RuntimeError: "Cluster failed to start"
                raise TraceError(where, f"local Dask workers did not start ({exc})", "run without --cluster") from None
            stack.callback(cluster.close)
            client = Client(cluster)
        else:
            _check_handshake(target, where)
            try:
                client = Client(target.address, timeout=CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError) as exc:
                raise TraceError(
                    where, f"cannot reach the Dask scheduler ({exc})", "check the address and that the scheduler runs"
                ) from None
        stack.callback(client.close)
        futures = client.map(summarise_one, pending, pure=False)
        for done, _ in enumerate(as_completed(futures), 1):
            if progress:
                progress(done, len(pending))
        return client.gather(futures), notes


@contextlib.contextmanager
def _safe_path_in_children() -> Iterator[None]:
    """``PYTHONSAFEPATH=1`` for the processes started meanwhile: multiprocessing's resource
    tracker and Dask's spawned workers run ``python -c``, which would put the current
    directory first on their ``sys.path``."""
    before = os.environ.get("PYTHONSAFEPATH")
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONSAFEPATH"]
        else:
            os.environ["PYTHONSAFEPATH"] = before


def _check_listening(scheduler: Scheduler, where: str) -> None:
    """Refuse at once a port nothing listens on (Dask would retry it until its timeout)."""
    try:
        socket.create_connection((scheduler.host, scheduler.port), timeout=CONNECT_TIMEOUT_S).close()
    except socket.gaierror as exc:
        raise TraceError(where, f"unknown host {scheduler.host} ({exc.strerror})", "check the address") from None
    except TimeoutError:
        raise TraceError(
            where,
            f"no answer from {scheduler.host}:{scheduler.port} in {CONNECT_TIMEOUT_S} s",
            "check the address and the firewall",
        ) from None
    except OSError as exc:
        raise TraceError(
            where,
            f"nothing accepts connections there ({exc.strerror})",
            "check the address and that the scheduler runs",
        ) from None


def _check_handshake(scheduler: Scheduler, where: str) -> None:
    """Refuse a service that is not a Dask scheduler, within :data:`HANDSHAKE_TIMEOUT_S`."""
    try:
        asyncio.run(asyncio.wait_for(_handshake(scheduler.address), HANDSHAKE_TIMEOUT_S))
    except Exception as exc:  # noqa: BLE001 - whatever a stranger's bytes make Dask raise (MemoryError for a garbage frame length)
        reason = "no answer" if isinstance(exc, TimeoutError) else type(exc).__name__
        raise TraceError(
            where,
            f"what listens there is not a Dask scheduler (its handshake: {reason})",
            "check the port: a scheduler listens on 8786 by default",
        ) from None


async def _handshake(address: str) -> None:
    """Dask's own handshake (both sides' info), then close: the scheduler has to answer it."""
    from distributed.comm import connect
    from distributed.security import Security

    comm = await connect(address, timeout=HANDSHAKE_TIMEOUT_S, **Security().get_connection_args("client"))
    await comm.close()
