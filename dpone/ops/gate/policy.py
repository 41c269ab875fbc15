"""The release gate's policy (SPEC §7): what a release accepts, from flags and a policy file.

The default protects without flags: a failed run or a failed quality gate blocks, a run that
read rows but loaded none blocks, and at most 1% of the rows read may be quarantined. A
policy file (``dpone.gate-policy.v1``, YAML or JSON) sets the same knobs for a CI step;
a flag given on the command line overrides the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, get_args

from dpone.errors import ConfigError, Stage
from dpone.evidence.model import DataOutcome
from dpone.records import frozen

POLICY_SCHEMA_ID = "dpone.gate-policy.v1"
DATA_OUTCOMES: tuple[str, ...] = get_args(DataOutcome)
DEFAULT_ALLOWED_OUTCOMES: tuple[str, ...] = (
    "passed",
    "passed_with_quarantine",
    "passed_with_warnings",
)
#: At most 1% of the rows read may be quarantined unless the policy says otherwise.
DEFAULT_MAX_QUARANTINE_RATIO = Fraction(1, 100)
#: A policy file is a handful of keys: anything this large is not one.
MAX_POLICY_BYTES = 64 * 1024


class GateUsageError(ConfigError):
    """The gate was called wrongly (exit 2): no bundles, a missing path, a bad option value."""

    code = "DPONE_GATE_USAGE"
    stage: Stage = "release_gate"


@frozen
class GatePolicy:
    """What a release accepts. ``max_quarantine_ratio`` is exact (``Fraction("0.1")``)."""

    allowed_outcomes: tuple[str, ...] = DEFAULT_ALLOWED_OUTCOMES
    max_quarantine_ratio: Fraction = DEFAULT_MAX_QUARANTINE_RATIO
    require_signature: bool = False
    allow_empty: bool = False
    #: the policy file the values came from, as given (None: flags and defaults only)
    source: str | None = None

    @classmethod
    def parse(
        cls,
        outcomes: Sequence[str],
        max_ratio: str | None,
        *,
        require_signature: bool = False,
        allow_unsigned: bool = False,
        allow_empty: bool | None = None,
        policy_file: str | os.PathLike[str] | None = None,
    ) -> GatePolicy:
        """The policy from a policy file and command-line values (a value given here wins
        over the file's); :class:`GateUsageError` for a bad one.

        Signatures are required whenever a signing key is configured, unless
        ``allow_unsigned``; ``require_signature`` without a key is a usage error."""
        file: Mapping[str, Any] = {} if policy_file is None else load_policy_file(policy_file)
        chosen = list(outcomes) or list(file.get("allowed_outcomes", ()))
        unknown = [o for o in chosen if o not in DATA_OUTCOMES]
        if unknown:
            raise GateUsageError(
                "--allow-outcome names an outcome that does not exist",
                code="DPONE_GATE_POLICY_INVALID",
                fixes=(f"use one of: {', '.join(DATA_OUTCOMES)}",),
            )
        allowed = tuple(o for o in DATA_OUTCOMES if o in chosen) or DEFAULT_ALLOWED_OUTCOMES
        ratio = DEFAULT_MAX_QUARANTINE_RATIO
        if max_ratio is None and "max_quarantine_ratio" in file:
            ratio = Fraction(str(file["max_quarantine_ratio"]))
        elif max_ratio is not None:
            ratio = _ratio(max_ratio)
        from dpone.signing import required

        require = required(
            require_signature=require_signature or bool(file.get("require_signature", False)),
            allow_unsigned=allow_unsigned
            or (not require_signature and bool(file.get("allow_unsigned", False))),
        )
        empty = bool(file.get("allow_empty", False)) if allow_empty is None else allow_empty
        shown = None if policy_file is None else os.fspath(policy_file)
        return cls(allowed, ratio, require, empty, shown)

    def to_json(self) -> dict[str, Any]:
        return {
            "allowed_outcomes": list(self.allowed_outcomes),
            "max_quarantine_ratio": float(self.max_quarantine_ratio),
            "require_signature": self.require_signature,
            "allow_empty": self.allow_empty,
            "policy_file": self.source,
        }


def _ratio(text: str) -> Fraction:
    try:
        ratio = Fraction(text.strip())
    except (ValueError, ZeroDivisionError):
        ratio = Fraction(-1)
    if not 0 <= ratio <= 1:
        raise GateUsageError(
            "--max-quarantine-ratio must be a number from 0 to 1",
            code="DPONE_GATE_POLICY_INVALID",
            fixes=("for example --max-quarantine-ratio 0.01 (at most 1% of rows read)",),
        )
    return ratio


def load_policy_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A ``dpone.gate-policy.v1`` file (YAML or JSON), validated against its schema.

    Typed errors: ``DPONE_GATE_POLICY_NOT_FOUND`` (missing or unreadable),
    ``DPONE_GATE_POLICY_INVALID`` (not YAML/JSON, or breaks the schema); neither quotes the
    file's content."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from dpone.published import validator

    shown = os.fspath(path)
    try:
        with Path(path).open("rb") as handle:
            data = handle.read(MAX_POLICY_BYTES + 1)
    except OSError:
        raise GateUsageError(
            "the gate policy file cannot be read",
            code="DPONE_GATE_POLICY_NOT_FOUND",
            path=shown,
            fixes=("check the path given to --policy",),
        ) from None
    fixes = (
        "write a mapping with allowed_outcomes, max_quarantine_ratio, allow_empty, "
        "require_signature or allow_unsigned (see docs/release-gate.md)",
    )
    if len(data) > MAX_POLICY_BYTES:
        raise GateUsageError(
            "the gate policy file is larger than any policy may be",
            code="DPONE_GATE_POLICY_INVALID",
            path=shown,
            fixes=fixes,
        )
    try:
        doc = YAML(typ="safe", pure=True).load(data.decode("utf-8"))
    except (YAMLError, UnicodeDecodeError):
        raise GateUsageError(
            "the gate policy file is not YAML or JSON",
            code="DPONE_GATE_POLICY_INVALID",
            path=shown,
            fixes=fixes,
        ) from None
    error = next(iter(validator(POLICY_SCHEMA_ID).iter_errors(doc)), None)
    if error is not None:
        where = "/" + "/".join(str(p) for p in error.absolute_path)
        raise GateUsageError(
            f"the gate policy file breaks the {POLICY_SCHEMA_ID} schema's "
            f"'{error.validator}' rule at {where}",
            code="DPONE_GATE_POLICY_INVALID",
            path=shown,
            fixes=fixes,
        )
    if doc.get("require_signature") and doc.get("allow_unsigned"):
        raise GateUsageError(
            "the gate policy file both requires signatures and allows unsigned bundles",
            code="DPONE_GATE_POLICY_INVALID",
            path=shown,
            fixes=("keep at most one of require_signature and allow_unsigned",),
        )
    result: dict[str, Any] = doc
    return result


__all__ = [
    "DATA_OUTCOMES",
    "DEFAULT_ALLOWED_OUTCOMES",
    "DEFAULT_MAX_QUARANTINE_RATIO",
    "POLICY_SCHEMA_ID",
    "GatePolicy",
    "GateUsageError",
    "load_policy_file",
]
