"""Tampering and drift on real files: every one is detected, each with its own code."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from dpone.dlq.canonical import checksum
from dpone.dlq.errors import (
    DlqAckChecksumMismatch,
    DlqChecksumMismatch,
    DlqIndexChecksumMismatch,
    DlqIndexDrift,
    DlqIndexMissing,
)
from dpone.dlq.store import DlqStore

from .conftest import record_files, rows

ACK = {
    "plan_id": "plan-1",
    "idempotency_key": "key-1",
    "outcome": "applied",
    "resolver_identity": "file",
    "target_identity": "duckdb",
}


@pytest.fixture
def closed(store: DlqStore) -> list[str]:
    writer = store.open_run("run-1", "load-1", pipeline="orders")
    ids = writer.write_chunk(rows(5))
    writer.close()
    assert store.verify() == []
    return ids


def _codes(store: DlqStore) -> list[str]:
    return sorted(f.code for f in store.verify())


def _record(root: Path, record_id: str) -> Path:
    return root / "runs" / "run-1" / "records" / f"{record_id}.json"


def test_a_flipped_byte_in_a_record(store: DlqStore, root: Path, closed: list[str]) -> None:
    path = _record(root, closed[2])
    path.write_bytes(path.read_bytes().replace(b"amount", b"amounT"))
    assert _codes(store) == ["DPONE_DLQ_CHECKSUM_MISMATCH"]
    [finding] = store.verify()
    assert finding.record_id == closed[2]
    assert finding.path == f"runs/run-1/records/{closed[2]}.json"
    with pytest.raises(DlqChecksumMismatch):
        store.read_record("run-1", closed[2])
    with pytest.raises(DlqChecksumMismatch):
        list(store.iter_records("run-1"))
    assert store.repair() == []  # tampering is never "repaired"
    assert _codes(store) == ["DPONE_DLQ_CHECKSUM_MISMATCH"]


def test_a_truncated_record(store: DlqStore, root: Path, closed: list[str]) -> None:
    path = _record(root, closed[0])
    path.write_bytes(path.read_bytes()[:40])
    assert _codes(store) == ["DPONE_DLQ_CHECKSUM_MISMATCH"]


def test_a_record_rewritten_with_a_fresh_checksum(
    store: DlqStore, root: Path, closed: list[str]
) -> None:
    path = _record(root, closed[1])
    doc = orjson.loads(path.read_bytes())
    del doc["sha256"]
    doc["diagnostics"]["source_offset"] = 999
    doc["sha256"] = checksum(doc)
    path.write_bytes(orjson.dumps(doc))
    assert _codes(store) == ["DPONE_DLQ_INDEX_DRIFT"]
    with pytest.raises(DlqIndexDrift):
        list(store.iter_records("run-1"))


def test_a_deleted_and_an_added_record(store: DlqStore, root: Path, closed: list[str]) -> None:
    _record(root, closed[0]).unlink()
    writer = store.open_run("run-2", "load-1")
    writer.write_chunk(rows(1, start=100))
    writer.close()
    assert _codes(store) == ["DPONE_DLQ_INDEX_DRIFT"]
    # A record of another run copied in: it verifies, but it is not this run's.
    [other] = record_files(root, "run-2")
    (root / "runs" / "run-1" / "records" / other.name).write_bytes(other.read_bytes())
    assert _codes(store) == ["DPONE_DLQ_INDEX_DRIFT", "DPONE_DLQ_RECORD_INVALID"]


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
    [repaired] = store.repair()
    assert repaired.code == "DPONE_DLQ_INDEX_MISSING"
    index = store.read_index("run-1")
    assert index.status == "aborted"
    assert index.status_reason == "index_missing"
    assert index.record_ids == tuple(closed)
    assert store.verify() == []


def test_a_tampered_ack(store: DlqStore, root: Path, closed: list[str]) -> None:
    sha = store.read_record("run-1", closed[0]).sha256
    store.write_ack("run-1", closed[0], {**ACK, "record_sha256": sha})
    path = root / "acks" / "run-1" / f"{closed[0]}.json"
    path.write_bytes(path.read_bytes().replace(b"applied", b"still_rejected"))
    assert _codes(store) == ["DPONE_DLQ_ACK_CHECKSUM_MISMATCH"]
    with pytest.raises(DlqAckChecksumMismatch):
        store.read_ack("run-1", closed[0])


def test_an_ack_of_a_record_the_run_does_not_hold(
    store: DlqStore, root: Path, closed: list[str]
) -> None:
    sha = store.read_record("run-1", closed[0]).sha256
    store.write_ack("run-1", closed[0], {**ACK, "record_sha256": sha})
    forged = root / "acks" / "run-1" / "7ZZZZZZZZZZZZZZZZZZZZZZZZZ.json"
    doc = orjson.loads((root / "acks" / "run-1" / f"{closed[0]}.json").read_bytes())
    del doc["sha256"]
    doc["record_id"] = forged.stem
    doc["sha256"] = checksum(doc)
    forged.write_bytes(orjson.dumps(doc))
    assert _codes(store) == ["DPONE_DLQ_ACK_ORPHAN"]


def test_stray_files_are_reported(store: DlqStore, root: Path, closed: list[str]) -> None:
    (root / "runs" / "run-1" / "records" / "notes.txt").write_text("hello")
    (root / "runs" / "run-1" / ".index.json.tmp-1-abcd").write_text("{")
    codes = {(f.code, f.repairable) for f in store.verify()}
    assert codes == {("DPONE_DLQ_STRAY_FILE", False), ("DPONE_DLQ_STRAY_FILE", True)}
    assert [f.code for f in store.repair()] == ["DPONE_DLQ_STRAY_FILE"]
    assert [f.path for f in store.verify()] == ["runs/run-1/records/notes.txt"]
