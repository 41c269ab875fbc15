"""The Dask cluster of a scale-out run: the manifest's (``runtime.dask.address``), or a
``LocalCluster`` started and closed by the run.

A local cluster's workers are forked from the driver on Linux (:func:`start_method`), with the
driver's objects frozen for the garbage collector while they live (:func:`frozen_for_fork`):
measured on 2,000,000 CSV rows, a spawned worker spent about half a second of CPU importing
again what the driver had imported, and in a forked one the task during which a full
collection walked the objects it shares with the driver (copying their pages) took a third
longer than the others: each a good share of a run on a small machine (docs/scale-out.md).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from dpone.errors import DponeError
from dpone.logs import get_logger
from dpone.manifest.plan import DaskPlan

log = get_logger("dpone.run")


class ScaleOutError(DponeError):
    code = "DPONE_SCALEOUT_FAILED"


def start_method() -> str:
    """How the local cluster's worker processes start: forked from the driver on Linux.

    A forked worker has the driver's modules already imported (pyarrow, Dask, dpone's
    stream). It inherits the driver's open files too, its run and DLQ locks among them; Dask's
    worker exits as soon as the process that started it is gone (its "parent alive" pipe), so
    a driver killed mid-run leaves no worker holding them. Elsewhere (macOS: fork is not safe
    there) Dask's own setting stays."""
    import dask

    if sys.platform == "linux":
        return "fork"
    return str(dask.config.get("distributed.worker.multiprocessing-method"))


@contextmanager
def frozen_for_fork(method: str) -> Iterator[None]:
    """The driver's objects left out of garbage collections while forked workers share them
    (the ``gc`` module's advice for a fork without exec): a collection walking them would
    write to, and so copy, every page they are on, in each worker. They are handed back to
    the collector when the cluster is closed. A process that froze objects itself (an
    application calling :func:`dpone.api.run`) is left as it is: unfreezing would undo its
    own freeze."""
    if method != "fork" or gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


@contextmanager
def cluster_client(config: DaskPlan) -> Iterator[Any]:
    """A client of the manifest's cluster, or of a local one started (and closed) here."""
    import dask
    from distributed import Client, LocalCluster

    if config.address:
        try:
            client = Client(config.address, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise ScaleOutError(
                f"cannot reach the Dask scheduler ({type(exc).__name__})",
                code="DPONE_SCALEOUT_UNAVAILABLE",
                fixes=("check runtime.dask.address and that the scheduler is running",),
            ) from None
        with client:
            yield client
        return
    workers = config.n_workers or os.cpu_count() or 1
    method = start_method()
    started = time.perf_counter()
    with (
        dask.config.set({"distributed.worker.multiprocessing-method": method}),
        frozen_for_fork(method),
        LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=":0",
            memory_limit=config.memory_limit or "auto",
        ) as cluster,
        Client(cluster) as client,
    ):
        seconds = round(time.perf_counter() - started, 3)
        log.info("scaleout.cluster_started", workers=workers, seconds=seconds)
        yield client
        closing = time.perf_counter()
    log.info("scaleout.cluster_closed", seconds=round(time.perf_counter() - closing, 3))


__all__ = ["ScaleOutError", "cluster_client", "frozen_for_fork", "start_method"]
