"""Sinks: ``make_sink`` turns the manifest's ``sink`` section into a :class:`Sink`.

All three are native Arrow paths rather than dlt destinations; docs/sinks.md says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone.clock import Clock, utc_now
from dpone.connectors.errors import SinkConfigError
from dpone.connectors.sources import _display_path

if TYPE_CHECKING:
    from dpone.connectors.base import Sink

SINK_TYPES: tuple[str, ...] = ("duckdb", "postgres", "filesystem")
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
    raise SinkConfigError(f"unknown sink type; expected one of {', '.join(SINK_TYPES)}")


__all__ = ["DEFAULT_DATASET", "SINK_TYPES", "make_sink"]
