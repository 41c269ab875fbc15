"""The DLQ policy: defaults and hard bounds (SPEC §5, seed 004).

Pure data, so it lives in the bottom layer: the manifest compiler builds it from
``sink.options.dlq``, the store enforces it, and seed 004's Python API builds it with
:meth:`DlqPolicy.from_config`. ``dpone.dlq`` re-exports ``DlqPolicy``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, get_args

from dpone.errors import ConfigError, ErrorDetail
from dpone.records import frozen

PiiPolicy = Literal["reference_only", "masked", "preserve"]
PII_POLICIES: tuple[str, ...] = get_args(PiiPolicy)

# (default, minimum, maximum) per limit; the JSON Schema carries the same numbers (tested).
RETENTION_DAYS = (30, 1, 3650)
MAX_RECORD_BYTES = (262_144, 4_096, 1_048_576)
MAX_DIAGNOSTIC_BYTES = (16_384, 1_024, 65_536)
MAX_RECORDS_PER_RUN = (100_000, 1, 1_000_000)
MAX_INDEX_BYTES = (67_108_864, 1_048_576, 536_870_912)
# A segment holds at least one record of the largest allowed size.
MAX_SEGMENT_BYTES = (67_108_864, 1_048_576, 1_073_741_824)
#: Where seed 004's Python API keeps the store when ``directory`` is not given (a manifest's
#: default is ``<runtime.work_dir>/dlq``, which is this path with the default work_dir).
DEFAULT_DIRECTORY = ".dpone/dlq"

LIMITS: dict[str, tuple[int, int, int]] = {
    "retention_days": RETENTION_DAYS,
    "max_record_bytes": MAX_RECORD_BYTES,
    "max_diagnostic_bytes": MAX_DIAGNOSTIC_BYTES,
    "max_records_per_run": MAX_RECORDS_PER_RUN,
    "max_index_bytes": MAX_INDEX_BYTES,
    "max_segment_bytes": MAX_SEGMENT_BYTES,
}


def is_production(environment: str) -> bool:
    """SPEC §2: ``production`` or any ``prod*`` environment forbids ``pii_policy: preserve``.

    The one rule for the compiler, the plan and the store. A manifest's environment is
    lower-case by its schema; a caller of the store may pass any text, so case and
    surrounding blanks are ignored (``PROD-eu`` is production): a PII guard errs on refusing.
    """
    return environment.strip().lower().startswith("prod")


@frozen
class DlqPolicy:
    """How rejected rows are kept. ``directory`` is absolute once the plan is compiled."""

    directory: str
    enabled: bool = True
    retention_days: int = RETENTION_DAYS[0]
    pii_policy: PiiPolicy = "reference_only"
    max_record_bytes: int = MAX_RECORD_BYTES[0]
    max_diagnostic_bytes: int = MAX_DIAGNOSTIC_BYTES[0]
    max_records_per_run: int = MAX_RECORDS_PER_RUN[0]
    max_index_bytes: int = MAX_INDEX_BYTES[0]
    max_segment_bytes: int = MAX_SEGMENT_BYTES[0]

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None = None) -> DlqPolicy:
        """The policy of a ``dlq`` mapping as a manifest writes it (seed 004's defaults).

        Every problem is reported at once as a :class:`~dpone.errors.ConfigError` whose
        ``details`` name the key (codes as the manifest compiler's); ``directory`` is kept as
        written (relative to the working directory of the caller).
        """
        doc = dict(config or {})
        errors = _config_errors(doc)
        if errors:
            raise ConfigError(
                errors[0].message
                if len(errors) == 1
                else f"the dlq policy has {len(errors)} errors",
                code=errors[0].code if len(errors) == 1 else None,
                pointer=errors[0].pointer if len(errors) == 1 else None,
                fixes=errors[0].fixes if len(errors) == 1 else (),
                details=errors,
            )
        doc.setdefault("directory", DEFAULT_DIRECTORY)
        return cls(**{k: v for k, v in doc.items() if k in _FIELDS})

    def out_of_range(self) -> list[tuple[str, int, int, int]]:
        """Every limit outside its bound, as (name, value, minimum, maximum)."""
        bad = []
        for name, (_, low, high) in LIMITS.items():
            value = getattr(self, name)
            if not low <= value <= high:
                bad.append((name, value, low, high))
        if self.max_diagnostic_bytes > self.max_record_bytes:
            bad.append(
                ("max_diagnostic_bytes", self.max_diagnostic_bytes, 1_024, self.max_record_bytes)
            )
        return bad

    def to_json(self) -> dict[str, Any]:
        return {
            "enabled": self.enabled,
            "directory": self.directory,
            "retention_days": self.retention_days,
            "pii_policy": self.pii_policy,
            "max_record_bytes": self.max_record_bytes,
            "max_diagnostic_bytes": self.max_diagnostic_bytes,
            "max_records_per_run": self.max_records_per_run,
            "max_index_bytes": self.max_index_bytes,
            "max_segment_bytes": self.max_segment_bytes,
        }


_FIELDS = ("enabled", "directory", "pii_policy", *LIMITS)


def _config_error(code: str, message: str, key: str, fix: str) -> ErrorDetail:
    return ErrorDetail(
        code=code, message=message, stage="validate", pointer=f"/dlq/{key}", fixes=(fix,)
    )


def _config_errors(doc: Mapping[str, Any]) -> list[ErrorDetail]:
    """The checks of the manifest schema's ``dlq`` block and the compiler's limit checks."""
    errors = [
        _config_error(
            "DPONE_MANIFEST_UNKNOWN_KEY",
            f"unknown key {key!r} in dlq",
            str(key),
            f"keys allowed here: {', '.join(sorted(_FIELDS))}",
        )
        for key in doc
        if key not in _FIELDS and not str(key).startswith("x-")
    ]
    if "enabled" in doc and type(doc["enabled"]) is not bool:
        errors.append(
            _config_error(
                "DPONE_MANIFEST_TYPE",
                "dlq.enabled must be a boolean",
                "enabled",
                "use true or false",
            )
        )
    directory = doc.get("directory", DEFAULT_DIRECTORY)
    if not isinstance(directory, str) or not directory:
        errors.append(
            _config_error(
                "DPONE_MANIFEST_TYPE",
                "dlq.directory must be a non-empty string",
                "directory",
                "name a folder, e.g. .dpone/dlq",
            )
        )
    if doc.get("pii_policy", "reference_only") not in PII_POLICIES:
        errors.append(
            _config_error(
                "DPONE_MANIFEST_ENUM",
                f"dlq.pii_policy must be one of: {', '.join(PII_POLICIES)}",
                "pii_policy",
                "use reference_only (the default) or masked",
            )
        )
    for name, (default, low, high) in LIMITS.items():
        value = doc.get(name, default)
        if type(value) is not int:
            errors.append(
                _config_error(
                    "DPONE_MANIFEST_TYPE",
                    f"dlq.{name} must be an integer",
                    name,
                    f"use a value in {low}..{high}",
                )
            )
        elif not low <= value <= high:
            errors.append(
                _config_error(
                    "DPONE_MANIFEST_DLQ_LIMIT",
                    f"dlq.{name} must be between {low} and {high}",
                    name,
                    f"use a value in {low}..{high}",
                )
            )
    record = doc.get("max_record_bytes", MAX_RECORD_BYTES[0])
    diagnostic = doc.get("max_diagnostic_bytes", MAX_DIAGNOSTIC_BYTES[0])
    if type(record) is int and type(diagnostic) is int and diagnostic > record:
        errors.append(
            _config_error(
                "DPONE_MANIFEST_DLQ_LIMIT",
                "dlq.max_diagnostic_bytes must not exceed dlq.max_record_bytes",
                "max_diagnostic_bytes",
                "lower max_diagnostic_bytes or raise max_record_bytes",
            )
        )
    return errors


__all__ = [
    "DEFAULT_DIRECTORY",
    "LIMITS",
    "MAX_DIAGNOSTIC_BYTES",
    "MAX_INDEX_BYTES",
    "MAX_RECORDS_PER_RUN",
    "MAX_RECORD_BYTES",
    "MAX_SEGMENT_BYTES",
    "PII_POLICIES",
    "RETENTION_DAYS",
    "DlqPolicy",
    "PiiPolicy",
    "is_production",
]
