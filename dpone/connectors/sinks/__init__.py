"""Sinks: ``make_sink`` builds the :class:`Sink` of a compiled sink spec.

All three are native Arrow paths rather than dlt destinations; docs/sinks.md says why. The
spec (``dpone.manifest.specs``) carries every setting, defaults included; a connector adds
none. A new sink type registers its factory in :data:`SINKS` under its spec class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from dpone.clock import Clock, utc_now
from dpone.connectors.errors import SinkConfigError
from dpone.manifest.specs import DuckdbSinkSpec, FilesystemSinkSpec, PostgresSinkSpec, SinkSpec

if TYPE_CHECKING:
    from dpone.connectors.base import Sink

#: Builds a sink from its spec, the environment secrets resolve in, and the clock of its
#: load markers.
SinkFactory = Callable[[Any, Mapping[str, str], Clock], "Sink"]


def _duckdb(spec: DuckdbSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    from dpone.connectors.sinks.duckdb import DuckDbSink

    return DuckDbSink(spec, clock=clock)


def _postgres(spec: PostgresSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    from dpone.connectors.sinks.postgres import PostgresSink

    return PostgresSink(spec, spec.connection.resolve(env), clock=clock)


def _filesystem(spec: FilesystemSinkSpec, env: Mapping[str, str], clock: Clock) -> Sink:
    from dpone.connectors.sinks.filesystem import FilesystemSink

    return FilesystemSink(spec, clock=clock)


#: Spec class -> the factory of its connector (imported only when a manifest uses it).
SINKS: dict[type[Any], SinkFactory] = {
    DuckdbSinkSpec: _duckdb,
    PostgresSinkSpec: _postgres,
    FilesystemSinkSpec: _filesystem,
}


def make_sink(spec: SinkSpec, *, env: Mapping[str, str], clock: Clock = utc_now) -> Sink:
    """The sink of ``spec``; a connection string's ``${VAR}`` references resolve in ``env``.

    ``strategy`` belongs to each load (:class:`~dpone.connectors.base.LoadSpec`), not here.
    """
    factory = SINKS.get(type(spec))
    if factory is None:
        raise SinkConfigError(f"no sink connector is registered for {type(spec).__name__}")
    return factory(spec, env, clock)


__all__ = ["SINKS", "SinkFactory", "make_sink"]
