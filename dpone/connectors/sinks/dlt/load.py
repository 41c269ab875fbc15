"""One load of the dlt sink: staged to one Parquet file, extracted and normalized into one dlt
load package, recorded, then loaded by dlt (the order ``sink.py`` explains)."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpone.clock import Clock, iso_utc
from dpone.connectors.base import ColumnDefinition, LoadMarker, LoadSpec, TableDefinition
from dpone.connectors.batches import conform
from dpone.connectors.dltlib import quiet_dlt
from dpone.connectors.errors import SinkConfigError, SinkError, SinkUnavailable
from dpone.connectors.sinks._common import os_error
from dpone.connectors.sinks.dlt.destination import LOAD_ID_COLUMN
from dpone.connectors.sinks.dlt.hints import resource_hints, with_added
from dpone.connectors.sinks.dlt.records import RECORD_SCHEMA, PackageRecords, marker
from dpone.connectors.sinks.loadstate import LoadState
from dpone.errors import DponeError
from dpone.faults import checkpoint
from dpone.logs import get_logger

log = get_logger("dpone.sink")

_SEQ = "_dpone_seq"  # staging only: a row's position in the load, for merge's last-wins
_READ_BATCH = 65_536


class DltTarget(Protocol):
    """What a load needs of its sink (``sink.DltSink``), so the two modules import one way."""

    destination: str
    table: str
    target: str
    pipeline_name: str
    dlt_pipeline_name: str
    root: Path
    records: PackageRecords
    loader_file_format: str | None
    table_format: str | None
    clock: Clock
    dlt: Any

    def pipeline(self) -> Any: ...

    def dlt_columns(self) -> dict[str, Any]: ...

    def failing(self, doing: str) -> AbstractContextManager[None]: ...

    def table_name(self) -> str: ...

    def pending(self) -> tuple[list[str], list[str]]: ...

    def loaded_at(self, dlt_load_id: str) -> str | None: ...

    def committed_load(self, load_id: str) -> LoadMarker | None: ...

    def abandon(self, doc: dict[str, Any]) -> None: ...


class DltLoad(LoadState):
    """One load: Parquet staging, then one dlt load package."""

    def __init__(self, sink: DltTarget, spec: LoadSpec) -> None:
        super().__init__(spec)
        self._sink = sink
        self._dir = sink.root / "staging" / spec.load_id
        self._file = self._dir / "rows.parquet"
        self._writer: pq.ParquetWriter | None = None
        self._dlt_load_id: str | None = None
        self._recorded = False
        try:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir.mkdir(parents=True)
        except OSError as exc:
            raise os_error(exc, "dlt sink: creating the staging folder") from None

    def _staged_schema(self, spec: LoadSpec | None = None) -> pa.Schema:
        spec = spec or self.spec
        if spec.mode == "merge":
            return spec.schema.append(pa.field(_SEQ, pa.int64(), nullable=False))
        return spec.schema

    def _widen(self, spec: LoadSpec, added: list[pa.Field]) -> None:
        """The rows staged so far copied into a new file of the wider schema, whose writer
        stays open for the next batches (dlt reads one file, with the load's schema)."""
        try:
            self._close_writer()
            if not self._file.exists():
                return
            old, schema = self._file, self._staged_schema(spec)
            self._file = self._dir / f"rows-{len(spec.schema)}.parquet"
            self._writer = pq.ParquetWriter(self._file, schema)
            with pq.ParquetFile(old) as staged:
                for batch in staged.iter_batches():
                    self._writer.write_batch(conform(batch, schema))
            old.unlink()
        except OSError as exc:
            raise os_error(exc, "dlt sink: adding columns to staged rows") from None

    def _stage(self, batch: pa.RecordBatch) -> None:
        if self.spec.mode == "merge":
            seq = pa.array(range(self.rows, self.rows + batch.num_rows), pa.int64())
            batch = batch.append_column(pa.field(_SEQ, pa.int64(), nullable=False), seq)
        try:
            if self._writer is None:
                self._writer = pq.ParquetWriter(self._file, self._staged_schema())
            self._writer.write_batch(batch)
        except OSError as exc:
            raise os_error(exc, "dlt sink: staging rows") from None

    def _rows(self) -> Iterator[pa.Table]:
        """The staged rows as dlt receives them: merge keeps the last row of each key, and
        the columns dpone adds (``dlt_hints.with_added``) are on every row."""
        spec = self.spec
        if not self._file.exists():  # no row was staged
            yield with_added(spec, spec.schema.empty_table())
            return
        keep: pa.Array | None = None
        if self.spec.mode == "merge" and self.spec.unique_key:
            keys = list(self.spec.unique_key)
            index = pq.read_table(self._file, columns=[*keys, _SEQ])
            last = index.group_by(keys, use_threads=False).aggregate([(_SEQ, "max")])
            if last.num_rows < index.num_rows:
                keep = last.column(f"{_SEQ}_max").combine_chunks()
        for batch in pq.ParquetFile(self._file).iter_batches(batch_size=_READ_BATCH):
            if keep is not None:
                batch = batch.filter(pc.is_in(batch.column(_SEQ), value_set=keep))
            if self.spec.mode == "merge":
                batch = batch.drop_columns([_SEQ])
            yield with_added(spec, pa.Table.from_batches([batch], schema=self.spec.schema))

    def _resource(self) -> Any:
        sink, spec = self._sink, self.spec
        dlt = sink.dlt

        def rows() -> Iterator[pa.Table]:
            # Recorded in dlt's state of the package: a package always exists (even for no
            # rows: its state job), and the destination's state says which dpone load it was.
            dlt.current.resource_state()["dpone"] = {"run_id": spec.run_id, "load_id": spec.load_id}
            yield from self._rows()

        return dlt.resource(
            rows,
            name="dpone_rows",
            table_name=sink.table,
            table_format=sink.table_format,
            **resource_hints(spec),
        )

    def _commit(self) -> LoadMarker:
        sink, spec = self._sink, self.spec
        found = sink.committed_load(spec.load_id)
        if found is not None:
            return found
        self._close_writer()
        pipe = sink.pipeline()
        normalized, extracted = sink.pending()
        if normalized or extracted:
            raise SinkError(
                "dlt sink: the dlt pipeline holds a load package an earlier run left",
                code="DPONE_SINK_RECOVERY_FAILED",
                fixes=("run the pipeline again: its recovery finishes or drops the package",),
            )
        with quiet_dlt():
            with sink.failing("extracting the load package"):
                info = pipe.extract(self._resource(), loader_file_format=sink.loader_file_format)
            self._dlt_load_id = dlt_load_id = str(info.loads_ids[-1])
            with sink.failing("normalizing the load package"):
                pipe.normalize()
            table = sink.table_name()
            self._check_package(dlt_load_id, table)
        doc = {
            "schema": RECORD_SCHEMA,
            "load_id": spec.load_id,
            "pipeline": sink.pipeline_name,
            "run_id": spec.run_id,
            "dlt_pipeline": sink.dlt_pipeline_name,
            "dlt_load_id": dlt_load_id,
            "destination": sink.destination,
            "target": sink.target,
            "table": table,
            "mode": spec.mode,
            "rows": self.rows,
            "cursor_to": self.cursor_to,
            "recorded_at": iso_utc(sink.clock()),
        }
        sink.records.write(doc)
        self._recorded = True
        checkpoint("dlt_before_load")
        failure: DponeError | None = None
        try:
            with quiet_dlt(), sink.failing("loading the load package"):
                pipe.load(raise_on_failed_jobs=True)
        except DponeError as exc:
            failure = exc
        at = sink.loaded_at(dlt_load_id)
        if at is None:
            raise failure or SinkUnavailable(
                f"dlt {sink.destination}: the load package did not complete",
                fixes=("rerun the pipeline",),
            )
        shutil.rmtree(self._dir, ignore_errors=True)
        log.info("sink.dlt_loaded", load_id=spec.load_id, dlt_load_id=dlt_load_id, rows=self.rows)
        return marker(doc, at)

    def _check_package(self, dlt_load_id: str, table: str) -> None:
        """One data file for the table, whose rows carry their load id: what lets recovery
        undo exactly one interrupted job. A dlt setting (``DATA_WRITER__FILE_MAX_ITEMS``,
        ``NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_LOAD_ID=false``) could break either."""
        from dlt.common.storages.load_package import ParsedLoadJobFileName

        pipe = self._sink.pipeline()
        jobs = pipe.get_load_package_info(dlt_load_id).jobs.get("new_jobs", ())
        files = [j for j in jobs if ParsedLoadJobFileName.parse(j.file_path).table_name == table]
        columns = pipe.default_schema.tables.get(table, {}).get("columns", {})
        if len(files) != 1 or LOAD_ID_COLUMN not in columns:
            raise SinkConfigError(
                f"dlt split the load into {len(files)} files or left out {LOAD_ID_COLUMN}; "
                "dpone needs one file per load, its rows carrying their load id",
                fixes=(
                    "unset DATA_WRITER__FILE_MAX_ITEMS / FILE_MAX_BYTES and "
                    "NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_LOAD_ID in dlt's configuration",
                ),
            )

    def target_definition(self) -> TableDefinition:
        """The table as dlt's schema will hold it once this load is normalized: the columns
        dlt already knows, in their order, then this load's new ones as dlt types them from
        Arrow. Dialect ``dlt``: the types are dlt's data types, which each destination maps to
        its own. dlt's ``_dlt_*`` columns are left out: dlt adds them when it first normalizes
        a table, so naming them would make a first load's ``ddl`` differ from a second's."""
        self._require_open()
        from dlt.common.libs.pyarrow import py_arrow_to_table_schema_columns

        known = self._sink.dlt_columns()
        staged = py_arrow_to_table_schema_columns(self.spec.schema)
        columns = {**known, **{n: c for n, c in staged.items() if n not in known}}
        return TableDefinition(
            self._sink.target,
            "dlt",
            tuple(
                ColumnDefinition(name, _dlt_type(column), bool(column.get("nullable", True)))
                for name, column in columns.items()
            ),
        )

    def _abort(self) -> None:
        """Drop staging; a package dlt may have begun to load is abandoned (see
        :meth:`DltSink.abandon`), the rest of it by the next ``cleanup_abandoned`` if this
        fails. Never raises: the error that caused the abort is what the caller reports."""
        sink, spec = self._sink, self.spec
        self._close_writer()
        shutil.rmtree(self._dir, ignore_errors=True)
        try:
            if self._recorded:
                doc = sink.records.get(spec.load_id)
                sink.records.move_to_dropped(spec.load_id)
                if doc is not None:
                    sink.abandon(doc)
            elif self._dlt_load_id is not None:
                normalized, extracted = sink.pending()
                if self._dlt_load_id in (*normalized, *extracted):
                    with quiet_dlt(), sink.failing("dropping the load package"):
                        sink.pipeline().abort_packages(load_id=self._dlt_load_id)
        except (DponeError, OSError) as exc:
            log.error(
                "sink.dlt_abandon_incomplete",
                load_id=spec.load_id,
                code=getattr(exc, "code", type(exc).__name__),
                detail="the next run of the pipeline finishes it",
            )

    def _close_writer(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            try:
                writer.close()
            except OSError as exc:
                raise os_error(exc, "dlt sink: staging rows") from None

    def _close(self) -> None:
        with contextlib.suppress(OSError):
            self._close_writer()


def _dlt_type(column: dict[str, Any]) -> str:
    """A dlt column's data type with its precision and scale, e.g. ``decimal(12,2)``."""
    precision, scale = column.get("precision"), column.get("scale")
    if precision is None:
        return str(column["data_type"])
    if scale is None:
        return f"{column['data_type']}({precision})"
    return f"{column['data_type']}({precision},{scale})"
