"""The compiled, typed plan of one manifest: frozen data that the runtime executes.

Paths are absolute here (resolved against the manifest's folder); the normalized document
kept in :attr:`Plan.document` holds them as the user wrote them, which is what the
fingerprint and ``dpone plan`` show.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from dpone.contracts.spec import ContractSpec
from dpone.dlq.policy import DlqPolicy
from dpone.manifest.secrets import SecretRef

PLAN_SCHEMA_ID = "dpone.plan.v1"

SourceType = Literal["file", "python", "duckdb", "sqlite", "postgres"]
SinkType = Literal["duckdb", "postgres", "filesystem", "dlt"]
StrategyMode = Literal["append", "replace", "merge"]
Policy = Literal["fail", "quarantine", "warn"]
Scope = Literal["row", "batch"]


@dataclass(frozen=True, slots=True)
class IncrementalPlan:
    cursor_column: str
    initial_value: str | int | float | None = None


@dataclass(frozen=True, slots=True)
class SourcePlan:
    type: SourceType
    config: dict[str, Any]
    """The normalized ``source`` section (defaults applied, paths as written)."""
    base_dir: Path
    connection: SecretRef | None = None
    incremental: IncrementalPlan | None = None

    @property
    def format(self) -> str | None:
        value = self.config.get("format")
        return str(value) if value is not None else None


@dataclass(frozen=True, slots=True)
class StrategyPlan:
    mode: StrategyMode = "append"
    unique_key: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SinkPlan:
    type: SinkType
    config: dict[str, Any]
    """The normalized ``sink`` section without ``options`` (paths as written)."""
    dataset: str
    table: str
    strategy: StrategyPlan
    contract: ContractSpec
    dlq: DlqPolicy
    evidence_dir: Path
    database: Path | None = None
    path: Path | None = None
    connection: SecretRef | None = None


@dataclass(frozen=True, slots=True)
class AssertionSpec:
    """One configured assertion, its policy already resolved by precedence."""

    type: str
    params: dict[str, Any]
    on_failure: Policy
    pointer: str
    name: str

    def to_json(self) -> dict[str, Any]:
        return {
            "type": self.type,
            "name": self.name,
            "params": self.params,
            "on_failure": self.on_failure,
        }


@dataclass(frozen=True, slots=True)
class QualityPlan:
    on_failure: Policy = "fail"
    assertions: tuple[AssertionSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class RuntimePlan:
    work_dir: Path
    chunk_size: int


@dataclass(frozen=True, slots=True)
class Plan:
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

    @property
    def is_production(self) -> bool:
        return is_production(self.environment)

    @property
    def secret_names(self) -> tuple[str, ...]:
        refs = [r for r in (self.source.connection, self.sink.connection) if r is not None]
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


def is_production(environment: str) -> bool:
    return environment == "production" or environment.startswith("prod")
