"""A pipeline whose file source is a bucket of the local S3 server (tests/support/s3server.py),
run and replayed through the CLI into a DuckDB file, read back with duckdb and boto3."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
from click.testing import CliRunner

from dpone.cli.main import cli
from tests.support import dlqfiles
from tests.support.processes import CliRun
from tests.support.replay_pipeline import ROWS
from tests.support.s3server import REGION, S3Server

TABLE = "orders"
ENDPOINT_VARIABLE = "DPONE_TEST_S3_ENDPOINT"


def csv_bytes(rows: tuple[tuple[str, str, str], ...] = ROWS) -> bytes:
    return ("\n".join(["id,name,amount", *(",".join(row) for row in rows)]) + "\n").encode()


@dataclass
class S3Pipeline:
    """A manifest in ``root`` reading ``s3://<bucket>/landing/...``, loading DuckDB."""

    root: Path
    server: S3Server
    bucket: str
    env: dict[str, str] = field(default_factory=dict)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.yaml"

    @property
    def dlq_dir(self) -> Path:
        return self.root / ".dpone" / "dlq"

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{key}"

    def put(self, key: str, data: bytes) -> None:
        self.server.put(self.bucket, key, data)

    def write_manifest(
        self,
        *,
        path: str = "landing/*.csv",
        fmt: str = "csv",
        scale: int = 2,
        storage: dict[str, Any] | None = None,
        columns: dict[str, Any] | None = None,
    ) -> None:
        """``path`` is a key glob in the bucket (or a whole URI); ``storage`` defaults to the
        endpoint as a ``${ENV}`` reference and the region."""
        source_path = path if "://" in path else self.uri(path)
        if storage is None:
            storage = {"endpoint_url": "${" + ENDPOINT_VARIABLE + "}", "region": REGION}
        amount = {"type": "decimal", "precision": 12, "scale": scale, "nullable": False}
        doc = {
            "name": "orders_s3",
            "runtime": {"work_dir": ".dpone"},
            "source": {
                "type": "file",
                "format": fmt,
                "path": source_path,
                "options": {"storage": storage},
            },
            "sink": {
                "type": "duckdb",
                "database": "warehouse.duckdb",
                "dataset": "analytics",
                "table": TABLE,
                "options": {
                    "schema_contract": {
                        "enforcement": "quarantine",
                        "columns": columns
                        or {
                            "id": {"type": "integer", "nullable": False},
                            "name": {"type": "string"},
                            "amount": amount,
                        },
                    }
                },
            },
        }
        self.manifest.write_text(json.dumps(doc, indent=2), encoding="utf-8")

    def standard_env(self) -> dict[str, str]:
        """The standard AWS variables with this server's credentials, and the endpoint."""
        return {**self.server.env(), ENDPOINT_VARIABLE: self.server.endpoint}

    def cli(self, *args: str, env: dict[str, str] | None = None) -> CliRun:
        result = CliRunner().invoke(
            cli, list(args), env=self.env if env is None else env, catch_exceptions=False
        )
        return CliRun(result.exit_code, result.stdout, result.stderr)

    def run(self, env: dict[str, str] | None = None) -> CliRun:
        return self.cli("run", str(self.manifest), "--format", "json", env=env)

    def execute(self, run_id: str) -> CliRun:
        return self.cli(
            "ops",
            "quarantine-replay",
            "--run-id",
            run_id,
            "--manifest",
            str(self.manifest),
            "--execute",
            "--format",
            "json",
        )

    def sql(self, sql: str) -> list[tuple[Any, ...]]:
        with duckdb.connect(str(self.root / "warehouse.duckdb"), read_only=True) as con:
            return con.execute(sql).fetchall()

    def amounts(self) -> dict[int, Decimal]:
        rows = self.sql(f"SELECT id, amount FROM analytics.{TABLE} ORDER BY id")
        ids = [int(r[0]) for r in rows]
        assert len(ids) == len(set(ids)), f"a row was loaded twice: {sorted(ids)}"
        return {int(i): Decimal(a) for i, a in rows}

    def migrate_amount(self, scale: int = 3) -> None:
        with duckdb.connect(str(self.root / "warehouse.duckdb")) as con:
            con.execute(f"ALTER TABLE analytics.{TABLE} ALTER amount TYPE DECIMAL(12,{scale})")

    def records(self, run_id: str) -> list[dict[str, Any]]:
        return dlqfiles.records_on_disk(self.dlq_dir, run_id)

    def acked_ids(self, run_id: str) -> list[str]:
        return dlqfiles.acked_ids(self.dlq_dir, run_id)
