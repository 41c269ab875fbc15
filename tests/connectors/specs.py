"""Connectors built the way the runtime builds them: from a section compiled by the compiler.

A test writes a ``source`` or ``sink`` section as a manifest would; the real compiler fills its
defaults and types it, and ``make_source``/``make_sink`` build the connector. A literal
connection string is moved into an environment variable first (a manifest may hold only
``${VAR}`` references), exactly as a user would write it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone.connectors import make_sink, make_source
from dpone.connectors.base import Sink, Source
from dpone.contracts.spec import ColumnSpec
from dpone.manifest.compiler import compile_text
from dpone.manifest.plan import Plan
from dpone.manifest.specs import (
    DltSourceSpec,
    IncrementalPlan,
    RestApiSourceSpec,
    SinkSpec,
    SourceSpec,
)

CONNECTION_VAR = "DPONE_TEST_CONNECTION"
_OTHER_SOURCE = {"type": "python", "callable": "rows:rows"}
_OTHER_SINK = {"type": "filesystem", "path": "lake", "table": "t"}


def _by_reference(section: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    section = dict(section)
    connection = section.get("connection")
    if connection is None or str(connection).startswith("${"):
        return section, {}
    section["connection"] = "${" + CONNECTION_VAR + "}"
    return section, {CONNECTION_VAR: str(connection)}


def compiled(
    base: Path,
    *,
    source: Mapping[str, Any] = _OTHER_SOURCE,
    sink: Mapping[str, Any] = _OTHER_SINK,
    name: str = "connector_test",
) -> Plan:
    document = {"name": name, "source": dict(source), "sink": dict(sink)}
    return compile_text(json.dumps(document), path=base / "manifest.yaml")


def source_spec(config: Mapping[str, Any], base: Path) -> SourceSpec:
    """The compiled spec of the ``source`` section ``config``."""
    return compiled(base, source=_by_reference(config)[0]).source.spec


def sink_spec(config: Mapping[str, Any], base: Path, *, name: str) -> SinkSpec:
    """The compiled spec of the ``sink`` section ``config`` of pipeline ``name``."""
    return compiled(base, sink=_by_reference(config)[0], name=name).sink.spec


def build_source(config: Mapping[str, Any], base: Path, *, read_all_as_text: bool) -> Source:
    section, env = _by_reference(config)
    return make_source(source_spec(section, base), env=env, read_all_as_text=read_all_as_text)


def build_sink(config: Mapping[str, Any], base: Path, *, name: str, **kwargs: Any) -> Sink:
    section, env = _by_reference(config)
    return make_sink(sink_spec(section, base, name=name), env=env, **kwargs)


def dlt_backed_spec(
    config: dict[str, Any], base: Path, cursor: ColumnSpec | None = None
) -> DltSourceSpec | RestApiSourceSpec:
    """The compiled spec of a dlt-backed ``source`` section (references left unresolved)."""
    found = config.get("incremental")
    incremental = (
        IncrementalPlan(
            found["cursor_column"],
            found.get("initial_value"),
            lag=found.get("lag", 0),
            end_value=found.get("end_value"),
        )
        if found
        else None
    )
    if config["type"] == "rest_api":
        return RestApiSourceSpec(
            base,
            config,
            (),
            incremental,
            allowed_origins=tuple(config.get("allowed_origins", ())),
            max_pages=config.get("max_pages", 100_000),
            max_response_bytes=config.get("max_response_bytes", 64 * 1024 * 1024),
        )
    return DltSourceSpec(base, config, (), incremental, cursor)
