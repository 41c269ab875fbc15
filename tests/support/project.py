"""End-to-end runs: a project folder (manifest + CSV data) against a real sink.

A :class:`Project` writes a manifest and its CSV files into ``tmp_path``, runs it through the
CLI and reads every outcome back independently of dpone: the target table with a fresh DuckDB
connection, psycopg2 or pyarrow.parquet (committed files only), the state file's bytes, the DLQ
files on disk and the evidence bundles.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
import psycopg2
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from dpone.canonical import verify_checksum
from dpone.cli.main import cli
from dpone.dlq.store import DlqStore
from dpone.ops.verification import verify_store
from dpone.published import schema_errors
from tests import dltkit
from tests.support import dlqfiles
from tests.support.postgres import PG_URL, pg_query
from tests.support.processes import CliRun

PG_ENV = "DPONE_TEST_PG_URL"
PIPELINE = "orders_rt"
DATASET = "analytics"
TABLE = "orders"
#: A row value (mostly of bad rows): no dpone artifact, log or output may ever contain it.
CANARY = f"canary{uuid.uuid4().hex}"

HEADER = ("id", "name", "amount", "updated_at", "active")
CONTRACT_COLUMNS: dict[str, dict[str, Any]] = {
    "id": {"type": "integer", "nullable": False},
    "name": {"type": "string"},
    "amount": {"type": "decimal", "precision": 10, "scale": 2, "nullable": False},
    "updated_at": {"type": "timestamp", "timezone": True, "nullable": False},
    "active": {"type": "boolean"},
}

Row = tuple[Any, ...]
"""A sink row normalized for comparison: (id, name, amount text, updated_at ISO UTC, active)."""


def ts(day: int) -> str:
    """The canonical text of 10:00 UTC on a day of January 2026."""
    return f"2026-01-{day:02d}T10:00:00Z"


def good(i: int, *, name: str | None = None, amount: str = "10.00", day: int | None = None) -> Row:
    """A CSV row every enforcement mode accepts, in canonical text."""
    return (
        str(i),
        name if name is not None else f"n{i}",
        amount,
        ts(day if day is not None else i),
        "true" if i % 2 else "false",
    )


def loaded(
    i: int, *, name: str | None = None, amount: str = "10.00", day: int | None = None
) -> Row:
    """What :func:`good` looks like once in the sink (normalized)."""
    return (
        i,
        name if name is not None else f"n{i}",
        amount,
        f"2026-01-{(day if day is not None else i):02d}T10:00:00+00:00",
        bool(i % 2),
    )


def normalize(row: dict[str, Any]) -> Row:
    moment = row["updated_at"]
    amount = row["amount"]
    return (
        row["id"],
        row["name"],
        None if amount is None else str(Decimal(amount).quantize(Decimal("0.01"))),
        None if moment is None else _utc(moment).isoformat(),
        row["active"],
    )


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise AssertionError("a timestamp with timezone: true came back naive")
    return moment.astimezone(UTC)


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass
class Project:
    """One pipeline in a folder of its own, against one real sink."""

    root: Path
    kind: str
    sink: dict[str, Any]
    env: dict[str, str] = field(default_factory=dict)
    name: str = PIPELINE
    dlq_directory: str | None = None
    """``dlq.directory`` of the manifest, relative to the root (None: ``.dpone/dlq``)."""

    # --- writing ----------------------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.yaml"

    def write_csv(self, file: str, rows: Sequence[Sequence[str | None]]) -> Path:
        """``data/<file>`` with the header; None is an empty field (NULL via null_values)."""
        path = self.root / "data" / file
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="", encoding="utf-8") as fh:
            writer = csv.writer(fh, lineterminator="\n")
            writer.writerow(HEADER)
            writer.writerows(["" if v is None else v for v in row] for row in rows)
        return path

    def write_manifest(
        self,
        *,
        enforcement: str = "quarantine",
        mode: str = "append",
        unique_key: Sequence[str] = (),
        incremental: bool | dict[str, Any] = False,
        assertions: dict[str, Any] | None = None,
        chunk_size: int = 1000,
        dlq: dict[str, Any] | None = None,
        source: dict[str, Any] | None = None,
        sink_options: dict[str, Any] | None = None,
    ) -> Path:
        """The manifest; ``source`` replaces the CSV files of :meth:`write_csv`;
        ``sink_options`` are more keys of ``sink.options`` (``system_tables``)."""
        self.dlq_directory = (dlq or {}).get("directory")
        strategy: dict[str, Any] = {"mode": mode}
        if unique_key:
            strategy["unique_key"] = list(unique_key)
        source = source or {
            "type": "file",
            "format": "csv",
            "path": "data/*.csv",
            "options": {"csv": {"null_values": [""]}},
        }
        if incremental:  # a mapping adds lag, initial_value, end_value
            extra = incremental if isinstance(incremental, dict) else {}
            source["incremental"] = {"cursor_column": "updated_at", **extra}
        doc: dict[str, Any] = {
            "kind": "dpone.manifest.v1",
            "name": self.name,
            "runtime": {"work_dir": ".dpone", "chunk_size": chunk_size},
            "source": source,
            "sink": {
                **self.sink,
                "strategy": strategy,
                "options": {
                    "schema_contract": {"enforcement": enforcement, "columns": CONTRACT_COLUMNS},
                    "dlq": {"pii_policy": "reference_only", **(dlq or {})},
                    "runtime_evidence": {"output_dir": ".dpone/evidence"},
                    **(sink_options or {}),
                },
            },
            "state": {"type": "file"},
        }
        if assertions is not None:
            doc["quality"] = {"assertions": assertions}
        # JSON is YAML: no quoting surprises, and the compiler still reads it as a manifest.
        self.manifest_path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
        return self.manifest_path

    # --- running ----------------------------------------------------------------------------

    def cli(self, *args: str, env: dict[str, str | None] | None = None) -> CliRun:
        """``dpone run manifest.yaml --format json ARGS`` through click's test runner
        (``env``: variables to set, or to unset with None)."""
        result = CliRunner().invoke(
            cli,
            ["run", str(self.manifest_path), "--format", "json", *args],
            env={**self.env, **(env or {})},
            catch_exceptions=False,
        )
        return CliRun(result.exit_code, result.stdout, result.stderr)

    def run(self) -> dict[str, Any]:
        """One CLI run; returns its report after checking it against ``dpone.run.v1``."""
        result = self.cli()
        doc = result.doc
        assert schema_errors(doc, "dpone.run.v1") == []
        assert result.exit_code == doc["exit_code"]
        assert CANARY not in result.stdout
        assert CANARY not in result.stderr
        return doc

    # --- reading the sink -------------------------------------------------------------------

    def rows(self) -> list[Row] | None:
        """The target table's rows sorted by id, or None when the table does not exist."""
        table = self.read_table()
        if table is None:
            return None
        return sorted((normalize(r) for r in table.to_pylist()), key=lambda r: (r[0] is None, r))

    def read_table(self) -> pa.Table | None:
        if self.kind.startswith("dlt_"):
            return dltkit.read_table(self.kind, self.root, self.sink)
        if self.kind == "duckdb":
            return self._duckdb_table()
        if self.kind == "postgres":
            return self._postgres_table()
        return self._parquet_table()

    def nullable(self) -> dict[str, bool]:
        """Whether each column of the target accepts NULL, as the sink itself says."""
        if self.kind.startswith("dlt_"):
            return dltkit.nullable(self.kind, self.root, self.sink)
        if self.kind == "duckdb":
            with self._duckdb() as con:
                found = con.execute(
                    "SELECT column_name, is_nullable FROM duckdb_columns() "
                    "WHERE schema_name = ? AND table_name = ?",
                    [self.dataset, TABLE],
                ).fetchall()
            return {str(n): bool(f) for n, f in found}
        if self.kind == "postgres":
            found = pg_query(
                PG_URL,
                "SELECT column_name, is_nullable FROM information_schema.columns "
                f"WHERE table_schema = '{self.dataset}' AND table_name = '{TABLE}'",
            )
            return {str(n): f == "YES" for n, f in found}
        schema = pa.unify_schemas([pq.read_schema(p) for p in self.committed_files()])
        return {f.name: f.nullable for f in schema}

    @property
    def dataset(self) -> str:
        return str(self.sink["dataset"])

    def _duckdb(self) -> duckdb.DuckDBPyConnection:
        return duckdb.connect(str(self.root / self.sink["database"]), read_only=True)

    def _duckdb_table(self) -> pa.Table | None:
        if not (self.root / self.sink["database"]).exists():
            return None
        with self._duckdb() as con:
            found = con.execute(
                "SELECT count(*) FROM information_schema.tables "
                "WHERE table_schema = ? AND table_name = ?",
                [self.dataset, TABLE],
            ).fetchall()
            if not found[0][0]:
                return None
            table: pa.Table = con.sql(f'SELECT * FROM "{self.dataset}"."{TABLE}"').to_arrow_table()
            return table

    def duckdb_tables(self) -> list[str]:
        """Every table of the dataset (to see staging left behind)."""
        if not (self.root / self.sink["database"]).exists():
            return []
        with self._duckdb() as con:
            return sorted(
                str(r[0])
                for r in con.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = ?",
                    [self.dataset],
                ).fetchall()
            )

    def load_markers(self) -> list[dict[str, Any]]:
        """This pipeline's load markers in the sink (the proof of each committed load), in
        commit order: ``run_id``, ``load_id``, ``rows`` and ``cursor_to`` of each."""
        if self.kind.startswith("dlt_"):
            return dltkit.load_markers(self.kind, self.root, self.sink, self.work_dir, self.name)
        columns = "run_id, load_id, row_count, cursor_to"
        where = f"WHERE pipeline = '{self.name}' AND target = '{self.dataset}.{TABLE}'"
        found: list[tuple[Any, ...]] = []
        if self.kind == "duckdb":
            if "_dpone_loads" not in self.duckdb_tables():
                return []
            with self._duckdb() as con:
                found = con.execute(
                    f'SELECT {columns} FROM "{self.dataset}"._dpone_loads {where} ORDER BY load_seq'
                ).fetchall()
        elif self.kind == "postgres":
            exists = pg_query(PG_URL, f"SELECT to_regclass('\"{self.dataset}\"._dpone_loads')")
            if exists[0][0] is not None:
                found = pg_query(
                    PG_URL,
                    f'SELECT {columns} FROM "{self.dataset}"._dpone_loads {where} '
                    "ORDER BY load_seq",
                )
        else:
            docs = sorted(
                (
                    json.loads(p.read_text(encoding="utf-8"))
                    for p in (self.lake / "_dpone_loads").glob("*.json")
                ),
                key=lambda d: int(d["seq"]),
            )
            found = [
                (d["run_id"], d["load_id"], d["rows"], d["cursor_to"])
                for d in docs
                if d["pipeline"] == self.name and d["target"] == f"{self.dataset}.{TABLE}"
            ]
        return [
            {"run_id": r[0], "load_id": r[1], "rows": int(r[2]), "cursor_to": r[3]} for r in found
        ]

    def _postgres_table(self) -> pa.Table | None:
        conn = psycopg2.connect(PG_URL)
        try:
            cur = conn.cursor()
            cur.execute("SELECT to_regclass(%s)", (f'"{self.dataset}"."{TABLE}"',))
            found = cur.fetchone()
            if found is None or found[0] is None:
                return None
            cur.execute(f'SELECT * FROM "{self.dataset}"."{TABLE}"')
            names = [d[0] for d in cur.description]
            return pa.Table.from_pylist([dict(zip(names, r, strict=True)) for r in cur.fetchall()])
        finally:
            conn.close()

    @property
    def lake(self) -> Path:
        return self.root / str(self.sink["path"])

    def committed_files(self) -> list[Path]:
        """The table's live Parquet files, replayed from the commit markers on disk."""
        markers = [
            json.loads(p.read_text(encoding="utf-8"))
            for p in (self.lake / "_dpone_loads").glob("*.json")
        ]
        live: dict[str, None] = {}
        for doc in sorted(markers, key=lambda d: int(d["seq"])):
            if doc["target"] != f"{self.dataset}.{TABLE}":
                continue
            for rel in doc["removes"]:
                live.pop(rel, None)
            for _, final in doc["adds"]:
                live[final] = None
        return [self.lake / rel for rel in sorted(live)]

    def _parquet_table(self) -> pa.Table | None:
        files = self.committed_files()
        on_disk = sorted((self.lake / self.dataset / TABLE).glob("*.parquet"))
        # Only committed files may be visible to a reader of the table's folder.
        assert on_disk == files
        if not files:
            return None
        tables = [pq.read_table(p) for p in files]
        return pa.concat_tables(tables, promote_options="default")

    # --- reading dpone's own files ------------------------------------------------------------

    @property
    def work_dir(self) -> Path:
        return self.root / ".dpone"

    @property
    def state_path(self) -> Path:
        return self.work_dir / "state" / f"{self.name}.json"

    def state_bytes(self) -> bytes | None:
        return self.state_path.read_bytes() if self.state_path.exists() else None

    def state(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.state_path.read_bytes())
        assert schema_errors(doc, "dpone.state.v1") == []
        assert verify_checksum(doc)
        return doc

    @property
    def dlq_root(self) -> Path:
        if self.dlq_directory is not None:
            return self.root / self.dlq_directory
        return self.work_dir / "dlq"

    def dlq(self) -> DlqStore:
        return DlqStore(self.dlq_root)

    def dlq_index_path(self, run_id: str) -> Path:
        return self.dlq_root / "runs" / run_id / "index.json"

    def dlq_index(self, run_id: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.dlq_index_path(run_id).read_bytes())
        return doc

    def dlq_records(self, run_id: str) -> list[dict[str, Any]]:
        """The run's records as written in its segments, sorted by their row (record_ref)."""
        docs = dlqfiles.records_on_disk(self.dlq_root, run_id)
        # file refs end in `row=<n>`, run refs in `/rows/<n>`
        return sorted(docs, key=lambda d: int(re.split(r"[=/]", d["record_ref"])[-1]))

    def evidence_path(self, run_id: str) -> Path:
        return self.work_dir / "evidence" / self.name / run_id / "data_contract_evidence.json"

    def evidence(self, run_id: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.evidence_path(run_id).read_bytes())
        return doc

    def file_ref(self, file: str, row: int) -> str:
        digest = sha256_of(self.root / "data" / file)
        return f"dpone://file/data/{file}?sha256={digest}&row={row}"

    def check_artifacts(self) -> None:
        """Every artifact dpone wrote validates against its published schema and checksum,
        and none holds the canary (reference_only: no row value anywhere)."""
        for path in sorted((self.work_dir / "evidence").rglob("*.json")):
            doc = json.loads(path.read_bytes())
            assert schema_errors(doc, "dpone.data_contract_evidence.v1") == [], path
            assert verify_checksum(doc), path
        if self.state_path.exists():
            self.state()
        runs = self.dlq_root / "runs"
        for run in sorted(runs.iterdir()) if runs.exists() else ():
            index = json.loads((run / "index.json").read_bytes())
            assert schema_errors(index, "dpone.dlq-index.v1") == [], run
            assert dlqfiles.temp_files(self.dlq_root, run.name) == []
            for record in dlqfiles.records_on_disk(self.dlq_root, run.name):
                assert schema_errors(record, "dpone.dlq.v1") == [], run
        assert verify_store(self.dlq()) == []
        for path in sorted(self.work_dir.rglob("*")):
            if path.is_file() and path.suffix in (".json", ".md", ".jsonl"):
                assert CANARY not in path.read_text(encoding="utf-8"), path


def make_project(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str | None = None
) -> Project:
    """A project against sink ``kind``; by default the test class's ``kind`` (DuckDB when
    it names none)."""
    if kind is None:
        kind = getattr(request.cls, "kind", "duckdb")
    if kind == "duckdb":
        sink = {"type": "duckdb", "database": "warehouse.duckdb", "dataset": DATASET}
        return Project(tmp_path, kind, {**sink, "table": TABLE})
    if kind == "postgres":
        schema = request.getfixturevalue("pg_schema")
        sink = {"type": "postgres", "connection": "${" + PG_ENV + "}", "dataset": schema}
        return Project(tmp_path, kind, {**sink, "table": TABLE}, env={PG_ENV: PG_URL})
    if kind == "filesystem":
        sink = {"type": "filesystem", "path": "lake", "dataset": DATASET, "table": TABLE}
        return Project(tmp_path, kind, sink)
    if kind in dltkit.KINDS:
        dataset = DATASET
        if kind == "dlt_postgres":
            dataset = request.getfixturevalue("pg_schema")
            request.addfinalizer(lambda: dltkit.drop_pg_schemas(dataset))
        sink, env = dltkit.sink_config(kind, dataset, TABLE)
        return Project(tmp_path, kind, sink, env=env)
    raise ValueError(kind)
