"""Sources: ``make_source`` builds the :class:`Source` of a compiled source spec.

The spec (``dpone.manifest.specs``) carries every setting, defaults included; a connector
adds none. A new source type registers its factory in :data:`SOURCES` under its spec class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dpone.connectors.errors import SourceConfigError
from dpone.manifest.specs import (
    DltSourceSpec,
    DuckdbSourceSpec,
    FileSourceSpec,
    PostgresSourceSpec,
    PythonSourceSpec,
    RestApiSourceSpec,
    SourceSpec,
    SqliteSourceSpec,
)

if TYPE_CHECKING:
    from dpone.connectors.base import Source

#: Builds a source from its spec, the environment secrets resolve in, and whether CSV and
#: JSONL columns arrive all as text.
SourceFactory = Callable[[Any, Mapping[str, str], bool], "Source"]


def _file(spec: FileSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.file import FileSource

    return FileSource(spec, read_all_as_text=as_text, env=env)


def _python(spec: PythonSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.python import PythonSource

    return PythonSource(spec)


def _duckdb(spec: DuckdbSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.duckdb import DuckDbSource

    return DuckDbSource(spec)


def _sqlite(spec: SqliteSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.sqlite import SqliteSource

    return SqliteSource(spec)


def _postgres(spec: PostgresSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.postgres import PostgresSource

    return PostgresSource(spec, spec.connection.resolve(env))


def _rest_api(spec: RestApiSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.rest_api import RestApiSource

    return RestApiSource(
        spec.config,
        env,
        allowed_origins=spec.allowed_origins,
        max_pages=spec.max_pages,
        max_response_bytes=spec.max_response_bytes,
    )


def _dlt_source(spec: DltSourceSpec, env: Mapping[str, str], as_text: bool) -> Source:
    from dpone.connectors.sources.dlt_source import DltSource

    return DltSource(spec.base_dir, spec.config, env, spec.cursor)


#: Spec class -> the factory of its connector (imported only when a manifest uses it).
SOURCES: dict[type[Any], SourceFactory] = {
    FileSourceSpec: _file,
    PythonSourceSpec: _python,
    DuckdbSourceSpec: _duckdb,
    SqliteSourceSpec: _sqlite,
    PostgresSourceSpec: _postgres,
    RestApiSourceSpec: _rest_api,
    DltSourceSpec: _dlt_source,
}


def make_source(spec: SourceSpec, *, env: Mapping[str, str], read_all_as_text: bool) -> Source:
    """The source of ``spec``; its ``${VAR}`` references resolve in ``env``.

    ``env`` resolves a connection string, the references of a dlt-backed source and those
    of a file source's ``options.storage`` (where it also holds the object store's standard
    variables). ``read_all_as_text`` makes CSV and JSONL columns all ``string``; other
    formats keep types.
    """
    factory = SOURCES.get(type(spec))
    if factory is None:
        raise SourceConfigError(f"no source connector is registered for {type(spec).__name__}")
    return factory(spec, env, read_all_as_text)


__all__ = ["SOURCES", "SourceFactory", "make_source"]
