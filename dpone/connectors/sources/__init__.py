"""Sources: ``make_source`` turns the manifest's ``source`` section into a :class:`Source`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone.connectors.base import Source
from dpone.connectors.errors import SourceConfigError
from dpone.connectors.sources._sql import Incremental, Relation
from dpone.contracts.spec import ColumnSpec

SOURCE_TYPES: tuple[str, ...] = (
    "file",
    "python",
    "duckdb",
    "sqlite",
    "postgres",
    "dlt",
    "rest_api",
)


def make_source(
    config: Mapping[str, Any],
    base_dir: Path,
    *,
    read_all_as_text: bool,
    connection: str | None = None,
    env: Mapping[str, str] | None = None,
    cursor: ColumnSpec | None = None,
) -> Source:
    """The source of a manifest's ``source`` section; paths are relative to ``base_dir``.

    ``connection`` is the resolved connection string of a postgres source (defaults to
    ``config["connection"]``, which must then hold no ``${...}`` reference any more).
    ``read_all_as_text`` makes CSV and JSONL columns all ``string``; other formats keep types.
    ``env`` resolves the ``${...}`` references of a dlt-backed source (default: the process
    environment); ``cursor`` is the contract's incremental cursor column, which types the
    committed cursor handed to a ``dlt`` source.
    """
    kind = config.get("type")
    base_dir = Path(base_dir)
    if kind == "file":
        from dpone.connectors.sources.file import CsvOptions, FileSource

        fmt = config.get("format")
        path = config.get("path")
        if fmt not in ("csv", "jsonl", "parquet") or not isinstance(path, str):
            raise SourceConfigError("a file source needs format (csv|jsonl|parquet) and path")
        options = config.get("options") or {}
        jsonl = options.get("jsonl") or {}
        return FileSource(
            base_dir,
            path,
            fmt,
            csv=CsvOptions.from_config(options.get("csv")),
            read_all_as_text=read_all_as_text,
            jsonl_encoding=str(jsonl.get("encoding", "utf-8")),
        )
    if kind == "python":
        from dpone.connectors.sources.python import PythonSource

        spec = config.get("callable")
        if not isinstance(spec, str):
            raise SourceConfigError("a python source needs callable: module:attr")
        return PythonSource(base_dir, spec, config.get("args"))
    if kind == "rest_api":
        from dpone.connectors.sources.rest_api import RestApiSource

        return RestApiSource(config, os.environ if env is None else env)
    if kind == "dlt":
        from dpone.connectors.sources.dlt_source import DltSource

        return DltSource(base_dir, config, os.environ if env is None else env, cursor)
    if kind in ("duckdb", "sqlite"):
        database = config.get("database")
        if not isinstance(database, str):
            raise SourceConfigError(f"a {kind} source needs database: a file path")
        path = Path(database)
        full = path if path.is_absolute() else base_dir / path
        display = _display_path(full, base_dir)
        relation = Relation.from_config(config)
        incremental = Incremental.from_config(config.get("incremental"))
        if kind == "duckdb":
            from dpone.connectors.sources.duckdb import DuckDbSource

            return DuckDbSource(full, display, relation, incremental)
        from dpone.connectors.sources.sqlite import SqliteSource

        return SqliteSource(full, display, relation, incremental)
    if kind == "postgres":
        from dpone.connectors.sources.postgres import PostgresSource

        conn = connection if connection is not None else config.get("connection")
        if not isinstance(conn, str) or not conn or "${" in conn:
            raise SourceConfigError(
                "a postgres source needs a resolved connection string",
                code="DPONE_SECRET_UNRESOLVED",
            )
        return PostgresSource(
            conn, Relation.from_config(config), Incremental.from_config(config.get("incremental"))
        )
    raise SourceConfigError(f"unknown source type; expected one of {', '.join(SOURCE_TYPES)}")


def _display_path(path: Path, base_dir: Path) -> str:
    """Relative to the manifest's folder when possible, else the bare file name."""
    try:
        rel = os.path.relpath(path.resolve(), base_dir.resolve())
    except ValueError:
        return path.name
    return path.name if rel.startswith("..") else Path(rel).as_posix()


__all__ = ["SOURCE_TYPES", "make_source"]
