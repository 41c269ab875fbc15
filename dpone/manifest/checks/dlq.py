"""The DLQ policy: not disabled while something sends rows to it, no row values kept in
production, limits within their bounds."""

from __future__ import annotations

from dpone.contracts import dlq as dlq_limits
from dpone.errors import ErrorDetail
from dpone.manifest.context import DLQ, CompileContext, Document


def check_dlq(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    dlq = doc["sink"]["options"]["dlq"]
    errors = []
    needs = _dead_letter_uses(doc) if not dlq["enabled"] else []
    if needs:
        what, fix = needs[0]
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_DLQ_DISABLED",
                f"the DLQ cannot be disabled while {what} sends rows to it",
                f"{DLQ}/enabled",
                fixes=("remove `enabled: false`", fix),
            )
        )
    if dlq["pii_policy"] == "preserve" and dlq_limits.is_production(doc["environment"]):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_PII_PRESERVE_IN_PRODUCTION",
                "pii_policy preserve keeps row values and is refused in production",
                f"{DLQ}/pii_policy",
                fixes=("use reference_only (the default) or masked",),
            )
        )
    for name, (_, low, high) in dlq_limits.LIMITS.items():
        value = dlq[name]
        if not low <= value <= high:
            errors.append(
                ctx.error(
                    "DPONE_MANIFEST_DLQ_LIMIT",
                    f"dlq.{name} must be between {low} and {high}",
                    f"{DLQ}/{name}",
                    fixes=(f"use a value in {low}..{high}",),
                )
            )
    if dlq["max_diagnostic_bytes"] > dlq["max_record_bytes"]:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_DLQ_LIMIT",
                "dlq.max_diagnostic_bytes must not exceed dlq.max_record_bytes",
                f"{DLQ}/max_diagnostic_bytes",
                fixes=("lower max_diagnostic_bytes or raise max_record_bytes",),
            )
        )
    return errors


def _dead_letter_uses(doc: Document) -> list[tuple[str, str]]:
    """What in the manifest may send a row to the DLQ (SPEC §5: then it cannot be disabled)."""
    options = doc["sink"]["options"]
    contract = options["schema_contract"]
    uses: list[tuple[str, str]] = []
    if contract["enforcement"] == "quarantine":
        uses.append(("enforcement quarantine", "or choose another enforcement mode"))
    elif contract["enforcement"] == "warn":
        # warn loads NULL but these ask for the DLQ by name. (strict fails on a rejected row;
        # coerce's rejects, and warn's NOT NULL ones, are counted when the DLQ is disabled.)
        if options["type_inference"]["conflict_policy"] == "quarantine":
            uses.append(("type_inference.conflict_policy quarantine", "or use fail"))
        if "discard_row" in contract["evolution"].values():
            uses.append(("evolution discard_row", "or use discard_value"))
    assertions = doc["quality"]["assertions"]
    default = assertions["on_failure"]
    for key, value in assertions.items():
        if key == "on_failure":
            continue
        entries = value if key == "custom" else [value]
        for entry in entries:
            if isinstance(entry, dict) and entry.get("on_failure", default) == "quarantine":
                name = entry.get("name") or entry.get("predicate") if key == "custom" else key
                uses.append((f"assertion '{name}' (on_failure quarantine)", "or use fail or warn"))
    return uses
