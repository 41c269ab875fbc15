"""Replay: planning 100,000 records, and executing 20,000 fixable rows on DuckDB and PostgreSQL.

*Plan*: a replay plan reads each record of a closed run (through the store, which verifies
it), and derives the plan id and one idempotency key per item. Target: under 1 s for
100,000 records (the median of five plans, each by a store of its own, as the CLI does it).
The records are written with the DLQ writer under /tmp first (not timed).

*Execute*: a real pipeline quarantines 20,000 rows whose amount has three decimals under
``decimal(12,2)``; the contract and the target column are then fixed to scale 3 and
``quarantine-replay --execute`` is timed end to end (plan, re-read, re-enforce, assertions,
batch loads of ``chunk_size`` rows with their keys, acknowledgements). Target: 5,000 rows/s;
the per-row executor it replaces applied about 24 rows/s (one sink load per row). The time
spent inside the store's ``write_acks`` is shown on its own line, since the store's files
are not the executor's to choose.

Folders are removed in the background at the end (deleting many files on this VM is slow).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import structlog

from dpone.dlq import DlqPolicy, DlqStore, file_refs, rejected_rows
from dpone.ops.replay import plan
from dpone.testing import FrozenClock

TARGET_ROWS_PER_S = 5_000
OLD_ROWS_PER_S = 24  # the per-row executor: one sink load (and connection) per row
PLAN_TARGET_S = 1.0
PLAN_RECORDS = 100_000
PLAN_RUNS = 5
EXECUTE_ROWS = 20_000
CHUNK_SIZE = 10_000
CHUNK = 10_000
SOURCE = "data/orders/2026-03-01.csv"
PG_URL = os.environ.get("DPONE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")


def _write_run(store: DlqStore, run_id: str, total: int) -> float:
    began = time.perf_counter()
    with store.open_run(run_id, "load-1", pipeline="orders") as writer:
        for start in range(1, total + 1, CHUNK):
            count = min(CHUNK, total - start + 1)
            writer.write_chunk(
                rejected_rows(
                    pa.array(file_refs(SOURCE, "ab" * 32, range(start, start + count))),
                    "schema.type_mismatch",
                    columns="amount",
                    actual_types="string",
                    expected_types="decimal(12,2)",
                    source_partitions=SOURCE,
                )
            )
    return time.perf_counter() - began


def _remove_later(folder: Path) -> None:
    """Delete ``folder`` from a detached process, so the bench does not wait for the disk."""
    try:
        subprocess.Popen(
            ["rm", "-rf", "--", str(folder)],
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError:
        shutil.rmtree(folder, ignore_errors=True)


def _bench_plan(base: Path) -> None:
    root = base / "dlq"
    policy = DlqPolicy(directory=str(root))
    run_id = f"bench-{PLAN_RECORDS}"
    wrote = _write_run(DlqStore(root, policy, clock=FrozenClock()), run_id, PLAN_RECORDS)
    times = []
    size = 0
    for _ in range(PLAN_RUNS):
        # A store of its own each time, as the CLI has: nothing verified before is reused.
        store = DlqStore(root, policy, clock=FrozenClock())
        began = time.perf_counter()
        built = plan(store, run_id, "bench-resolver", "bench-sink", max_items=PLAN_RECORDS)
        times.append(time.perf_counter() - began)
        size = len(orjson.dumps(built.to_json()))
    median, best, worst = statistics.median(times), min(times), max(times)
    print(
        f"  plan, {PLAN_RECORDS:,} records: median {median:.2f} s of {PLAN_RUNS}, best "
        f"{best:.2f} s, worst {worst:.2f} s ({PLAN_RECORDS / median:,.0f} records/s; target "
        f"< {PLAN_TARGET_S:.0f} s: {'met' if median < PLAN_TARGET_S else 'NOT met'}; plan "
        f"JSON {size / 1e6:.1f} MB; records written in {wrote:.1f} s, not timed)"
    )


# --- execute --------------------------------------------------------------------------------


def _manifest(folder: Path, kind: str, scale: int, dataset: str) -> Path:
    if kind == "duckdb":
        sink: dict[str, Any] = {"type": "duckdb", "database": "warehouse.duckdb"}
    else:
        sink = {"type": "postgres", "connection": "${DPONE_BENCH_PG}"}
    doc = {
        "name": "replay_bench",
        "runtime": {"work_dir": ".dpone", "chunk_size": CHUNK_SIZE},
        "source": {"type": "file", "format": "csv", "path": "data/*.csv"},
        "sink": {
            **sink,
            "dataset": dataset,
            "table": "orders",
            "strategy": {"mode": "append"},
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {
                        "id": {"type": "integer", "nullable": False},
                        "name": {"type": "string"},
                        "amount": {
                            "type": "decimal",
                            "precision": 12,
                            "scale": scale,
                            "nullable": False,
                        },
                    },
                }
            },
        },
    }
    path = folder / "manifest.yaml"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def _migrate(kind: str, folder: Path, dataset: str) -> None:
    target = f'"{dataset}"."orders"'
    if kind == "duckdb":
        import duckdb

        with duckdb.connect(str(folder / "warehouse.duckdb")) as con:
            con.execute(f"ALTER TABLE {target} ALTER amount TYPE DECIMAL(12,3)")
    else:
        _pg(f"ALTER TABLE {target} ALTER COLUMN amount TYPE numeric(12,3)")


def _pg(sql: str) -> None:
    import adbc_driver_postgresql.dbapi as adbc_pg

    with adbc_pg.connect(PG_URL, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute(sql)


def _timed(store: DlqStore, name: str, spent: list[float]) -> None:
    """Wrap ``store.name`` so the seconds spent inside it add up in ``spent``."""
    inner: Callable[..., Any] = getattr(store, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent[0] += time.perf_counter() - began

    setattr(store, name, wrapper)


def _bench_execute(base: Path, kind: str) -> None:
    from dpone.manifest.compiler import compile_manifest
    from dpone.ops.replay.binding import bind, execute_replay
    from dpone.runtime.lifecycle import RunOptions, run_pipeline

    folder = base / kind
    (folder / "data").mkdir(parents=True)
    dataset = f"bench_replay_{uuid.uuid4().hex[:8]}"
    env = {"DPONE_BENCH_PG": PG_URL}
    lines = ["id,name,amount"]
    lines += [
        f"{i},name{i},{i % 1000}.{i % 100:02d}{1 + i % 9}" for i in range(1, EXECUTE_ROWS + 1)
    ]
    (folder / "data" / "orders.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    try:
        report = run_pipeline(
            compile_manifest(_manifest(folder, kind, 2, dataset)), RunOptions(env=env)
        )
        run_id = str(report.dlq.run_id)
        _migrate(kind, folder, dataset)
        binding = bind(compile_manifest(_manifest(folder, kind, 3, dataset)), run_id, env=env)
        acks = [0.0]
        _timed(binding.store, "write_acks", acks)
        began = time.perf_counter()
        result = execute_replay(binding)
        took = time.perf_counter() - began
        applied = result.counts()["applied"]
        assert applied == EXECUTE_ROWS, result.counts()
        again = execute_replay(binding).counts()
        assert again["applied"] == 0, again
        assert again["already_acknowledged"] == EXECUTE_ROWS, again
        rate = applied / took
        print(
            f"  execute on {kind:<8}, {applied:,} rows: {took:.2f} s = {rate:,.0f} rows/s "
            f"= {rate / TARGET_ROWS_PER_S:.2f}x the {TARGET_ROWS_PER_S:,} rows/s target, "
            f"{rate / OLD_ROWS_PER_S:,.0f}x the per-row executor (~{OLD_ROWS_PER_S} rows/s); "
            f"applied exactly once (a second execution applied 0)"
        )
        rest = took - acks[0]
        print(
            f"    of which the store's write_acks {acks[0]:.2f} s; everything else "
            f"{rest:.2f} s = {applied / rest:,.0f} rows/s"
        )
    finally:
        if kind == "postgres":
            _pg(f'DROP SCHEMA IF EXISTS "{dataset}" CASCADE')


def run() -> None:
    if not structlog.is_configured():  # the store's lifecycle logs would drown the table
        structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    base = Path(tempfile.mkdtemp(prefix="dpone-bench-replay-", dir="/tmp"))
    try:
        print(
            f"targets: plan of {PLAN_RECORDS:,} records < {PLAN_TARGET_S:.0f} s; execute "
            f">= {TARGET_ROWS_PER_S:,} rows/s (chunk_size {CHUNK_SIZE:,})"
        )
        _bench_plan(base)
        for kind in ("duckdb", "postgres"):
            _bench_execute(base, kind)
    finally:
        _remove_later(base)
        print(f"  (the bench's files are being removed in the background: {base})")
