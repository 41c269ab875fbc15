"""dlt sink: the good rows of a run become one dlt load package, loaded into any dlt destination.

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
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.clock import Clock, utc_now
from dpone.connectors.base import LoadMarker, LoadSpec
from dpone.connectors.dltlib import import_dlt, quiet_dlt
from dpone.connectors.errors import SinkConfigError, SinkError, SinkMarkerInvalid, SinkUnavailable
from dpone.connectors.sinks.dlt.destination import delete_load_rows, iso, loads_row
from dpone.connectors.sinks.dlt.errors import dlt_error
from dpone.connectors.sinks.dlt.load import DltLoad
from dpone.connectors.sinks.dlt.records import DLT_LOAD_ID, FIX_RECORD, PackageRecords, marker
from dpone.errors import DponeError
from dpone.logs import get_logger

log = get_logger("dpone.sink")

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
        self.clock = clock
        self.dlt = import_dlt()
        settings = dict(options or {})
        #: a table hint in dlt (filesystem: delta or iceberg), not a destination setting
        self.table_format: str | None = settings.pop("table_format", None)
        self._factory = self._destination(credentials, settings)
        self._pipeline: Any = None
        self.records = PackageRecords(self.root, pipeline, self.dlt_pipeline_name)

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

    def table_name(self) -> str:
        """The table as dlt's naming convention spells it in the destination."""
        naming = self.pipeline().default_schema.naming
        return str(naming.normalize_table_identifier(self.table))

    def pending(self) -> tuple[list[str], list[str]]:
        """dlt load ids of the normalized packages and of the extracted ones."""
        pipe = self.pipeline()
        return sorted(pipe.list_normalized_load_packages()), sorted(
            pipe.list_extracted_load_packages()
        )

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
            row = loads_row(client, dlt_load_id, self.pipeline(), self.clock)
        if row is None or row[0] != 0:
            return None
        return iso(row[1])

    # --- Sink ------------------------------------------------------------------------------------

    def dlt_columns(self) -> dict[str, Any]:
        """The target's columns as dlt's schema of the pipeline holds them (restored from the
        destination when the work dir has none), without dlt's own ``_dlt_*`` columns; empty
        when dlt knows no such table."""
        pipe = self.pipeline()
        with quiet_dlt(), self.failing("reading the destination's schema"):
            if pipe.default_schema_name is None:
                pipe.sync_destination()
            if pipe.default_schema_name is None:
                return {}
            table = pipe.default_schema.tables.get(self.table_name())
            if not table:
                return {}
            return {
                name: column
                for name, column in table.get("columns", {}).items()
                if not name.startswith("_dlt") and column.get("data_type")
            }

    def existing_schema(self) -> pa.Schema | None:
        columns = self.dlt_columns()
        if not columns:
            return None
        from dlt.common.libs.pyarrow import columns_to_arrow

        with quiet_dlt(), self.failing("reading the destination's schema"):
            capabilities = self.pipeline().destination.capabilities()
            arrow: pa.Schema = columns_to_arrow(columns, capabilities, "UTC")
        return arrow

    def committed_load(self, load_id: str) -> LoadMarker | None:
        doc = self.records.get(load_id)
        if doc is None:
            return None
        at = self.loaded_at(doc["dlt_load_id"])
        return None if at is None else marker(doc, at)

    def begin(self, load: LoadSpec) -> DltLoad:
        return DltLoad(self, load)

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        """Finish every recorded package dlt did not finish loading, drop every unrecorded
        one, finish abandoning the loads in ``dropped/``, remove staging. Returns the dpone
        load ids whose rows were dropped (staging or an unrecorded package)."""
        dropped: list[str] = []
        for doc in self.records.all("dropped"):
            self.abandon(doc)
        records = {d["dlt_load_id"]: d for d in self.records.all("packages")}
        normalized, extracted = self.pending()
        unrecorded = sorted(x for x in {*normalized, *extracted} if x not in records)
        if unrecorded:
            # Never reached the loader: aborted, with every newer package (there is none: one
            # run at a time, and a package is recorded before dlt loads it).
            pipe = self.pipeline()
            with quiet_dlt(), self.failing("dropping an unrecorded load package"):
                pipe.abort_packages(load_id=unrecorded[0])
            log.warning("sink.dlt_package_dropped", dlt_load_id=unrecorded[0])
            normalized, extracted = self.pending()
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
                fixes=FIX_RECORD,
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
            gone = delete_load_rows(client, table, dlt_load_id, staging)
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
                fix=FIX_RECORD[0],
            )
            return
        dlt_load_id = doc["dlt_load_id"]
        normalized, extracted = self.pending()
        pipe = self.pipeline()
        with quiet_dlt(), self.failing("abandoning a load package"):
            if dlt_load_id in (*normalized, *extracted):
                pipe.abort_packages(load_id=dlt_load_id)
            if doc["mode"] == "append":
                with pipe.destination_client() as client:
                    gone = delete_load_rows(client, doc["table"], dlt_load_id, False)
                if gone:
                    log.warning("sink.dlt_rows_removed", dlt_load_id=dlt_load_id, removed=gone)
        with contextlib.suppress(FileNotFoundError):
            self.records.path("dropped", doc["load_id"]).unlink()

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
        if self.records.get(doc["load_id"]) is not None or any(
            other["dlt_load_id"] == doc["dlt_load_id"] for other in self.records.all("packages")
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
        return self.table_name()
