"""The file store on real disk: create-only segments, idempotent rewrites, run lifecycle."""

from __future__ import annotations

import hashlib
import os
from dataclasses import replace
from pathlib import Path

import orjson
import pytest

from dpone.canonical import checksum, verify_checksum
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.acks import read_ack, replay_id_of
from dpone.dlq.errors import (
    DlqAckConflict,
    DlqAckMismatch,
    DlqRecordConflict,
    DlqRunLocked,
    DlqRunMismatch,
    DlqRunNotFound,
    DlqRunNotOpen,
)
from dpone.dlq.model import DlqRecord, Reason
from dpone.dlq.store import DlqStore
from dpone.ops.verification import verify_store
from dpone.testing import FrozenClock
from tests.support.dlqfiles import lines_of, record_ids_on_disk, segment_files
from tests.support.dlqrows import StoreFactory, rows, run_writer

ACK = {
    "plan_id": "sha256:" + "1" * 64,
    "idempotency_key": "key-1",
    "outcome": "applied",
    "resolver_identity": "file:data/orders.csv",
    "target_identity": "duckdb:analytics.orders",
}


def test_open_run_writes_an_open_index_at_once(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1", pipeline="orders")
    index = store.read_index("run-1")
    assert index.status == "open"
    assert index.pipeline == "orders"
    assert index.owner_pid == os.getpid()
    assert index.record_count == 0
    assert (root / "runs" / "run-1" / "writer.lock").exists()
    assert not [p for p in (root / "runs").iterdir() if p.name.startswith(".")]
    writer.close()
    assert not (root / "runs" / "run-1" / "writer.lock").exists()


def test_chunk_is_written_and_closed(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1", pipeline="orders")
    first = writer.write_chunk(rows(100))
    second = writer.write_chunk(rows(50, start=101, reason=ReasonCode.REQUIRED_NULL))
    assert len(set(first + second)) == 150
    assert first + second == sorted(first + second)  # ULIDs keep the write order
    result = writer.close()
    assert result.status == "closed"
    assert result.record_count == 150
    assert result.reason_counts == {"schema.required_null": 50, "schema.type_mismatch": 100}
    assert result.index_ref == "runs/run-1/index.json"
    index = store.read_index("run-1")
    assert index.status == "closed"
    assert index.owner_pid is None
    assert index.record_ids == tuple(sorted(first + second))
    assert index.fingerprint == result.fingerprint
    assert index.sha256 == result.index_sha256
    assert [r.record_id for r in store.iter_records("run-1")] == sorted(first + second)
    # One segment per chunk, its lines in record-id order, listed in the index as it is.
    files = segment_files(root, "run-1")
    assert [p.name for p in files] == ["00000001.jsonl", "00000002.jsonl"]
    for path, chunk in zip(files, (first, second), strict=True):
        assert [orjson.loads(line)["record_id"] for line in lines_of(path)] == chunk
    assert [s.to_json() for s in index.segments] == [
        {
            "name": path.name,
            "sha256": "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest(),
            "record_count": len(chunk),
            "first_record_id": chunk[0],
            "last_record_id": chunk[-1],
            "expires_at": "2026-03-31T12:00:00.000000Z",
        }
        for path, chunk in zip(files, (first, second), strict=True)
    ]
    assert verify_store(store) == []


def test_record_line_is_canonical_and_checksummed(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    [record_id] = writer.write_chunk(rows(1))
    [line] = lines_of(segment_files(root, "run-1")[0])
    doc = orjson.loads(line)
    assert doc["record_id"] == record_id
    assert set(doc) == {
        "schema", "record_id", "run_id", "load_id", "record_ref", "reason", "diagnostics",
        "payload", "replay", "created_at", "expires_at", "sha256",
    }  # fmt: skip
    assert verify_checksum(doc)
    assert doc["sha256"] == checksum({k: v for k, v in doc.items() if k != "sha256"})
    # The line is the record's canonical JSON (sorted keys, no whitespace), checksum included.
    assert line == orjson.dumps(doc, option=orjson.OPT_SORT_KEYS)
    writer.close()


def test_same_row_twice_is_one_record(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    ids = writer.write_chunk(rows(3) + rows(2))
    assert ids[3:] == ids[:2]
    again = writer.write_chunk(rows(3))
    assert again == ids[:3]
    assert len(segment_files(root, "run-1")) == 1  # the second chunk wrote nothing
    assert record_ids_on_disk(root, "run-1") == sorted(ids[:3])
    writer.close()


def test_same_record_written_again_is_a_noop(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    [record_id] = writer.write_chunk(rows(1))
    [path] = segment_files(root, "run-1")
    before = path.stat()
    assert writer.write_chunk(rows(1)) == [record_id]
    assert segment_files(root, "run-1") == [path]  # no second segment holding it again
    after = path.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )
    assert writer.close().record_ids == (record_id,)
    assert verify_store(store) == []


def test_same_id_other_checksum_is_a_conflict(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    [record_id] = writer.write_chunk(rows(1))
    [path] = segment_files(root, "run-1")
    original = path.read_bytes()
    record = store.read_record("run-1", record_id)
    other = replace(
        record,
        reason=Reason("schema", ReasonCode.REQUIRED_NULL, "enforce", "x", "amount"),
        sha256="",
    )
    doc = other.to_json()
    doc.pop("sha256")
    forged = DlqRecord.from_json({**doc, "sha256": checksum(doc)})
    # Another record under the same id, in the segment the writer publishes next.
    planted = path.with_name("00000002.jsonl")
    planted.write_bytes(orjson.dumps(forged.to_json(), option=orjson.OPT_SORT_KEYS) + b"\n")
    planted_bytes = planted.read_bytes()
    with pytest.raises(DlqRecordConflict) as caught:
        writer.write_chunk(rows(1, start=2))
    assert caught.value.code == "DPONE_DLQ_RECORD_CONFLICT"
    assert path.read_bytes() == original  # both files kept as they are
    assert planted.read_bytes() == planted_bytes
    assert store.read_record("run-1", record_id) == record
    planted.unlink()  # the operator removes the forged file: the chunk can be retried
    [second] = writer.write_chunk(rows(1, start=2))
    assert writer.close().record_ids == (record_id, second)
    assert store.read_record("run-1", record_id) == record
    assert verify_store(store) == []


def test_a_closed_run_cannot_be_written(store: DlqStore) -> None:
    writer = store.open_run("run-1", "load-1")
    writer.close()
    with pytest.raises(DlqRunNotOpen):
        writer.write_chunk(rows(1))
    with pytest.raises(DlqRunNotOpen):
        store.open_run("run-1", "load-1")


def test_a_live_writer_locks_its_run(store: DlqStore) -> None:
    writer = store.open_run("run-1", "load-1")
    with pytest.raises(DlqRunLocked):
        store.open_run("run-1", "load-1")
    assert store.recover_abandoned() == []  # alive: not touched
    assert verify_store(store) == []
    writer.close()


def test_context_manager_closes_or_aborts(store: DlqStore) -> None:
    with store.open_run("run-1", "load-1") as writer:
        writer.write_chunk(rows(2))
    assert store.read_index("run-1").status == "closed"

    def failing_run() -> None:
        with store.open_run("run-2", "load-1") as writer:
            writer.write_chunk(rows(2))
            raise RuntimeError("the sink failed")

    with pytest.raises(RuntimeError, match="the sink failed"):
        failing_run()
    index = store.read_index("run-2")
    assert index.status == "aborted"
    assert index.status_reason == "run_failed"
    assert index.record_count == 2


def test_abort_after_close_marks_the_run_aborted(store: DlqStore) -> None:
    writer = store.open_run("run-1", "load-1")
    ids = writer.write_chunk(rows(3))
    writer.close()
    result = writer.abort()
    assert result.status == "aborted"
    assert list(result.record_ids) == ids
    assert store.read_index("run-1").status_reason == "run_failed"
    assert verify_store(store) == []


def test_restarted_writer_resumes_with_the_records_on_disk(
    make_store: StoreFactory, root: Path
) -> None:
    [ids] = run_writer(root, run_id="run-1", chunks=[3], mode="abandon")
    store = make_store()
    writer = store.open_run("run-1", "load-1", pipeline="orders")
    assert writer.record_count == 3
    assert writer.write_chunk(rows(3)) == ids  # the same rows: already recorded
    more = writer.write_chunk(rows(2, start=4))
    assert min(more) > max(ids)
    assert writer.close().record_count == 5


def test_resuming_needs_the_same_load(make_store: StoreFactory, root: Path) -> None:
    run_writer(root, run_id="run-1", chunks=[1], mode="abandon")
    with pytest.raises(DlqRunMismatch):
        make_store().open_run("run-1", "another-load")
    with pytest.raises(DlqRunMismatch):
        make_store(pii_policy="masked").open_run("run-1", "load-1")


def test_recover_abandoned_aborts_only_dead_writers_of_the_pipeline(
    make_store: StoreFactory, root: Path
) -> None:
    [ids] = run_writer(root, run_id="run-dead", chunks=[4], mode="abandon")
    store = make_store()
    live = store.open_run("run-live", "load-1", pipeline="orders")
    assert store.recover_abandoned(pipeline="another") == []
    assert store.recover_abandoned(pipeline="orders") == ["run-dead"]
    index = store.read_index("run-dead")
    assert index.status == "aborted"
    assert index.status_reason == "writer_gone"
    assert index.record_ids == tuple(ids)
    assert store.read_index("run-live").status == "open"
    assert store.recover_abandoned() == []
    live.close()
    assert verify_store(store) == []


def test_acks_are_create_only(store: DlqStore, clock: FrozenClock, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    [record_id] = writer.write_chunk(rows(1))
    with pytest.raises(DlqRunNotOpen):
        store.write_ack("run-1", record_id, {**ACK, "record_sha256": "sha256:" + "0" * 64})
    writer.close()
    record = store.read_record("run-1", record_id)
    ack = store.write_ack("run-1", record_id, {**ACK, "record_sha256": record.sha256})
    assert ack.acknowledged_at == "2026-03-01T12:00:00.000000Z"
    assert read_ack(store, "run-1", record_id) == ack
    clock.advance(minutes=5)
    again = store.write_ack("run-1", record_id, ack)  # the same acknowledgement: a no-op
    assert again == ack
    with pytest.raises(DlqAckConflict):
        store.write_ack("run-1", record_id, replace(ack, outcome="still_rejected"))
    with pytest.raises(DlqAckMismatch):
        store.write_ack("run-1", record_id, replace(ack, record_sha256="sha256:" + "0" * 64))
    assert [p.name for p in (root / "acks" / "run-1").iterdir()] == [
        f"{replay_id_of(ACK['plan_id'])}-000001.jsonl"
    ]
    assert verify_store(store) == []


def test_reading_an_unknown_run(store: DlqStore) -> None:
    with pytest.raises(DlqRunNotFound):
        store.read_index("nope")
