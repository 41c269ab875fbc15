"""This run's load in the sink while the chunks arrive: begun at the first valid rows (or empty,
or over files scale-out tasks staged), then committed or aborted once by the lifecycle."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING

import pyarrow as pa

from dpone.connectors.base import (
    DescribedLoad,
    LoadSpec,
    NestedLoad,
    Sink,
    SinkLoad,
    SystemTablesLoad,
    TableDefinition,
)
from dpone.connectors.errors import SinkConfigError, SinkSchemaError
from dpone.contracts.spec import VARIANT_PREFIX
from dpone.logs import get_logger

if TYPE_CHECKING:  # imported only by a run that keeps the system tables
    from dpone.connectors.systables import SystemRows

log = get_logger("dpone.run")


class Staging:
    """This run's load in the sink: begun at the first valid rows, committed or aborted once.

    ``on_end`` is called once the load committed or aborted (a scale-out run removes the
    folder its tasks staged their files in: nothing else reads it)."""

    def __init__(
        self,
        sink: Sink,
        spec: Callable[[pa.Schema], LoadSpec],
        *,
        on_end: Callable[[], None] | None = None,
    ) -> None:
        self._sink = sink
        self._spec = spec
        self._on_end = on_end
        self._load: SinkLoad | None = None
        #: Parquet files staged by scale-out tasks, loaded by the commit itself (None: the
        #: rows were written into the load)
        self._files: tuple[Path, ...] | None = None
        #: the load's columns (:func:`widened` as chunks bring new ones)
        self._schema = pa.schema([])
        #: the sink table before this run (None: absent); read by :meth:`open`
        self.existing: pa.Schema | None = None
        #: every column this run staged, in order
        self.written: dict[str, pa.Field] = {}

    def open(self) -> pa.Schema | None:
        self.existing = self._sink.existing_schema()
        return self.existing

    def write(
        self,
        batch: pa.RecordBatch,
        nested: tuple[pa.StringArray, Mapping[str, pa.RecordBatch]] | None = None,
    ) -> None:
        """Stage a chunk's valid rows. A chunk without any still names its columns: one chunk
        holding every row of the run would have created them (a JSONL key whose rows were
        all rejected), so the load gets them too, once it has a row at all.

        ``nested``: with child tables, the rows' ``_dpone_id`` and the child tables' rows
        under them (``runtime/children.py``), committed with the load."""
        if self._load is None:
            self._schema = widened(self._schema, batch.schema)
            if not batch.num_rows:
                return
            self._load = self._sink.begin(self._spec(self._schema))
        elif any(self._schema.get_field_index(n) < 0 for n in batch.schema.names):
            # A chunk brings a column the load lacks (a variant column's first value): the
            # load grows before the chunk is staged, so no chunk size changes the table.
            self._schema = widened(self._schema, batch.schema)
            widen = getattr(self._load, "widen", None)
            if widen is None:
                new = next(n for n in batch.schema.names if n not in self.written)
                raise SinkSchemaError(
                    f"column {new!r} is not in the load schema, and this sink cannot add "
                    "columns to a load in progress"
                )
            widen(self._schema)
        if nested is not None:
            if not isinstance(self._load, NestedLoad):
                raise SinkSchemaError("this sink cannot load child tables")
            self._load.write_nested(batch, *nested)
        elif batch.num_rows:
            self._load.write(batch)
        self.written = {f.name: f for f in self._schema}

    @property
    def begun(self) -> bool:
        """Whether this run's load has begun (rows were staged, or an empty load)."""
        return self._load is not None

    def begin_empty(self, schema: pa.Schema) -> None:
        """Nothing valid to load still commits an empty load: its marker is the run's proof."""
        if self._load is None:
            self._load = self._sink.begin(self._spec(schema))
            self.written = {f.name: f for f in schema}

    def begin_staged(self, files: Sequence[Path], schema: pa.Schema) -> None:
        """Begin the load of ``files`` (Parquet files scale-out tasks staged, checked already)
        with ``schema``, all of theirs: the sink reads them itself when it commits."""
        self._files = tuple(files)
        self.begin_empty(schema)

    def target_definition(self) -> TableDefinition | None:
        """The target as this load's commit leaves it, when the sink can say (SPEC §7 ``ddl``)."""
        if isinstance(self._load, DescribedLoad):
            return self._load.target_definition()
        return None

    def attach_system_rows(self, rows: SystemRows) -> None:
        """The system tables' rows, inserted by the load's commit (``runtime/systables.py``)."""
        assert self._load is not None, "begin_empty() runs before the commit"
        if not isinstance(self._load, SystemTablesLoad):
            raise SinkConfigError(
                "sink.options.system_tables is on, but this sink's load cannot write them",
                code="DPONE_MANIFEST_SINK_OPTION",
            )
        self._load.attach_system_rows(rows)

    def commit(self, cursor_to: str | None) -> None:
        assert self._load is not None, "begin_empty() runs before the commit"
        if self._files is None:
            self._load.commit(cursor_to=cursor_to)
        else:
            started = perf_counter()
            self._load.commit_staged_parquet(self._files, cursor_to=cursor_to)
            log.info(
                "sink.files_committed",
                files=len(self._files),
                seconds=round(perf_counter() - started, 3),
            )
        self._end()

    def abort(self) -> None:
        if self._load is not None:
            self._load.abort()
        self._end()

    def _end(self) -> None:
        if self._on_end is not None:
            self._on_end()


def widened(schema: pa.Schema, batch: pa.Schema) -> pa.Schema:
    """``schema`` with the columns of ``batch`` it lacks, in the order one chunk holding
    every row would have given them (the enforcer's: the other columns, then the variant
    columns in the order of their columns), whichever chunk brought each first."""
    fields = [*schema, *(f for f in batch if schema.get_field_index(f.name) < 0)]
    plain = [f.name for f in fields if not f.name.startswith(VARIANT_PREFIX)]

    def rank(f: pa.Field) -> tuple[int, int]:
        if not f.name.startswith(VARIANT_PREFIX):
            return 0, plain.index(f.name)
        base = f.name[len(VARIANT_PREFIX) :]
        return 1, plain.index(base) if base in plain else len(plain)

    return pa.schema(sorted(fields, key=rank))


__all__ = ["Staging", "widened"]
