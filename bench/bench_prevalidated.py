"""Prevalidated Parquet against the normal path: ``dpone run`` of the same marked Parquet files
into DuckDB, side by side.

Two manifests over the same files and the same contract (strict), timed as whole processes
(``python -m dpone run manifest.yaml --format json``: interpreter start and imports included),
alternating, the first of each pair alternating too, median of :data:`REPEATS`:

* prevalidated: ``source.prevalidated: true``: each file's footer is checked (mark,
  fingerprint, schema, NOT NULL statistics), then DuckDB reads the files itself inside the
  load's commit (``INSERT ... SELECT FROM read_parquet``);
* normal: the same source without ``prevalidated``: every chunk read into Arrow, enforced
  against the contract and staged into the load.

Each run loads a fresh DuckDB file; both must hold :data:`ROWS` rows with the same checksum.
Prints each side's median wall time, rows/s and the ratio (normal / prevalidated). Everything
lives under one ``tempfile.mkdtemp()`` folder, removed at the end. ``DPONE_BENCH_PREVALIDATED_ROWS``
changes the row count (default 2,000,000 in 4 files).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

import dpone

ROWS = int(os.environ.get("DPONE_BENCH_PREVALIDATED_ROWS", "2000000"))
FILES = 4
REPEATS = 5
#: 2026-01-01T00:00:00Z in microseconds since the epoch
EPOCH_US = 1_767_225_600_000_000
COLUMNS = {
    "id": {"type": "integer", "nullable": False},
    "customer": {"type": "string", "nullable": False},
    "amount": {"type": "decimal", "precision": 12, "scale": 2, "nullable": False},
    "quantity": {"type": "integer"},
    "updated_at": {"type": "timestamp", "timezone": True, "nullable": False},
    "active": {"type": "boolean"},
}


def _manifest(base: Path, tag: str, prevalidated: bool) -> Path:
    folder = base / tag
    folder.mkdir()
    source = {"type": "file", "format": "parquet", "path": str(base / "data" / "*.parquet")}
    if prevalidated:
        source["prevalidated"] = True
    doc = {
        "name": f"bench_{tag}",
        "runtime": {"work_dir": ".dpone", "chunk_size": 250_000},
        "source": source,
        "sink": {
            "type": "duckdb",
            "database": "warehouse.duckdb",
            "dataset": "analytics",
            "table": "orders",
            "options": {"schema_contract": {"enforcement": "strict", "columns": COLUMNS}},
        },
    }
    path = folder / "manifest.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _write_files(base: Path, manifest: Path) -> None:
    """:data:`FILES` Parquet files of the contract's schema, marked for it."""
    from dpone.contracts.types import sink_schema

    plan = dpone.compile(manifest)
    schema = pa.schema(
        [pa.field(f.name, f.type, f.nullable) for f in sink_schema(plan.sink.contract)]
    )
    mark = dpone.prevalidated_metadata(plan)
    (base / "data").mkdir()
    per_file = ROWS // FILES
    for n in range(FILES):
        first = n * per_file
        ids = pa.array(range(first, first + per_file), pa.int64())
        cents = pc.multiply(pc.add(pc.bit_wise_and(ids, 0xFFFF), 1), 7)
        micros = pc.add(pc.multiply(ids, 1_000_000), EPOCH_US)
        table = pa.table(
            {
                "id": ids,
                "customer": pc.binary_join_element_wise(
                    "c", pc.cast(pc.bit_wise_and(ids, 4095), pa.string()), ""
                ),
                "amount": pc.cast(pc.cast(cents, pa.int32()), pa.decimal128(12, 2)),
                "quantity": pc.bit_wise_and(ids, 31),
                "updated_at": pc.cast(micros, pa.timestamp("us", tz="UTC")),
                "active": pc.equal(pc.bit_wise_and(ids, 1), 1),
            },
            schema=schema,
        )
        pq.write_table(table.replace_schema_metadata(mark), base / "data" / f"part-{n:04d}.parquet")


def _once(manifest: Path, env: dict[str, str]) -> float:
    db = manifest.parent / "warehouse.duckdb"
    for leftover in (db, manifest.parent / ".dpone"):
        if leftover.is_dir():
            shutil.rmtree(leftover)
        elif leftover.exists():
            leftover.unlink()
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "dpone", "run", str(manifest), "--format", "json"],
        cwd=manifest.parent,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - started
    report = json.loads(proc.stdout)
    if proc.returncode != 0 or report["rows"]["loaded"] != ROWS - ROWS % FILES:
        raise SystemExit(f"{manifest.parent.name}: the run failed: {proc.stdout[:2000]}")
    return wall


def _checksum(manifest: Path) -> tuple[object, ...]:
    with duckdb.connect(str(manifest.parent / "warehouse.duckdb"), read_only=True) as con:
        row = con.execute(
            "SELECT count(*), sum(id), sum(amount), sum(hash(customer)), "
            "sum(epoch_us(updated_at)), count(*) FILTER (WHERE active) FROM analytics.orders"
        ).fetchone()
    assert row is not None
    return tuple(row)


def run() -> None:
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-prevalidated-"))
    try:
        fast = _manifest(base, "prevalidated", prevalidated=True)
        slow = _manifest(base, "normal", prevalidated=False)
        _write_files(base, fast)
        env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
        env["PYTHONPYCACHEPREFIX"] = str(base / "pycache")
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        _once(fast, env)  # warm the bytecode and page caches
        _once(slow, env)
        if _checksum(fast) != _checksum(slow):
            raise SystemExit("the two runs loaded different tables")
        times: dict[str, list[float]] = {"prevalidated": [], "normal": []}
        for i in range(REPEATS):
            pair = [("prevalidated", fast), ("normal", slow)]
            for tag, manifest in pair if i % 2 == 0 else reversed(pair):
                times[tag].append(_once(manifest, env))
        rows = ROWS - ROWS % FILES
        print(f"{rows:,} rows in {FILES} Parquet files into DuckDB, median of {REPEATS} runs")
        for tag, walls in times.items():
            median = statistics.median(walls)
            spread = f"{min(walls):.2f}..{max(walls):.2f} s"
            print(f"  {tag:>13}: {median:6.2f} s  {rows / median:12,.0f} rows/s  ({spread})")
        ratio = statistics.median(times["normal"]) / statistics.median(times["prevalidated"])
        print(f"  ratio normal / prevalidated: {ratio:.2f}x")
    finally:
        shutil.rmtree(base, ignore_errors=True)
