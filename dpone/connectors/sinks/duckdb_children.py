"""The child tables of one DuckDB load (``source.normalize: {nested: child_tables}``, SPEC §13),
held in memory until the load commits (``loadstate.NestingLoad``) and written inside its one
transaction, before its marker: every table of a load commits together or none does.

Per strategy, as dlt applies its child tables: ``append`` appends; ``replace`` empties every
child table of the target (``<table>__*``) with the target; a ``merge`` (upsert) deletes the
child rows of every target row whose key the load re-loads, before the target's rows are
replaced, and inserts only the child rows whose root row is in the target afterwards (the
last row of a key wins; a row marked deleted takes its children with it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import duckdb
import pyarrow as pa

from dpone.connectors.base import ColumnDefinition, TableDefinition
from dpone.connectors.sinks._common import Step
from dpone.connectors.sql.identifiers import quote_ident
from dpone.connectors.sql.merge import ROOT_ID_COLUMN, ROW_ID_COLUMN, under_kept_roots

#: the Arrow table of one child table's rows registered for its INSERT
CHILD = "_dpone_child"


class DuckChildren:
    """The statements on the child tables of the target ``dataset.table``."""

    def __init__(self, table: str, dataset: str) -> None:
        self._table = table
        self._dataset = dataset

    def existing(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        """The target's child tables in the database (``<table>__*``)."""
        rows = con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_catalog = "
            "current_database() AND table_schema = ? AND starts_with(table_name, ?) "
            "ORDER BY table_name",
            [self._dataset, self._table + "__"],
        ).fetchall()
        return [str(r[0]) for r in rows]

    def before_apply(
        self,
        con: duckdb.DuckDBPyConnection,
        children: list[str],
        *,
        target: str,
        stage: str,
        mode: str,
        keys: tuple[str, ...],
        step: Step,
    ) -> None:
        """Empty (``replace``) or prune (``merge``) the existing child tables (``children``,
        quoted names), before the staged rows reach ``target``."""
        if mode == "replace":
            for child in children:
                step.doing = f"emptying the child table {child} to replace its rows"
                con.execute(f"DELETE FROM {child}")
        elif mode == "merge":
            quoted = ", ".join(quote_ident(k) for k in keys)
            on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in keys)
            for child in children:
                step.doing = f"deleting the re-loaded rows' children from {child}"
                con.execute(
                    f"DELETE FROM {child} WHERE {quote_ident(ROOT_ID_COLUMN)} IN (SELECT "
                    f"t.{quote_ident(ROW_ID_COLUMN)} FROM {target} AS t JOIN (SELECT DISTINCT "
                    f"{quoted} FROM {stage}) AS s ON {on})"
                )

    def insert(
        self,
        con: duckdb.DuckDBPyConnection,
        q: Callable[[str], str],
        present: Mapping[str, list[str]],
        rows: Mapping[str, pa.Table],
        *,
        target: str,
        merge: bool,
        step: Step,
    ) -> None:
        """Create or widen each child table of the load and insert its ``rows``; ``q`` quotes
        a table's name, ``present`` holds the columns of the child tables that exist (lower
        case: DuckDB matches quoted names so)."""
        for name, table in rows.items():
            child = q(name)
            con.register(CHILD, table)
            try:
                self._shape(con, child, present.get(name), step)
                cols = ", ".join(quote_ident(n) for n in table.schema.names)
                where = under_kept_roots(merge, target)
                step.doing = f"inserting rows into the child table {child}"
                con.execute(f"INSERT INTO {child} ({cols}) SELECT {cols} FROM {CHILD}{where}")
            finally:
                con.unregister(CHILD)

    def describe(
        self,
        con: duckdb.DuckDBPyConnection,
        q: Callable[[str], str],
        columns: Callable[[duckdb.DuckDBPyConnection, str], list[tuple[str, str, bool]]],
        schemas: Mapping[str, pa.Schema],
        step: Step,
    ) -> tuple[TableDefinition, ...]:
        """Each child table of ``schemas`` as the commit leaves it: created or widened as
        :meth:`insert` does (no row), then read from the catalog with ``columns``. Inside
        a transaction the caller rolls back."""
        out = []
        for name, schema in schemas.items():
            present = [c[0].lower() for c in columns(con, name)]
            con.register(CHILD, schema.empty_table())
            try:
                self._shape(con, q(name), present or None, step)
            finally:
                con.unregister(CHILD)
            found = tuple(ColumnDefinition(*c) for c in columns(con, name))
            out.append(TableDefinition(f"{self._dataset}.{name}", "duckdb", found))
        return tuple(out)

    def _shape(
        self, con: duckdb.DuckDBPyConnection, child: str, present: list[str] | None, step: Step
    ) -> None:
        """Create the child table from the registered rows' types, or add the columns it
        lacks (``present``: its columns, lower case; None: absent)."""
        if present is None:
            step.doing = f"creating the child table {child}"
            con.execute(f"CREATE TABLE {child} AS SELECT * FROM {CHILD} LIMIT 0")
        else:
            self._widen(con, child, present, step)

    @staticmethod
    def _widen(con: duckdb.DuckDBPyConnection, child: str, present: list[str], step: Step) -> None:
        described = con.execute(f"DESCRIBE SELECT * FROM {CHILD}").fetchall()
        for name, dtype, *_ in described:
            if str(name).lower() not in present:
                step.doing = f"adding column {quote_ident(str(name))} to {child}"
                con.execute(f"ALTER TABLE {child} ADD COLUMN {quote_ident(str(name))} {dtype}")


__all__ = ["DuckChildren"]
