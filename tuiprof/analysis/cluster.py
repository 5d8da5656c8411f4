"""Summarising a run's ranks on a Dask cluster (``--cluster ADDRESS`` or ``--cluster local:N``).

A 256-rank run of 2 GB traces is 512 GB: no single machine should read it.
Each rank's summary needs only its own file, so the per-rank work
(:func:`tuiprof.analysis.ranks.summarise_one`: load, analyse, summarise) runs
on the cluster's workers, next to the traces (a shared filesystem path), and
only the summaries (a few KB each) come back.  Dask is an optional extra
(``pip install "tuiprof[cluster]"``), imported only here and only with
``--cluster``.
"""

from __future__ import annotations

import logging

from tuiprof.analysis.ranks import Progress, RankSummary, summarise_one
from tuiprof.errors import TraceError
from tuiprof.trace.parallel import WORKERS_ENV
from tuiprof.trace.run import RankFile

LOCAL_PREFIX = "local:"
CONNECT_TIMEOUT_S = 20


def summarise_on_cluster(pending: list[RankFile], address: str, progress: Progress | None = None) -> list[RankSummary | str]:
    """One summary (or problem line) per file of ``pending``, in order, computed on Dask workers."""
    try:
        from dask.distributed import Client, LocalCluster, as_completed
    except ImportError:
        raise TraceError(f"--cluster {address}", "Dask is not installed", 'pip install "tuiprof[cluster]"') from None
    logging.getLogger("distributed").setLevel(logging.ERROR)  # stderr is for our one-line diagnostics
    cluster = None
    try:
        if address.startswith(LOCAL_PREFIX):
            count = address[len(LOCAL_PREFIX) :]
            if not count.isdigit() or int(count) < 1:
                raise TraceError(f"--cluster {address}", "local:N needs a worker count", "write e.g. --cluster local:2")
            # One process per worker, one task at a time, and no decode workers inside: the cores are the workers'.
            cluster = LocalCluster(
                n_workers=int(count), threads_per_worker=1, processes=True, dashboard_address=None,
                env={WORKERS_ENV: "1"},
            )
            client = Client(cluster)
        else:
            client = Client(address, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        if cluster is not None:
            cluster.close()
        raise TraceError(f"--cluster {address}", f"cannot reach the Dask scheduler ({exc})", "check the address and that the scheduler runs") from None
    try:
        futures = client.map(summarise_one, pending, pure=False)
        done = 0
        for _ in as_completed(futures):
            done += 1
            if progress:
                progress(done, len(pending))
        return client.gather(futures)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
