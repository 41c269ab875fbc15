"""Typed, frozen specs of a manifest's source and sink: what a connector is built from.

The compiler builds them from the normalized document, where every default is already filled
from the JSON Schema (``dpone.manifest.defaults``); the connectors take them as they are and
default nothing themselves, so no field here has a default either. Paths are absolute
(resolved against the manifest's folder); ``display`` is how such a path appears in an
identity: relative to the manifest's folder, else the bare file name, never absolute.
Connection strings stay :class:`SecretRef` templates until a connector resolves them.

Adding a source or sink type is four small edits: its spec class and builder in
``sources.py`` (added to ``SourceSpec``/``SOURCE_SPECS``) or ``sinks.py``
(``SinkSpec``/``SINK_SPECS``), its branch in the manifest schema (with its defaults), and its
connector registered in ``dpone.connectors.sources.SOURCES`` (or ``sinks.SINKS``). The
connectors import every spec from here; the names below are imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.manifest.specs.common import IncrementalPlan, resolve_under
    from dpone.manifest.specs.sinks import (
        SINK_SPECS,
        DltSinkSpec,
        DuckdbSinkSpec,
        FilesystemSinkSpec,
        PostgresSinkSpec,
        SinkPlace,
        SinkSpec,
        sink_spec,
    )
    from dpone.manifest.specs.sources import (
        DEFAULT_MAX_COLUMNS,
        SOURCE_SPECS,
        STORAGE_TEXT_KEYS,
        CsvOptions,
        DatabaseFileSpec,
        DltSourceSpec,
        DuckdbSourceSpec,
        FileFormat,
        FileSourceSpec,
        PostgresSourceSpec,
        PythonSourceSpec,
        RestApiSourceSpec,
        SourceSpec,
        SqliteSourceSpec,
        StorageOptions,
        source_spec,
    )

__getattr__, __dir__ = exports(
    __name__,
    {
        "CsvOptions": "dpone.manifest.specs.sources",
        "DEFAULT_MAX_COLUMNS": "dpone.manifest.specs.sources",
        "DatabaseFileSpec": "dpone.manifest.specs.sources",
        "DltSinkSpec": "dpone.manifest.specs.sinks",
        "DltSourceSpec": "dpone.manifest.specs.sources",
        "DuckdbSinkSpec": "dpone.manifest.specs.sinks",
        "DuckdbSourceSpec": "dpone.manifest.specs.sources",
        "FileFormat": "dpone.manifest.specs.sources",
        "FileSourceSpec": "dpone.manifest.specs.sources",
        "FilesystemSinkSpec": "dpone.manifest.specs.sinks",
        "IncrementalPlan": "dpone.manifest.specs.common",
        "PostgresSinkSpec": "dpone.manifest.specs.sinks",
        "PostgresSourceSpec": "dpone.manifest.specs.sources",
        "PythonSourceSpec": "dpone.manifest.specs.sources",
        "RestApiSourceSpec": "dpone.manifest.specs.sources",
        "SINK_SPECS": "dpone.manifest.specs.sinks",
        "SOURCE_SPECS": "dpone.manifest.specs.sources",
        "STORAGE_TEXT_KEYS": "dpone.manifest.specs.sources",
        "SinkPlace": "dpone.manifest.specs.sinks",
        "SinkSpec": "dpone.manifest.specs.sinks",
        "SourceSpec": "dpone.manifest.specs.sources",
        "SqliteSourceSpec": "dpone.manifest.specs.sources",
        "StorageOptions": "dpone.manifest.specs.sources",
        "resolve_under": "dpone.manifest.specs.common",
        "sink_spec": "dpone.manifest.specs.sinks",
        "source_spec": "dpone.manifest.specs.sources",
    },
)

__all__ = [
    "DEFAULT_MAX_COLUMNS",
    "SINK_SPECS",
    "SOURCE_SPECS",
    "STORAGE_TEXT_KEYS",
    "CsvOptions",
    "DatabaseFileSpec",
    "DltSinkSpec",
    "DltSourceSpec",
    "DuckdbSinkSpec",
    "DuckdbSourceSpec",
    "FileFormat",
    "FileSourceSpec",
    "FilesystemSinkSpec",
    "IncrementalPlan",
    "PostgresSinkSpec",
    "PostgresSourceSpec",
    "PythonSourceSpec",
    "RestApiSourceSpec",
    "SinkPlace",
    "SinkSpec",
    "SourceSpec",
    "SqliteSourceSpec",
    "StorageOptions",
    "resolve_under",
    "sink_spec",
    "source_spec",
]
