"""Tampering and drift on real files: every one is detected, each with its own code, naming
the segment and the line; ``--repair`` fixes what a crash leaves and never what tampering does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dpone import durable
from dpone.canonical import checksum
from dpone.dlq.acks import read_ack, replay_id_of
from dpone.dlq.errors import (
    DlqAckChecksumMismatch,
    DlqChecksumMismatch,
    DlqIndexChecksumMismatch,
    DlqIndexDrift,
    DlqIndexMissing,
    DlqRecordInvalid,
)
from dpone.dlq.integrity import Finding
from dpone.dlq.store import DlqStore
from dpone.ops.repair import repair_store
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import ack_files, lines_of, rewrite_line, segment_files, segments_dir
from tests.support.dlqrows import StoreFactory, rows, run_writer

ACK = {
    "plan_id": "plan-1",
    "idempotency_key": "key-1",
    "outcome": "applied",
    "resolver_identity": "file",
    "target_identity": "duckdb",
}
SEGMENT = "runs/run-1/segments/00000001.jsonl"


@pytest.fixture
def closed(store: DlqStore) -> list[str]:
    """run-1 closed: one segment of five records."""
    writer = store.open_run("run-1", "load-1", pipeline="orders")
    ids = writer.write_chunk(rows(5))
    writer.close()
    assert verify_store(store) == []
    return ids


@pytest.fixture
def segment(root: Path, closed: list[str]) -> Path:
    [path] = segment_files(root, "run-1")
    return path


def _codes(store: DlqStore) -> list[str]:
    return sorted(f.code for f in verify_store(store))


def _where(finding: Finding) -> tuple[str, str | None, int | None]:
    return finding.code, finding.path, finding.line


def _resealed(line: bytes, **changes: Any) -> bytes:
    """A record line changed and given a checksum that matches again (a careful forger)."""
    doc = orjson.loads(line)
    del doc["sha256"]
    doc.update(changes)
    doc["sha256"] = checksum(doc)
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)


def _assert_not_repaired(store: DlqStore, before: list[Finding]) -> None:
    assert repair_store(store) == []  # tampering is never "repaired"
    assert verify_store(store) == before


# --- one tamper at a time -----------------------------------------------------------------------


def test_a_line_whose_checksum_fails(store: DlqStore, segment: Path, closed: list[str]) -> None:
    rewrite_line(segment, 3, lines_of(segment)[2].replace(b"amount", b"amounT"))
    findings = verify_store(store)
    assert [_where(f) for f in findings] == [("DPONE_DLQ_CHECKSUM_MISMATCH", SEGMENT, 3)]
    assert "line 3" in findings[0].message
    with pytest.raises(DlqChecksumMismatch, match=f"{SEGMENT} line 3"):
        store.read_record("run-1", closed[2])
    with pytest.raises(DlqChecksumMismatch):
        store.read_record("run-1", closed[0])  # the segment is read whole: it fails whole
    with pytest.raises(DlqChecksumMismatch):
        list(store.iter_records("run-1"))
    _assert_not_repaired(store, findings)


def test_a_truncated_line(store: DlqStore, segment: Path, closed: list[str]) -> None:
    segment.write_bytes(segment.read_bytes()[:-40])
    findings = verify_store(store)
    assert [_where(f) for f in findings] == [("DPONE_DLQ_CHECKSUM_MISMATCH", SEGMENT, 5)]
    assert "truncated" in findings[0].message
    _assert_not_repaired(store, findings)


def test_a_segment_whose_bytes_fail(store: DlqStore, segment: Path, closed: list[str]) -> None:
    # Every line verifies, but the segment is not the bytes the index lists.
    line = lines_of(segment)[1]
    diagnostics = {**orjson.loads(line)["diagnostics"], "source_offset": 999}
    rewrite_line(segment, 2, _resealed(line, diagnostics=diagnostics))
    findings = verify_store(store)
    assert sorted(_where(f) for f in findings) == [
        ("DPONE_DLQ_CHECKSUM_MISMATCH", SEGMENT, None),
        ("DPONE_DLQ_INDEX_DRIFT", SEGMENT, 2),
    ]
    drift = next(f for f in findings if f.code == "DPONE_DLQ_INDEX_DRIFT")
    assert drift.record_id == closed[1]
    with pytest.raises(DlqChecksumMismatch, match="not the bytes the run index lists"):
        store.read_record("run-1", closed[0])
    with pytest.raises(DlqChecksumMismatch):
        list(store.iter_records("run-1"))
    _assert_not_repaired(store, findings)


def test_a_line_removed(store: DlqStore, segment: Path, closed: list[str]) -> None:
    rewrite_line(segment, 3, None)
    findings = verify_store(store)
    assert sorted(_where(f) for f in findings) == [
        ("DPONE_DLQ_CHECKSUM_MISMATCH", SEGMENT, None),
        ("DPONE_DLQ_INDEX_DRIFT", SEGMENT, 2),
    ]
    drift = next(f for f in findings if f.code == "DPONE_DLQ_INDEX_DRIFT")
    assert drift.record_id == closed[2]
    assert "a line removed after line 2" in drift.message
    with pytest.raises(DlqChecksumMismatch):
        store.read_record("run-1", closed[2])
    _assert_not_repaired(store, findings)


def test_lines_reordered(store: DlqStore, segment: Path, closed: list[str]) -> None:
    lines = lines_of(segment)
    lines[1], lines[2] = lines[2], lines[1]
    segment.write_bytes(b"".join(line + b"\n" for line in lines))
    findings = verify_store(store)
    assert [_where(f) for f in findings] == [("DPONE_DLQ_RECORD_INVALID", SEGMENT, 3)]
    assert "out of record-id order" in findings[0].message
    with pytest.raises(DlqRecordInvalid):
        list(store.iter_records("run-1"))
    _assert_not_repaired(store, findings)


def test_a_segment_deleted(store: DlqStore, segment: Path, closed: list[str]) -> None:
    segment.unlink()
    findings = verify_store(store)
    assert [_where(f) for f in findings] == [("DPONE_DLQ_INDEX_DRIFT", SEGMENT, None)]
    assert "in the index but not on disk" in findings[0].message
    with pytest.raises(DlqIndexDrift):
        store.read_record("run-1", closed[0])
    with pytest.raises(DlqIndexDrift):
        list(store.iter_records("run-1"))
    _assert_not_repaired(store, findings)


def test_an_unlisted_segment_holding_listed_records(
    store: DlqStore, root: Path, segment: Path, closed: list[str]
) -> None:
    # The listed segment renamed: the index's records are in a segment it does not list.
    moved = segment.with_name("00000009.jsonl")
    segment.rename(moved)
    findings = verify_store(store)
    assert sorted((_where(f), f.repairable) for f in findings) == [
        (("DPONE_DLQ_INDEX_DRIFT", SEGMENT, None), False),
        (("DPONE_DLQ_SEGMENT_UNLISTED", "runs/run-1/segments/00000009.jsonl", None), False),
    ]
    with pytest.raises(DlqIndexDrift):
        store.read_record("run-1", closed[0])
    _assert_not_repaired(store, findings)
    assert moved.exists()


def test_a_segment_of_another_run_copied_in(store: DlqStore, root: Path, closed: list[str]) -> None:
    with store.open_run("run-2", "load-1") as writer:
        writer.write_chunk(rows(1, start=100))
    [other] = segment_files(root, "run-2")
    (segments_dir(root, "run-1") / "00000002.jsonl").write_bytes(other.read_bytes())
    findings = verify_store(store)
    assert [_where(f) for f in findings] == [
        ("DPONE_DLQ_RECORD_INVALID", "runs/run-1/segments/00000002.jsonl", 1)
    ]
    assert "another run" in findings[0].message
    _assert_not_repaired(store, findings)


# --- what a crash leaves: repairable ------------------------------------------------------------


def test_a_torn_temp_file_is_repaired(store: DlqStore, root: Path, closed: list[str]) -> None:
    torn = segments_dir(root, "run-1") / durable.temp_name("00000002.jsonl")
    torn.write_bytes(b'{"schema":"dpone.dlq.v1","rec')  # a publish interrupted mid-write
    [finding] = verify_store(store)
    assert _where(finding) == ("DPONE_DLQ_TORN_SEGMENT", f"runs/run-1/segments/{torn.name}", None)
    assert finding.repairable
    assert repair_store(store) == [finding]
    assert not torn.exists()
    assert verify_store(store) == []
    assert store.read_index("run-1").record_ids == tuple(closed)


def test_a_compaction_leftover_is_repaired(
    store: DlqStore, root: Path, segment: Path, closed: list[str]
) -> None:
    # What a retention compaction killed before its index replace leaves: a new segment
    # holding a part of the listed one's lines, under its compacted name.
    leftover = segments_dir(root, "run-1") / "00000001-k0123456789ab.jsonl"
    leftover.write_bytes(b"".join(line + b"\n" for line in lines_of(segment)[2:]))
    [finding] = verify_store(store)
    where = f"runs/run-1/segments/{leftover.name}"
    assert _where(finding) == ("DPONE_DLQ_SEGMENT_UNLISTED", where, None)
    assert finding.repairable
    assert repair_store(store) == [finding]
    assert not leftover.exists()
    assert segment_files(root, "run-1") == [segment]
    assert verify_store(store) == []


def test_repair_fixes_exactly_the_crash_cases(make_store: StoreFactory, root: Path) -> None:
    store = make_store()
    for run_id in ("tamper-1", "tamper-2", "tamper-3", "torn", "compacted"):
        with store.open_run(run_id, "load-1", pipeline="orders") as writer:
            writer.write_chunk(rows(4))
    run_writer(root, run_id="abandoned", chunks=[3], mode="abandon")
    [checksum_fails] = segment_files(root, "tamper-1")
    rewrite_line(checksum_fails, 2, lines_of(checksum_fails)[1].replace(b"amount", b"amounT"))
    [line_removed] = segment_files(root, "tamper-2")
    rewrite_line(line_removed, 4, None)
    segment_files(root, "tamper-3")[0].unlink()
    torn = segments_dir(root, "torn") / durable.temp_name("00000002.jsonl")
    torn.write_bytes(b"")
    [kept] = segment_files(root, "compacted")
    leftover = segments_dir(root, "compacted") / "00000001-kabcdefabcdef.jsonl"
    leftover.write_bytes(b"".join(line + b"\n" for line in lines_of(kept)[:1]))
    before = verify_store(store)
    crash = {
        ("DPONE_DLQ_RUN_ABANDONED", "runs/abandoned", None),
        ("DPONE_DLQ_TORN_SEGMENT", f"runs/torn/segments/{torn.name}", None),
        ("DPONE_DLQ_SEGMENT_UNLISTED", f"runs/compacted/segments/{leftover.name}", None),
    }
    tamper = [
        ("DPONE_DLQ_CHECKSUM_MISMATCH", "runs/tamper-1/segments/00000001.jsonl", 2),
        ("DPONE_DLQ_CHECKSUM_MISMATCH", "runs/tamper-2/segments/00000001.jsonl", None),
        ("DPONE_DLQ_INDEX_DRIFT", "runs/tamper-2/segments/00000001.jsonl", 3),
        ("DPONE_DLQ_INDEX_DRIFT", "runs/tamper-3/segments/00000001.jsonl", None),
    ]
    assert {_where(f) for f in before if f.repairable} == crash
    assert sorted((_where(f) for f in before if not f.repairable), key=str) == tamper

    repaired = repair_store(store)

    assert {_where(f) for f in repaired} == crash
    assert sorted((_where(f) for f in verify_store(store)), key=str) == tamper
    assert store.read_index("abandoned").status == "aborted"
    assert not torn.exists()
    assert not leftover.exists()
    assert kept.exists()
    assert repair_store(store) == []  # nothing left a repair may touch


# --- index and acknowledgements -----------------------------------------------------------------


def test_a_tampered_index(store: DlqStore, root: Path, closed: list[str]) -> None:
    path = root / "runs" / "run-1" / "index.json"
    doc = orjson.loads(path.read_bytes())
    doc["records"] = doc["records"][1:]
    path.write_bytes(orjson.dumps(doc))
    assert _codes(store) == ["DPONE_DLQ_INDEX_CHECKSUM_MISMATCH"]
    with pytest.raises(DlqIndexChecksumMismatch):
        store.read_index("run-1")


def test_an_index_with_a_consistent_checksum_but_wrong_fingerprint(
    store: DlqStore, root: Path, closed: list[str]
) -> None:
    path = root / "runs" / "run-1" / "index.json"
    doc = orjson.loads(path.read_bytes())
    del doc["sha256"]
    doc["records"] = doc["records"][1:]
    doc["record_count"] -= 1
    doc["reason_counts"] = {"schema.type_mismatch": 4}
    doc["sha256"] = checksum(doc)
    path.write_bytes(orjson.dumps(doc))
    assert _codes(store) == ["DPONE_DLQ_INDEX_INVALID"]


def test_a_missing_index(store: DlqStore, root: Path, closed: list[str]) -> None:
    (root / "runs" / "run-1" / "index.json").unlink()
    assert _codes(store) == ["DPONE_DLQ_INDEX_MISSING"]
    with pytest.raises(DlqIndexMissing):
        store.read_index("run-1")
    [repaired] = repair_store(store)
    assert repaired.code == "DPONE_DLQ_INDEX_MISSING"
    index = store.read_index("run-1")
    assert index.status == "aborted"
    assert index.status_reason == "index_missing"
    assert index.record_ids == tuple(closed)
    assert [s.name for s in index.segments] == ["00000001.jsonl"]
    assert verify_store(store) == []


def test_a_tampered_ack(store: DlqStore, root: Path, closed: list[str]) -> None:
    for record_id in closed[:2]:
        sha = store.read_record("run-1", record_id).sha256
        store.write_ack("run-1", record_id, {**ACK, "record_sha256": sha})
    first, second = ack_files(root, "run-1")
    second.write_bytes(second.read_bytes().replace(b"applied", b"still_rejected"))
    findings = verify_store(store)
    assert [_where(f) for f in findings] == [
        ("DPONE_DLQ_ACK_CHECKSUM_MISMATCH", f"acks/run-1/{second.name}", 1)
    ]
    with pytest.raises(DlqAckChecksumMismatch):
        read_ack(store, "run-1", closed[0])  # every ack segment of the run is verified
    _assert_not_repaired(store, findings)
    assert first.name == f"{replay_id_of('plan-1')}-000001.jsonl"


def test_an_ack_of_a_record_the_run_does_not_hold(
    store: DlqStore, root: Path, closed: list[str]
) -> None:
    sha = store.read_record("run-1", closed[0]).sha256
    store.write_ack("run-1", closed[0], {**ACK, "record_sha256": sha})
    [real] = ack_files(root, "run-1")
    doc = json.loads(lines_of(real)[0])
    del doc["sha256"]
    doc["record_id"] = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"
    doc["sha256"] = checksum(doc)
    forged = real.with_name(real.name.replace("-000001", "-000002"))
    forged.write_bytes(real.read_bytes() + orjson.dumps(doc) + b"\n")
    findings = verify_store(store)
    assert [(_where(f), f.record_id, f.repairable) for f in findings] == [
        (
            ("DPONE_DLQ_ACK_ORPHAN", f"acks/run-1/{forged.name}", 2),
            "7ZZZZZZZZZZZZZZZZZZZZZZZZZ",
            True,
        )
    ]
    # It acknowledges nothing the run holds (what an interrupted retention leaves): repair
    # removes it and keeps the real acknowledgement.
    assert repair_store(store) == findings
    assert verify_store(store) == []
    assert list(store.read_acks("run-1")) == [closed[0]]


def test_stray_files_are_reported(store: DlqStore, root: Path, closed: list[str]) -> None:
    (segments_dir(root, "run-1") / "notes.txt").write_text("hello")
    (root / "runs" / "run-1" / ".index.json.tmp-1-abcd").write_text("{")
    codes = {(f.code, f.repairable) for f in verify_store(store)}
    assert codes == {("DPONE_DLQ_STRAY_FILE", False), ("DPONE_DLQ_STRAY_FILE", True)}
    assert [f.code for f in repair_store(store)] == ["DPONE_DLQ_STRAY_FILE"]
    assert [f.path for f in verify_store(store)] == ["runs/run-1/segments/notes.txt"]
    assert not (root / "runs" / "run-1" / ".index.json.tmp-1-abcd").exists()
    assert (segments_dir(root, "run-1") / "notes.txt").exists()
