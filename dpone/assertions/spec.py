"""The assertions' own data: what a manifest configures (:class:`AssertionSpec`, which the
compiler builds) and what a run concludes (:class:`AssertionVerdict`, which evidence carries).

Pure data, no Arrow: the manifest compiler and the evidence model import it, never the
reverse.
"""

from __future__ import annotations

from typing import Any, Literal

from dpone.records import frozen

Scope = Literal["row", "batch"]
#: How the compiler checks an assertion's value: a row count, contract column names, anything.
ValueKind = Literal["count", "columns", "any"]
Policy = Literal["fail", "quarantine", "warn"]
Verdict = Literal["passed", "failed", "warned", "quarantined"]


@frozen
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


@frozen
class AssertionVerdict:
    """What a run concluded about one assertion, with the rows it judged and those that failed."""

    name: str
    type: str
    scope: Scope
    on_failure: Policy
    verdict: Verdict
    failed_rows: int = 0
    observed_rows: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "type": self.type,
            "scope": self.scope,
            "on_failure": self.on_failure,
            "verdict": self.verdict,
            "failed_rows": self.failed_rows,
            "observed_rows": self.observed_rows,
        }


__all__ = ["AssertionSpec", "AssertionVerdict", "Policy", "Scope", "ValueKind", "Verdict"]
