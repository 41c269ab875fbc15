"""The run report as text for people (``dpone run`` without ``--format json``).

It renders the ``dpone.run.v1`` document (:meth:`dpone.runtime.report.RunReport.to_json`),
so what it shows is exactly what ``--format json`` prints.
"""

from __future__ import annotations

import json
from typing import Any

from dpone.runtime.report import WARNING_HINTS


def _cursor(value: Any) -> str:
    return "none" if value is None else str(value)


def _state_line(state: dict[str, Any]) -> str:
    """The state's move in words: the cursor values as they are stored, never Python reprs."""
    before, after = state.get("from"), state.get("to")
    if not state.get("advanced"):
        return f"unchanged  cursor {_cursor(before)}"
    if before == after:
        return f"advanced  cursor stays {_cursor(after)}"
    return f"advanced  cursor {_cursor(before)} → {_cursor(after)}"


_STAGE_NAMES = (
    ("read", "read"),
    ("enforce", "enforce"),
    ("dlq", "dlq"),
    ("sink_write", "sink write"),
    ("commit", "commit"),
)


def _stages_line(timings: dict[str, float]) -> str:
    """Each stage's seconds; the DLQ writer's and the staging thread's own time in brackets
    (they overlap)."""
    parts = [f"{label} {timings[key]:.2f}s" for key, label in _STAGE_NAMES]
    threads = f"dlq writer thread {timings['dlq_writer']:.2f}s"
    if timings.get("sink_writer"):
        threads += f", staging thread {timings['sink_writer']:.2f}s"
    return "  ".join(parts) + f"  ({threads})"


def _sink_lines(sink: dict[str, Any] | None) -> list[str]:
    """The load, and the rows of each child table it committed."""
    if not sink:
        return []
    committed = "committed" if sink.get("committed") else "not committed"
    lines = [f"  sink       {sink['type']} {sink['table']}  load {sink['load_id']} {committed}"]
    for child in sink.get("child_tables", []):
        lines.append(f"  child      {child['table']}  loaded {child['rows_loaded']:,}")
    return lines


def render_text(doc: dict[str, Any]) -> str:
    """The lines ``dpone run`` prints: rows, timings, sink, DLQ, state, hints, the error."""
    rows = doc["rows"]
    head = "succeeded" if doc["status"] == "succeeded" else "FAILED"
    outcome = doc["data_outcome"]
    if doc["status"] != "succeeded" and outcome != "failed_quality_gate":
        outcome = None  # "FAILED (passed)" would read as a contradiction; the error says why
    lines = [
        f"dpone run {doc['pipeline']} {head}" + (f" ({outcome})" if outcome else ""),
        f"  run        {doc['run_id']}",
        f"  rows       read {rows['read']:,}  loaded {rows['loaded']:,}  "
        f"quarantined {rows['quarantined']:,}  warned {rows['warned']:,}  "
        f"skipped {rows['skipped']:,}"
        + (f"  dropped {rows['dropped']:,}" if rows.get("dropped") else "")
        + (f"  late_skipped {late:,}" if (late := rows.get("late_skipped", 0)) else ""),
        f"  time       {doc['duration_s']:.2f}s  ({doc['rows_per_s']:,.0f} rows/s)",
    ]
    if doc.get("timings"):
        lines.append(f"  stages     {_stages_line(doc['timings'])}")
    lines += _sink_lines(doc["sink"])
    dlq = doc["dlq"]
    if dlq.get("records"):
        lines.append(
            f"  dlq        {dlq['records']} record(s) in {dlq['directory']}  (run {dlq['run_id']})"
        )
    for renamed in doc.get("renamed_columns", []):
        written = json.dumps(renamed["source"], ensure_ascii=False)
        lines.append(f"  column     {renamed['position']} {written} → {renamed['name']}")
    for change in doc.get("schema_changes", []):
        what = change["change"].replace("_", " ")
        column = f" {change['column']} {change['type']}" if change["column"] else ""
        lines.append(f"  schema     {change['table']}{column}: {what}")
    if doc["evidence"]:
        lines.append(f"  evidence   {doc['evidence']}")
    state = doc["state"]
    if state:
        lines.append(f"  state      {_state_line(state)}")
    for rec in doc["recovered"]:
        lines.append(f"  recovered  run {rec['run_id']}: {rec['action']} ({rec['reason']})")
    for hint in doc.get("hints", []):
        label = "warning" if hint["code"] in WARNING_HINTS else "hint"
        fix = f"  fix: {hint['fix']}" if hint["fix"] else ""
        lines.append(f"  {label:<10} {hint['message']}{fix}")
    if doc["error"]:
        err = doc["error"]
        lines.append(f"  error      {err['code']}: {err['message']}")
        lines.extend(f"             row: {ref}" for ref in err.get("record_refs", []))
        lines.extend(f"             fix: {fix}" for fix in err.get("fixes", []))
    return "\n".join(lines)


__all__ = ["render_text"]
