"""The legacy top-level ``quarantine: {dir: ...}``: readable for a deprecation window, with a
warning naming its replacement, and refused in production (its raw export keeps row values,
as ``pii_policy: preserve`` does; ``checks.dlq`` refuses that one the same way)."""

from __future__ import annotations

from dpone.contracts.dlq import is_production
from dpone.errors import ErrorDetail
from dpone.manifest.context import DLQ, LEGACY_QUARANTINE, CompileContext, Document

#: The release that stops reading ``quarantine.dir`` (docs/manifest.md says the same).
REMOVED_IN = "1.0"
LEGACY_DIR = f"{LEGACY_QUARANTINE}/dir"
REPLACEMENT = "sink.options.dlq.directory"


def check_legacy_quarantine(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """The raw JSONL export holds every rejected row's values: never in production. It
    exports what the DLQ receives, so the DLQ cannot be disabled beside it."""
    if "quarantine" not in doc:
        return []
    errors = []
    if not doc["sink"]["options"]["dlq"]["enabled"]:
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_DLQ_DISABLED",
                "the DLQ cannot be disabled while quarantine.dir exports its rejected rows",
                f"{DLQ}/enabled",
                fixes=("remove `enabled: false`", "or remove `quarantine:`"),
            )
        )
    if is_production(doc["environment"]):
        errors.append(
            ctx.error(
                "DPONE_MANIFEST_LEGACY_EXPORT_IN_PRODUCTION",
                "quarantine.dir keeps a raw JSONL export of rejected row values and is refused "
                "in production",
                LEGACY_DIR,
                fixes=(
                    f"remove `quarantine:`; rejected rows go to the DLQ at {REPLACEMENT} "
                    "(reference_only: no row values)",
                ),
            )
        )
    return errors


def deprecations(doc: Document, ctx: CompileContext) -> list[ErrorDetail]:
    """The deprecation warnings of a document as written (before any pass): they do not stop
    the compiler; ``dpone validate`` and ``dpone run`` show them."""
    legacy = doc.get("quarantine")
    if not isinstance(legacy, dict) or "dir" not in legacy:
        return []
    if ctx.manifest.mark(f"{DLQ}/directory") is None:
        fix = (
            f"move the value to {REPLACEMENT} and remove `quarantine:`: the DLQ stays in the "
            "same folder, and rejected row values are no longer exported"
        )
    else:
        fix = (
            f"remove `quarantine:`: the DLQ is at {REPLACEMENT} already, and rejected row "
            "values are no longer exported"
        )
    return [
        ctx.error(
            "DPONE_MANIFEST_DEPRECATED_KEY",
            f"quarantine.dir is deprecated and is replaced by {REPLACEMENT}; it is read until "
            f"dpone {REMOVED_IN} and its raw JSONL export holds rejected row values (sensitive)",
            LEGACY_DIR,
            at_key=True,
            fixes=(fix,),
            severity="warning",
        )
    ]
