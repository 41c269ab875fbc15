"""Logical types, the declared contract, and the vectorized enforcement engine (SPEC §3).

``ContractEnforcementService(contract).enforce(batch, existing_schema=...)`` is the entry point;
``docs/contracts.md`` lists every accepted text form and coercion. The names below are
imported on first use: the manifest compiler imports ``dpone.contracts.spec`` without Arrow.
The conversion kernel is ``dpone.contracts.convert.convert`` (not re-exported here: a lazy
package attribute cannot share its name with a submodule).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.contracts.enforcer import ContractEnforcementService
    from dpone.contracts.errors import (
        ContractDefinitionError,
        ContractError,
        ContractViolation,
        SchemaFrozen,
    )
    from dpone.contracts.kernels import Conversion
    from dpone.contracts.reasons import ReasonCode
    from dpone.contracts.result import (
        TABLE_SCOPE,
        Action,
        Diagnostic,
        EnforcementResult,
        Rejects,
        RowRejection,
        Violation,
    )
    from dpone.contracts.spec import ColumnSpec, ContractSpec, EvolutionSpec, TypeInferenceSpec
    from dpone.contracts.types import (
        arrow_type,
        sink_field,
        sink_schema,
        spec_from_arrow,
        type_label,
    )

__getattr__, __dir__ = exports(
    __name__,
    {
        "ContractEnforcementService": "dpone.contracts.enforcer",
        "ContractDefinitionError": "dpone.contracts.errors",
        "ContractError": "dpone.contracts.errors",
        "ContractViolation": "dpone.contracts.errors",
        "SchemaFrozen": "dpone.contracts.errors",
        "Conversion": "dpone.contracts.kernels",
        "ReasonCode": "dpone.contracts.reasons",
        "TABLE_SCOPE": "dpone.contracts.result",
        "Action": "dpone.contracts.result",
        "Diagnostic": "dpone.contracts.result",
        "EnforcementResult": "dpone.contracts.result",
        "RowRejection": "dpone.contracts.result",
        "Rejects": "dpone.contracts.result",
        "Violation": "dpone.contracts.result",
        "ColumnSpec": "dpone.contracts.spec",
        "ContractSpec": "dpone.contracts.spec",
        "EvolutionSpec": "dpone.contracts.spec",
        "TypeInferenceSpec": "dpone.contracts.spec",
        "arrow_type": "dpone.contracts.types",
        "sink_field": "dpone.contracts.types",
        "sink_schema": "dpone.contracts.types",
        "spec_from_arrow": "dpone.contracts.types",
        "type_label": "dpone.contracts.types",
    },
)

__all__ = [
    "TABLE_SCOPE",
    "Action",
    "ColumnSpec",
    "ContractDefinitionError",
    "ContractEnforcementService",
    "ContractError",
    "ContractSpec",
    "ContractViolation",
    "Conversion",
    "Diagnostic",
    "EnforcementResult",
    "EvolutionSpec",
    "ReasonCode",
    "Rejects",
    "RowRejection",
    "SchemaFrozen",
    "TypeInferenceSpec",
    "Violation",
    "arrow_type",
    "sink_field",
    "sink_schema",
    "spec_from_arrow",
    "type_label",
]
