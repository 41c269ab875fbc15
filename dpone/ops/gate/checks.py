"""The release gate: may the runs behind these evidence bundles be released? (SPEC §7)

For each bundle the gate goes through three steps and stops at the first that fails, because
what a bundle says cannot be trusted before it verifies:

1. *where it is*: a regular file inside one of the roots (:mod:`dpone.ops.gate.confine`);
2. *what it is*: JSON that validates against ``dpone.data_contract_evidence.v1`` and whose
   ``sha256`` verifies;
3. *what it points to*: the DLQ index named by ``dlq.index_ref`` (relative to the bundle's
   folder, confined like the bundle), which verifies by itself (checksum, the index model's
   own consistency checks) and matches the bundle: run id, fingerprint, record count, reasons,
   run status; closed when the run succeeded. No index means no records.

Then the policy (:mod:`dpone.ops.gate.policy`): the run succeeded, its data outcome is
allowed, and the share of quarantined rows is at most the maximum.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dpone.canonical import verify_checksum
from dpone.clock import Clock, iso_utc, utc_now
from dpone.dlq.errors import DlqIndexInvalid
from dpone.dlq.index import INDEX_SCHEMA, DlqIndex
from dpone.dlq.layout import HARD_MAX_INDEX_BYTES
from dpone.evidence.model import EVIDENCE_SCHEMA_ID
from dpone.ops.gate.confine import WHAT, Refused, confine, parse, pointer, read_confined, real_root
from dpone.ops.gate.policy import GatePolicy, GateUsageError
from dpone.ops.gate.report import (
    BundleResult,
    GateCode,
    GateFinding,
    GateReport,
    Subject,
    quarantine_ratio,
)

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore

#: An evidence bundle holds counts, not rows: anything this large is not one.
MAX_EVIDENCE_BYTES = 16 * 1024 * 1024
#: Schema findings listed per bundle; the rest are counted in one more finding.
MAX_SCHEMA_FINDINGS = 20


def evaluate(
    bundles: Sequence[str | os.PathLike[str]],
    policy: GatePolicy | None = None,
    roots: Sequence[str | os.PathLike[str]] = (),
    *,
    cwd: Path | None = None,
    clock: Clock = utc_now,
) -> GateReport:
    """Check every bundle against ``policy``. Relative paths are taken from ``cwd``
    (default: the current directory), which is also the only root when none is given."""
    policy = policy or GatePolicy()
    base = cwd if cwd is not None else Path.cwd()
    if not bundles:
        raise GateUsageError(
            "no evidence bundle was given",
            code="DPONE_GATE_NO_EVIDENCE",
            fixes=("pass one or more data_contract_evidence.json files",),
        )
    given_roots = [os.fspath(r) for r in roots] or ["."]
    real_roots = [real_root(base / r, r) for r in given_roots]
    paths = [os.fspath(b) for b in bundles]
    for path in paths:
        if not os.path.lexists(base / path):
            raise GateUsageError(
                "an evidence bundle given on the command line does not exist",
                code="DPONE_GATE_EVIDENCE_NOT_FOUND",
                path=path,
                fixes=("check the path (a shell glob that matched nothing stays as written)",),
            )
    results = tuple(check_bundle(base / p, p, real_roots, policy) for p in paths)
    return GateReport(policy, tuple(given_roots), results, iso_utc(clock()))


def check_bundle(
    path: Path, display: str, roots: Sequence[Path], policy: GatePolicy
) -> BundleResult:
    """The verdict on one bundle at ``path`` (absolute), shown as ``display``."""
    try:
        root, parts = confine(path, roots, "evidence")
        data = read_confined(root, parts, MAX_EVIDENCE_BYTES, "evidence")
        if data is None:
            raise Refused(GateCode.UNREADABLE, "the bundle disappeared while it was read")
        doc = parse(data, "evidence")
    except Refused as refused:
        return BundleResult(display, (refused.finding,))
    integrity = _integrity(doc) or _signature(doc, policy, "evidence")
    if integrity:
        return BundleResult(display, tuple(integrity))
    findings, dlq_records = _dlq_findings(doc, root.joinpath(*parts[:-1]), roots, policy)
    findings += _policy_findings(doc, policy)
    return BundleResult(display, tuple(findings), doc, dlq_records)


def _integrity(doc: Any) -> list[GateFinding]:
    """Schema and checksum problems of a bundle (both, so a tampered one says so)."""
    from dpone.published import validator

    findings = []
    errors = sorted(
        validator(EVIDENCE_SCHEMA_ID).iter_errors(doc), key=lambda e: list(e.absolute_path)
    )
    for err in errors[:MAX_SCHEMA_FINDINGS]:
        findings.append(
            GateFinding(
                GateCode.SCHEMA_INVALID,
                f"the bundle breaks the evidence schema's '{err.validator}' rule",
                pointer=pointer(err.absolute_path),
            )
        )
    if len(errors) > MAX_SCHEMA_FINDINGS:
        findings.append(
            GateFinding(
                GateCode.SCHEMA_INVALID,
                f"and {len(errors) - MAX_SCHEMA_FINDINGS} more schema problems",
            )
        )
    if not isinstance(doc, dict) or not verify_checksum(doc):
        findings.append(
            GateFinding(
                GateCode.CHECKSUM_MISMATCH,
                "the bundle's sha256 is not the checksum of its content: it changed after "
                "it was written",
                pointer="/sha256",
            )
        )
    return findings


def _signature(doc: Any, policy: GatePolicy, subject: Subject) -> list[GateFinding]:
    """A keyed signature that does not verify (always), or is missing (when required)."""
    from dpone import signing

    found = signing.problem(
        doc, signing.keyring(), require=policy.require_signature, what=WHAT[subject]
    )
    if found is None:
        return []
    code = (
        GateCode.SIGNATURE_MISSING
        if found[0] == "DPONE_SIGNATURE_MISSING"
        else (GateCode.SIGNATURE_INVALID)
    )
    return [GateFinding(code, f"{found[1]} ({found[0]})", subject, "/signature")]


def _dlq_findings(
    doc: Mapping[str, Any], folder: Path, roots: Sequence[Path], policy: GatePolicy
) -> tuple[list[GateFinding], int | None]:
    """What is wrong between the bundle and its DLQ index; and the index's record count."""
    dlq = doc["dlq"]
    if dlq["index_ref"] is None:
        claims = dlq["record_count"], doc["summary"]["rows_quarantined"], dlq["index_fingerprint"]
        if any(claims):
            return [
                GateFinding(
                    GateCode.DLQ_INDEX_MISSING,
                    "the bundle reports dead letters but names no DLQ index",
                    pointer="/dlq/index_ref",
                )
            ], None
        return [], None
    try:
        root, parts = confine(folder / dlq["index_ref"], roots, "dlq_index")
        data = read_confined(root, parts, HARD_MAX_INDEX_BYTES, "dlq_index")
        if data is None:
            raise Refused(
                GateCode.DLQ_INDEX_MISSING,
                "the DLQ index the bundle names does not exist",
                "dlq_index",
            )
        index_doc = parse(data, "dlq_index")
        index = _index(index_doc)
    except Refused as refused:
        return [refused.finding], None
    signature = _signature(index_doc, policy, "dlq_index")
    if signature:
        return signature, index.record_count
    findings = _compare(doc, index)
    if not findings:
        findings = _records(root.joinpath(*parts), index)
    return findings, index.record_count


def _records(index_path: Path, index: DlqIndex) -> list[GateFinding]:
    """The records behind the index: every listed segment read through the store (its bytes
    and each line verified against the index), and the fingerprint recomputed from them.

    The index alone proves nothing about the segments: a record edited out of a segment
    whose index was left alone is caught here.
    """
    from dpone.dlq.errors import DlqError
    from dpone.dlq.index import fingerprint
    from dpone.dlq.store import DlqStore

    run_folder = index_path.parent
    if run_folder.name != index.run_id or run_folder.parent.name != "runs":
        return [
            GateFinding(
                GateCode.DLQ_RECORDS_MISMATCH,
                "the DLQ index is not at runs/<run_id>/index.json of a dead-letter store",
                "dlq_index",
            )
        ]
    store = DlqStore(run_folder.parent.parent)
    try:
        pairs = [(r.record_id, r.sha256) for r in store.iter_records(index.run_id, index)]
        unlisted = _unlisted_segments(store, index)
    except DlqError as err:
        return [
            GateFinding(
                GateCode.DLQ_RECORDS_MISMATCH,
                f"the DLQ records do not verify against their index ({err.code}: {err.message})",
                "dlq_index",
                "/segments",
            )
        ]
    if unlisted:
        return [
            GateFinding(
                GateCode.DLQ_UNLISTED_SEGMENT,
                f"the DLQ run's segments folder holds {unlisted} file(s) its index does not "
                "list (planted, or left by an interrupted write: run `dpone ops dlq verify`)",
                "dlq_index",
                "/segments",
            )
        ]
    if len(pairs) != index.record_count or fingerprint(pairs) != index.fingerprint:
        return [
            GateFinding(
                GateCode.DLQ_RECORDS_MISMATCH,
                "the DLQ records' fingerprint is not the index's",
                "dlq_index",
                "/fingerprint",
            )
        ]
    return []


def _unlisted_segments(store: DlqStore, index: DlqIndex) -> int:
    """How many entries of the run's segments folder the index does not list.

    Readers that query the segments directly (``read_json('.../segments/*.jsonl')``) see a
    planted segment as records of the run, so a release may not pass over one."""
    from dpone.dlq import fsio
    from dpone.dlq.layout import RUNS_DIR
    from dpone.dlq.segments import SEGMENTS_DIR

    listed = {seg.name for seg in index.segments}
    if not (store.root / RUNS_DIR / index.run_id / SEGMENTS_DIR).exists():
        return 0
    where = f"{RUNS_DIR}/{index.run_id}/{SEGMENTS_DIR}"
    with store.open_path(RUNS_DIR, index.run_id, SEGMENTS_DIR) as fd:
        return sum(entry.name not in listed for entry in fsio.entries(fd, where))


def _index(doc: Any) -> DlqIndex:
    """The verified index: its own checksum, its published schema (so that the model only
    sees well-typed values), then the index model's own consistency checks."""
    from dpone.published import validator

    if not isinstance(doc, dict) or not verify_checksum(doc):
        raise Refused(
            GateCode.CHECKSUM_MISMATCH,
            "the DLQ index's sha256 is not the checksum of its content",
            "dlq_index",
            "/sha256",
        )
    error = next(iter(validator(INDEX_SCHEMA).iter_errors(doc)), None)
    if error is not None:
        raise Refused(
            GateCode.SCHEMA_INVALID,
            f"the DLQ index breaks its schema's '{error.validator}' rule",
            "dlq_index",
            pointer(error.absolute_path),
        )
    try:
        return DlqIndex.from_json(doc)
    except DlqIndexInvalid:
        raise Refused(
            GateCode.SCHEMA_INVALID,
            "the DLQ index is not a consistent dpone.dlq-index.v1 document",
            "dlq_index",
        ) from None


def _compare(doc: Mapping[str, Any], index: DlqIndex) -> list[GateFinding]:
    dlq = doc["dlq"]
    checks = (
        (index.run_id == doc["run_id"], "/run_id", "the DLQ index belongs to another run"),
        (
            index.fingerprint == dlq["index_fingerprint"],
            "/dlq/index_fingerprint",
            "the DLQ index's fingerprint is not the one the bundle pins",
        ),
        (
            index.record_count == dlq["record_count"],
            "/dlq/record_count",
            "the DLQ index holds another number of records than the bundle reports",
        ),
        (
            dict(index.reason_counts) == dict(dlq["reasons"]),
            "/dlq/reasons",
            "the DLQ index counts other reasons than the bundle reports",
        ),
        (
            dlq["run_status"] is None or index.status == dlq["run_status"],
            "/dlq/run_status",
            "the DLQ index's status is not the one the bundle reports",
        ),
    )
    findings = [
        GateFinding(GateCode.DLQ_INDEX_MISMATCH, message, pointer=pointer)
        for ok, pointer, message in checks
        if not ok
    ]
    if doc["execution_status"] == "succeeded" and index.status != "closed":
        findings.append(
            GateFinding(
                GateCode.DLQ_INDEX_NOT_CLOSED,
                "the run succeeded but its DLQ index is not closed",
                "dlq_index",
                "/status",
            )
        )
    return findings


def _policy_findings(doc: Mapping[str, Any], policy: GatePolicy) -> list[GateFinding]:
    findings = []
    if doc["execution_status"] != "succeeded":
        findings.append(
            GateFinding(
                GateCode.EXECUTION_FAILED,
                "the run failed: nothing of it was loaded",
                pointer="/execution_status",
            )
        )
    if doc["data_outcome"] not in policy.allowed_outcomes:
        findings.append(
            GateFinding(
                GateCode.OUTCOME_NOT_ALLOWED,
                "the run's data outcome is not one the policy allows",
                pointer="/data_outcome",
            )
        )
    if quarantine_ratio(doc) > policy.max_quarantine_ratio:
        findings.append(
            GateFinding(
                GateCode.QUARANTINE_RATIO,
                "the share of quarantined rows is above the policy's maximum",
                pointer="/summary/rows_quarantined",
            )
        )
    summary = doc["summary"]
    # A failed run loaded nothing by definition and is blocked above already.
    succeeded = doc["execution_status"] == "succeeded"
    if succeeded and not policy.allow_empty and summary["rows_read"] and not summary["rows_loaded"]:
        findings.append(
            GateFinding(
                GateCode.EMPTY_LOAD,
                "the run read rows but loaded none (pass --allow-empty if that is expected)",
                pointer="/summary/rows_loaded",
            )
        )
    return findings


__all__ = ["MAX_EVIDENCE_BYTES", "check_bundle", "evaluate"]
