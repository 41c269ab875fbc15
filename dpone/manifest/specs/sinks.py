"""The specs of the sink types, and how each is built from a normalized ``sink`` section."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from dpone.manifest.secrets import SecretRef
from dpone.manifest.specs.common import Section, display_path, resolve_under
from dpone.records import frozen


@frozen
class SinkTarget:
    """What every sink loads into: ``dataset.table``."""

    type: ClassVar[str]
    dataset: str
    table: str


@frozen
class DuckdbSinkSpec(SinkTarget):
    """A DuckDB file."""

    type: ClassVar[str] = "duckdb"
    database: Path
    display: str


@frozen
class PostgresSinkSpec(SinkTarget):
    """A PostgreSQL database (``dataset`` is the schema)."""

    type: ClassVar[str] = "postgres"
    connection: SecretRef


@frozen
class FilesystemSinkSpec(SinkTarget):
    """Parquet files under ``path/dataset/table``."""

    type: ClassVar[str] = "filesystem"
    path: Path
    display: str


@frozen
class DltSinkSpec(SinkTarget):
    """Any dlt destination (``destination`` is dlt's name for it).

    ``credentials`` is the connection template (``${VAR}`` unresolved). Local paths in it (a
    DuckDB file, a ``sqlite:///`` URL, a filesystem ``bucket_url``) are anchored at
    ``base_dir`` by the connector; ``pipeline`` and ``work_dir`` (where dlt keeps its pipeline
    and packages) are the manifest's ``name`` and ``runtime.work_dir``, set by the compiler.
    """

    type: ClassVar[str] = "dlt"
    destination: str
    credentials: SecretRef | None
    destination_options: Mapping[str, Any]
    loader_file_format: str | None
    base_dir: Path
    pipeline: str
    work_dir: Path


SinkSpec = DuckdbSinkSpec | PostgresSinkSpec | FilesystemSinkSpec | DltSinkSpec


@frozen
class SinkPlace:
    """What a sink's spec is built with besides its section: the manifest's folder (relative
    paths resolve under it), the pipeline's name and its absolute work dir (a dlt sink keeps
    its pipeline and load packages there)."""

    base: Path
    pipeline: str
    work_dir: Path


def _duckdb_sink(section: Section, at: SinkPlace) -> DuckdbSinkSpec:
    database = resolve_under(at.base, section["database"])
    return DuckdbSinkSpec(
        database=database,
        display=display_path(database, at.base),
        dataset=section["dataset"],
        table=section["table"],
    )


def _postgres_sink(section: Section, at: SinkPlace) -> PostgresSinkSpec:
    return PostgresSinkSpec(
        connection=SecretRef(section["connection"]),
        dataset=section["dataset"],
        table=section["table"],
    )


def _filesystem_sink(section: Section, at: SinkPlace) -> FilesystemSinkSpec:
    root = resolve_under(at.base, section["path"])
    return FilesystemSinkSpec(
        path=root,
        display=display_path(root, at.base),
        dataset=section["dataset"],
        table=section["table"],
    )


def _dlt_sink(section: Section, at: SinkPlace) -> DltSinkSpec:
    credentials = section.get("credentials")
    return DltSinkSpec(
        destination=section["destination"],
        credentials=SecretRef(credentials) if credentials is not None else None,
        destination_options=dict(section.get("destination_options") or {}),
        loader_file_format=section.get("loader_file_format"),
        base_dir=at.base,
        pipeline=at.pipeline,
        work_dir=at.work_dir,
        dataset=section["dataset"],
        table=section["table"],
    )


#: ``sink.type`` -> the builder of its spec from the normalized ``sink`` section.
SINK_SPECS: dict[str, Callable[[Section, SinkPlace], SinkSpec]] = {
    "duckdb": _duckdb_sink,
    "postgres": _postgres_sink,
    "filesystem": _filesystem_sink,
    "dlt": _dlt_sink,
}


def sink_spec(section: Section, at: SinkPlace) -> SinkSpec:
    """The spec of a normalized ``sink`` section; relative paths resolve under ``at.base``."""
    return SINK_SPECS[section["type"]](section, at)
