"""The DLQ policy: defaults and hard bounds (SPEC §5, seed 004).

Pure data. The manifest compiler builds it from ``sink.options.dlq``; the store enforces it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, get_args

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


@dataclass(frozen=True, slots=True)
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

    def preserve_allowed(self, environment: str) -> bool:
        """Whether this policy may run in ``environment`` (preserve never in production)."""
        return self.pii_policy != "preserve" or not is_production(environment)

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
