"""``SchemaContract.from_config``: seed 004's schema contract, built by the manifest compiler.

A mapping written as a manifest's ``sink.options.schema_contract`` becomes the same
:class:`~dpone.contracts.spec.ContractSpec` a ``dpone run`` enforces: the mapping is placed in
a minimal manifest and compiled by the real compiler, so the schema, the defaults, the static
checks and the error codes are the compiler's own (a bad mapping raises its
:class:`~dpone.errors.ManifestError`, a :class:`~dpone.errors.ConfigError`, whose details point
at ``/sink/options/schema_contract/...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dpone.contracts.spec import ContractSpec, Enforcement
from dpone.manifest.compiler import compile_loaded
from dpone.manifest.loader import LoadedManifest
from dpone.records import frozen

#: What the contract is compiled inside of; nothing of it reaches the contract.
_DISPLAY = "schema_contract"
_SKELETON_NAME = "schema_contract"


def _skeleton(options: dict[str, Any]) -> dict[str, Any]:
    # A file source and a replace strategy carry no rule that depends on the contract's mode
    # (append + coerce on a re-read source is a manifest error of its own).
    return {
        "kind": "dpone.manifest.v1",
        "name": _SKELETON_NAME,
        "source": {"type": "file", "format": "csv", "path": "rows.csv"},
        "sink": {
            "type": "duckdb",
            "database": "target.duckdb",
            "table": "rows",
            "strategy": {"mode": "replace"},
            "options": options,
        },
    }


@frozen
class SchemaContract:
    """A compiled schema contract; ``spec`` is what the enforcement engine takes."""

    spec: ContractSpec

    @classmethod
    def from_config(
        cls,
        config: Mapping[str, Any],
        *,
        type_inference: Mapping[str, Any] | None = None,
    ) -> SchemaContract:
        """Compile ``config``: a ``schema_contract`` mapping, or a whole ``sink.options``
        mapping (``schema_contract`` with ``type_inference`` beside it, as seed 004 writes
        it). ``type_inference`` may also be given on its own."""
        if "schema_contract" in config:
            options: dict[str, Any] = {k: v for k, v in config.items()}
        else:
            options = {"schema_contract": dict(config)}
        if type_inference is not None:
            options["type_inference"] = dict(type_inference)
        manifest = LoadedManifest(
            Path.cwd() / f"{_SKELETON_NAME}.yaml", _DISPLAY, _skeleton(options), {}
        )
        return cls(compile_loaded(manifest).sink.contract)

    @property
    def enforcement(self) -> Enforcement:
        return self.spec.enforcement

    def to_json(self) -> dict[str, Any]:
        return self.spec.to_json()


__all__ = ["SchemaContract"]
