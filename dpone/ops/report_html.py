"""``dpone ops report``: one self-contained HTML page about the pipelines of a work dir.

Runs over time (read, loaded, quarantined per run), rejects by reason and by column, schema
changes, release gate verdicts (the ``release_gate.json`` files under the work dir), the DLQ's
size per run and its growth, and what retention would free now (the retention planner, read
only). Inline CSS and SVG only: no script, no font, no image, no URL, so the page opens
offline and a copy mailed around shows the same. Counts, codes and names only, never a row
value; every name is escaped (it comes from user files).
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from dpone.canonical import verify_checksum
from dpone.ops.pipeline_files import PipelineDirs, Unreadable, read_plain
from dpone.ops.pipelines import PipelineInfo, dlq_runs, pipeline_info
from dpone.ops.report_svg import bars_with_line, esc, grouped_bars, horizontal_bars
from dpone.published import schema_errors
from dpone.records import frozen

REPORT_SCHEMA = "dpone.ops-report.v1"
GATE_FILE = "release_gate.json"
GATE_SCHEMA = "dpone.release-gate.v1"
MAX_GATE_BYTES = 64 * 1024 * 1024
#: Folders searched for gate reports, at most this deep under the work dir.
GATE_DEPTH = 4
#: Runs charted per pipeline (the newest); the tables list the same runs.
CHART_RUNS = 30


@frozen
class GateVerdict:
    """One ``release_gate.json`` under the work dir: its decision, bundles checked and blocked."""

    path: str
    decision: str
    generated_at: str
    bundles: int
    blocked: int

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "decision": self.decision,
            "generated_at": self.generated_at,
            "bundles": self.bundles,
            "blocked": self.blocked,
        }


@frozen
class RetentionView:
    """What a retention plan made now would delete (records, and their bytes on disk)."""

    now: str
    records: int
    bytes: int
    protected: dict[str, int]
    problem: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "now": self.now,
            "records": self.records,
            "bytes": self.bytes,
            "protected": dict(self.protected),
            "problem": self.problem,
        }


@frozen
class OpsReport:
    """The page and what it shows, as data."""

    work_dir: str
    pipelines: tuple[PipelineInfo, ...]
    gates: tuple[GateVerdict, ...]
    retention: RetentionView
    html: str
    output: str | None = None

    def to_json(self) -> dict[str, Any]:
        """``dpone.ops-report.v1``: the page's numbers."""
        return {
            "schema": REPORT_SCHEMA,
            "work_dir": self.work_dir,
            "output": self.output,
            "pipelines": [
                {
                    "pipeline": p.name,
                    "runs": p.run_count,
                    "dlq_records": sum(d.records for d in p.dlq_runs),
                    "dlq_bytes": sum(d.bytes for d in p.dlq_runs),
                }
                for p in self.pipelines
            ],
            "gates": [g.to_json() for g in self.gates],
            "retention": self.retention.to_json(),
        }


def build_report(dirs: PipelineDirs, now: datetime) -> OpsReport:
    dlq = dlq_runs(dirs)
    pipelines = tuple(pipeline_info(n, dirs, limit=None, dlq=dlq) for n in dirs.names())
    gates = tuple(_gates(dirs.work_dir, dirs.dlq_dir))
    retention = _retention(dirs.dlq_dir, now)
    page = render(os.fspath(dirs.work_dir), pipelines, gates, retention)
    return OpsReport(os.fspath(dirs.work_dir), pipelines, gates, retention, page)


# --- reading ------------------------------------------------------------------------------------


def _gate_files(folder: Path, depth: int, skip: Path) -> Iterator[Path]:
    """``release_gate.json`` files under ``folder``, links not followed, ``skip`` (the DLQ
    root: thousands of segment folders, never a gate report) left out."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.name == GATE_FILE and entry.is_file(follow_symlinks=False):
            yield Path(entry.path)
        elif depth > 0 and entry.is_dir(follow_symlinks=False) and Path(entry.path) != skip:
            yield from _gate_files(Path(entry.path), depth - 1, skip)


def _gates(work_dir: Path, dlq_dir: Path) -> Iterator[GateVerdict]:
    for path in _gate_files(work_dir, GATE_DEPTH, dlq_dir):
        shown = os.path.relpath(path, work_dir)
        try:
            data = read_plain(path, MAX_GATE_BYTES)
            doc = orjson.loads(data) if data is not None else None
        except (Unreadable, orjson.JSONDecodeError):
            continue
        if not isinstance(doc, dict) or schema_errors(doc, GATE_SCHEMA) or not verify_checksum(doc):
            yield GateVerdict(shown, "unverified", "", 0, 0)
            continue
        bundles = doc["bundles"]
        blocked = sum(1 for b in bundles if b.get("decision") == "blocked")
        yield GateVerdict(shown, doc["decision"], doc["generated_at"], len(bundles), blocked)


def _retention(dlq_dir: Path, now: datetime) -> RetentionView:
    """A retention plan of the DLQ store at ``now``, made and thrown away (read only)."""
    from dpone.clock import iso_utc
    from dpone.dlq.layout import RUNS_DIR
    from dpone.dlq.segments import SEGMENTS_DIR
    from dpone.dlq.store import DlqStore
    from dpone.errors import DponeError
    from dpone.ops.retention.mark import plan_retention
    from dpone.ops.retention.model import PROTECTIONS

    moment = iso_utc(now)
    empty = {name: 0 for name in PROTECTIONS}
    if not (dlq_dir / RUNS_DIR).is_dir():
        return RetentionView(moment, 0, 0, empty)
    store = DlqStore(dlq_dir)
    try:
        plan = plan_retention(store, now)
        freed = 0
        for run in plan.runs:
            if not run.delete:
                continue
            listed = {seg.name: seg.record_count for seg in store.read_index(run.run_id).segments}
            folder = dlq_dir / RUNS_DIR / run.run_id / SEGMENTS_DIR
            for cut in run.delete:
                size = _size(folder / cut.segment)
                # A compacted segment keeps its other records: count the deleted share of it.
                freed += (
                    size
                    if cut.whole
                    else size * cut.delete_count // max(1, listed.get(cut.segment, 1))
                )
    except DponeError as err:
        return RetentionView(moment, 0, 0, empty, problem=err.code)
    return RetentionView(moment, plan.delete_count, freed, plan.protected())


def _size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


# --- the page -----------------------------------------------------------------------------------

_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;
max-width:1100px;color:#1b1f24;background:#fff;padding:0 16px}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-bottom:1px solid #d0d7de}
h3{font-size:15px}table{border-collapse:collapse;margin:8px 0 16px}
th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;white-space:nowrap}
td.n{text-align:right}.scroll{overflow-x:auto}svg{max-width:100%;height:auto}
th{background:#f6f8fa}svg{display:block;margin:8px 0;font-size:11px}svg text{fill:#1b1f24}
.grid{stroke:#d0d7de}.pass{color:#1a7f37}.blocked,.failed{color:#cf222e}.muted{color:#57606a}
"""


def render(
    work_dir: str,
    pipelines: Sequence[PipelineInfo],
    gates: Sequence[GateVerdict],
    retention: RetentionView,
) -> str:
    body = [
        f"<h1>dpone operations report</h1><p class=muted>work dir {esc(work_dir)}; "
        f"retention judged at {esc(retention.now)}</p>"
    ]
    if not pipelines:
        body.append("<p>No pipeline has run in this work dir.</p>")
    for info in pipelines:
        body.extend(_pipeline(info))
    body.extend(_gates_section(gates))
    body.extend(_retention_section(retention))
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>dpone report — {esc(work_dir)}</title><style>{_CSS}</style></head><body>"
        + "".join(body)
        + "</body></html>\n"
    )


def _when(moment: str) -> str:
    """An ISO-8601 UTC time to the second, for a table cell."""
    return moment[:19].replace("T", " ") + (" UTC" if moment.endswith("Z") else "")


def _table(head: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = "".join(f"<th>{esc(h)}</th>" for h in head)
    out = [f'<div class="scroll"><table><thead><tr>{cells}</tr></thead><tbody>']
    for row in rows:
        tds = "".join(
            f'<td class="n">{v:,}</td>'
            if isinstance(v, int) and not isinstance(v, bool)
            else f"<td>{esc(v)}</td>"
            for v in row
        )
        out.append(f"<tr>{tds}</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _pipeline(info: PipelineInfo) -> list[str]:
    runs = list(reversed(info.runs[:CHART_RUNS]))  # oldest first, left to right
    name = esc(info.name)
    out = [
        f'<h2 id="p-{name}">Pipeline {name}</h2>',
        f"<p>state: {esc(info.state.status)}; cursor {esc(info.state.cursor_text)}; "
        f"{info.run_count:,} run(s)"
        + (
            f"; sink {esc(info.sink['type'])} {esc(info.sink['table'])} "
            f"({esc(info.sink['mode'] or 'strategy not recorded')})"
            if info.sink
            else ""
        )
        + "</p>",
    ]
    if runs:
        # The axis says when (UTC, to the minute); the table below names each run.
        labels = [f"{r.started_at[5:10]} {r.started_at[11:19]}" for r in runs]
        out.append("<h3>Runs over time</h3>")
        out.append(
            grouped_bars(
                labels,
                [(k, [r.rows[k] for r in runs]) for k in ("read", "loaded", "quarantined")],
                title=f"rows per run of {info.name}",
            )
        )
        out.append(
            _table(
                [
                    "run",
                    "started",
                    "execution",
                    "data outcome",
                    "read",
                    "loaded",
                    "quarantined",
                    "warned",
                    "skipped",
                ],
                [
                    [
                        r.run_id,
                        _when(r.started_at),
                        r.execution_status,
                        r.data_outcome,
                        r.rows["read"],
                        r.rows["loaded"],
                        r.rows["quarantined"],
                        r.rows["warned"],
                        r.rows["skipped"],
                    ]
                    for r in reversed(runs)
                ],
            )
        )
    out.extend(_rejects(info))
    changes = [(r.run_id, c) for r in reversed(runs) for c in r.schema_changes]
    if changes:
        out.append("<h3>Schema changes</h3>")
        out.append(
            _table(
                ["run", "change", "table", "column", "type"],
                [
                    [rid, c["change"], c["table"], c["column"] or "", c["type"] or ""]
                    for rid, c in changes
                ],
            )
        )
    out.extend(_dlq_section(info))
    if info.unreadable:
        out.append("<h3>Evidence that does not verify (not counted)</h3>")
        out.append(_table(["run", "problem"], list(info.unreadable)))
    return out


def _rejects(info: PipelineInfo) -> list[str]:
    by_reason: Counter[str] = Counter()
    by_column: Counter[str] = Counter()
    for run in info.runs:
        for column, reason, count in run.violations:
            by_reason[reason] += count
            by_column[column] += count
    if not by_reason:
        return ["<h3>Rejects</h3><p>No rejected row in these runs.</p>"]
    title = info.name
    return [
        "<h3>Rejects by reason</h3>",
        horizontal_bars(by_reason.most_common(), title=f"rejects by reason of {title}"),
        "<h3>Rejects by column</h3>",
        horizontal_bars(by_column.most_common(20), title=f"rejects by column of {title}"),
    ]


def _dlq_section(info: PipelineInfo) -> list[str]:
    runs = info.dlq_runs[-CHART_RUNS:]
    if not runs:
        return ["<h3>DLQ</h3><p>No DLQ run.</p>"]
    total, growth = 0, []
    for run in runs:
        total += run.bytes
        growth.append(total)
    return [
        "<h3>DLQ size</h3>",
        bars_with_line(
            [r.run_id for r in runs],
            ("bytes per run", [r.bytes for r in runs]),
            ("store total (bytes)", growth),
            title=f"DLQ bytes per run of {info.name}",
        ),
        _table(
            ["DLQ run", "status", "records", "bytes"],
            [[r.run_id, r.status, r.records, r.bytes] for r in runs],
        ),
    ]


def _gates_section(gates: Sequence[GateVerdict]) -> list[str]:
    out = ["<h2>Release gate verdicts</h2>"]
    if not gates:
        return [*out, f"<p>No {GATE_FILE} under the work dir.</p>"]
    rows = [[g.path, g.decision, g.generated_at, g.bundles, g.blocked] for g in gates]
    out.append(_table(["report", "decision", "generated", "bundles", "blocked"], rows))
    return out


def _retention_section(retention: RetentionView) -> list[str]:
    out = ["<h2>Retention</h2>"]
    if retention.problem:
        return [*out, f"<p>No plan: the DLQ store does not verify ({esc(retention.problem)}).</p>"]
    out.append(
        f"<p>A retention plan made now would delete {retention.records:,} record(s), about "
        f"{retention.bytes:,} bytes.</p>"
    )
    out.append(_table(["protected because", "records"], sorted(retention.protected.items())))
    return out


__all__ = ["GateVerdict", "OpsReport", "RetentionView", "build_report", "render"]
