"""Counts per reason code and column, per run (``dpone ops dlq summary``).

A run that has ended is counted from its verified index; an open run from its verified
records. Only codes, column names and counts appear: never a value.

The DLQ records alone cannot say what would fix them (they usually hold no values): the run
that wrote them could, while the rows were in memory, and its evidence bundle keeps those
hints. A run's hints are shown when its bundle is found (``evidence/<pipeline>/<run_id>/``
next to the DLQ folder by default) and its checksum verifies.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from dpone.canonical import verify_checksum
from dpone.dlq.fsio import check_identifier
from dpone.evidence.writer import EVIDENCE_FILE
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.dlq.store import DlqStore


@frozen
class ReasonCount:
    """How many records of a run have one reason code and column (None: no column)."""

    code: str
    column: str | None
    count: int

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, "column": self.column, "count": self.count}


@frozen
class RunSummary:
    """One DLQ run's record counts by reason and by reason and column, with its evidence's hints."""

    run_id: str
    load_id: str
    pipeline: str | None
    status: str
    record_count: int
    by_reason: Mapping[str, int]
    by_reason_column: tuple[ReasonCount, ...]
    #: the run's hints from its evidence bundle (``dpone.run.v1`` hints); empty when none
    hints: tuple[Mapping[str, Any], ...] = ()
    #: whether the run's evidence bundle was found and verified (no hints then means the run
    #: found no single fix shared by its rejects, not that nobody looked)
    evidence_found: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "load_id": self.load_id,
            "pipeline": self.pipeline,
            "status": self.status,
            "record_count": self.record_count,
            "by_reason": dict(self.by_reason),
            "by_reason_column": [c.to_json() for c in self.by_reason_column],
            "hints": [dict(h) for h in self.hints],
            "evidence_found": self.evidence_found,
        }


@frozen
class DlqSummary:
    """The summaries of the DLQ runs asked for (one run, or every run), and their totals."""

    runs: tuple[RunSummary, ...]

    @property
    def record_count(self) -> int:
        return sum(run.record_count for run in self.runs)

    @property
    def by_reason(self) -> dict[str, int]:
        total: Counter[str] = Counter()
        for run in self.runs:
            total.update(run.by_reason)
        return dict(sorted(total.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "record_count": self.record_count,
            "by_reason": self.by_reason,
            "runs": [run.to_json() for run in self.runs],
        }


#: An evidence bundle holds counts, not rows: anything this large is not one.
_MAX_EVIDENCE_BYTES = 16 * 1024 * 1024


def summarize(
    store: DlqStore, run_id: str | None = None, *, evidence_dir: Path | None = None
) -> DlqSummary:
    """Counts per run; ``evidence_dir``: where the runs' evidence bundles are (default:
    ``evidence/`` next to the DLQ folder), for their hints."""
    if run_id is not None:
        check_identifier(run_id, "run id")
    run_ids = [run_id] if run_id is not None else store.run_ids()
    where = evidence_dir if evidence_dir is not None else store.root.parent / "evidence"
    return DlqSummary(tuple(_summarize_run(store, rid, where) for rid in run_ids))


def _hints(
    evidence_dir: Path, pipeline: str | None, run_id: str
) -> tuple[dict[str, Any], ...] | None:
    """The hints the run's evidence bundle recorded; ``None`` when the bundle is absent,
    unreadable, or its checksum does not verify (a summary never fails on a missing bundle)."""
    if not pipeline or pipeline.startswith(".") or "/" in pipeline or "\\" in pipeline:
        return None
    path = evidence_dir / pipeline / run_id / EVIDENCE_FILE
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > _MAX_EVIDENCE_BYTES:
            return None
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("run_id") != run_id or not verify_checksum(doc):
        return None
    hints = doc.get("hints", [])
    if not isinstance(hints, list):
        return ()
    return tuple(h for h in hints if isinstance(h, dict) and isinstance(h.get("message"), str))


def _summarize_run(store: DlqStore, run_id: str, evidence_dir: Path) -> RunSummary:
    index = store.read_index(run_id)
    pairs: Counter[tuple[str, str | None]] = Counter()
    if index.status == "open":
        for record in store.iter_records(run_id):
            pairs[(record.reason.code.value, record.reason.column)] += 1
    else:
        for item in index.entries:
            pairs[(item.code.value, item.column)] += 1
    by_reason: Counter[str] = Counter()
    for (code, _), count in pairs.items():
        by_reason[code] += count
    hints = _hints(evidence_dir, index.pipeline, run_id)
    ordered = sorted(pairs.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or ""))
    return RunSummary(
        run_id=run_id,
        load_id=index.load_id,
        pipeline=index.pipeline,
        status=index.status,
        record_count=sum(pairs.values()),
        by_reason=dict(sorted(by_reason.items())),
        by_reason_column=tuple(ReasonCount(code, col, n) for (code, col), n in ordered),
        hints=hints or (),
        evidence_found=hints is not None,
    )


__all__ = ["DlqSummary", "ReasonCount", "RunSummary", "summarize"]
