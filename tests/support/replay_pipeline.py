"""Replay and retention end to end: a real pipeline folder (manifest + CSV) run by the
lifecycle into a real sink, then replayed through the CLI, and read back independently.

A run quarantines rows whose amount has three decimals under ``decimal(12,2)`` and one whose
amount is not a number; "fixing the contract" means scale 3 in the manifest plus the target
column migrated to the new type (the sink never changes a column's type by itself).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.dlq.store import DlqStore
from dpone.manifest.compiler import compile_manifest
from dpone.published import schema_errors
from dpone.runtime.lifecycle import RunOptions, run_pipeline
from dpone.testing import FrozenClock
from tests.support import dlqfiles
from tests.support.postgres import PG_URL, pg_query
from tests.support.processes import CliRun, dpone_killed_at

PG_ENV = "DPONE_TEST_PG_URL"
PIPELINE = "orders_rp"
TABLE = "orders"
T0 = "2026-03-01T12:00:00Z"

#: A row value: no DLQ file, plan, result, log or error may ever contain it.
CANARY = f"canary{uuid.uuid4().hex}"
#: id, name, amount. Rows 2 and 4 pass once the scale is 3; row 5 never passes.
ROWS: tuple[tuple[str, str, str], ...] = (
    ("1", "a", "10.50"),
    ("2", CANARY, "12.345"),
    ("3", "c", "7.25"),
    ("4", "d", "1.999"),
    ("5", CANARY, f"{CANARY}abc"),
    ("6", "f", "3.00"),
)
FIRST_LOAD = {1: Decimal("10.50"), 3: Decimal("7.25"), 6: Decimal("3.00")}
REPLAYED = {2: Decimal("12.345"), 4: Decimal("1.999")}


@dataclass
class Pipeline:
    """One pipeline in a folder of its own, against one real sink."""

    root: Path
    kind: str
    dataset: str
    env: dict[str, str] = field(default_factory=dict)
    clock: FrozenClock = field(default_factory=lambda: FrozenClock(T0))

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.yaml"

    @property
    def dlq_dir(self) -> Path:
        return self.root / ".dpone" / "dlq"

    @property
    def data(self) -> Path:
        return self.root / "data" / "orders.csv"

    def store(self) -> DlqStore:
        return DlqStore(self.dlq_dir, clock=self.clock)

    # --- writing ------------------------------------------------------------------------------

    def write_csv(self, rows: tuple[tuple[str, str, str], ...] = ROWS) -> None:
        self.data.parent.mkdir(parents=True, exist_ok=True)
        lines = ["id,name,amount", *(",".join(row) for row in rows)]
        self.data.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def write_manifest(
        self, *, scale: int = 2, mode: str = "append", chunk_size: int = 10_000, **extra: Any
    ) -> None:
        sink: dict[str, Any] = {"dataset": self.dataset, "table": TABLE}
        if self.kind == "duckdb":
            sink |= {"type": "duckdb", "database": "warehouse.duckdb"}
        elif self.kind == "filesystem":
            sink |= {"type": "filesystem", "path": "lake"}
        else:
            sink |= {"type": "postgres", "connection": "${" + PG_ENV + "}"}
        strategy: dict[str, Any] = {"mode": mode}
        if mode == "merge":
            strategy["unique_key"] = ["id"]
        doc: dict[str, Any] = {
            "name": PIPELINE,
            "runtime": {"work_dir": ".dpone", "chunk_size": chunk_size},
            "source": {"type": "file", "format": "csv", "path": "data/*.csv"},
            "sink": {
                **sink,
                "strategy": strategy,
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
                    },
                },
            },
            **extra,
        }
        self.manifest.write_text(json.dumps(doc, indent=2), encoding="utf-8")

    # --- running ------------------------------------------------------------------------------

    def run(self) -> str:
        """Run the pipeline with the lifecycle; the DLQ run id of its quarantined rows."""
        report = run_pipeline(
            compile_manifest(self.manifest), RunOptions(env=self.env, clock=self.clock)
        )
        assert report.exit_code == 0, report.error
        run_id = report.dlq.run_id
        assert run_id is not None
        return str(run_id)

    def quarantine_run(self) -> str:
        """The starting point of every replay test: the first run, then the contract fix."""
        self.write_csv()
        self.write_manifest()
        run_id = self.run()
        assert self.amounts() == FIRST_LOAD
        self.write_manifest(scale=3)
        self.migrate_amount()
        return run_id

    def cli(self, *args: str) -> CliRun:
        result = CliRunner().invoke(cli, list(args), env=self.env, catch_exceptions=False)
        return CliRun(result.exit_code, result.stdout, result.stderr)

    def replay(self, run_id: str, *args: str) -> CliRun:
        return self.cli("ops", "quarantine-replay", "--run-id", run_id, *args)

    def execute(self, run_id: str, *args: str) -> CliRun:
        return self.replay(
            run_id, "--manifest", str(self.manifest), "--execute", "--format", "json", *args
        )

    def execute_killed(self, run_id: str, point: str) -> None:
        """``--execute`` in a process of its own, SIGKILLed by itself at ``point``."""
        args = ["ops", "quarantine-replay", "--run-id", run_id]
        args += ["--manifest", str(self.manifest), "--execute"]
        dpone_killed_at(point, args, cwd=self.root, env=self.env)

    def run_killed(self, point: str) -> str:
        """``dpone run`` in a process of its own, SIGKILLed at ``point``; its run id."""
        run_id = f"dead-{uuid.uuid4().hex[:12]}"
        args = ["run", str(self.manifest), "--run-id", run_id]
        dpone_killed_at(point, args, cwd=self.root, env=self.env)
        return run_id

    # --- the sink, read independently ---------------------------------------------------------

    def _duck(self, sql: str) -> list[tuple[Any, ...]]:
        path = self.root / "warehouse.duckdb"
        with duckdb.connect(str(path)) as con:
            return con.execute(sql).fetchall()

    def sql(self, sql: str) -> list[tuple[Any, ...]]:
        if self.kind == "duckdb":
            return self._duck(sql)
        return pg_query(PG_URL, sql)

    @property
    def lake(self) -> Path:
        return self.root / "lake"

    def _markers(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_bytes()) for p in (self.lake / "_dpone_loads").glob("*.json")]

    def _parquet_files(self) -> list[Path]:
        return sorted((self.lake / self.dataset / TABLE).glob("*.parquet"))

    def amounts(self) -> dict[int, Decimal]:
        """id -> amount of every target row; a duplicated id fails the test."""
        if self.kind == "filesystem":
            table = pa.concat_tables(
                [pq.read_table(p, columns=["id", "amount"]) for p in self._parquet_files()],
                promote_options="permissive",
            )
            rows = list(zip(table["id"].to_pylist(), table["amount"].to_pylist(), strict=True))
        else:
            rows = self.sql(f'SELECT id, amount FROM "{self.dataset}"."{TABLE}" ORDER BY id')
        ids = [int(r[0]) for r in rows]
        assert len(ids) == len(set(ids)), f"a row was loaded twice: {sorted(ids)}"
        return {int(i): Decimal(a) for i, a in rows}

    def load_ids(self) -> list[str]:
        if self.kind == "filesystem":
            return sorted(str(doc["load_id"]) for doc in self._markers())
        rows = self.sql(f'SELECT load_id FROM "{self.dataset}"."_dpone_loads" ORDER BY load_id')
        return [str(r[0]) for r in rows]

    def committed_keys(self) -> dict[str, str]:
        """Idempotency key -> the load that committed it, read from the sink's own tables."""
        if self.kind == "filesystem":
            return {k: str(doc["load_id"]) for doc in self._markers() for k in doc.get("keys", ())}
        rows = self.sql(f'SELECT idempotency_key, load_id FROM "{self.dataset}"."_dpone_load_keys"')
        return {str(k): str(load) for k, load in rows}

    def migrate_amount(self, scale: int = 3) -> None:
        """The operator's migration that goes with the contract fix."""
        target = f'"{self.dataset}"."{TABLE}"'
        if self.kind == "duckdb":
            self._duck(f"ALTER TABLE {target} ALTER amount TYPE DECIMAL(12,{scale})")
        elif self.kind == "filesystem":
            for path in self._parquet_files():
                table = pq.read_table(path)
                where = table.schema.get_field_index("amount")
                field = table.schema.field(where).with_type(pa.decimal128(12, scale))
                pq.write_table(table.cast(table.schema.set(where, field)), path)
        else:
            pg_query(PG_URL, f"ALTER TABLE {target} ALTER COLUMN amount TYPE numeric(12,{scale})")

    # --- the DLQ, read independently ----------------------------------------------------------

    def acked_ids(self, run_id: str) -> list[str]:
        """The record ids acknowledged on disk, sorted (a record acknowledged twice shows
        twice)."""
        return dlqfiles.acked_ids(self.dlq_dir, run_id)

    def acked(self, run_id: str) -> list[str]:
        """The acknowledged record ids (through the store, whatever its file layout)."""
        return sorted(self.store().read_acks(run_id))

    def record_ids(self, run_id: str) -> list[str]:
        """The record ids of every line of the run's segments, sorted."""
        return dlqfiles.record_ids_on_disk(self.dlq_dir, run_id)

    def segment_files(self, run_id: str) -> list[Path]:
        return dlqfiles.segment_files(self.dlq_dir, run_id)


def assert_valid(doc: Any, schema: str) -> None:
    assert schema_errors(doc, schema) == [], schema_errors(doc, schema)


def assert_acks_valid(pipeline: Pipeline, run_id: str) -> None:
    acks = dlqfiles.acks_on_disk(pipeline.dlq_dir, run_id)
    assert acks
    for doc in acks:
        assert_valid(doc, "dpone.dlq-replay-ack.v1")


def make_pipeline(request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> Pipeline:
    if kind in ("duckdb", "filesystem"):
        return Pipeline(tmp_path, kind, "analytics")
    schema = request.getfixturevalue("pg_schema")
    return Pipeline(tmp_path, "postgres", schema, env={PG_ENV: PG_URL})
