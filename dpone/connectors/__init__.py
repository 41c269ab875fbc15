"""dpone connectors: sources and sinks behind two small Protocols (see ``base``).

Only this package imports duckdb, database drivers or (should it ever need to) dlt.
"""

from dpone.connectors.base import (
    LOAD_MODES,
    LoadMarker,
    LoadMode,
    LoadSpec,
    Sink,
    SinkLoad,
    Source,
    SourceChunk,
)
from dpone.connectors.sinks import make_sink
from dpone.connectors.sources import make_source

__all__ = [
    "LOAD_MODES",
    "LoadMarker",
    "LoadMode",
    "LoadSpec",
    "Sink",
    "SinkLoad",
    "Source",
    "SourceChunk",
    "make_sink",
    "make_source",
]
