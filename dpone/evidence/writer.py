"""Write an evidence bundle: JSON + Markdown, create-only and atomic, checksummed.

Layout: ``<output_dir>/<pipeline>/<run_id>/data_contract_evidence.json`` (+ ``.md``).
The bundle never holds absolute paths: ``dlq.index_ref`` is relative to the bundle's folder.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import orjson

from dpone import signing
from dpone.canonical import with_checksum
from dpone.durable import create_only, read_below
from dpone.errors import DponeError
from dpone.evidence.model import Evidence

EVIDENCE_FILE = "data_contract_evidence.json"


class EvidenceExists(DponeError):
    code = "DPONE_EVIDENCE_EXISTS"
    stage = "evidence"


def bundle_dir(output_dir: Path, pipeline: str, run_id: str) -> Path:
    return output_dir / pipeline / run_id


def write_evidence(output_dir: Path, evidence: Evidence) -> Path:
    """Publish the bundle; refuses to overwrite one that exists (evidence is immutable)."""
    return publish_evidence_doc(output_dir, evidence.to_json())


def publish_evidence_doc(
    output_dir: Path,
    doc: dict[str, Any],
    *,
    exist_ok: bool = False,
    anchor: Path | None = None,
) -> Path:
    """Publish an evidence document (checksummed here). ``exist_ok``: an identical bundle
    already published is fine (recovery republishing what a dead run prepared).

    ``anchor`` is the user's folder (the work dir, or ``output_dir`` itself when it is not
    below the work dir): every folder below it is reached without following links."""
    anchor = anchor if anchor is not None else output_dir
    folder = bundle_dir(output_dir, doc["pipeline"], doc["run_id"])
    sealed = signing.sign(with_checksum(doc))
    path = folder / EVIDENCE_FILE
    data = orjson.dumps(sealed, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    try:
        create_only(path, data, anchor=anchor)
    except FileExistsError:
        held = read_below(anchor, path, len(data))
        if not (exist_ok and held == data):
            raise EvidenceExists(
                f"evidence for run {doc['run_id']} already exists; evidence is never overwritten",
                fixes=("use a new --run-id",),
            ) from None
    md = path.with_suffix(".md")
    with contextlib.suppress(FileExistsError):  # published by a run that died after it
        create_only(md, render_markdown(sealed).encode(), anchor=anchor)
    return path


def render_markdown(doc: dict[str, Any]) -> str:
    s = doc["summary"]
    lines = [
        f"# Data contract evidence — {doc['pipeline']}",
        "",
        f"- run: `{doc['run_id']}`",
        f"- execution: **{doc['execution_status']}**; data: **{doc['data_outcome']}**",
        f"- enforcement: {doc['enforcement']}",
        f"- manifest: `{doc['manifest_fingerprint']}`",
        f"- started {doc['started_at']}, finished {doc['finished_at']}",
        "",
        "| rows read | loaded | quarantined | warned | skipped | late skipped |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
        f"| {s['rows_read']} | {s['rows_loaded']} | {s['rows_quarantined']} | "
        f"{s['rows_warned']} | {s['rows_skipped']} | {s.get('rows_late_skipped', 0)} |",
    ]
    if doc["violations"]:
        lines += ["", "## Violations", "", "| column | reason | count |", "| --- | --- | ---: |"]
        lines += [f"| {v['column']} | {v['reason']} | {v['count']} |" for v in doc["violations"]]
    if doc["assertions"]:
        lines += ["", "## Assertions", "", "| assertion | policy | verdict | failed rows |"]
        lines += ["| --- | --- | --- | ---: |"]
        lines += [
            f"| {a['name']} | {a['on_failure']} | {a['verdict']} | {a['failed_rows']} |"
            for a in doc["assertions"]
        ]
    changes = doc.get("schema_changes", [])
    if changes:
        lines += ["", "## Schema changes", "", "| change | table | column | type |"]
        lines += ["| --- | --- | --- | --- |"]
        lines += [
            f"| {c['change']} | {c['table']} | {c['column'] or ''} | {c['type'] or ''} |"
            for c in changes
        ]
    lines += _compatibility_lines(doc.get("compatibility"))
    lines += _ddl_lines(doc.get("ddl"))
    dlq = doc["dlq"]
    lines += ["", "## Dead letters", "", f"- records: {dlq['record_count']}"]
    if dlq["index_ref"]:
        lines.append(f"- index: `{dlq['index_ref']}` (`{dlq['index_fingerprint']}`)")
    lines += [f"- {code}: {count}" for code, count in dlq["reasons"].items()]
    ids = dlq.get("record_ids") or []
    if ids:
        more = f" (the first {len(ids)})" if dlq.get("record_ids_truncated") else ""
        lines += ["", f"Record ids{more}:", ""] + [f"- `{rid}`" for rid in ids]
    sink, state = doc["sink"], doc["state"]
    lines += [
        "",
        "## Sink and state",
        "",
        f"- sink: {sink.get('type')} `{sink.get('table')}`, load `{sink.get('load_id')}`",
        f"- state advanced: {state.get('advanced')} ({state.get('from')} → {state.get('to')})",
        "",
        f"checksum `{doc['sha256']}`",
        "",
    ]
    return "\n".join(lines)


def _compatibility_lines(compat: dict[str, Any] | None) -> list[str]:
    if not compat or not compat["changes"]:
        return []
    lines = ["", f"## Compatibility: {compat['level']}", ""]
    lines += ["| change | column | before | after | class |", "| --- | --- | --- | --- | --- |"]
    lines += [
        f"| {c['change']} | {c['column'] or ''} | {c['before'] or ''} | {c['after'] or ''} "
        f"| {c['compatibility']} |"
        for c in compat["changes"]
    ]
    return lines


def _ddl_lines(ddl: dict[str, Any] | None, heading: str = "Table") -> list[str]:
    if not ddl:
        return []
    lines = ["", f"## {heading} after the load ({ddl['dialect']} `{ddl['table']}`)", ""]
    lines += ["| column | type | nullable |", "| --- | --- | --- |"]
    lines += [
        f"| {c['name']} | {c['type']} | {'yes' if c['nullable'] else 'no'} |"
        for c in ddl["columns"]
    ]
    for child in ddl.get("child_tables", []):
        lines += _ddl_lines(child, "Child table")
    return lines
