"""Deleting records from the dead-letter store: what retention applies (SPEC §5, §8).

A segment whose records all go is removed; one that keeps some is compacted into a new
create-only ``-k<hash>`` segment holding exactly the kept lines; then the run's index is
replaced atomically; then the old segments go; then the acknowledgements of the deleted
records (their ack segments rewritten as ``.k<hash>`` ones). :func:`leftover_segments` and
:func:`remove_leftovers` find and remove what an interrupted deletion leaves. The caller
decides what may go (:mod:`dpone.ops.retention`).
"""

from __future__ import annotations

import os
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import ExitStack
from itertools import compress
from operator import not_
from typing import Any

from dpone import durable
from dpone.dlq import acks, fsio, segments
from dpone.dlq.acks import ACK_FILE
from dpone.dlq.errors import (
    DlqIndexDrift,
    DlqRecordConflict,
    DlqRunLocked,
    DlqRunNotFound,
    DlqRunNotOpen,
)
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import DlqIndex
from dpone.dlq.indexfile import read_index_at
from dpone.dlq.layout import (
    ACKS_DIR,
    HARD_MAX_SEGMENT_BYTES,
    INDEX_FILE,
    RUNS_DIR,
    dumps,
    segment_where,
)
from dpone.dlq.lock import release_lock, take_lock
from dpone.dlq.rundir import RunDir, RunHeader
from dpone.dlq.scan import SegmentScan
from dpone.dlq.segments import SEGMENT_FILE, SEGMENTS_DIR, SegmentEntry
from dpone.faults import checkpoint
from dpone.logs import get_logger

# Threads that remove what retention deleted (unlink and fsync wait on the disk, not the CPU).
_DELETE_WORKERS = 4
# Identifiers (``IDENTIFIER_PATTERN``), each followed by a newline, which none may hold.
_IDENTIFIER_LINES = re.compile(r"(?:[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}\n)*")
log = get_logger("dpone.dlq")


def all_identifiers(values: Collection[Any]) -> bool:
    """Whether every value is a safe identifier (:func:`check_identifier`), checked at once."""
    if not set(map(type, values)) <= {str}:
        return False
    text = "\n".join(values) + "\n" if values else ""
    return text.count("\n") == len(values) and _IDENTIFIER_LINES.fullmatch(text) is not None


def delete_records(
    runs: RunDir, run_id: str, record_ids: Collection[str], *, known: DlqIndex | None = None
) -> DlqIndex:
    """Delete records of an ended run with their acknowledgements (for retention).

    Segment by segment: one whose records all go is removed; one that keeps some is
    compacted into a new create-only segment holding exactly the kept lines (published
    and durable first). Then the index is replaced atomically, listing the new segments
    and the remaining records; then the old segments are removed; then the
    acknowledgements of the deleted records. A crash at any point leaves a store that
    lists every kept record exactly once: the leftovers (an unlisted compacted segment, an
    old segment the index no longer lists) hold nothing the index needs, and calling this
    again with the same ids, or ``verify --repair``, removes them. The caller decides what
    may go (``dpone.ops.retention``); an open run, or one with a live writer, is refused.
    ``known`` is the run's index as the caller verified it (see :func:`read_index_at`).
    """
    index, rest = _delete_until_index(runs, run_id, record_ids, known)
    rest()
    return index


def delete_many(
    runs: RunDir, deletes: Sequence[tuple[str, Collection[str], DlqIndex | None]]
) -> list[DlqIndex]:
    """:func:`delete_records` of several runs ``(run_id, record_ids, known)``: each run's
    compaction and index replace in the order given, on this thread; what follows the
    index replace of each run (removing the old segments, then the acknowledgements, each
    made durable) on worker threads meanwhile, since it waits on the disk. Every step of
    one run keeps its order, so a crash leaves each run where :func:`delete_records`
    could have left it. Returns when everything is durable; the first failure raises
    then (the runs before it are done)."""
    indexes: list[DlqIndex] = []
    futures: list[Future[None]] = []
    failed: BaseException | None = None
    with ThreadPoolExecutor(_DELETE_WORKERS, thread_name_prefix="dpone-dlq-delete") as pool:
        for run_id, record_ids, known in deletes:
            try:
                index, rest = _delete_until_index(runs, run_id, record_ids, known)
            except BaseException as exc:  # the runs before it finish first
                failed = exc
                break
            indexes.append(index)
            futures.append(pool.submit(rest))
    for future in futures:
        future.result()
    if failed is not None:
        raise failed
    return indexes


def _delete_until_index(
    runs: RunDir, run_id: str, record_ids: Collection[str], known: DlqIndex | None
) -> tuple[DlqIndex, Callable[[], None]]:
    """The first part of :func:`delete_records`, up to the replaced index (the run's lock
    held); the rest, which lets go of the lock, to be called once."""
    check_identifier(run_id, "run id")
    doomed = set(record_ids)
    if not all_identifiers(doomed):
        for record_id in doomed:
            check_identifier(record_id, "record id")  # raises, with the right code
    where = f"{RUNS_DIR}/{run_id}"
    seg_where = f"{where}/{SEGMENTS_DIR}"
    held = ExitStack()
    try:
        run_fd = held.enter_context(runs.open_path(RUNS_DIR, run_id, missing=DlqRunNotFound))
        lock_fd = take_lock(run_fd, where, create=True)
        if lock_fd is None:
            raise DlqRunLocked(f"{where} has a live writer; its records cannot be deleted")
        held.callback(release_lock, run_fd, lock_fd)
        index = read_index_at(run_fd, run_id, known, cache=runs.index_cache)
        if index.status == "open":
            raise DlqRunNotOpen(f"run {run_id} is open; records of an open run stay")
        segments_fd, _ = fsio.open_dir(run_fd, SEGMENTS_DIR, seg_where, create=True)
        held.callback(os.close, segments_fd)
        index, replaced = _compact(runs, run_fd, segments_fd, index, doomed)
        if replaced:
            runs.index_cache.drop(run_id)
    except BaseException:
        held.close()
        raise

    def rest() -> None:
        with held:
            for name in replaced:
                durable.unlink_quietly(segments_fd, name)
            if replaced:
                fsio.fsync_fd(segments_fd, seg_where)
            remove_leftovers(segments_fd, run_id, index)
        _delete_acks(runs, run_id, doomed)
        log.info("dlq.records.deleted", run_id=run_id, records=len(doomed))

    return index, rest


def _compact(
    runs: RunDir, run_fd: int, segments_fd: int, index: DlqIndex, doomed: set[str]
) -> tuple[DlqIndex, list[str]]:
    """Publish the compacted segments and replace the index; the index and the names of
    the segments it no longer lists (for the caller to remove)."""
    run_id = index.run_id
    ids = index.record_ids
    listed: list[SegmentEntry] = []
    replaced: list[str] = []
    for seg in index.segments:
        inside = ids[bisect_left(ids, seg.first_record_id) : bisect_right(ids, seg.last_record_id)]
        going = sum(map(doomed.__contains__, inside))
        if not going:
            listed.append(seg)
            continue
        replaced.append(seg.name)
        if going == len(inside) == seg.record_count:
            continue  # every record goes: the segment is removed, nothing to read
        where = segment_where(run_id, seg.name)
        data = fsio.read_file(segments_fd, seg.name, where, HARD_MAX_SEGMENT_BYTES)
        if data is None:
            raise DlqIndexDrift(f"{where} is in the index but not on disk")
        kept = [
            line for line in segments.pinned_lines(data, where, seg) if line.record_id not in doomed
        ]
        if not kept:
            continue
        new_data = segments.encode([line.data for line in kept])
        name = segments.compacted_name(seg.name, new_data)
        new_where = segment_where(run_id, name)
        if not segments.publish(segments_fd, name, new_data, new_where):
            on_disk = fsio.read_file(segments_fd, name, new_where, HARD_MAX_SEGMENT_BYTES)
            if on_disk != new_data:
                raise DlqRecordConflict(f"{new_where} exists with other bytes; it is kept")
        listed.append(segments.entry_of(name, new_data, kept))
    if not replaced:
        return index, replaced
    checkpoint("retention_after_compact")
    doc = runs.index_doc(
        RunHeader.of(index),
        index.status,
        index.status_reason,
        owner=False,
        entries=index.records_json(doomed),
        segments=listed,
    )
    where = f"{RUNS_DIR}/{run_id}/{INDEX_FILE}"
    fsio.replace_atomic(run_fd, INDEX_FILE, dumps(doc), where)
    checkpoint("retention_after_index")
    return DlqIndex.built(doc, tuple(listed)), replaced


def remove_acks(runs: RunDir, run_id: str, record_ids: Collection[str]) -> None:
    """Remove the acknowledgements of records an ended run no longer lists (what an
    interrupted retention leaves; ``verify --repair`` calls it). Listed records keep
    theirs."""
    check_identifier(run_id, "run id")
    listed = runs.read_index(run_id).checksums()
    _delete_acks(runs, run_id, {rid for rid in record_ids if rid not in listed})


def _delete_acks(runs: RunDir, run_id: str, doomed: set[str]) -> None:
    """Rewrite the ack segments that acknowledge deleted records (create-only, then
    remove the old segment); the same acknowledgement in two segments counts once."""
    folder = f"{ACKS_DIR}/{run_id}"
    touched = [
        (name, data, ids)
        for name, data, ids in acks.ack_segment_ids(runs, run_id)
        if not doomed.isdisjoint(ids)
    ]
    if not touched:
        return
    with runs.open_path(ACKS_DIR, run_id) as fd:
        for name, data, ids in touched:
            kept = list(map(not_, map(doomed.__contains__, ids)))
            if any(kept):
                match = ACK_FILE.fullmatch(name)
                assert match is not None
                new_data = b"\n".join(compress(data.split(b"\n"), kept)) + b"\n"
                stem = re.sub(r"\.k[0-9a-f]{12}$", "", match[1])
                digest = segments.bytes_checksum(new_data)[7:19]
                new_name = f"{stem}.k{digest}-{match[2]}.jsonl"
                segments.publish(fd, new_name, new_data, f"{folder}/{new_name}")
            durable.unlink_quietly(fd, name)
        fsio.fsync_fd(fd, folder)


def leftover_segments(scan: SegmentScan, index: DlqIndex) -> list[str]:
    """Unlisted segments of an ended run that hold nothing the index needs.

    What an interrupted compaction leaves: its new segment before the index named it, or the
    old segment after. Each of their records is either gone from the index or held by a
    listed segment that verifies, so removing them loses nothing.
    """
    listed = {s.name for s in index.segments}
    held = {r.record_id for name in listed if name in scan.valid for r in scan.valid[name][1]}
    checksums = index.checksums()
    return [
        name
        for name, (_, records, _) in sorted(scan.valid.items())
        if name not in listed
        and all(r.record_id not in checksums or r.record_id in held for r in records)
    ]


def remove_leftovers(segments_fd: int, run_id: str, index: DlqIndex) -> list[str]:
    """Remove the temp files and :func:`leftover_segments` of an ended run (lock held).

    Only unlisted names are read: the listed segments are taken to hold what the index says
    (``verify`` checks that), which is what makes an unlisted one redundant or not.
    """
    where = segment_where(run_id, "")
    listed = {s.name for s in index.segments}
    names = [e.name for e in fsio.entries(segments_fd, where)]
    temps = [n for n in names if durable.is_temp_name(n)]
    unlisted = [n for n in names if SEGMENT_FILE.fullmatch(n) and n not in listed]
    for name in temps:
        durable.unlink_quietly(segments_fd, name)
    doomed = []
    checksums = index.checksums()
    for name in unlisted:
        data = fsio.read_file(segments_fd, name, where + name, HARD_MAX_SEGMENT_BYTES) or b""
        decoded = segments.decode(data, run_id, where + name)
        if not decoded.problems and all(
            checksums.get(r.record_id) in (None, r.sha256) for r in decoded.records
        ):
            durable.unlink_quietly(segments_fd, name)
            doomed.append(name)
    if temps or doomed:
        fsio.fsync_fd(segments_fd, where)
    return doomed


__all__ = [
    "all_identifiers",
    "delete_many",
    "delete_records",
    "leftover_segments",
    "remove_acks",
    "remove_leftovers",
]
