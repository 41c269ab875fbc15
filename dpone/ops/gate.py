"""The release gate: may the runs behind these evidence bundles be released? (SPEC §7)

Size (over 500 lines): the gate's three steps, its policy and its report are one procedure over
untrusted bundles, read in order.

For each bundle the gate goes through three steps and stops at the first that fails, because
what a bundle says cannot be trusted before it verifies:

1. *where it is*: a regular file inside one of the roots, reached without a symbolic link
   below a root (a root itself, or a folder above it, may be one: the operator chose it);
2. *what it is*: JSON that validates against ``dpone.data_contract_evidence.v1`` and whose
   ``sha256`` verifies;
3. *what it points to*: the DLQ index named by ``dlq.index_ref`` (relative to the bundle's
   folder, confined like the bundle), which verifies by itself (checksum, the index model's
   own consistency checks) and matches the bundle: run id, fingerprint, record count, reasons,
   run status; closed when the run succeeded. No index means no records.

Then the policy: the run succeeded, its data outcome is allowed, and the share of quarantined
rows is at most the maximum. Every finding has a stable ``DPONE_GATE_*`` code and a message
without values; the report ``dpone.release-gate.v1`` is checksummed like every artifact.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

import orjson

from dpone import __version__
from dpone.canonical import verify_checksum, with_checksum
from dpone.clock import Clock, iso_utc, utc_now
from dpone.dlq.errors import DlqIndexInvalid
from dpone.dlq.index import INDEX_SCHEMA, DlqIndex
from dpone.dlq.layout import HARD_MAX_INDEX_BYTES
from dpone.durable import replace_atomic
from dpone.evidence.model import EVIDENCE_SCHEMA_ID
from dpone.ops.gate_policy import (
    DATA_OUTCOMES,
    DEFAULT_ALLOWED_OUTCOMES,
    GatePolicy,
    GateUsageError,
)

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore

GATE_SCHEMA_ID = "dpone.release-gate.v1"
REPORT_JSON = "release_gate.json"
REPORT_MD = "release_gate.md"
#: An evidence bundle holds counts, not rows: anything this large is not one.
MAX_EVIDENCE_BYTES = 16 * 1024 * 1024
#: Schema findings listed per bundle; the rest are counted in one more finding.
MAX_SCHEMA_FINDINGS = 20

Decision = Literal["pass", "blocked"]
Subject = Literal["evidence", "dlq_index"]
SUBJECTS: tuple[str, ...] = get_args(Subject)


class GateCode(StrEnum):
    """Why a bundle is blocked. Stable: CI scripts and people match on these."""

    PATH_REFUSED = "DPONE_GATE_PATH_REFUSED"
    UNREADABLE = "DPONE_GATE_UNREADABLE"
    SCHEMA_INVALID = "DPONE_GATE_SCHEMA_INVALID"
    CHECKSUM_MISMATCH = "DPONE_GATE_CHECKSUM_MISMATCH"
    DLQ_INDEX_MISSING = "DPONE_GATE_DLQ_INDEX_MISSING"
    DLQ_INDEX_MISMATCH = "DPONE_GATE_DLQ_INDEX_MISMATCH"
    DLQ_INDEX_NOT_CLOSED = "DPONE_GATE_DLQ_INDEX_NOT_CLOSED"
    EXECUTION_FAILED = "DPONE_GATE_EXECUTION_FAILED"
    OUTCOME_NOT_ALLOWED = "DPONE_GATE_OUTCOME_NOT_ALLOWED"
    QUARANTINE_RATIO = "DPONE_GATE_QUARANTINE_RATIO"
    SIGNATURE_MISSING = "DPONE_GATE_SIGNATURE_MISSING"
    SIGNATURE_INVALID = "DPONE_GATE_SIGNATURE_INVALID"
    DLQ_RECORDS_MISMATCH = "DPONE_GATE_DLQ_RECORDS_MISMATCH"
    DLQ_UNLISTED_SEGMENT = "DPONE_GATE_DLQ_UNLISTED_SEGMENT"
    EMPTY_LOAD = "DPONE_GATE_EMPTY_LOAD"


# --- results ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateFinding:
    """One reason to block, as data. ``pointer`` is a JSON pointer into ``subject``."""

    code: GateCode
    message: str
    subject: Subject = "evidence"
    pointer: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code.value,
            "message": self.message,
            "subject": self.subject,
            "pointer": self.pointer,
        }


@dataclass(frozen=True, slots=True)
class BundleResult:
    """The verdict on one bundle. ``evidence`` is set only when the bundle verified."""

    path: str
    findings: tuple[GateFinding, ...]
    evidence: Mapping[str, Any] | None = None
    dlq_records: int | None = None

    @property
    def decision(self) -> Decision:
        return "blocked" if self.findings else "pass"

    @property
    def quarantine_ratio(self) -> Fraction | None:
        if self.evidence is None:
            return None
        return quarantine_ratio(self.evidence)

    def to_json(self) -> dict[str, Any]:
        doc = self.evidence or {}
        summary = doc.get("summary", {})
        ratio = self.quarantine_ratio
        return {
            "path": self.path,
            "decision": self.decision,
            "run_id": doc.get("run_id"),
            "pipeline": doc.get("pipeline"),
            "execution_status": doc.get("execution_status"),
            "data_outcome": doc.get("data_outcome"),
            "evidence_sha256": doc.get("sha256"),
            "rows_read": summary.get("rows_read"),
            "rows_quarantined": summary.get("rows_quarantined"),
            "quarantine_ratio": None if ratio is None else float(ratio),
            "dlq_records": self.dlq_records,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True, slots=True)
class GateReport:
    policy: GatePolicy
    roots: tuple[str, ...]
    bundles: tuple[BundleResult, ...]
    generated_at: str

    @property
    def decision(self) -> Decision:
        return "blocked" if any(b.findings for b in self.bundles) else "pass"

    def to_json(self) -> dict[str, Any]:
        """The ``dpone.release-gate.v1`` document, checksum included."""
        return with_checksum(
            {
                "schema": GATE_SCHEMA_ID,
                "decision": self.decision,
                "policy": self.policy.to_json() | {"roots": list(self.roots)},
                "bundles": [b.to_json() for b in self.bundles],
                "generated_at": self.generated_at,
                "dpone_version": __version__,
            }
        )


def quarantine_ratio(evidence: Mapping[str, Any]) -> Fraction:
    """rows_quarantined / rows_read, exact; 0 when nothing was read."""
    summary = evidence["summary"]
    read = summary["rows_read"]
    return Fraction(summary["rows_quarantined"], read) if read else Fraction(0)


# --- the gate -----------------------------------------------------------------------------------


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
    real_roots = [_real_root(base / r, r) for r in given_roots]
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
        root, parts = _confine(path, roots, "evidence")
        data = _read_confined(root, parts, MAX_EVIDENCE_BYTES, "evidence")
        if data is None:
            raise _Refused(GateCode.UNREADABLE, "the bundle disappeared while it was read")
        doc = _parse(data, "evidence")
    except _Refused as refused:
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
                pointer=_pointer(err.absolute_path),
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
        doc, signing.keyring(), require=policy.require_signature, what=_WHAT[subject]
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
        root, parts = _confine(folder / dlq["index_ref"], roots, "dlq_index")
        data = _read_confined(root, parts, HARD_MAX_INDEX_BYTES, "dlq_index")
        if data is None:
            raise _Refused(
                GateCode.DLQ_INDEX_MISSING,
                "the DLQ index the bundle names does not exist",
                "dlq_index",
            )
        index_doc = _parse(data, "dlq_index")
        index = _index(index_doc)
    except _Refused as refused:
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
        raise _Refused(
            GateCode.CHECKSUM_MISMATCH,
            "the DLQ index's sha256 is not the checksum of its content",
            "dlq_index",
            "/sha256",
        )
    error = next(iter(validator(INDEX_SCHEMA).iter_errors(doc)), None)
    if error is not None:
        raise _Refused(
            GateCode.SCHEMA_INVALID,
            f"the DLQ index breaks its schema's '{error.validator}' rule",
            "dlq_index",
            _pointer(error.absolute_path),
        )
    try:
        return DlqIndex.from_json(doc)
    except DlqIndexInvalid:
        raise _Refused(
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


# --- reading, confined --------------------------------------------------------------------------


class _Refused(Exception):
    """A step of a bundle's check failed; carries the finding."""

    def __init__(
        self,
        code: GateCode,
        message: str,
        subject: Subject = "evidence",
        pointer: str | None = None,
    ) -> None:
        super().__init__(message)
        self.finding = GateFinding(code, message, subject, pointer)


_WHAT: Mapping[Subject, str] = {"evidence": "the bundle", "dlq_index": "the DLQ index"}


def _real_root(path: Path, shown: str) -> Path:
    """A ``--root`` resolved (it may be a symlink: the operator chose it); it must exist."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):
        real = None
    if real is None or not real.is_dir():
        raise GateUsageError(
            "a --root is not an existing folder",
            code="DPONE_GATE_ROOT_NOT_FOUND",
            path=shown,
            fixes=("pass the folder that holds the evidence and the DLQ with --root",),
        )
    return real


def _confine(path: Path, roots: Sequence[Path], subject: Subject) -> tuple[Path, tuple[str, ...]]:
    """The root that holds ``path`` and the names that lead from it to ``path``.

    Refused: ``path`` itself a symlink; a symlink that sits inside a root (above the roots,
    symlinks are the operator's business); a real location outside every root.
    """
    what = _WHAT[subject]
    try:
        if path.is_symlink():
            raise _Refused(GateCode.PATH_REFUSED, f"{what} is a symbolic link", subject)
        for prefix in path.parents:
            if prefix.is_symlink() and _inside(prefix.parent.resolve(), roots):
                raise _Refused(
                    GateCode.PATH_REFUSED,
                    f"a folder on the way to {what} is a symbolic link",
                    subject,
                )
        real = path.resolve()
    except (OSError, RuntimeError, ValueError):  # a symlink loop, no entry, a NUL in a name
        raise _Refused(GateCode.PATH_REFUSED, f"{what} cannot be resolved", subject) from None
    for root in roots:
        if real.is_relative_to(root) and real != root:
            return root, real.relative_to(root).parts
    raise _Refused(GateCode.PATH_REFUSED, f"{what} is outside every --root", subject)


def _inside(path: Path, roots: Sequence[Path]) -> bool:
    return any(path.is_relative_to(root) for root in roots)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NOFOLLOW_DIR = _DIR_FLAGS | os.O_NOFOLLOW
_READ_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK


def _read_confined(
    root: Path, parts: tuple[str, ...], limit: int, subject: Subject
) -> bytes | None:
    """The bytes of ``root/parts...`` (``None`` if missing), walked from the open root one
    name at a time without following a link: a symlink swapped in after :func:`_confine`
    fails the open instead of being followed."""
    what = _WHAT[subject]
    fds: list[int] = []
    try:
        fds.append(os.open(root, _DIR_FLAGS))
        for name in parts[:-1]:
            fds.append(os.open(name, _NOFOLLOW_DIR, dir_fd=fds[-1]))
        fds.append(os.open(parts[-1], _READ_FLAGS, dir_fd=fds[-1]))
        if not stat.S_ISREG(os.fstat(fds[-1]).st_mode):
            raise _Refused(GateCode.PATH_REFUSED, f"{what} is not a regular file", subject)
        chunks, size = [], 0
        while size <= limit:  # at most limit + 1 bytes: enough to tell an oversized file
            chunk = os.read(fds[-1], min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise _Refused(
                GateCode.PATH_REFUSED,
                f"{what} is reached through a symbolic link or a file, not plain folders",
                subject,
            ) from None
        raise _Refused(GateCode.UNREADABLE, f"{what} cannot be read", subject) from None
    finally:
        for fd in reversed(fds):
            os.close(fd)
    if size > limit:
        raise _Refused(GateCode.UNREADABLE, f"{what} is larger than any such file may be", subject)
    return b"".join(chunks)


def _parse(data: bytes, subject: Subject) -> Any:
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        raise _Refused(GateCode.UNREADABLE, f"{_WHAT[subject]} is not JSON", subject) from None


def _pointer(path: Sequence[Any]) -> str:
    return "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in path)


# --- writing ------------------------------------------------------------------------------------


def write_report(doc: Mapping[str, Any], output_dir: Path) -> Path:
    """Write ``release_gate.json`` and ``.md`` into ``output_dir``, each atomically."""
    path = output_dir / REPORT_JSON
    data = orjson.dumps(
        doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE
    )
    try:  # the JSON last: when it is there, so is the Markdown of the same decision
        replace_atomic(output_dir / REPORT_MD, render_markdown(doc).encode())
        replace_atomic(path, data)
    except OSError as exc:
        raise GateUsageError(
            f"cannot write the release gate report ({exc.strerror or 'I/O error'})",
            code="DPONE_GATE_OUTPUT_UNWRITABLE",
            path=str(output_dir),
            fixes=("choose a writable folder with --output",),
        ) from None
    return path


def render_markdown(doc: Mapping[str, Any]) -> str:
    """The report for people (a CI job summary, a release ticket)."""
    policy = doc["policy"]
    lines = [
        f"# Release gate — {'PASS' if doc['decision'] == 'pass' else 'BLOCKED'}",
        "",
        f"- allowed outcomes: {', '.join(policy['allowed_outcomes'])}",
        f"- maximum quarantine ratio: {policy['max_quarantine_ratio']}",
        f"- a run that loaded none of the rows it read: "
        f"{'allowed' if policy['allow_empty'] else 'blocks'}",
        f"- signatures: {'required' if policy['require_signature'] else 'not required'}",
        f"- policy file: {_policy_file(policy)}",
        f"- roots: {', '.join(f'`{_cell(r)}`' for r in policy['roots'])}",
        f"- generated {doc['generated_at']} by dpone {doc['dpone_version']}",
        "",
        "| bundle | pipeline | run | execution | data outcome | quarantined | decision |",
        "| --- | --- | --- | --- | --- | ---: | --- |",
    ]
    for b in doc["bundles"]:
        quarantined = "" if b["rows_read"] is None else f"{b['rows_quarantined']}/{b['rows_read']}"
        lines.append(
            f"| `{_cell(b['path'])}` | {b['pipeline'] or ''} | {b['run_id'] or ''} | "
            f"{b['execution_status'] or ''} | {b['data_outcome'] or ''} | {quarantined} | "
            f"**{b['decision']}** |"
        )
    blocked = [b for b in doc["bundles"] if b["findings"]]
    if blocked:
        lines += ["", "## Findings"]
    for b in blocked:
        lines += ["", f"### `{_cell(b['path'])}`", ""]
        for f in b["findings"]:
            where = f" ({f['subject']} `{f['pointer']}`)" if f["pointer"] else ""
            lines.append(f"- `{f['code']}`: {f['message']}{where}")
    lines += ["", f"checksum `{doc['sha256']}`", ""]
    return "\n".join(lines)


def _policy_file(policy: Mapping[str, Any]) -> str:
    source = policy.get("policy_file")
    return "none (flags and defaults)" if source is None else f"`{_cell(source)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'").replace("\n", " ")


__all__ = [
    "DATA_OUTCOMES",
    "DEFAULT_ALLOWED_OUTCOMES",
    "GATE_SCHEMA_ID",
    "REPORT_JSON",
    "REPORT_MD",
    "SUBJECTS",
    "BundleResult",
    "GateCode",
    "GateFinding",
    "GatePolicy",
    "GateReport",
    "GateUsageError",
    "check_bundle",
    "evaluate",
    "quarantine_ratio",
    "render_markdown",
    "write_report",
]
