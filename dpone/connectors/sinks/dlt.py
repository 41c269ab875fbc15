"""dlt sink: the good rows of a run become one dlt load package, loaded into any dlt destination.

Size (over 500 lines): the sink, its load and its recovery are one protocol over dlt's pipeline
state (record, load, confirm in ``_dlt_loads``).

One load, in order (``DltLoad.commit``; the DLQ is closed and the run's evidence journaled
before the lifecycle calls it):

1. ``write`` stages the Arrow batches in one Parquet file under
   ``<work_dir>/dlt/<pipeline>/staging/<load_id>/`` (memory stays bounded by a batch).
2. ``commit`` extracts that file as one dlt resource into the dlt pipeline
   ``dpone_<pipeline>`` (its ``pipelines_dir`` is ``<work_dir>/dlt/<pipeline>/pipelines``)
   and normalizes it: one load package, with dlt's load id.
3. The package record ``packages/<load_id>.json`` (``dpone.dlt-package.v1``: dpone's load id
   <-> dlt's load id, rows, cursor) is published create-only and durably.
4. dlt loads the package. The load committed exactly when the destination's ``_dlt_loads``
   table holds the package's load id with status 0: that row is this sink's load marker.

Recovery (``cleanup_abandoned``, which the lifecycle runs before it asks ``committed_load``)
decides every package a killed process left in the dlt pipeline, deterministically:

- a package with a record (it was complete and handed to the loader) is **finished**: dlt's
  loader resumes it. Dropping it instead would need undoing what the destination already
  applied, which dlt cannot do (a merge has deleted the old versions of its keys). dlt reruns
  a job it did not record as done; if that job's transaction had committed, its rows would be
  loaded twice. Every row carries its package's ``_dlt_load_id`` and each package loads one
  file per table, so before resuming, the rows of this load id in the table that job writes
  (the target, or dlt's staging dataset for merge and staged replace) are deleted: the rerun
  then writes them once. On SQL destinations; a filesystem job rewrites the same file.
- a package without a record never reached the loader and is **dropped**
  (``Pipeline.abort_packages``); the lifecycle rolls the run back and the next run reads its
  rows again.

A load that fails while dlt loads it (a terminal job error, a lost connection) is abandoned:
its record moves to ``dropped/``, its package is aborted and, under ``append``, the rows its
load id may have left in the table are deleted; ``cleanup_abandoned`` retries whatever of that
did not finish. docs/guarantees.md states what each strategy guarantees.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dpone.canonical import verify_checksum, with_checksum
from dpone.clock import Clock, iso_utc, utc_now
from dpone.connectors.base import LoadMarker, LoadSpec
from dpone.connectors.batches import conform
from dpone.connectors.dltlib import import_dlt, quiet_dlt
from dpone.connectors.errors import (
    SinkConfigError,
    SinkError,
    SinkMarkerInvalid,
    SinkUnavailable,
)
from dpone.connectors.sinks._common import os_error
from dpone.connectors.sinks.loadstate import LoadState
from dpone.durable import create_only, fsync_dir
from dpone.errors import DponeError
from dpone.faults import checkpoint
from dpone.logs import get_logger
from dpone.published import schema_errors

log = get_logger("dpone.sink")

RECORD_SCHEMA = "dpone.dlt-package.v1"
#: The column dlt fills with a row's load package id (dlt's own name for it).
LOAD_ID_COLUMN = "_dlt_load_id"
#: dlt load ids are Unix timestamps as text; checked before one reaches a SQL literal.
DLT_LOAD_ID = re.compile(r"[0-9]{1,12}(\.[0-9]{1,9})?")
MAX_RECORD_BYTES = 64 * 1024
_SEQ = "_dpone_seq"  # staging only: a row's position in the load, for merge's last-wins
_READ_BATCH = 65_536
_MODES = {
    "append": "append",
    "replace": "replace",
    "merge": {"disposition": "merge", "strategy": "delete-insert"},
}
#: Settings of dpone's dlt pipelines, scoped under the pipeline's name (no other dlt
#: pipeline of the process sees them).
_PIPELINE_CONFIG: Mapping[str, Any] = {
    # Every row carries its package's load id: what recovery and abandon delete by.
    "normalize.parquet_normalizer.add_dlt_load_id": True,
    # A loaded package keeps no row data under the work dir.
    "load.delete_completed_jobs": True,
}
#: Destinations whose staged ``replace`` is atomic get it unless the manifest says otherwise:
#: dlt's default (truncate-and-insert) shows readers an empty table while it loads.
_STAGED_REPLACE = "insert-from-staging"
#: Destinations of files: their replace removes the table's files, staging is for table formats.
_FILE_DESTINATIONS = ("filesystem",)
_FIX_RECORD = (
    "a file under the work dir's dlt/<pipeline>/packages/ or dropped/ is not one dpone wrote; "
    "compare it with a backup or move it out of the work dir, then rerun",
)


class DltSink:
    """``dataset.table`` in the dlt destination ``destination``, through one dlt pipeline.

    ``credentials`` is what dlt takes as the destination's credentials (resolved, possibly a
    secret: it is never rendered); ``options`` are the destination factory's other keyword
    arguments. ``work_dir``/dlt/``pipeline`` holds dlt's pipeline folder and this sink's
    staging and package records.
    """

    def __init__(
        self,
        *,
        destination: str,
        dataset: str,
        table: str,
        pipeline: str,
        work_dir: Path,
        credentials: str | None = None,
        options: Mapping[str, Any] | None = None,
        loader_file_format: str | None = None,
        merge_key: tuple[str, ...] = (),
        clock: Clock = utc_now,
    ) -> None:
        self.destination = destination
        self.dataset = dataset
        self.table = table
        self.target = f"{dataset}.{table}"
        self.identity = f"dlt:{destination}:{self.target}"
        self.pipeline_name = pipeline
        self.dlt_pipeline_name = f"dpone_{pipeline}"
        self.root = Path(work_dir) / "dlt" / pipeline
        self.loader_file_format = loader_file_format
        self.merge_key = merge_key
        self._clock = clock
        self.dlt = import_dlt()
        settings = dict(options or {})
        #: a table hint in dlt (filesystem: delta or iceberg), not a destination setting
        self.table_format: str | None = settings.pop("table_format", None)
        self._factory = self._destination(credentials, settings)
        self._pipeline: Any = None

    # --- dlt -------------------------------------------------------------------------------------

    def _destination(self, credentials: str | None, options: dict[str, Any]) -> Any:
        """dlt's destination object, built now: a bad setting is a config error (exit 2)."""
        try:
            factory = getattr(self.dlt.destinations, self.destination)
        except AttributeError:
            raise SinkConfigError(
                f"dlt has no destination named '{self.destination}'",
                fixes=("use one of dlt's destination names (see docs/sinks.md)",),
            ) from None
        try:
            with quiet_dlt():
                bare = factory()
                # dlt ignores a keyword its destination does not know: a typo would vanish.
                known = {f.name for f in dataclasses.fields(bare.spec)}
                unknown = sorted(k for k in options if k not in known or k == "credentials")
                if unknown:
                    raise SinkConfigError(
                        f"dlt's {self.destination} destination has no setting "
                        f"{', '.join(repr(k) for k in unknown)}",
                        fixes=(
                            "check destination_options against dlt's documentation of the "
                            "destination; credentials go in the sink's credentials",
                        ),
                    )
                strategies = bare.capabilities().supported_replace_strategies or ()
                if (
                    "replace_strategy" in known
                    and _STAGED_REPLACE in strategies
                    and self.destination not in _FILE_DESTINATIONS
                ):
                    options.setdefault("replace_strategy", _STAGED_REPLACE)
                if credentials is not None:
                    options["credentials"] = credentials
                return factory(**options)
        except DponeError:
            raise
        except Exception as exc:
            raise SinkConfigError(
                f"dlt's {self.destination} destination refused its settings ({type(exc).__name__})",
                fixes=("check destination_options against dlt's documentation of the destination",),
            ) from None

    def pipeline(self) -> Any:
        """The dlt pipeline, created on first use."""
        if self._pipeline is None:
            for key, value in _PIPELINE_CONFIG.items():
                self.dlt.config[f"{self.dlt_pipeline_name}.{key}"] = value
            with quiet_dlt(), self.failing("opening the dlt pipeline"):
                self._pipeline = self.dlt.pipeline(
                    pipeline_name=self.dlt_pipeline_name,
                    pipelines_dir=str(self.root / "pipelines"),
                    destination=self._factory,
                    dataset_name=self.dataset,
                )
        return self._pipeline

    @contextlib.contextmanager
    def failing(self, doing: str) -> Iterator[None]:
        """dlt's exceptions as typed dpone errors that name what failed, never its text."""
        try:
            yield
        except DponeError:
            raise
        except Exception as exc:
            raise dlt_error(exc, f"dlt {self.destination}: {doing}") from None

    def _table_name(self) -> str:
        """The table as dlt's naming convention spells it in the destination."""
        naming = self.pipeline().default_schema.naming
        return str(naming.normalize_table_identifier(self.table))

    def _pending(self) -> tuple[list[str], list[str]]:
        """dlt load ids of the normalized packages and of the extracted ones."""
        pipe = self.pipeline()
        return sorted(pipe.list_normalized_load_packages()), sorted(
            pipe.list_extracted_load_packages()
        )

    # --- package records -------------------------------------------------------------------------

    def _record_path(self, folder: str, load_id: str) -> Path:
        return self.root / folder / f"{load_id}.json"

    def _records(self, folder: str) -> list[dict[str, Any]]:
        where = self.root / folder
        if not where.is_dir():
            return []
        docs = [self._read_record(path) for path in sorted(where.glob("*.json"))]
        return sorted(docs, key=lambda d: float(d["dlt_load_id"]))

    def _record(self, load_id: str) -> dict[str, Any] | None:
        path = self._record_path("packages", load_id)
        return self._read_record(path) if os.path.lexists(path) else None

    def _read_record(self, path: Path) -> dict[str, Any]:
        def invalid(what: str) -> SinkMarkerInvalid:
            return SinkMarkerInvalid(f"dlt sink: a package record {what}", fixes=_FIX_RECORD)

        if path.is_symlink() or not path.is_file():
            raise invalid("is not a regular file")
        try:
            with path.open("rb") as handle:
                raw = handle.read(MAX_RECORD_BYTES + 1)
        except OSError as exc:
            raise os_error(exc, "dlt sink: reading a package record") from None
        if len(raw) > MAX_RECORD_BYTES:
            raise invalid("is larger than any record dpone writes")
        try:
            doc = orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise invalid("is not JSON") from None
        if not isinstance(doc, dict) or schema_errors(doc, RECORD_SCHEMA):
            raise invalid(f"is not a valid {RECORD_SCHEMA}")
        if not verify_checksum(doc):
            raise invalid("does not match its checksum")
        if doc["load_id"] != path.stem or not DLT_LOAD_ID.fullmatch(doc["dlt_load_id"]):
            raise invalid("names another load than its file name")
        if (doc["pipeline"], doc["dlt_pipeline"]) != (self.pipeline_name, self.dlt_pipeline_name):
            raise invalid("belongs to another pipeline")
        return doc

    def _write_record(self, doc: dict[str, Any]) -> None:
        path = self._record_path("packages", doc["load_id"])
        try:
            create_only(path, orjson.dumps(with_checksum(doc), option=orjson.OPT_INDENT_2))
        except OSError as exc:
            raise os_error(exc, "dlt sink: recording the load package") from None

    def _move_to_dropped(self, load_id: str) -> None:
        """Durably mark a recorded load as abandoned (what ``cleanup_abandoned`` finishes)."""
        source = self._record_path("packages", load_id)
        target = self._record_path("dropped", load_id)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(source, target)
        fsync_dir(target.parent)
        fsync_dir(source.parent)

    # --- the destination's _dlt_loads ------------------------------------------------------------

    def loaded_at(self, dlt_load_id: str) -> str | None:
        """When the destination's ``_dlt_loads`` recorded ``dlt_load_id`` with status 0
        (ISO-8601 UTC), or None when it holds no such row."""
        if not DLT_LOAD_ID.fullmatch(dlt_load_id):
            raise SinkError("a dlt load id is not a Unix timestamp", code="DPONE_SINK_FAILED")
        pipe = self.pipeline()
        with (
            quiet_dlt(),
            self.failing("reading _dlt_loads"),
            pipe.destination_client() as client,
        ):
            row = self._loads_row(client, dlt_load_id)
        if row is None or row[0] != 0:
            return None
        return _iso(row[1])

    def _loads_row(self, client: Any, dlt_load_id: str) -> tuple[int, Any] | None:
        schema = client.schema
        if _is_filesystem(client):
            # dlt writes one JSON file per completed package: <schema>__<load id>.jsonl.
            path = client.pathlib.join(
                client.dataset_path, schema.loads_table_name, f"{schema.name}__{dlt_load_id}.jsonl"
            )
            if not client.fs_client.exists(path):
                return None
            doc = orjson.loads(client.fs_client.read_bytes(path).splitlines()[0])
            return int(doc["status"]), doc["inserted_at"]
        sql = getattr(client, "sql_client", None)
        if sql is None:
            # No queryable _dlt_loads (vector stores, custom destinations): dlt's own local
            # record that the package completed is the best evidence there is.
            done = dlt_load_id in self.pipeline().list_completed_load_packages()
            state = self.pipeline().get_load_package_info(dlt_load_id).state if done else None
            return (0, self._clock()) if state == "loaded" else None
        from dlt.destinations.exceptions import DatabaseUndefinedRelation

        table = sql.make_qualified_table_name(schema.loads_table_name)
        load_id_col, name_col = (
            sql.escape_column_name("load_id"),
            sql.escape_column_name("schema_name"),
        )
        status_col, at_col = sql.escape_column_name("status"), sql.escape_column_name("inserted_at")
        query = (
            f"SELECT {status_col}, {at_col} FROM {table} WHERE {load_id_col} = "
            f"'{dlt_load_id}' AND {name_col} = {_literal(schema.name)}"
        )
        try:
            rows = sql.execute_sql(query)
        except DatabaseUndefinedRelation:
            return None
        if not rows:
            return None
        best = min(rows, key=lambda r: int(r[0]))
        return int(best[0]), best[1]

    def _delete_load_rows(self, client: Any, table: str, dlt_load_id: str, staging: bool) -> int:
        """Delete the rows of ``dlt_load_id`` from ``table`` (in dlt's staging dataset when
        ``staging``); on a filesystem destination, the table files of that load id. Returns
        how many rows or files went; -1 when the destination offers no way to delete."""
        if _is_filesystem(client):
            if staging:
                return 0
            gone = 0
            for path in client.list_table_files(table):
                if os.path.basename(path).startswith(f"{dlt_load_id}."):
                    client.fs_client.rm(path)
                    gone += 1
            return gone
        sql = getattr(client, "sql_client", None)
        if sql is None:
            return -1
        from dlt.destinations.exceptions import DatabaseUndefinedRelation

        scope = sql.with_staging_dataset() if staging else contextlib.nullcontext()
        with scope:
            name = sql.make_qualified_table_name(table)
            column = sql.escape_column_name(LOAD_ID_COLUMN)
            try:
                counted = sql.execute_sql(
                    f"SELECT count(*) FROM {name} WHERE {column} = '{dlt_load_id}'"
                )
            except DatabaseUndefinedRelation:
                return 0
            found = int(counted[0][0]) if counted else 0
            if found:
                sql.execute_sql(f"DELETE FROM {name} WHERE {column} = '{dlt_load_id}'")
            return found

    # --- Sink ------------------------------------------------------------------------------------

    def existing_schema(self) -> pa.Schema | None:
        """The target's columns as dlt's schema of the pipeline holds them (restored from the
        destination when the work dir has none), without dlt's own ``_dlt_*`` columns."""
        pipe = self.pipeline()
        with quiet_dlt(), self.failing("reading the destination's schema"):
            if pipe.default_schema_name is None:
                pipe.sync_destination()
            if pipe.default_schema_name is None:
                return None
            schema = pipe.default_schema
            table = schema.tables.get(self._table_name())
            if not table:
                return None
            columns = {
                name: column
                for name, column in table.get("columns", {}).items()
                if not name.startswith("_dlt") and column.get("data_type")
            }
            if not columns:
                return None
            from dlt.common.libs.pyarrow import columns_to_arrow

            arrow: pa.Schema = columns_to_arrow(columns, pipe.destination.capabilities(), "UTC")
            return arrow

    def committed_load(self, load_id: str) -> LoadMarker | None:
        doc = self._record(load_id)
        if doc is None:
            return None
        at = self.loaded_at(doc["dlt_load_id"])
        return None if at is None else _marker(doc, at)

    def begin(self, load: LoadSpec) -> DltLoad:
        return DltLoad(self, load)

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        """Finish every recorded package dlt did not finish loading, drop every unrecorded
        one, finish abandoning the loads in ``dropped/``, remove staging. Returns the dpone
        load ids whose rows were dropped (staging or an unrecorded package)."""
        dropped: list[str] = []
        for doc in self._records("dropped"):
            self.abandon(doc)
        records = {d["dlt_load_id"]: d for d in self._records("packages")}
        normalized, extracted = self._pending()
        unrecorded = sorted(x for x in {*normalized, *extracted} if x not in records)
        if unrecorded:
            # Never reached the loader: aborted, with every newer package (there is none: one
            # run at a time, and a package is recorded before dlt loads it).
            pipe = self.pipeline()
            with quiet_dlt(), self.failing("dropping an unrecorded load package"):
                pipe.abort_packages(load_id=unrecorded[0])
            log.warning("sink.dlt_package_dropped", dlt_load_id=unrecorded[0])
            normalized, extracted = self._pending()
        for dlt_load_id in normalized:
            record = records.get(dlt_load_id)
            if record is not None and record["load_id"] != keep_load_id:
                self.finish(record)
        for folder in sorted((self.root / "staging").glob("*")):
            if folder.name == keep_load_id:
                continue
            shutil.rmtree(folder, ignore_errors=True)
            if folder.name not in {d["load_id"] for d in records.values()}:
                dropped.append(folder.name)
        return dropped

    def finish(self, doc: dict[str, Any]) -> None:
        """Load a recorded package dlt did not finish (see the module docstring)."""
        pipe = self.pipeline()
        dlt_load_id = doc["dlt_load_id"]
        if doc["target"] != self.target or doc["table"] != self._expected_table():
            # Finishing deletes the rows a half-done job of ``table`` may have left.
            raise SinkMarkerInvalid(
                f"dlt sink: the package record of load {doc['load_id']} names another table",
                fixes=_FIX_RECORD,
            )
        with quiet_dlt(), self.failing("finishing an interrupted load package"):
            self._undo_unrecorded_job(dlt_load_id, doc["table"])
            pipe.load(raise_on_failed_jobs=True)
        if self.loaded_at(dlt_load_id) is None:
            raise SinkUnavailable(
                f"dlt {self.destination}: the interrupted load package of load "
                f"{doc['load_id']} did not complete",
                fixes=(
                    "rerun once the destination is reachable; the next run finishes it",
                    f"to give the load up instead, move packages/{doc['load_id']}.json to "
                    "dropped/ under the work dir's dlt folder and rerun",
                ),
            )
        log.warning("sink.dlt_package_finished", load_id=doc["load_id"], dlt_load_id=dlt_load_id)

    def _undo_unrecorded_job(self, dlt_load_id: str, table: str) -> None:
        """Before dlt reruns the job that writes ``table``: delete what an earlier attempt of
        it may have committed (dlt reruns a started job it has no outcome for)."""
        from dlt.common.storages.load_package import ParsedLoadJobFileName

        pipe = self.pipeline()
        info = pipe.get_load_package_info(dlt_load_id)
        started = [os.path.basename(job.file_path) for job in info.jobs.get("started_jobs", ())]
        ours = [f for f in started if ParsedLoadJobFileName.parse(f).table_name == table]
        if not ours:
            return
        plan = pipe.abort_packages(dry_run=True)
        victim = plan.get("package_to_abort") if plan else None
        settled: set[str] = set()
        if victim is not None and victim["load_id"] == dlt_load_id:
            settled = {os.path.basename(p) for p in (*victim["committed_jobs"],)}
            settled |= {os.path.basename(p) for p in victim["terminal_jobs"]}
        if all(f in settled for f in ours):
            return
        with pipe.destination_client() as client:
            staging = bool(
                getattr(client, "should_load_data_to_staging_dataset", lambda _t: False)(table)
            )
            gone = self._delete_load_rows(client, table, dlt_load_id, staging)
        log.warning(
            "sink.dlt_job_rerun",
            dlt_load_id=dlt_load_id,
            rows_removed_first=gone,
            staging_dataset=staging,
        )

    def abandon(self, doc: dict[str, Any]) -> None:
        """Finish abandoning a load whose record is in ``dropped/``: abort its package if dlt
        still holds it, delete its appended rows, forget the record. A record this sink may
        not act on (:meth:`_refusal`) is left where it is, with a warning, and nothing is
        deleted."""
        reason = self._refusal(doc)
        if reason is not None:
            log.warning(
                "sink.dlt_record_refused",
                code=SinkMarkerInvalid.code,
                load_id=doc["load_id"],
                dlt_load_id=doc["dlt_load_id"],
                reason=reason,
                fix=_FIX_RECORD[0],
            )
            return
        dlt_load_id = doc["dlt_load_id"]
        normalized, extracted = self._pending()
        pipe = self.pipeline()
        with quiet_dlt(), self.failing("abandoning a load package"):
            if dlt_load_id in (*normalized, *extracted):
                pipe.abort_packages(load_id=dlt_load_id)
            if doc["mode"] == "append":
                with pipe.destination_client() as client:
                    gone = self._delete_load_rows(client, doc["table"], dlt_load_id, False)
                if gone:
                    log.warning("sink.dlt_rows_removed", dlt_load_id=dlt_load_id, removed=gone)
        with contextlib.suppress(FileNotFoundError):
            self._record_path("dropped", doc["load_id"]).unlink()

    def _refusal(self, doc: Mapping[str, Any]) -> str | None:
        """Why a record in ``dropped/`` must not be acted on, or None. Abandoning deletes the
        rows of its dlt load id from its table, so the record must be this sink's (its
        destination, target and table as dlt spells it) and its load must be uncommitted by
        both accounts: no record of it under ``packages/`` and no ``_dlt_loads`` row. A record
        that moved into ``dropped/`` after its load committed, or one planted to name another
        table, would otherwise delete committed rows."""
        if (doc["destination"], doc["target"]) != (self.destination, self.target):
            return "it names another destination or table"
        if doc["table"] != self._expected_table():
            return "it names another table"
        if self._record(doc["load_id"]) is not None or any(
            other["dlt_load_id"] == doc["dlt_load_id"] for other in self._records("packages")
        ):
            return "its load is recorded under packages/"
        if self.loaded_at(doc["dlt_load_id"]) is not None:
            return "its load committed (the destination's _dlt_loads holds it)"
        return None

    def _expected_table(self) -> str | None:
        """The table as dlt spells it, or None when this pipeline has no schema yet (then no
        record can be confirmed as this sink's)."""
        pipe = self.pipeline()
        if pipe.default_schema_name is None:
            return None
        return self._table_name()


class DltLoad(LoadState):
    """One load: Parquet staging, then one dlt load package."""

    def __init__(self, sink: DltSink, spec: LoadSpec) -> None:
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
        """The staged rows as dlt receives them: merge keeps the last row of each key."""
        if not self._file.exists():  # no row was staged
            yield self.spec.schema.empty_table()
            return
        keep: pa.Array | None = None
        if self.spec.mode == "merge":
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
            yield pa.Table.from_batches([batch], schema=self.spec.schema)

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
            write_disposition=_MODES[spec.mode],
            primary_key=list(spec.unique_key) or None,
            merge_key=list(sink.merge_key) or None,
            table_format=sink.table_format,
        )

    def _commit(self) -> LoadMarker:
        sink, spec = self._sink, self.spec
        found = sink.committed_load(spec.load_id)
        if found is not None:
            return found
        self._close_writer()
        pipe = sink.pipeline()
        normalized, extracted = sink._pending()
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
            table = sink._table_name()
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
            "recorded_at": iso_utc(sink._clock()),
        }
        sink._write_record(doc)
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
        return _marker(doc, at)

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

    def _abort(self) -> None:
        """Drop staging; a package dlt may have begun to load is abandoned (see
        :meth:`DltSink.abandon`), the rest of it by the next ``cleanup_abandoned`` if this
        fails. Never raises: the error that caused the abort is what the caller reports."""
        sink, spec = self._sink, self.spec
        self._close_writer()
        shutil.rmtree(self._dir, ignore_errors=True)
        try:
            if self._recorded:
                doc = sink._record(spec.load_id)
                sink._move_to_dropped(spec.load_id)
                if doc is not None:
                    sink.abandon(doc)
            elif self._dlt_load_id is not None:
                normalized, extracted = sink._pending()
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


def _is_filesystem(client: Any) -> bool:
    """Whether ``client`` is dlt's filesystem destination (importable only with fsspec)."""
    try:
        from dlt.destinations.impl.filesystem.filesystem import FilesystemClient
    except ImportError:
        return False
    return isinstance(client, FilesystemClient)


def _marker(doc: Mapping[str, Any], committed_at: str) -> LoadMarker:
    return LoadMarker(
        load_id=doc["load_id"],
        pipeline=doc["pipeline"],
        run_id=doc["run_id"],
        rows=int(doc["rows"]),
        cursor_to=doc["cursor_to"],
        committed_at=committed_at,
        target=doc["target"],
        mode=doc["mode"],
    )


def _iso(value: Any) -> str:
    if isinstance(value, str):
        return value
    to_iso = getattr(value, "isoformat", None)
    return str(to_iso()) if callable(to_iso) else str(value)


def _literal(text: str) -> str:
    """A SQL string literal of dlt's schema name (a normalized identifier)."""
    return "'" + text.replace("'", "''") + "'"


#: dlt and driver exception class names that say "try again later", not "this cannot work".
_TRANSIENT = (
    "DestinationTransientException",
    "DestinationConnectionError",
    "LoadClientJobRetry",
    "OperationalError",
    "InterfaceError",
    "ConnectionError",
    "TimeoutError",
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        inner = getattr(current, "exception", None)
        current = (
            inner if isinstance(inner, BaseException) else current.__cause__ or current.__context__
        )
    return seen


def dlt_error(exc: BaseException, doing: str) -> DponeError:
    """A typed error for a dlt failure: the exception classes along its chain, never their
    text (a driver's message may quote a row value, a host or a credential)."""
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    what = f"{doing} failed ({' <- '.join(dict.fromkeys(names))})"
    if any(n in ("ConfigFieldMissingException", "ConfigurationValueError") for n in names):
        missing = [
            str(f)
            for e in chain
            for f in getattr(e, "fields", ()) or ()
            if isinstance(f, str) and f.isidentifier()
        ]
        return SinkConfigError(
            f"{doing}: dlt's configuration is incomplete"
            + (f" (missing {', '.join(missing)})" if missing else ""),
            fixes=(
                "give the destination's credentials in the sink's credentials (as ${ENV_VAR}) "
                "or through dlt's own configuration",
            ),
        )
    if any(isinstance(e, OSError) for e in chain) and not any(n in _TRANSIENT for n in names):
        oserror = next(e for e in chain if isinstance(e, OSError))
        return os_error(oserror, doing)
    if any(n in _TRANSIENT for n in names):
        return SinkUnavailable(what, fixes=("rerun once the destination is reachable",))
    return SinkError(
        what,
        fixes=(
            "check the destination and its table (column types, constraints, grants), then rerun",
        ),
    )
