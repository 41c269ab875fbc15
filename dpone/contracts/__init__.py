"""Logical types, the declared contract, and the vectorized enforcement engine (SPEC §3).

``ContractEnforcementService(contract).enforce(batch, existing_schema=...)`` is the entry point;
``docs/contracts.md`` lists every accepted text form and coercion.
"""

from dpone.contracts.convert import convert
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
from dpone.contracts.types import arrow_type, sink_field, sink_schema, spec_from_arrow, type_label

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
    "convert",
    "sink_field",
    "sink_schema",
    "spec_from_arrow",
    "type_label",
]
