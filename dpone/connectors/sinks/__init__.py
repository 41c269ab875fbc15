"""Sinks: ``make_sink`` builds the :class:`Sink` of a compiled sink spec.

duckdb, postgres and filesystem are native Arrow paths rather than dlt destinations
(docs/sinks.md says why); ``dlt`` loads into any dlt destination and imports dlt only then. The
spec (``dpone.manifest.specs``) carries every setting, defaults included; a connector adds
none. A new sink type registers its factory in :data:`SINKS` under its spec class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone.clock import Clock, utc_now
from dpone.connectors.errors import SinkConfigError
from dpone.manifest.specs import (
    DltSinkSpec,
    DuckdbSinkSpec,
    FilesystemSinkSpec,
    PostgresSinkSpec,
    SinkSpec,
)

if TYPE_CHECKING:
    from dpone.connectors.base import Sink

#: Builds a sink from its spec, the environment secrets resolve in, and the clock of its
#: load markers.
SinkFactory = Callable[[Any, Mapping[str, str], Clock], "Sink"]


def _duckdb(spec: DuckdbSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    from dpone.connectors.sinks.duckdb import DuckDbSink

    return DuckDbSink(spec, clock=clock)


def _postgres(spec: PostgresSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    from dpone.connectors.sinks.postgres import PostgresSink

    return PostgresSink(spec, spec.connection.resolve(env), clock=clock)


def _filesystem(spec: FilesystemSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    from dpone.connectors.sinks.filesystem import FilesystemSink

    return FilesystemSink(spec, clock=clock)


#: Spec class -> the factory of its connector (imported only when a manifest uses it).
def _dlt(spec: DltSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    """A dlt sink; local paths the manifest writes relative (a DuckDB file, a SQLite URL, a
    filesystem ``bucket_url``) are relative to the manifest's folder, as everywhere else."""
    from dpone.connectors.sinks.dlt import DltSink

    credentials = spec.credentials.resolve(env) if spec.credentials is not None else None
    options = dict(spec.destination_options)
    if spec.destination == "duckdb":
        default = f"{spec.work_dir}/{spec.pipeline}.duckdb"
        credentials = str(_local(credentials or default, spec.base_dir))
    elif spec.destination == "sqlalchemy" and credentials and credentials.startswith("sqlite:///"):
        database = credentials[len("sqlite:///") :]
        if database and not database.startswith("/") and not database.startswith(":memory:"):
            credentials = "sqlite:///" + str(_local(database, spec.base_dir))
    elif spec.destination == "filesystem" and isinstance(options.get("bucket_url"), str):
        bucket = options["bucket_url"]
        if "://" not in bucket:
            options["bucket_url"] = str(_local(bucket, spec.base_dir))
    return DltSink(
        destination=spec.destination,
        dataset=spec.dataset,
        table=spec.table,
        pipeline=spec.pipeline,
        work_dir=spec.work_dir,
        credentials=credentials,
        options=options,
        loader_file_format=spec.loader_file_format,
        clock=clock,
    )


def _local(path: str, base_dir: Path) -> Path:
    """A file path as the manifest wrote it, anchored at the manifest's folder."""
    full = Path(path).expanduser()
    return full if full.is_absolute() else base_dir / full


SINKS: dict[type[Any], SinkFactory] = {
    DuckdbSinkSpec: _duckdb,
    PostgresSinkSpec: _postgres,
    FilesystemSinkSpec: _filesystem,
    DltSinkSpec: _dlt,
}


def make_sink(spec: SinkSpec, *, env: Mapping[str, str], clock: Clock = utc_now) -> Sink:
    """The sink of ``spec``; a connection string's ``${VAR}`` references resolve in ``env``.

    ``strategy`` belongs to each load (:class:`~dpone.connectors.base.LoadSpec`), not here.
    """
    factory = SINKS.get(type(spec))
    if factory is None:
        raise SinkConfigError(f"no sink connector is registered for {type(spec).__name__}")
    return factory(spec, env, clock)


__all__ = ["SINKS", "SinkFactory", "make_sink"]
