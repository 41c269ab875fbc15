"""Reading every file of a run's segments folder: what verifies, what does not, what is left
of an interrupted publish. What recovery, a resumed writer and ``verify`` build on."""

from __future__ import annotations

from dataclasses import dataclass, field

from dpone import durable
from dpone.dlq import fsio, segments
from dpone.dlq.errors import DlqError
from dpone.dlq.layout import HARD_MAX_SEGMENT_BYTES, segment_where
from dpone.dlq.model import DlqRecord
from dpone.dlq.segments import SEGMENT_FILE, SegmentEntry


@dataclass(slots=True)
class SegmentScan:
    """Every file of a segments folder, sorted into what verifies and what does not."""

    valid: dict[str, tuple[SegmentEntry, list[DlqRecord], bytes]] = field(default_factory=dict)
    temps: list[str] = field(default_factory=list)
    bad: list[tuple[str, int | None, DlqError]] = field(default_factory=list)
    stray: list[str] = field(default_factory=list)

    def adoptable(self) -> tuple[list[SegmentEntry], list[DlqRecord]]:
        """The segments an index may list, in name order, each record in one segment only.

        A segment whose records are all in earlier ones is a duplicate (left by an
        interrupted compaction) and is left out; one that overlaps partly is left out too,
        for ``verify`` to report.
        """
        seen: dict[str, str] = {}
        kept: list[SegmentEntry] = []
        records: list[DlqRecord] = []
        for name in sorted(self.valid):
            seg, recs, _ = self.valid[name]
            if any(r.record_id in seen for r in recs):
                continue
            for r in recs:
                seen[r.record_id] = r.sha256
            kept.append(seg)
            records.extend(recs)
        records.sort(key=lambda r: r.record_id)
        return kept, records


def scan_segments(segments_fd: int, run_id: str, *, remove_temps: bool) -> SegmentScan:
    """Read and verify every segment of a run. Temp files are removed only when asked."""
    scan = SegmentScan()
    for item in sorted(fsio.entries(segments_fd, segment_where(run_id, "")), key=lambda e: e.name):
        name = item.name
        where = segment_where(run_id, name)
        if item.is_symlink() or not item.is_file(follow_symlinks=False):
            scan.bad.append((name, None, fsio.escape(where)))
            continue
        if durable.is_temp_name(name):
            scan.temps.append(name)
            if remove_temps:
                durable.unlink_quietly(segments_fd, name)
            continue
        if SEGMENT_FILE.fullmatch(name) is None:
            scan.stray.append(name)
            continue
        try:
            data = fsio.read_file(segments_fd, name, where, HARD_MAX_SEGMENT_BYTES)
        except DlqError as err:
            scan.bad.append((name, None, err))
            continue
        if data is None:
            continue
        decoded = segments.decode(data, run_id, where)
        if decoded.problems:
            scan.bad.extend((name, line, err) for line, err in decoded.problems)
            continue
        entry_ = segments.entry_of(name, data, decoded.records)
        scan.valid[name] = (entry_, decoded.records, data)
    if remove_temps and scan.temps:
        fsio.fsync_fd(segments_fd, segment_where(run_id, ""))
    return scan


__all__ = ["SegmentScan", "scan_segments"]
