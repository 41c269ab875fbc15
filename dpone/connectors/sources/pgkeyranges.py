"""Key ranges of a PostgreSQL table (``partition_column``): the partitions of a scale-out run.

``count`` ranges between the column's minimum and maximum (integer, date or timestamp), rows
with a NULL key a partition of their own, each range read in key order; only ranges that hold
rows become partitions, each with the count of rows before it (the row numbers of its
run-scoped DLQ refs).
"""

from __future__ import annotations

import contextlib
from typing import Any

from dpone.connectors.base import Partition, Partitioning
from dpone.connectors.errors import SourceConfigError, SourceError, SourceUnavailable
from dpone.connectors.sql import postgres as pg
from dpone.connectors.sql.identifiers import quote_ident
from dpone.connectors.sql.select import KeyRange, Relation, select_sql, sql_literal
from dpone.manifest.specs import IncrementalPlan


def key_ranges(
    connection: str,
    relation: Relation,
    incremental: IncrementalPlan | None,
    column: str,
    count: int,
    after: object | None,
) -> Partitioning:
    """The key ranges of ``relation`` (a table) on ``column``; ``connection`` is resolved and
    never shown."""
    table = relation.table
    assert table is not None
    key = quote_ident(column)
    base = relation.base_sql()
    rows = _query(connection, f"SELECT min({key}), max({key}) FROM ({base}) AS _dpone_k")
    low, high = rows[0]
    preds: list[str] = []
    if low is not None:
        numeric = isinstance(low, int) and not isinstance(low, bool)
        if not numeric and not hasattr(low, "isoformat"):
            raise SourceConfigError(
                f"partition_column {column!r} must be an integer, date or timestamp column",
                pointer="/source/partition_column",
            )
        expr = key if numeric else f"EXTRACT(EPOCH FROM {key})"
        lo, hi = (low, high) if numeric else _epochs(connection, key, base)
        span = hi - lo
        count = max(1, min(count, int(span) + 1)) if numeric else max(1, count)
        bounds = [lo + span * i / count for i in range(count)] + [hi]
        for i in range(count):
            left, right = _literal(bounds[i], numeric), _literal(bounds[i + 1], numeric)
            upper = "<=" if i == count - 1 else "<"
            preds.append(f"{expr} >= {left} AND {expr} {upper} {right}")
    preds.append(f"{key} IS NULL")
    parts: list[Partition] = []
    offset = 0
    for pred in preds:
        ranged = KeyRange(table, None, where=pred, order_by=key)
        counted = select_sql(ranged, incremental, after, sql_literal)
        (rows_in,) = _query(connection, f"SELECT count(*) FROM ({counted}) AS _dpone_c")[0]
        if not rows_in:
            continue
        parts.append(
            Partition(len(parts), "key_range", table, where=pred, order_by=key, row_offset=offset)
        )
        offset += int(rows_in)
    if not parts:  # an empty table still runs (and commits an empty load)
        return Partitioning.whole(relation.partition, "the table is empty")
    return Partitioning(tuple(parts))


def _literal(value: float, numeric: bool) -> str:
    if numeric:
        # Integer keys: ranges start at whole numbers (ceil keeps them disjoint and complete).
        return str(-int(-value // 1))
    return repr(float(value))


def _epochs(connection: str, key: str, base: str) -> tuple[float, float]:
    sql = (
        f"SELECT EXTRACT(EPOCH FROM min({key}))::float8, EXTRACT(EPOCH FROM max({key}))::float8 "
        f"FROM ({base}) AS _dpone_k"
    )
    low, high = _query(connection, sql)[0]
    return float(low), float(high)


def _query(connection: str, sql: str) -> list[tuple[Any, ...]]:
    """A small query of the source database (its SQLSTATE only in an error)."""
    try:
        conn = pg.connect(connection, autocommit=True)
    except pg.DRIVER_ERRORS:
        raise SourceUnavailable("cannot connect to the PostgreSQL source") from None
    try:
        with conn.cursor() as cur:
            cur.execute(sql)
            return [tuple(row) for row in cur.fetchall()]
    except pg.DRIVER_ERRORS as exc:
        _, detail = pg.classify(exc)
        raise SourceError(f"cannot partition the PostgreSQL source ({detail})") from None
    finally:
        with contextlib.suppress(*pg.DRIVER_ERRORS, RuntimeError):
            conn.close()


__all__ = ["key_ranges"]
