"""The scale-out tests' helpers and clusters: one folder, two manifests (engine local and engine
dask) over the same data, what each run left (loaded rows, DLQ records, evidence counts), a
``LocalCluster`` of two worker processes shared by a test module, and a ``dask scheduler`` with
two ``dask worker`` processes started as processes of their own on 127.0.0.1."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

from dpone import api
from tests.support.processes import wait_until

#: The ``runtime`` keys of a run that starts (and closes) a LocalCluster of 2 worker processes.
OWN_CLUSTER = {"dask": {"n_workers": 2}}


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[dict[str, Any]]:
    """A LocalCluster of 2 worker processes (one thread each) for a whole test module: the
    ``runtime`` keys of a manifest that runs on it."""
    from distributed import LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield {"dask": {"address": cluster.scheduler_address}}


@pytest.fixture
def external_cluster(tmp_path: Path) -> Iterator[str]:
    """``dask scheduler`` and two ``dask worker`` processes on 127.0.0.1; the address."""
    scheduler_file = tmp_path / "scheduler.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    common = ["--no-dashboard"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
             "--port", "0", "--scheduler-file", str(scheduler_file), *common],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
    ]  # fmt: skip
    try:
        wait_until(scheduler_file.exists, "dask scheduler", process=procs[0])
        for _ in range(2):
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                     str(scheduler_file), "--nthreads", "1", "--host", "127.0.0.1", *common],
                    env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                )
            )  # fmt: skip
        from distributed import Client

        with Client(scheduler_file=str(scheduler_file), timeout="60s") as client:
            client.wait_for_workers(2, timeout=120)
        yield str(json.loads(scheduler_file.read_text())["address"])
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def csv_files(folder: Path, files: int = 3, rows: int = 1200) -> None:
    """``files`` CSV files of ``rows`` rows under ``folder/data``; every 97th amount is not a
    number (quarantined)."""
    data = folder / "data"
    data.mkdir()
    for f in range(files):
        lines = ["id,amount,kind"]
        for i in range(rows):
            amount = "n/a" if i % 97 == 0 else f"{i}.25"
            lines.append(f"{f * 100_000 + i},{amount},k{i % 3}")
        (data / f"part{f}.csv").write_text("\n".join(lines) + "\n")


#: the columns of :func:`csv_files`
CSV_COLUMNS: dict[str, Any] = {
    "id": {"type": "integer", "nullable": False},
    "amount": {"type": "decimal", "precision": 18, "scale": 2},
    "kind": {"type": "string"},
}


def write_manifest(
    folder: Path,
    name: str,
    engine: str,
    source: dict[str, Any],
    columns: dict[str, Any] | None = None,
    **runtime: Any,
) -> Path:
    doc = {
        "name": name,
        "runtime": {"engine": engine, "chunk_size": 500, "work_dir": f".{name}", **runtime},
        "source": source,
        "sink": {
            "type": "duckdb",
            "table": "t",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": CSV_COLUMNS if columns is None else columns,
                },
            },
        },
        "quality": {"assertions": {"min_rows_per_load": 1}},
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


_RUN_ROW = re.compile(r"/rows/([0-9]+)$")


def outcome(manifest: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``manifest``; what it loaded, dead-lettered and put in its evidence."""
    report = api.run(manifest, env=env).to_json()
    folder = manifest.parent
    work = folder / f".{manifest.stem}"
    con = duckdb.connect(str(work / f"{manifest.stem}.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT id, amount, kind FROM dpone.t ORDER BY id").fetchall()
    finally:
        con.close()
    run_id = report["run_id"]
    run_dir = work / "dlq" / "runs" / run_id
    index = json.loads((run_dir / "index.json").read_text())
    records = []
    for segment in sorted((run_dir / "segments").glob("*.jsonl")):
        for line in segment.read_bytes().splitlines():
            doc = json.loads(line)
            ref = doc["record_ref"]
            # run-scoped refs name their run: compare them by the row number they carry
            found = _RUN_ROW.search(ref) if ref.startswith("dpone://runs/") else None
            records.append((found.group(1) if found else ref, doc["reason"]["code"]))
    evidence = json.loads((folder / report["evidence"]).read_text())
    return {
        "report": report,
        "rows": rows,
        "records": sorted(records),
        "index_status": index["status"],
        "index_count": index["record_count"],
        "evidence": {
            "summary": {k: v for k, v in evidence["summary"].items() if k != "chunks"},
            "violations": evidence["violations"],
            "dlq": {k: evidence["dlq"][k] for k in ("record_count", "reasons", "run_status")},
            "assertions": evidence["assertions"],
        },
        "work": work,
        "scale_out": evidence.get("scale_out"),
        "evidence_doc": evidence,
    }


def same_result(local: dict[str, Any], dask: dict[str, Any]) -> None:
    assert dask["rows"] == local["rows"]
    assert dask["records"] == local["records"]
    assert dask["index_status"] == local["index_status"] == "closed"
    assert dask["index_count"] == local["index_count"] == len(local["records"])
    assert dask["evidence"] == local["evidence"]
