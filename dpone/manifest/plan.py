"""The compiled, typed plan of one manifest: frozen data that the runtime executes.

Paths are absolute here (resolved against the manifest's folder); the normalized document
kept in :attr:`Plan.document` holds them as the user wrote them, which is what the
fingerprint and ``dpone plan`` show. Every default is filled in by the compiler from the
JSON Schema, so nothing here (nor in the connectors built from it) defaults a manifest value.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from dpone.assertions.spec import AssertionSpec, Policy
from dpone.contracts.dlq import DlqPolicy, is_production
from dpone.contracts.prevalidated import contract_fingerprint
from dpone.contracts.spec import ContractSpec
from dpone.errors import ErrorDetail
from dpone.manifest.secrets import SecretRef
from dpone.manifest.specs import IncrementalPlan, SinkSpec, SourceSpec
from dpone.records import frozen

PLAN_SCHEMA_ID = "dpone.plan.v1"

StrategyMode = Literal["append", "replace", "merge"]
#: How a ``merge`` applies its rows (``strategy.merge_strategy``, SPEC §13).
MergeStrategy = Literal["upsert", "delete-insert", "scd2"]
#: Columns a sink can add to every loaded row (``sink.options.load_columns``).
LoadColumn = Literal["load_id"]


def _connection(spec: SourceSpec | SinkSpec) -> SecretRef | None:
    found = getattr(spec, "connection", None) or getattr(spec, "credentials", None)
    return found if isinstance(found, SecretRef) else None


@frozen
class SourcePlan:
    """The plan's source: the spec its connector is built from, and the secrets it names."""

    spec: SourceSpec
    """What the source connector is built from (``dpone.manifest.specs``)."""

    @property
    def type(self) -> str:
        return self.spec.type

    @property
    def incremental(self) -> IncrementalPlan | None:
        return self.spec.incremental

    @property
    def connection(self) -> SecretRef | None:
        """The connection string template of a source that has one."""
        return _connection(self.spec)

    @property
    def secrets(self) -> tuple[SecretRef, ...]:
        """``${ENV_VAR}`` references of a dlt-backed source (credentials, headers, arguments)
        or of a file source's ``options.storage``."""
        found = getattr(self.spec, "secrets", ())
        return tuple(found)


@frozen
class StrategyPlan:
    """How a load writes into the sink table (``sink.strategy``): mode, keys, merge settings."""

    mode: StrategyMode
    unique_key: tuple[str, ...]
    #: None unless ``mode`` is merge (then ``upsert`` unless the manifest says otherwise)
    merge_strategy: MergeStrategy | None
    #: ``delete-insert``'s columns: target rows whose values the load holds are replaced
    merge_key: tuple[str, ...]
    #: a boolean column whose true rows delete (close, under scd2) the row of their key
    deleted_column: str | None
    #: ``scd2``: when versions open and close (ISO-8601 UTC); None: the run's start
    boundary_timestamp: str | None

    def boundary(self) -> datetime | None:
        """``boundary_timestamp`` as an aware datetime (the compiler checked it parses)."""
        if self.boundary_timestamp is None:
            return None
        return datetime.fromisoformat(self.boundary_timestamp)


@frozen
class SinkPlan:
    """The plan's sink: its connector spec, strategy, contract, DLQ policy and evidence folder."""

    spec: SinkSpec
    """What the sink connector is built from (``dpone.manifest.specs``)."""
    strategy: StrategyPlan
    contract: ContractSpec
    dlq: DlqPolicy
    evidence_dir: Path
    #: dpone's columns added to every loaded row (``load_id`` -> ``_dpone_load_id``)
    load_columns: tuple[LoadColumn, ...]
    #: ``options.system_tables``: the sink keeps ``_dpone_runs`` and ``_dpone_rejected``
    system_tables: bool

    @property
    def type(self) -> str:
        return self.spec.type

    @property
    def dataset(self) -> str:
        return self.spec.dataset

    @property
    def table(self) -> str:
        return self.spec.table

    @property
    def connection(self) -> SecretRef | None:
        """The connection string template of a sink that has one."""
        return _connection(self.spec)


@frozen
class QualityPlan:
    """The manifest's ``quality.assertions``: the default policy and every configured assertion."""

    on_failure: Policy
    assertions: tuple[AssertionSpec, ...]


@frozen
class DaskPlan:
    """``runtime.dask``: a scheduler's address, or the shape of a local cluster (None: the
    manifest does not say; ``n_workers`` is then the machine's cores, ``memory_limit`` Dask's)."""

    address: str | None
    n_workers: int | None
    memory_limit: str | None


@frozen
class RuntimePlan:
    """The manifest's ``runtime``: work dir, chunk size, column limit, engine and Dask settings."""

    work_dir: Path
    chunk_size: int
    engine: Literal["local", "dask"]
    dask: DaskPlan
    #: the most columns a source batch may have (``DPONE_SOURCE_TOO_MANY_COLUMNS``)
    max_columns: int


@frozen
class Plan:
    """One manifest compiled: what a run executes, every default filled in (see the module)."""

    name: str
    environment: str
    description: str | None
    manifest_path: Path
    manifest_dir: Path
    runtime: RuntimePlan
    source: SourcePlan
    sink: SinkPlan
    quality: QualityPlan
    state_type: Literal["file", "disabled"]
    observability: dict[str, Any]
    document: dict[str, Any]
    """The normalized manifest: defaults applied, ``x-*`` keys dropped, paths as written."""
    fingerprint: str
    quarantine_export: Path | None
    """The deprecated ``quarantine.dir``: every rejected row's values are exported there too
    (``dpone.runtime.legacy_export``); None for a manifest without it."""
    warnings: tuple[ErrorDetail, ...]
    """The compiler's warnings about the manifest as written (a deprecated key)."""

    @property
    def is_production(self) -> bool:
        return is_production(self.environment)

    @property
    def contract_fingerprint(self) -> str:
        """``sha256:`` over the declared columns (names, types, nullability): what a producer's
        mark on a prevalidated Parquet file must carry (``dpone.prevalidated_metadata``)."""
        return contract_fingerprint(self.sink.contract)

    @property
    def secret_names(self) -> tuple[str, ...]:
        refs = [r for r in (self.source.connection, self.sink.connection) if r is not None]
        refs.extend(self.source.secrets)
        return tuple(dict.fromkeys(n for r in refs for n in r.names))

    def to_json(self) -> dict[str, Any]:
        """``dpone.plan.v1``: what will run, with secrets as their ``${VAR}`` references."""
        return {
            "schema": PLAN_SCHEMA_ID,
            "name": self.name,
            "fingerprint": self.fingerprint,
            "environment": self.environment,
            "production": self.is_production,
            "secrets": list(self.secret_names),
            "assertions": [a.to_json() for a in self.quality.assertions],
            "manifest": self.document,
        }
