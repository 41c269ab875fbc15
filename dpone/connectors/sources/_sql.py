"""What database sources share: the relation and the SELECT with cursor pushdown."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import ClassVar

import pyarrow as pa

from dpone.connectors._util import qualify, quote_ident, short_hash
from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import SourceConfigError
from dpone.manifest.specs import DatabaseFileSpec, IncrementalPlan


@dataclass(frozen=True, slots=True)
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


class DatabaseFileSource(ABC):
    """A table or query of an embedded database file (DuckDB, SQLite), opened read-only; the
    incremental cursor is pushed down as a ``?`` parameter. Subclasses say how to run the
    SELECT and stream its rows as Arrow batches of at most ``chunk_size`` rows."""

    cursor_pushdown = True
    kind: ClassVar[str]  # the identity's prefix
    product: ClassVar[str]  # the name in messages

    def __init__(self, spec: DatabaseFileSpec) -> None:
        self.database = spec.database
        self.relation = Relation.of(spec.table, spec.query)
        self.incremental = spec.incremental
        self.identity = f"{self.kind}:{spec.display}:{self.relation.label}"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Chunks in cursor order; ``WHERE cursor >= ?`` runs inside the database."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        if not self.database.is_file():
            raise SourceConfigError(f"the {self.product} source database file does not exist")
        row = 1
        for batch in self.batches(after, chunk_size):
            yield SourceChunk(batch, self.relation.partition, None, row, False)
            row += batch.num_rows

    def statement(
        self, after: object | None, catalog: str | None = None
    ) -> tuple[str, list[object]]:
        """The SELECT (see :func:`select_sql`) and its ``?`` parameters."""
        params: list[object] = []

        def bind(value: object) -> str:
            params.append(self.param(value))
            return "?"

        return select_sql(self.relation, self.incremental, after, bind, catalog), params

    def param(self, value: object) -> object:
        """The cursor value as the driver binds it."""
        return value

    @abstractmethod
    def batches(self, after: object | None, chunk_size: int) -> Iterator[pa.RecordBatch]:
        """The rows of :meth:`statement`, connection opened and closed here, errors typed."""
