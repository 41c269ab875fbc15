"""dpone connectors: sources and sinks behind two small Protocols (see ``base``).

Only this package imports duckdb, database drivers or dlt. The names below are imported on
first use, so importing one connector module (or ``dpone.connectors.errors``) loads no other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.connectors.base import (
        LOAD_MODES,
        LoadMarker,
        LoadSpec,
        Sink,
        SinkLoad,
        Source,
        SourceChunk,
    )
    from dpone.connectors.sinks import make_sink
    from dpone.connectors.sources import make_source

__getattr__, __dir__ = exports(
    __name__,
    {
        "LOAD_MODES": "dpone.connectors.base",
        "LoadMarker": "dpone.connectors.base",
        "LoadSpec": "dpone.connectors.base",
        "Sink": "dpone.connectors.base",
        "SinkLoad": "dpone.connectors.base",
        "Source": "dpone.connectors.base",
        "SourceChunk": "dpone.connectors.base",
        "make_sink": "dpone.connectors.sinks",
        "make_source": "dpone.connectors.sources",
    },
)

__all__ = [
    "LOAD_MODES",
    "LoadMarker",
    "LoadSpec",
    "Sink",
    "SinkLoad",
    "Source",
    "SourceChunk",
    "make_sink",
    "make_source",
]
