"""What the embedded database file sources (DuckDB, SQLite) share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import ClassVar

import pyarrow as pa

from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import SourceConfigError
from dpone.connectors.sql.select import Relation, select_sql
from dpone.manifest.specs import DatabaseFileSpec


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
