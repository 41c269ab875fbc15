"""Prevalidated Parquet files for a :class:`~tests.support.project.Project`: written with the
contract's Arrow schema and the producer's mark, as a producer following docs/sources.md would,
and broken on purpose in the ways the run must refuse."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import dpone
from dpone.contracts.types import sink_schema
from tests.support.project import Project

SOURCE: dict[str, Any] = {
    "type": "file",
    "format": "parquet",
    "path": "data/*.parquet",
    "prevalidated": True,
}


def write_manifest(project: Project, **options: Any) -> Path:
    """The project's manifest over ``data/*.parquet``, ``prevalidated: true``."""
    return project.write_manifest(enforcement="strict", source=dict(SOURCE), **options)


def contract_schema(project: Project) -> pa.Schema:
    """The contract's Arrow schema, as the producer writes it (field metadata dropped)."""
    plan = dpone.compile(project.manifest_path)
    return pa.schema(
        [pa.field(f.name, f.type, f.nullable) for f in sink_schema(plan.sink.contract)]
    )


def table(first: int, count: int, schema: pa.Schema) -> pa.Table:
    """``count`` rows with ids from ``first``: what :func:`expected` reads back."""
    ids = range(first, first + count)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"n{i}" for i in ids], pa.string()),
            "amount": pa.array([Decimal(i % 1000) / 4 for i in ids], pa.decimal128(10, 2)),
            "updated_at": pa.array(
                [datetime(2026, 1, 1 + i % 28, 10, tzinfo=UTC) for i in ids],
                pa.timestamp("us", tz="UTC"),
            ),
            "active": pa.array([bool(i % 2) for i in ids], pa.bool_()),
        },
        schema=schema,
    )


def expected(first: int, count: int) -> list[tuple[Any, ...]]:
    """The rows of :func:`table` as ``Project.rows`` normalizes them."""
    return [
        (
            i,
            f"n{i}",
            str((Decimal(i % 1000) / 4).quantize(Decimal("0.01"))),
            datetime(2026, 1, 1 + i % 28, 10, tzinfo=UTC).isoformat(),
            bool(i % 2),
        )
        for i in range(first, first + count)
    ]


def write_file(
    project: Project,
    name: str,
    data: pa.Table,
    *,
    mark: dict[str, str] | None = None,
    marked: bool = True,
    **options: Any,
) -> Path:
    """``data/<name>`` with the manifest's mark (or ``mark``, or none when not ``marked``)."""
    if marked:
        data = data.replace_schema_metadata(
            mark if mark is not None else dpone.prevalidated_metadata(project.manifest_path)
        )
    path = project.root / "data" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(data, path, **options)
    return path


def write_good(project: Project, name: str, first: int, count: int) -> Path:
    return write_file(project, name, table(first, count, contract_schema(project)))


__all__ = [
    "SOURCE",
    "contract_schema",
    "expected",
    "table",
    "write_file",
    "write_good",
    "write_manifest",
]
