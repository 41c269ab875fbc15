"""The system tables a SQL sink keeps beside its target (``sink.options.system_tables``).

``<dataset>._dpone_runs`` holds one row per run (primary key ``run_id``) and
``<dataset>._dpone_rejected`` one row per dead-lettered record of a committed run (primary key
``(run_id, record_id)``). A committed run's rows go in with its load, in the commit's own
transaction, by ``INSERT ... ON CONFLICT DO NOTHING``: a commit that is applied again (a
recovered or replayed one) adds nothing twice. A failed run records its own row afterwards in
a short transaction of its own (:class:`RecordsRuns`), best effort.

This module is what DuckDB and PostgreSQL share: the tables' columns and their types in each
dialect, the rows as Arrow tables (both sinks insert from Arrow), and the two statements.
Values of a rejected row reach ``row_json`` only under ``pii_policy: preserve``; every other
column is a name, a code, a reference or a count.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Literal

import orjson
import pyarrow as pa

from dpone.connectors.sql.identifiers import quote_ident
from dpone.dlq.model import DlqRecord, parse_timestamp
from dpone.records import frozen

RUNS = "_dpone_runs"
REJECTED = "_dpone_rejected"
Dialect = Literal["duckdb", "postgres"]
#: The longest error summary kept (an error message is value-free but may be long).
MAX_SUMMARY = 2000

_TYPES: dict[str, dict[Dialect, str]] = {
    "text": {"duckdb": "VARCHAR", "postgres": "text"},
    "bigint": {"duckdb": "BIGINT", "postgres": "bigint"},
    "timestamp": {"duckdb": "TIMESTAMPTZ", "postgres": "timestamptz"},
}
_ARROW = {
    "text": pa.string(),
    "bigint": pa.int64(),
    "timestamp": pa.timestamp("us", tz="UTC"),
}


@frozen
class Column:
    """One column of a system table: its name, its kind (typed per dialect) and its nullability."""

    name: str
    kind: Literal["text", "bigint", "timestamp"]
    nullable: bool = False


@frozen
class SystemTable:
    """One system table: its columns (in order) and its primary key."""

    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]

    @property
    def schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, _ARROW[c.kind], c.nullable) for c in self.columns])

    def ddl(self, qualified: str, dialect: Dialect) -> str:
        """``CREATE TABLE IF NOT EXISTS`` of this table at ``qualified`` (already quoted)."""
        columns = [
            f"{quote_ident(c.name)} {_TYPES[c.kind][dialect]}{'' if c.nullable else ' NOT NULL'}"
            for c in self.columns
        ]
        key = ", ".join(quote_ident(k) for k in self.key)
        return f"CREATE TABLE IF NOT EXISTS {qualified} ({', '.join(columns)}, PRIMARY KEY ({key}))"

    def insert(self, qualified: str, source: str) -> str:
        """Insert every row of ``source`` (a relation with this table's columns) that is not
        there yet: a row whose key exists already is left as it is."""
        cols = ", ".join(quote_ident(c.name) for c in self.columns)
        return (
            f"INSERT INTO {qualified} ({cols}) SELECT {cols} FROM {source} ON CONFLICT DO NOTHING"
        )


RUNS_TABLE = SystemTable(
    RUNS,
    (
        Column("run_id", "text"),
        Column("pipeline", "text"),
        Column("load_id", "text"),
        Column("target", "text"),
        Column("started_at", "timestamp"),
        Column("finished_at", "timestamp"),
        Column("execution_status", "text"),
        Column("data_outcome", "text", nullable=True),
        Column("rows_read", "bigint"),
        Column("rows_loaded", "bigint"),
        Column("rows_quarantined", "bigint"),
        Column("error_code", "text", nullable=True),
        Column("error_summary", "text", nullable=True),
    ),
    ("run_id",),
)

REJECTED_TABLE = SystemTable(
    REJECTED,
    (
        Column("run_id", "text"),
        Column("record_id", "text"),
        Column("pipeline", "text"),
        Column("load_id", "text"),
        Column("reason", "text"),
        Column("column_name", "text", nullable=True),
        Column("rule", "text", nullable=True),
        Column("record_ref", "text"),
        Column("row_json", "text", nullable=True),
        Column("created_at", "timestamp"),
    ),
    ("run_id", "record_id"),
)


@frozen
class RunRow:
    """A run as ``_dpone_runs`` holds it. ``error_summary`` is ``CODE: message`` (the error's
    own message: value-free, cut at :data:`MAX_SUMMARY`)."""

    run_id: str
    pipeline: str
    load_id: str
    target: str
    started_at: datetime
    finished_at: datetime
    execution_status: Literal["succeeded", "failed"]
    data_outcome: str | None
    rows_read: int
    rows_loaded: int
    rows_quarantined: int
    error_code: str | None = None
    error_summary: str | None = None

    def to_table(self) -> pa.Table:
        values = {c.name: [getattr(self, c.name)] for c in RUNS_TABLE.columns}
        return pa.Table.from_pydict(values, schema=RUNS_TABLE.schema)


def error_summary(code: str, message: str) -> str:
    """The one line ``_dpone_runs`` keeps of a failure."""
    line = f"{code}: {' '.join(message.split())}"
    return line if len(line) <= MAX_SUMMARY else line[: MAX_SUMMARY - 1] + "…"


def rejected_table(pipeline: str, records: Iterable[DlqRecord], *, with_values: bool) -> pa.Table:
    """``_dpone_rejected``'s rows for ``records`` (a run's DLQ records, read back verified).

    ``row_json`` is the record's payload as JSON only when ``with_values`` (the manifest's
    ``pii_policy`` is ``preserve``); otherwise NULL, whatever the record holds."""
    columns: dict[str, list[object]] = {c.name: [] for c in REJECTED_TABLE.columns}
    for record in records:
        columns["run_id"].append(record.run_id)
        columns["record_id"].append(record.record_id)
        columns["pipeline"].append(pipeline)
        columns["load_id"].append(record.load_id)
        columns["reason"].append(str(record.reason.code))
        columns["column_name"].append(record.reason.column or record.diagnostics.column)
        columns["rule"].append(record.diagnostics.rule_id)
        columns["record_ref"].append(record.record_ref)
        value = record.payload.value if with_values else None
        columns["row_json"].append(None if value is None else orjson.dumps(value).decode())
        columns["created_at"].append(parse_timestamp(record.created_at))
    return pa.Table.from_pydict(columns, schema=REJECTED_TABLE.schema)


@frozen
class SystemRows:
    """What a committing load adds to the system tables: its run and its rejected records."""

    run: RunRow
    rejected: pa.Table

    def tables(self) -> tuple[tuple[SystemTable, pa.Table], ...]:
        return (RUNS_TABLE, self.run.to_table()), (REJECTED_TABLE, self.rejected)


__all__ = [
    "REJECTED",
    "REJECTED_TABLE",
    "RUNS",
    "RUNS_TABLE",
    "RunRow",
    "SystemRows",
    "SystemTable",
    "error_summary",
    "rejected_table",
]
