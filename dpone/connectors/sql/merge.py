"""The SQL that moves a load's staged rows into its target, per strategy (SPEC §13), for the
DuckDB and PostgreSQL sinks. Every statement runs inside the load's one commit transaction,
with its marker; this module only writes the statements.

- ``upsert``: delete the target rows whose ``unique_key`` the load holds, insert the last
  staged row of each key (``seq``: the row's position in the load).
- ``delete-insert``: delete the target rows whose ``merge_key`` values the load holds, insert
  the load (the last row of each ``unique_key`` when there is one).
- ``scd2``: the last row of each key, hashed over the load's columns into a scratch table;
  the current versions (``_dpone_valid_to`` NULL) whose hash differs, or whose row is marked
  deleted, are closed at ``valid_at``; a key without a current version then opens one.
  Identical rows change nothing and keys absent from the load stay open.

A row whose ``deleted_column`` is true deletes (closes) and is never inserted. Values that
reach the SQL as literals are dpone's own: the load id (``[A-Za-z0-9._-]``) and a timestamp.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import pyarrow as pa

from dpone.connectors.base import LOAD_ID_COLUMN, ROW_HASH, VALID_FROM, VALID_TO, LoadSpec
from dpone.connectors.sql.identifiers import quote_ident
from dpone.records import frozen

Dialect = Literal["duckdb", "postgres"]
#: a row's id with child tables: their ``_dpone_parent_id`` / ``_dpone_root_id``
ROW_ID_COLUMN = "_dpone_id"
#: a child row's link to the root row of its document
ROOT_ID_COLUMN = "_dpone_root_id"


def under_kept_roots(merge: bool, target: str) -> str:
    """A merge's filter on child rows: only those whose root row the load left in ``target``
    (a root that lost to a later row of its key, or was deleted, takes its children along);
    nothing outside a merge."""
    if not merge:
        return ""
    return (
        f" WHERE {quote_ident(ROOT_ID_COLUMN)} IN "
        f"(SELECT {quote_ident(ROW_ID_COLUMN)} FROM {target})"
    )


@frozen
class Statement:
    """One statement and what it does (the error of a failed one names it)."""

    doing: str
    sql: str


@frozen
class MergeSql:
    """The statements of one load: ``target``, ``stage`` and ``scratch`` are quoted names;
    ``select`` the staged columns as the target takes them (PostgreSQL casts JSON)."""

    spec: LoadSpec
    dialect: Dialect
    target: str
    stage: str
    #: a table of this transaction for scd2's hashed rows (temporary)
    scratch: str
    seq: str
    at: datetime

    # --- the pieces ---------------------------------------------------------------------------

    @property
    def names(self) -> list[str]:
        return [quote_ident(n) for n in self.spec.schema.names]

    def select(self, alias: str) -> list[str]:
        return [
            f"{alias}.{n}::jsonb"
            if self.dialect == "postgres" and isinstance(f.type, pa.JsonType)
            else f"{alias}.{n}"
            for n, f in zip(self.names, self.spec.schema, strict=True)
        ]

    def extra(self) -> tuple[list[str], list[str]]:
        """The load columns (names, values) every inserted row gets: the load id, and with
        child tables each row's staged ``_dpone_id`` (from ``s``, the staged rows)."""
        names: list[str] = []
        values: list[str] = []
        if "load_id" in self.spec.load_columns:
            names.append(quote_ident(LOAD_ID_COLUMN))
            values.append(f"'{self.spec.load_id}'")
        if self.spec.child_tables:
            names.append(quote_ident(ROW_ID_COLUMN))
            values.append(f"s.{quote_ident(ROW_ID_COLUMN)}")
        return names, values

    def latest(self, keys: tuple[str, ...]) -> str:
        """The staged rows, the last of each ``keys`` (all of them without keys), as a
        subquery with every staged column."""
        if not keys:
            return f"(SELECT * FROM {self.stage})"
        quoted = ", ".join(quote_ident(k) for k in keys)
        seq = quote_ident(self.seq)
        if self.dialect == "postgres":
            return (
                f"(SELECT DISTINCT ON ({quoted}) * FROM {self.stage} ORDER BY {quoted}, {seq} DESC)"
            )
        rn = quote_ident("_dpone_rn")
        return (
            f"(SELECT * EXCLUDE ({rn}) FROM (SELECT *, row_number() OVER (PARTITION BY {quoted} "
            f"ORDER BY {seq} DESC) AS {rn} FROM {self.stage}) WHERE {rn} = 1)"
        )

    def kept(self, alias: str) -> str:
        """The rows to insert: those not marked deleted (NULL is not deleted)."""
        deleted = self.spec.deleted_column
        if deleted is None:
            return "TRUE"
        return f"NOT coalesce({alias}.{quote_ident(deleted)}, FALSE)"

    def timestamp(self) -> str:
        text = self.at.astimezone(UTC).isoformat(sep=" ")
        return f"CAST('{text}' AS {'TIMESTAMPTZ' if self.dialect == 'duckdb' else 'timestamptz'})"

    def row_hash(self, alias: str) -> str:
        """An MD5 of the row's load columns, the same text whatever the session's time zone."""
        if self.dialect == "duckdb":
            parts = []
            for n, f in zip(self.names, self.spec.schema, strict=True):
                value = f"{alias}.{n}"
                if pa.types.is_timestamp(f.type) and f.type.tz is not None:
                    value = f"epoch_us({value})"
                parts.append(f"{n} := {value}")
            return f"md5(CAST(to_json(struct_pack({', '.join(parts)})) AS VARCHAR))"
        values = []
        for n, f in zip(self.names, self.spec.schema, strict=True):
            value = f"{alias}.{n}"
            if pa.types.is_timestamp(f.type) and f.type.tz is not None:
                value = f"extract(epoch FROM {value})"
            values.append(value)
        return f"md5(ROW({', '.join(values)})::text)"

    def on(self, keys: tuple[str, ...], left: str = "t", right: str = "s") -> str:
        return " AND ".join(f"{left}.{quote_ident(k)} = {right}.{quote_ident(k)}" for k in keys)

    # --- the statements -----------------------------------------------------------------------

    def statements(self) -> list[Statement]:
        spec = self.spec
        if spec.mode == "merge" and spec.merge_strategy == "scd2":
            return self._scd2()
        out: list[Statement] = []
        if spec.mode == "replace":
            empty = "DELETE FROM" if self.dialect == "duckdb" else "TRUNCATE"
            out.append(
                Statement(f"emptying {self.target} to replace its rows", f"{empty} {self.target}")
            )
        source = self.stage
        if spec.mode == "merge":
            keys = spec.merge_key if spec.merge_strategy == "delete-insert" else spec.unique_key
            quoted = ", ".join(quote_ident(k) for k in keys)
            out.append(
                Statement(
                    f"merging into {self.target} on {quoted}",
                    f"DELETE FROM {self.target} AS t USING (SELECT DISTINCT {quoted} "
                    f"FROM {self.stage}) AS s WHERE {self.on(keys)}",
                )
            )
            source = self.latest(spec.unique_key)
        names, values = self.extra()
        columns = ", ".join([*self.names, *names])
        out.append(
            Statement(
                f"inserting the staged rows into {self.target}",
                f"INSERT INTO {self.target} ({columns}) SELECT "
                f"{', '.join([*self.select('s'), *values])} FROM {source} AS s "
                f"WHERE {self.kept('s')}",
            )
        )
        return out

    def _scd2(self) -> list[Statement]:
        spec, keys = self.spec, self.spec.unique_key
        at, hashed = self.timestamp(), quote_ident(ROW_HASH)
        valid_from, valid_to = quote_ident(VALID_FROM), quote_ident(VALID_TO)
        temp = "TEMPORARY TABLE" if self.dialect == "postgres" else "TEMP TABLE"
        drop = " ON COMMIT DROP" if self.dialect == "postgres" else ""
        deleted = (
            f"coalesce(l.{quote_ident(spec.deleted_column)}, FALSE) OR "
            if spec.deleted_column
            else ""
        )
        names, values = self.extra()
        columns = ", ".join([*self.names, valid_from, valid_to, hashed, *names])
        current = f"t.{valid_to} IS NULL"
        hashing = ", ".join([*self.select("s"), f"{self.row_hash('s')} AS {hashed}"])
        opening = ", ".join([*(f"l.{n}" for n in self.names), at, "NULL", f"l.{hashed}", *values])
        out = [
            Statement(
                f"hashing the staged rows of {self.target}",
                f"CREATE {temp} {self.scratch}{drop} AS SELECT {hashing} "
                f"FROM {self.latest(keys)} AS s",
            ),
            Statement(
                f"closing the changed versions in {self.target}",
                f"UPDATE {self.target} AS t SET {valid_to} = {at} FROM {self.scratch} AS l "
                f"WHERE {self.on(keys, 't', 'l')} AND {current} "
                f"AND ({deleted}t.{hashed} IS DISTINCT FROM l.{hashed})",
            ),
            Statement(
                f"opening new versions in {self.target}",
                f"INSERT INTO {self.target} ({columns}) SELECT {opening} "
                f"FROM {self.scratch} AS l WHERE {self.kept('l')} AND NOT EXISTS "
                f"(SELECT 1 FROM {self.target} AS t WHERE {self.on(keys, 't', 'l')} AND {current})",
            ),
        ]
        if self.dialect == "duckdb":
            out.append(Statement(f"dropping {self.scratch}", f"DROP TABLE {self.scratch}"))
        return out


def extra_columns(spec: LoadSpec, dialect: Dialect) -> list[tuple[str, str]]:
    """(name, type) of the columns the sink adds to the target beside the load's."""
    text = "VARCHAR" if dialect == "duckdb" else "text"
    stamp = "TIMESTAMPTZ" if dialect == "duckdb" else "timestamptz"
    out: list[tuple[str, str]] = []
    if spec.mode == "merge" and spec.merge_strategy == "scd2":
        out += [(VALID_FROM, stamp), (VALID_TO, stamp), (ROW_HASH, text)]
    if "load_id" in spec.load_columns:
        out.append((LOAD_ID_COLUMN, text))
    if spec.child_tables:
        out.append((ROW_ID_COLUMN, text))
    return out


def is_dpone_column(name: str) -> bool:
    """A column a sink added (``_dpone_*``): not the contract's, never in a load's schema."""
    return name.startswith("_dpone")
