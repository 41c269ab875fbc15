"""The release gate's verdicts and its report ``dpone.release-gate.v1`` (SPEC §7).

Every finding has a stable ``DPONE_GATE_*`` code and a message without values; the report is
checksummed like every artifact and written with its Markdown twin (``release_gate.md``, what a
CI job summary or a release ticket shows), which is why the Markdown is rendered here and not
by the CLI: :func:`dpone.ops.release_gate` writes both files.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal, get_args

import orjson

from dpone._version import __version__
from dpone.canonical import with_checksum
from dpone.durable import replace_atomic
from dpone.ops.gate.policy import GatePolicy, GateUsageError
from dpone.records import frozen

GATE_SCHEMA_ID = "dpone.release-gate.v1"
REPORT_JSON = "release_gate.json"
REPORT_MD = "release_gate.md"

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


@frozen
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


@frozen
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


@frozen
class GateReport:
    """The release gate's verdict on every bundle it checked: ``blocked`` when any has a finding."""

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
    "GATE_SCHEMA_ID",
    "REPORT_JSON",
    "REPORT_MD",
    "SUBJECTS",
    "BundleResult",
    "Decision",
    "GateCode",
    "GateFinding",
    "GateReport",
    "Subject",
    "quarantine_ratio",
    "render_markdown",
    "write_report",
]
