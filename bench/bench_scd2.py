"""scd2 merge on DuckDB: a 1,000,000-row table, then a load of 100,000 rows of which half
change (their versions close and new ones open) and half are identical (nothing opens).

Each load goes through the DuckDB sink as a run's does: staged, then committed in one
transaction with its marker (the rows hashed, the changed versions closed, the new ones
opened). Printed: the time and rows/s of the first load (every key new) and of the change
set. Beside it, the same change applied as a plain upsert, which keeps no history.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from dpone.connectors.base import LoadSpec
from dpone.connectors.sinks.duckdb import DuckDbSink
from dpone.manifest.specs import DuckdbSinkSpec

ROWS = 1_000_000
CHANGES = 100_000
BATCH = 250_000
SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("updated_at", pa.timestamp("us", tz="UTC")),
    ]
)


def _batch(start: int, stop: int, version: int) -> pa.RecordBatch:
    ids = pa.array(range(start, stop), pa.int64())
    names = pa.array([f"customer {i} v{version if i % 2 else 0}" for i in range(start, stop)])
    amounts = pa.array([i % 100_000 for i in range(start, stop)], pa.int32())
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    return pa.record_batch(
        [
            ids,
            names,
            amounts.cast(pa.decimal128(10, 0)).cast(pa.decimal128(12, 2)),
            pa.array([stamp] * (stop - start), pa.timestamp("us", tz="UTC")),
        ],
        schema=SCHEMA,
    )


def _load(sink: DuckDbSink, load_id: str, batches: list[pa.RecordBatch], how: str) -> float:
    spec = LoadSpec(
        pipeline="bench",
        run_id=load_id,
        load_id=load_id,
        schema=SCHEMA,
        mode="merge",
        unique_key=("id",),
        merge_strategy=how,  # type: ignore[arg-type]
        valid_at=datetime.now(UTC),
    )
    started = time.perf_counter()
    load = sink.begin(spec)
    for batch in batches:
        load.write(batch)
    load.commit()
    return time.perf_counter() - started


def _line(what: str, rows: int, seconds: float) -> None:
    print(f"{what:<44} {rows:>9,} rows {seconds:>7.2f} s {rows / seconds:>12,.0f} rows/s")


def run() -> None:
    root = Path(tempfile.mkdtemp(prefix="dpone-bench-scd2-"))
    try:
        for how in ("scd2", "upsert"):
            spec = DuckdbSinkSpec(
                dataset="bench", table=how, database=root / f"{how}.duckdb", display=how
            )
            sink = DuckDbSink(spec)
            first = [_batch(s, min(s + BATCH, ROWS), 0) for s in range(0, ROWS, BATCH)]
            seconds = _load(sink, f"{how}-1", first, how)
            _line(f"{how}: first load, every key new", ROWS, seconds)
            change = [_batch(0, CHANGES, 1)]
            seconds = _load(sink, f"{how}-2", change, how)
            _line(f"{how}: {CHANGES:,} rows (half changed) on {ROWS:,}", CHANGES, seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    run()
