"""engine: dask (a LocalCluster of 2 worker processes) against engine: local, in one run.

10,000,000 rows in 20 CSV files, 1% of them with an amount that is not a decimal (quarantined);
``DPONE_BENCH_DASK_ROWS`` sets another row count (still 20 files), e.g. 1000000 for a quick
look at the per-stage split on a busy machine. The files are generated once into a cache
folder on disk (``DPONE_BENCH_CACHE``, default ``~/.cache/dpone-bench``), never on a tmpfs.
Printed: rows/s of each engine and the ratio (target >= 1.5x at 10M rows on 2 idle cores),
the peak RSS of every worker process (target < 1 GB; psutil, sampled every 0.2 s), the
driver's time per stage (cluster start, partitioning, tasks, DLQ index from the tasks'
descriptors, the staged files' check, the sink's commit reading them, the rest: preflight,
evidence and state), and the machine's load average: the figures are of the moment they were
taken.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.csv as pacsv
import structlog
import yaml

from dpone import api

FILES = 20
ROWS = 10_000_000
ROWS_ENV = "DPONE_BENCH_DASK_ROWS"
BAD_EVERY = 100  # 1%
CHUNK = 100_000


def _rows() -> int:
    return int(os.environ.get(ROWS_ENV, ROWS))


def _cache() -> Path:
    root = Path(os.environ.get("DPONE_BENCH_CACHE", Path.home() / ".cache" / "dpone-bench"))
    rows = _rows()
    folder = root / f"dask-{rows}-{FILES}"
    done = folder / ".complete"
    if done.exists():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    (folder / "data").mkdir(parents=True)
    per = rows // FILES
    for f in range(FILES):
        ids = range(f * per, (f + 1) * per)
        amount = [("n/a" if i % BAD_EVERY == 0 else f"{i % 100_000}.25") for i in ids]
        kind = [f"k{i % 4}" for i in ids]
        table = pa.table({"id": pa.array(ids, pa.int64()), "amount": amount, "kind": kind})
        pacsv.write_csv(table, folder / "data" / f"part{f:02d}.csv")
    done.touch()
    return folder


def _manifest(folder: Path, engine: str) -> Path:
    name = f"bench_{engine}"
    shutil.rmtree(folder / f".{name}", ignore_errors=True)
    doc: dict[str, Any] = {
        "name": name,
        "runtime": {"engine": engine, "chunk_size": CHUNK, "work_dir": f".{name}"},
        "source": {"type": "file", "format": "csv", "path": "data/*.csv"},
        "sink": {
            "type": "duckdb",
            "table": "t",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {
                        "id": {"type": "integer", "nullable": False},
                        "amount": {"type": "decimal", "precision": 18, "scale": 2},
                        "kind": {"type": "string"},
                    },
                }
            },
        },
    }
    if engine == "dask":
        doc["runtime"]["dask"] = {"n_workers": 2}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


class _RssSampler:
    """Peak RSS of every process below this one (the cluster's nannies and workers)."""

    def __init__(self) -> None:
        self.peaks: dict[int, tuple[int, str]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        me = psutil.Process()
        while not self._stop.wait(0.2):
            for child in me.children(recursive=True):
                try:
                    rss = child.memory_info().rss
                    # LocalCluster's nannies live in this process; its workers are spawned
                    # processes (multiprocessing's resource tracker is not one of them).
                    cmdline = " ".join(child.cmdline())
                except psutil.Error:
                    continue
                if "resource_tracker" in cmdline:
                    continue
                if rss > self.peaks.get(child.pid, (0, ""))[0]:
                    self.peaks[child.pid] = (rss, "worker")


def _timed(manifest: Path) -> tuple[float, Any, list[dict[str, Any]]]:
    with structlog.testing.capture_logs() as events:
        started = time.perf_counter()
        report = api.run(manifest)
        seconds = time.perf_counter() - started
    return seconds, report, events


def run() -> None:
    folder = _cache()
    load = os.getloadavg()
    print(f"{_rows():,} rows in {FILES} CSV files (1% bad), cache {folder}")
    print(
        f"load average before: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} cores"
    )
    local_s, local, _ = _timed(_manifest(folder, "local"))
    with _RssSampler() as rss:
        dask_s, dask, events = _timed(_manifest(folder, "dask"))
    for name, seconds, report in (("local", local_s, local), ("dask", dask_s, dask)):
        rows = report.rows
        print(
            f"engine {name:5}: {seconds:7.1f} s  {rows.read / seconds:12,.0f} rows/s  "
            f"loaded {rows.loaded:,} quarantined {rows.quarantined:,}"
        )
    assert (local.rows.loaded, local.rows.quarantined) == (dask.rows.loaded, dask.rows.quarantined)
    ratio = local_s / dask_s
    print(f"dask / local rows/s: {ratio:.2f}x (target >= 1.5x)")
    workers = sorted((v for v in rss.peaks.values() if v[1] == "worker"), reverse=True)
    print(
        "peak RSS per worker (target < 1 GB): "
        + ", ".join(f"{b / 2**20:,.0f} MB" for b, _ in workers)
    )
    stages = next((e for e in events if e["event"] == "scaleout.stages"), {})
    commit = next((e for e in events if e["event"] == "scaleout.sink_committed"), {})
    start = next((e for e in events if e["event"] == "scaleout.cluster_started"), {})
    closed = next((e for e in events if e["event"] == "scaleout.cluster_closed"), {})
    cluster = float(start.get("seconds", 0.0)) + float(closed.get("seconds", 0.0))
    split = {"cluster_start_and_close": cluster}
    split.update(
        (k, float(stages.get(k, 0.0))) for k in ("partitioning", "index_close", "staged_check")
    )
    split["tasks (without the cluster's start)"] = float(stages.get("tasks", 0.0)) - cluster
    split["sink_commit"] = float(commit.get("seconds", 0.0))
    split["rest (preflight, evidence, state)"] = dask_s - sum(split.values())
    print("dask run, seconds per stage:")
    for k, v in split.items():
        print(f"  {k:40} {v:7.2f}")
    load = os.getloadavg()
    print(f"load average after: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
