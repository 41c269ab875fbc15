"""The child tables of one PostgreSQL load (``source.normalize: {nested: child_tables}``, SPEC
§13), written inside the load's one transaction before its marker: every table of a load
commits together or none does. The child rows wait in memory for the commit
(``loadstate.NestingLoad``), go into a temporary table each by ADBC, and from there into their
table (created, or widened, from the rows' types).

Per strategy, as dlt applies its child tables: ``append`` appends; ``replace`` empties every
child table of the target (``<table>__*``) with the target; a ``merge`` (upsert) deletes the
child rows of every target row whose key the load re-loads, before the target's rows are
replaced, and inserts only the child rows whose root row is in the target afterwards.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pyarrow as pa

from dpone.connectors.base import ColumnDefinition, TableDefinition
from dpone.connectors.errors import SinkSchemaError
from dpone.connectors.sinks._common import Step
from dpone.connectors.sinks.pgtemp import MAX_IDENTIFIER_BYTES, ingest_temporary, temporary
from dpone.connectors.sinks.pgtemp import too_long as _too_long
from dpone.connectors.sql.identifiers import quote_ident
from dpone.connectors.sql.merge import ROOT_ID_COLUMN, ROW_ID_COLUMN, under_kept_roots
from dpone.connectors.sql.pgtypes import pg_type

Columns = Callable[[Any, str], list[tuple[str, str, bool]]]


class PgChildren:
    """The statements on the child tables of the target ``dataset.table``; ``q`` quotes a
    table name of the dataset, ``columns`` reads a table's columns (none: absent)."""

    def __init__(self, dataset: str, table: str, q: Callable[[str], str], columns: Columns) -> None:
        self._dataset = dataset
        self._table = table
        self._q = q
        self._columns = columns

    def existing(self, cur: Any) -> list[str]:
        """The target's child tables in the database (``<table>__*``)."""
        cur.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = $1 "
            "AND starts_with(table_name, $2) ORDER BY table_name",
            parameters=(self._dataset, self._table + "__"),
        )
        return [str(r[0]) for r in cur.fetchall()]

    def before_apply(
        self, cur: Any, *, mode: str, keys: tuple[str, ...], stage: str, step: Step
    ) -> None:
        """Empty (``replace``) or prune (``merge``) the existing child tables, before the
        staged rows (``stage``, quoted) reach the target."""
        target = self._q(self._table)
        quoted = ", ".join(quote_ident(k) for k in keys)
        on = " AND ".join(f"t.{quote_ident(k)} = s.{quote_ident(k)}" for k in keys)
        for name in self.existing(cur) if mode in ("replace", "merge") else []:
            child = self._q(name)
            if mode == "replace":
                step.doing = f"emptying the child table {child} to replace its rows"
                cur.execute(f"DELETE FROM {child}")
                continue
            step.doing = f"deleting the re-loaded rows' children from {child}"
            cur.execute(
                f"DELETE FROM {child} WHERE {quote_ident(ROOT_ID_COLUMN)} IN (SELECT "
                f"t.{quote_ident(ROW_ID_COLUMN)} FROM {target} AS t JOIN (SELECT DISTINCT "
                f"{quoted} FROM {stage}) AS s ON {on})"
            )

    def insert(
        self, cur: Any, rows: Mapping[str, pa.Table], *, merge: bool, scratch: str, step: Step
    ) -> None:
        """Create or widen each child table of the load and insert its ``rows`` (through
        temporary tables named after ``scratch``)."""
        target = self._q(self._table)
        for i, (name, table) in enumerate(rows.items()):
            _check_name(name)
            child, temp = self._q(name), f"{scratch}_c{i}"
            step.doing = f"staging the rows of the child table {child}"
            ingest_temporary(cur, temp, table)
            self._shape(cur, name, table.schema, step)
            names = ", ".join(quote_ident(f.name) for f in table.schema)
            values = ", ".join(
                f"{quote_ident(f.name)}::jsonb"
                if isinstance(f.type, pa.JsonType)
                else quote_ident(f.name)
                for f in table.schema
            )
            where = under_kept_roots(merge, target)
            step.doing = f"inserting rows into the child table {child}"
            cur.execute(
                f"INSERT INTO {child} ({names}) SELECT {values} FROM {temporary(temp)}{where}"
            )

    def describe(
        self, cur: Any, schemas: Mapping[str, pa.Schema], step: Step
    ) -> tuple[TableDefinition, ...]:
        """Each child table of ``schemas`` as the commit leaves it: created or widened as
        :meth:`insert` does (no row), then read from the catalog. Under a savepoint the
        caller rolls back."""
        out = []
        for name, schema in schemas.items():
            _check_name(name)
            self._shape(cur, name, schema, step)
            found = tuple(ColumnDefinition(c, t, not nn) for c, t, nn in self._columns(cur, name))
            out.append(TableDefinition(f"{self._dataset}.{name}", "postgres", found))
        return tuple(out)

    def _shape(self, cur: Any, name: str, schema: pa.Schema, step: Step) -> None:
        """Create the child table ``name`` from ``schema``'s types, or add the columns it
        lacks."""
        child = self._q(name)
        step.doing = f"reading the columns of {child}"
        present = {column for column, _, _ in self._columns(cur, name)}
        if not present:
            columns = ", ".join(f"{quote_ident(f.name)} {pg_type(f.type)}" for f in schema)
            step.doing = f"creating the child table {child}"
            cur.execute(f"CREATE TABLE {child} ({columns})")
        for f in schema:
            if present and f.name not in present:
                step.doing = f"adding column {quote_ident(f.name)} to {child}"
                cur.execute(
                    f"ALTER TABLE {child} ADD COLUMN {quote_ident(f.name)} {pg_type(f.type)}"
                )


def _check_name(name: str) -> None:
    if _too_long(name):
        raise SinkSchemaError(
            f"the child table {quote_ident(name)} is longer than {MAX_IDENTIFIER_BYTES} "
            "bytes in UTF-8; PostgreSQL would truncate it",
            fixes=("give the sink table or the nested fields shorter names",),
        )


__all__ = ["PgChildren"]
