"""Sinks: ``make_sink`` turns the manifest's ``sink`` section into a :class:`Sink`.

duckdb, postgres and filesystem are native Arrow paths rather than dlt destinations
(docs/sinks.md says why); ``dlt`` loads into any dlt destination and imports dlt only then.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone.connectors._util import Clock, utc_now
from dpone.connectors.base import Sink
from dpone.connectors.errors import SinkConfigError
from dpone.connectors.sources import _display_path

SINK_TYPES: tuple[str, ...] = ("duckdb", "postgres", "filesystem", "dlt")
DEFAULT_DATASET = "dpone"


def make_sink(
    config: Mapping[str, Any],
    base_dir: Path,
    work_dir: Path,
    pipeline_name: str,
    secrets_resolved_connection: str | None,
    *,
    clock: Clock = utc_now,
) -> Sink:
    """The sink of a manifest's ``sink`` section.

    Relative paths are relative to ``base_dir`` (the manifest's folder); a DuckDB sink without
    ``database`` uses ``<work_dir>/<pipeline_name>.duckdb``. ``dataset`` defaults to ``dpone``,
    ``table`` to the pipeline name. ``strategy`` belongs to each load (:class:`LoadSpec`).
    """
    kind = config.get("type")
    base_dir = Path(base_dir)
    dataset = str(config.get("dataset") or DEFAULT_DATASET)
    table = str(config.get("table") or pipeline_name)
    if kind == "duckdb":
        from dpone.connectors.sinks.duckdb import DuckDbSink

        database = config.get("database")
        path = Path(database) if database else Path(work_dir) / f"{pipeline_name}.duckdb"
        full = path if path.is_absolute() else base_dir / path
        return DuckDbSink(full, _display_path(full, base_dir), dataset, table, clock=clock)
    if kind == "postgres":
        from dpone.connectors.sinks.postgres import PostgresSink

        conn = secrets_resolved_connection
        if not conn or "${" in conn:
            raise SinkConfigError(
                "a postgres sink needs a resolved connection string",
                code="DPONE_SECRET_UNRESOLVED",
            )
        return PostgresSink(conn, dataset, table, clock=clock)
    if kind == "filesystem":
        from dpone.connectors.sinks.filesystem import FilesystemSink

        root = config.get("path")
        if not isinstance(root, str) or not root:
            raise SinkConfigError("a filesystem sink needs path: a directory")
        full = Path(root) if Path(root).is_absolute() else base_dir / root
        return FilesystemSink(full, _display_path(full, base_dir), dataset, table, clock=clock)
    if kind == "dlt":
        return _dlt_sink(
            config, base_dir, work_dir, pipeline_name, secrets_resolved_connection, clock
        )
    raise SinkConfigError(f"unknown sink type; expected one of {', '.join(SINK_TYPES)}")


def _dlt_sink(
    config: Mapping[str, Any],
    base_dir: Path,
    work_dir: Path,
    pipeline_name: str,
    credentials: str | None,
    clock: Clock,
) -> Sink:
    """A dlt sink; local paths the manifest writes relative (a DuckDB file, a SQLite URL, a
    filesystem ``bucket_url``) are relative to the manifest's folder, as everywhere else."""
    from dpone.connectors.sinks.dlt import DltSink

    if credentials is not None and "${" in credentials:
        raise SinkConfigError(
            "a dlt sink needs its credentials resolved", code="DPONE_SECRET_UNRESOLVED"
        )
    destination = str(config["destination"])
    options = dict(config.get("destination_options") or {})
    if destination == "duckdb":
        credentials = str(_local(credentials or f"{work_dir}/{pipeline_name}.duckdb", base_dir))
    elif destination == "sqlalchemy" and credentials and credentials.startswith("sqlite:///"):
        database = credentials[len("sqlite:///") :]
        if database and not database.startswith("/") and not database.startswith(":memory:"):
            credentials = "sqlite:///" + str(_local(database, base_dir))
    elif destination == "filesystem" and isinstance(options.get("bucket_url"), str):
        bucket = options["bucket_url"]
        if "://" not in bucket:
            options["bucket_url"] = str(_local(bucket, base_dir))
    return DltSink(
        destination=destination,
        dataset=str(config.get("dataset") or DEFAULT_DATASET),
        table=str(config.get("table") or pipeline_name),
        pipeline=pipeline_name,
        work_dir=Path(work_dir),
        credentials=credentials,
        options=options,
        loader_file_format=config.get("loader_file_format"),
        merge_key=tuple(config.get("merge_key") or ()),
        clock=clock,
    )


def _local(path: str, base_dir: Path) -> Path:
    """A file path as the manifest wrote it, anchored at the manifest's folder."""
    full = Path(path).expanduser()
    return full if full.is_absolute() else Path(base_dir) / full


__all__ = ["DEFAULT_DATASET", "SINK_TYPES", "make_sink"]
