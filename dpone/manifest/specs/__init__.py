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
connectors import every spec from here.
"""

from __future__ import annotations

from dpone.manifest.specs.common import IncrementalPlan, Section, display_path, resolve_under
from dpone.manifest.specs.sinks import (
    SINK_SPECS,
    DltSinkSpec,
    DuckdbSinkSpec,
    FilesystemSinkSpec,
    PostgresSinkSpec,
    SinkPlace,
    SinkSpec,
    SinkTarget,
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
    JsonlOptions,
    PostgresSourceSpec,
    PythonSourceSpec,
    RestApiSourceSpec,
    SourceSpec,
    SqliteSourceSpec,
    StorageOptions,
    source_spec,
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
    "JsonlOptions",
    "PostgresSinkSpec",
    "PostgresSourceSpec",
    "PythonSourceSpec",
    "RestApiSourceSpec",
    "Section",
    "SinkPlace",
    "SinkSpec",
    "SinkTarget",
    "SourceSpec",
    "SqliteSourceSpec",
    "StorageOptions",
    "display_path",
    "resolve_under",
    "sink_spec",
    "source_spec",
]
