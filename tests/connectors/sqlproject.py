"""A throwaway project for CLI runs into the SQL sinks under any names: a manifest written by
the test, a CSV outside the manifest's folder, and the target read back with quoted names."""

from __future__ import annotations

import contextlib
import csv
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
from click.testing import CliRunner

from dpone.cli.main import cli
from tests.support.postgres import PG_URL, pg_query
from tests.support.processes import CliRun

PG_ENV = "DPONE_TEST_SQL_PG_URL"
#: A row value: no output of dpone may ever contain it.
CANARY = f"canary{uuid.uuid4().hex}"


def q(*parts: str) -> str:
    """Quoted, dot-joined names, written independently of dpone's helper."""
    return ".".join('"' + p.replace('"', '""') + '"' for p in parts)


@dataclass
class SqlProject:
    """``kind`` (duckdb | postgres) loading ``key`` and ``value`` columns into
    ``dataset.table``; ``database`` is the DuckDB file's name."""

    root: Path
    kind: str
    dataset: str
    table: str
    key: str
    value: str
    database: str = "warehouse.duckdb"
    name: str = "sql_names"
    url: str = PG_URL

    @property
    def manifest_path(self) -> Path:
        return self.root / "project" / "manifest.yaml"

    @property
    def csv_path(self) -> Path:
        return self.root / "input" / "rows.csv"

    @property
    def dlq_root(self) -> Path:
        return self.root / "project" / ".dpone" / "dlq"

    def write_csv(self, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
        self.csv_path.parent.mkdir(parents=True, exist_ok=True)
        with self.csv_path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(header)
            writer.writerows(rows)

    def write_manifest(self, *, mode: str = "append", unique_key: Sequence[str] = ()) -> None:
        strategy: dict[str, Any] = {"mode": mode}
        if unique_key:
            strategy["unique_key"] = list(unique_key)
        sink: dict[str, Any] = {"type": self.kind, "dataset": self.dataset, "table": self.table}
        if self.kind == "duckdb":
            sink["database"] = self.database
        else:
            sink["connection"] = "${" + PG_ENV + "}"
        doc: dict[str, Any] = {
            "kind": "dpone.manifest.v1",
            "name": self.name,
            "runtime": {"work_dir": ".dpone"},
            "source": {"type": "file", "format": "csv", "path": str(self.csv_path)},
            "sink": {
                **sink,
                "strategy": strategy,
                "options": {
                    "schema_contract": {
                        "enforcement": "quarantine",
                        "columns": {
                            self.key: {"type": "integer", "nullable": False},
                            self.value: {
                                "type": "decimal",
                                "precision": 10,
                                "scale": 2,
                                "nullable": False,
                            },
                        },
                    },
                    "dlq": {"pii_policy": "reference_only"},
                },
            },
            "state": {"type": "file"},
        }
        self.manifest_path.parent.mkdir(parents=True, exist_ok=True)
        # JSON is YAML; ensure_ascii=False keeps the non-ASCII names as written.
        self.manifest_path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")

    def run(self) -> CliRun:
        result = CliRunner().invoke(
            cli,
            ["run", str(self.manifest_path), "--format", "json"],
            env={PG_ENV: self.url},
            catch_exceptions=False,
        )
        run = CliRun(result.exit_code, result.stdout, result.stderr)
        assert CANARY not in run.stdout
        assert CANARY not in run.stderr
        return run

    def select(self, columns: Sequence[str]) -> list[tuple[Any, ...]]:
        """The target's ``columns`` ordered by them, read with quoted names."""
        names = ", ".join(q(c) for c in columns)
        if self.kind == "postgres":
            return pg_query(
                PG_URL, f"SELECT {names} FROM {q(self.dataset, self.table)} ORDER BY {names}"
            )
        con = duckdb.connect(str(self.root / "project" / self.database), read_only=True)
        try:
            catalog = con.execute("SELECT current_database()").fetchall()[0][0]
            return con.execute(
                f"SELECT {names} FROM {q(catalog, self.dataset, self.table)} ORDER BY {names}"
            ).fetchall()
        finally:
            con.close()

    def execute(self, sql: str) -> None:
        """Run ``sql`` on the sink's database (committed)."""
        if self.kind == "postgres":
            pg_query(PG_URL, sql)
            return
        con = duckdb.connect(str(self.root / "project" / self.database))
        try:
            con.execute(sql)
        finally:
            con.close()

    def drop_dataset(self) -> None:
        if self.kind == "postgres":
            pg_query(PG_URL, f"DROP SCHEMA IF EXISTS {q(self.dataset)} CASCADE")


@contextlib.contextmanager
def hold_duckdb_file(path: Path) -> Iterator[None]:
    """Another process holds ``path`` open for writing while the block runs."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb, sys; c = duckdb.connect(sys.argv[1]); print('ready', flush=True); "
            "sys.stdin.read()",
            str(path),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        yield
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=60)
        assert holder.stdout is not None
        holder.stdout.close()
