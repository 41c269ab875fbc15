"""The relation a database source reads (a table, a query, a key range of a table) and the
SELECT with cursor pushdown."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal

from dpone.connectors.errors import SourceConfigError
from dpone.connectors.sql.identifiers import qualify, quote_ident, short_hash
from dpone.manifest.specs import IncrementalPlan
from dpone.records import frozen


@frozen
class Relation:
    """A table or a read-only query, and how it names itself."""

    table: str | None
    query: str | None

    def __post_init__(self) -> None:
        if (self.table is None) == (self.query is None):
            raise SourceConfigError("a database source needs exactly one of table or query")

    @classmethod
    def of(cls, table: str | None, query: str | None) -> Relation:
        """The relation of a spec: a query loses a trailing ``;`` (it becomes a subquery)."""
        return cls(table, None if query is None else query.strip().rstrip(";").strip())

    @property
    def partition(self) -> str:
        return self.table if self.table is not None else "query"

    @property
    def label(self) -> str:
        """Stable, secret-free: the table name, or a hash of the query text."""
        if self.table is not None:
            return f"table:{self.table}"
        return f"query:{short_hash(self.query or '', length=12)}"

    def base_sql(self, catalog: str | None = None) -> str:
        """``SELECT *`` of the table (each dot-separated part quoted) or of the query. With
        ``catalog`` (DuckDB), ``table`` and ``schema.table`` are qualified with it
        (``main`` the schema of a bare name), as DuckDB reads ``acc.t`` as ambiguous when
        the file holds a catalog ``acc`` and a schema ``acc``."""
        if self.table is None:
            return f"SELECT * FROM ({self.query}) AS _dpone_q"
        parts = self.table.split(".")
        if catalog is not None and len(parts) < 3:
            parts = [catalog, *(["main"] if len(parts) == 1 else []), *parts]
        return f"SELECT * FROM {qualify(*parts)}"


@frozen
class KeyRange(Relation):
    """A table's rows whose key is in one range, in key order (a partition of a scale-out run)."""

    where: str = "TRUE"
    order_by: str = ""

    def base_sql(self, catalog: str | None = None) -> str:
        sql = f"{Relation.base_sql(self, catalog)} WHERE {self.where}"
        return f"{sql} ORDER BY {self.order_by}" if self.order_by else sql


def select_sql(
    relation: Relation,
    incremental: IncrementalPlan | None,
    after: object | None,
    bind: Callable[[object], str],
    catalog: str | None = None,
) -> str:
    """The SELECT to run; ``bind`` turns the cursor value into a placeholder or a literal.

    Rows at or above ``after`` (the run's lower bound: the committed cursor minus ``lag``, or
    ``initial_value`` on the first run), or at or above ``initial_value`` when ``after`` is
    None, and below ``end_value`` when the manifest sets one (dlt's convention: the start
    inclusive, the end exclusive), ordered by the cursor. The boundary rows a committed run
    took come back and the lifecycle de-duplicates them. A NULL cursor never matches a
    bound, so such rows load only on a run without one.
    """
    sql = relation.base_sql(catalog)
    if incremental is None:
        return sql
    column = quote_ident(incremental.cursor_column)
    start = after if after is not None else incremental.initial_value
    bounds = [] if start is None else [f"{column} >= {bind(start)}"]
    if incremental.end_value is not None:
        bounds.append(f"{column} < {bind(incremental.end_value)}")
    where = f" WHERE {' AND '.join(bounds)}" if bounds else ""
    return f"SELECT * FROM ({sql}) AS _dpone_src{where} ORDER BY {column}"


def sql_literal(value: object) -> str:
    """A quoted SQL literal of unknown type (PostgreSQL coerces it to the column's type)."""
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, (datetime, date, time)):
        text = value.isoformat()
    elif isinstance(value, (int, float, Decimal, str)):
        text = str(value)
    else:
        raise SourceConfigError(
            f"an incremental cursor of type {type(value).__name__} cannot be pushed down"
        )
    if "\x00" in text:
        raise SourceConfigError("an incremental cursor value contains a NUL character")
    # standard_conforming_strings is on (the default since 9.1): only quotes need doubling.
    return "'" + text.replace("'", "''") + "'"


__all__ = ["KeyRange", "Relation", "select_sql", "sql_literal"]
