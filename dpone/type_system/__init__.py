"""Seed 004's enforcement service over Python rows (``ContractEnforcementService``).

The names are imported on first use: the service needs Arrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dpone._lazy import exports

if TYPE_CHECKING:
    from dpone.type_system.enforcement import (
        ContractEnforcementService,
        EnforcementOutcome,
        QuarantineRequired,
        QuarantineWriter,
    )

__getattr__, __dir__ = exports(
    __name__,
    {
        "ContractEnforcementService": "dpone.type_system.enforcement",
        "EnforcementOutcome": "dpone.type_system.enforcement",
        "QuarantineRequired": "dpone.type_system.enforcement",
        "QuarantineWriter": "dpone.type_system.enforcement",
    },
)

__all__ = [
    "ContractEnforcementService",
    "EnforcementOutcome",
    "QuarantineRequired",
    "QuarantineWriter",
]
