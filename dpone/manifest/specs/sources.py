"""The specs of the source types, and how each is built from a normalized ``source`` section."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

from dpone.contracts.spec import ColumnSpec
from dpone.manifest.dltblocks import secret_refs
from dpone.manifest.secrets import SecretRef
from dpone.manifest.specs.common import (
    IncrementalPlan,
    Section,
    display_path,
    incremental_plan,
    resolve_under,
)
from dpone.records import frozen

FileFormat = Literal["csv", "jsonl", "parquet"]


@frozen
class CsvOptions:
    """``source.options.csv``: how CSV text is read (see the manifest schema for each key)."""

    delimiter: str
    header: bool
    encoding: str
    quote_char: str
    null_values: tuple[str, ...]
    newlines_in_values: bool
    max_row_bytes: int


@frozen
class JsonlOptions:
    """``source.options.jsonl``."""

    encoding: str


@frozen
class StorageOptions:
    """``source.options.storage``: the object store settings of an ``s3://``, ``gs://`` or
    ``az://`` path (which keys apply to which store: ``sourcepaths.STORAGE_OPTIONS``).

    Each text setting stays a :class:`SecretRef` template (``${VAR}`` unresolved) until the
    connector resolves it (``dpone.connectors.fs``); a setting the manifest leaves out is None,
    and the store's standard environment variables, then its SDK's credential chain, apply.
    """

    endpoint_url: SecretRef | None
    region: SecretRef | None
    key: SecretRef | None
    secret: SecretRef | None
    token: SecretRef | None
    project_id: SecretRef | None
    account_name: SecretRef | None
    account_key: SecretRef | None
    sas_token: SecretRef | None
    anonymous: bool

    def written(self) -> dict[str, SecretRef]:
        """The text settings the manifest wrote, by key."""
        return {
            name: value for name in STORAGE_TEXT_KEYS if (value := getattr(self, name)) is not None
        }

    @property
    def secrets(self) -> tuple[SecretRef, ...]:
        """The settings that reference the environment."""
        return tuple(ref for ref in self.written().values() if ref.names)


#: The text settings of :class:`StorageOptions`, in the schema's order.
STORAGE_TEXT_KEYS: tuple[str, ...] = (
    "endpoint_url",
    "region",
    "key",
    "secret",
    "token",
    "project_id",
    "account_name",
    "account_key",
    "sas_token",
)


@frozen
class FileSourceSpec:
    """Files matching the glob ``path`` (as written; relative paths under ``base_dir``), or
    objects of a store when ``path`` is an ``s3://``, ``gs://`` or ``az://`` URI (then
    ``storage`` holds the store's settings; it is None for a local path)."""

    type: ClassVar[str] = "file"
    base_dir: Path
    path: str
    format: FileFormat
    csv: CsvOptions
    jsonl: JsonlOptions
    storage: StorageOptions | None
    incremental: IncrementalPlan | None
    #: ``runtime.max_columns``: the reader stops at a header (or JSON objects) wider than this
    max_columns: int
    #: ``prevalidated``: Parquet files a producer marked as held to the contract, checked and
    #: loaded through the sink's native path instead of the row-by-row enforcement
    prevalidated: bool

    @property
    def secrets(self) -> tuple[SecretRef, ...]:
        """``${ENV_VAR}`` references of ``storage`` (resolved when the source is built)."""
        return () if self.storage is None else self.storage.secrets


@frozen
class PythonSourceSpec:
    """A callable ``module:attr`` (found next to the manifest first), called with ``args``."""

    type: ClassVar[str] = "python"
    base_dir: Path
    callable: str
    args: Mapping[str, Any]
    incremental: IncrementalPlan | None
    #: ``normalize: {nested: child_tables}``: nested values reach the run as JSON text
    child_tables: bool


@frozen
class DatabaseFileSpec:
    """A table or a read-only query of a database file (exactly one of ``table``/``query``)."""

    type: ClassVar[str]
    database: Path
    display: str
    table: str | None
    query: str | None
    incremental: IncrementalPlan | None


@frozen
class DuckdbSourceSpec(DatabaseFileSpec):
    """A DuckDB file."""

    type: ClassVar[str] = "duckdb"


@frozen
class SqliteSourceSpec(DatabaseFileSpec):
    """A SQLite file."""

    type: ClassVar[str] = "sqlite"


@frozen
class PostgresSourceSpec:
    """A table or a read-only query of a PostgreSQL database."""

    type: ClassVar[str] = "postgres"
    connection: SecretRef
    table: str | None
    query: str | None
    incremental: IncrementalPlan | None
    #: ``engine: dask``: the column whose key range is split, into ``partitions`` ranges
    #: (both None when the manifest names no ``partition_column``)
    partition_column: str | None
    partitions: int | None


@frozen
class RestApiSourceSpec:
    """dlt's declarative REST API source: ``client`` and ``resource`` in dlt's vocabulary.

    ``config`` is the normalized section as written (``${VAR}`` references unresolved);
    ``secrets`` lists those references so preflight resolves them before anything is read.
    ``allowed_origins``, ``max_pages`` and ``max_response_bytes`` bound what the API's
    responses can make the source do (docs/security.md).
    """

    type: ClassVar[str] = "rest_api"
    base_dir: Path
    config: Mapping[str, Any]
    secrets: tuple[SecretRef, ...]
    incremental: IncrementalPlan | None
    allowed_origins: tuple[str, ...]
    max_pages: int
    max_response_bytes: int


@frozen
class DltSourceSpec:
    """Any dlt source or resource, ``ref: module:callable`` called with ``args``.

    ``cursor`` is the contract's incremental cursor column (it types the committed cursor
    handed to dlt's incremental as its start value).
    """

    type: ClassVar[str] = "dlt"
    base_dir: Path
    config: Mapping[str, Any]
    secrets: tuple[SecretRef, ...]
    incremental: IncrementalPlan | None
    cursor: ColumnSpec | None


SourceSpec = (
    FileSourceSpec
    | PythonSourceSpec
    | DuckdbSourceSpec
    | SqliteSourceSpec
    | PostgresSourceSpec
    | RestApiSourceSpec
    | DltSourceSpec
)


#: ``runtime.max_columns`` when a source section is built on its own (the schema's default;
#: a test holds them equal). The compiler always passes the manifest's value.
DEFAULT_MAX_COLUMNS = 10_000


def _file_source(
    section: Section, base: Path, max_columns: int = DEFAULT_MAX_COLUMNS
) -> FileSourceSpec:
    options = section["options"]
    csv = options["csv"]
    return FileSourceSpec(
        base_dir=base,
        path=section["path"],
        format=section["format"],
        csv=CsvOptions(
            delimiter=csv["delimiter"],
            header=csv["header"],
            encoding=csv["encoding"],
            quote_char=csv["quote_char"],
            null_values=tuple(csv["null_values"]),
            newlines_in_values=csv["newlines_in_values"],
            max_row_bytes=csv["max_row_bytes"],
        ),
        jsonl=JsonlOptions(encoding=options["jsonl"]["encoding"]),
        storage=_storage(options.get("storage")),
        incremental=incremental_plan(section),
        max_columns=max_columns,
        prevalidated=section["prevalidated"],
    )


def _storage(section: Section | None) -> StorageOptions | None:
    """The schema fills ``options.storage`` for an object store path only."""
    if section is None:
        return None

    def text(name: str) -> SecretRef | None:
        value = section.get(name)
        return None if value is None else SecretRef(value)

    return StorageOptions(
        endpoint_url=text("endpoint_url"),
        region=text("region"),
        key=text("key"),
        secret=text("secret"),
        token=text("token"),
        project_id=text("project_id"),
        account_name=text("account_name"),
        account_key=text("account_key"),
        sas_token=text("sas_token"),
        anonymous=section["anonymous"],
    )


def _python_source(section: Section, base: Path) -> PythonSourceSpec:
    return PythonSourceSpec(
        base_dir=base,
        callable=section["callable"],
        args=dict(section["args"]),
        incremental=incremental_plan(section),
        child_tables=(section.get("normalize") or {}).get("nested") == "child_tables",
    )


def _database_file_source(
    cls: type[DuckdbSourceSpec] | type[SqliteSourceSpec],
) -> Callable[[Section, Path], SourceSpec]:
    def build(section: Section, base: Path) -> SourceSpec:
        database = resolve_under(base, section["database"])
        return cls(
            database=database,
            display=display_path(database, base),
            table=section.get("table"),
            query=section.get("query"),
            incremental=incremental_plan(section),
        )

    return build


def _postgres_source(section: Section, base: Path) -> PostgresSourceSpec:
    return PostgresSourceSpec(
        connection=SecretRef(section["connection"]),
        table=section.get("table"),
        query=section.get("query"),
        incremental=incremental_plan(section),
        partition_column=section.get("partition_column"),
        partitions=section.get("partitions"),
    )


def _dlt_backed(
    cls: type[RestApiSourceSpec] | type[DltSourceSpec],
) -> Callable[[Section, Path], SourceSpec]:
    def build(section: Section, base: Path) -> SourceSpec:
        secrets = secret_refs(dict(section))
        incremental = incremental_plan(section)
        if cls is DltSourceSpec:  # the compiler sets the cursor column from the contract
            return DltSourceSpec(base, section, secrets, incremental, cursor=None)
        return RestApiSourceSpec(
            base,
            section,
            secrets,
            incremental,
            allowed_origins=tuple(section["allowed_origins"]),
            max_pages=section["max_pages"],
            max_response_bytes=section["max_response_bytes"],
        )

    return build


#: ``source.type`` -> the builder of its spec from the normalized ``source`` section.
SOURCE_SPECS: dict[str, Callable[[Section, Path], SourceSpec]] = {
    "file": _file_source,
    "python": _python_source,
    "duckdb": _database_file_source(DuckdbSourceSpec),
    "sqlite": _database_file_source(SqliteSourceSpec),
    "postgres": _postgres_source,
    "rest_api": _dlt_backed(RestApiSourceSpec),
    "dlt": _dlt_backed(DltSourceSpec),
}


def source_spec(
    section: Section, base: Path, *, max_columns: int = DEFAULT_MAX_COLUMNS
) -> SourceSpec:
    """The spec of a normalized ``source`` section; relative paths resolve under ``base``;
    ``max_columns`` is ``runtime.max_columns`` (a file source's reader applies it)."""
    if section["type"] == "file":
        return _file_source(section, base, max_columns)
    return SOURCE_SPECS[section["type"]](section, base)
