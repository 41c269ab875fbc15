"""Segment files on real disk: splitting, lookup by id, ack segments, retention compaction."""

from __future__ import annotations

import hashlib
import re
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from dpone.dlq.acks import replay_id_of
from dpone.dlq.errors import DlqAckConflict, DlqRecordNotFound, DlqRunLocked, DlqRunNotOpen
from dpone.dlq.store import DlqStore
from dpone.ids import UlidSequence
from dpone.ops.verification import verify_store
from dpone.testing import FrozenClock
from tests.support.dlqfiles import (
    ack_files,
    acked_ids,
    lines_of,
    locate,
    record_ids_on_disk,
    segment_files,
    temp_files,
)
from tests.support.dlqrows import StoreFactory, rows, run_writer

MIB = 1_048_576
PLAN = "sha256:" + "7" * 64
COMPACTED = re.compile(r"(\d{8})-k[0-9a-f]{12}\.jsonl")


def _ack(store: DlqStore, run_id: str, record_id: str, **changes: Any) -> dict[str, Any]:
    return {
        "record_id": record_id,
        "record_sha256": store.read_record(run_id, record_id).sha256,
        "plan_id": PLAN,
        "idempotency_key": f"key-{record_id.lower()}",
        "outcome": "applied",
        "resolver_identity": "file:data/orders.csv",
        "target_identity": "duckdb:analytics.orders",
        **changes,
    }


def _sha(path: Path) -> str:
    return "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()


# --- writing --------------------------------------------------------------------------------------


def test_max_segment_bytes_cuts_one_chunk_into_several_segments(
    make_store: StoreFactory, root: Path
) -> None:
    store = make_store(pii_policy="preserve", max_segment_bytes=MIB)
    values = [{"note": "x" * 100_000}] * 25  # about 100 KB a record: ten to a segment
    with store.open_run("run-1", "load-1") as writer:
        ids = writer.write_chunk(rows(25, values=values))
    files = segment_files(root, "run-1")
    assert [p.name for p in files] == [f"{n:08d}.jsonl" for n in range(1, len(files) + 1)]
    assert len(files) == 3
    sizes = [p.stat().st_size for p in files]
    assert all(size <= MIB for size in sizes)
    # Each segment is as full as the limit allows: the next record would not have fit.
    for path, following in pairwise(files):
        assert path.stat().st_size + len(lines_of(following)[0]) + 1 > MIB
    # The lines, segment after segment, are the chunk's records in record-id order.
    on_disk = [orjson.loads(line)["record_id"] for p in files for line in lines_of(p)]
    assert on_disk == sorted(ids) == ids
    index = store.read_index("run-1")
    assert [(s.name, s.sha256, s.record_count) for s in index.segments] == [
        (p.name, _sha(p), len(lines_of(p))) for p in files
    ]
    assert sum(s.record_count for s in index.segments) == index.record_count == 25
    assert temp_files(root, "run-1") == []
    assert verify_store(store) == []


def test_a_record_is_found_through_the_first_and_last_ids_of_its_segment(
    store: DlqStore, root: Path
) -> None:
    with store.open_run("run-1", "load-1") as writer:
        chunks = [writer.write_chunk(rows(4, start=1 + 4 * n)) for n in range(3)]
    index = store.read_index("run-1")
    assert [(s.first_record_id, s.last_record_id) for s in index.segments] == [
        (chunk[0], chunk[-1]) for chunk in chunks
    ]
    for chunk in chunks:
        for record_id in chunk:
            segment = index.segment_of(record_id)
            assert segment is not None
            path, _ = locate(root, "run-1", record_id)
            assert segment.name == path.name
            assert store.read_record("run-1", record_id).record_id == record_id
    # An id after every segment's range (one inside a range is in the compaction test).
    [later] = UlidSequence(after=chunks[-1][-1]).batch(1, FrozenClock("2030-01-01T00:00:00Z")())
    assert index.segment_of(later) is None
    with pytest.raises(DlqRecordNotFound):
        store.read_record("run-1", later)


# --- acknowledgements ---------------------------------------------------------------------------


def test_acks_of_one_replay_are_one_segment_and_a_repeat_is_a_noop(
    store: DlqStore, root: Path, clock: FrozenClock
) -> None:
    with store.open_run("run-1", "load-1") as writer:
        ids = writer.write_chunk(rows(4))
    replay = replay_id_of(PLAN)
    assert replay == "7" * 32

    written = store.write_acks("run-1", replay, [_ack(store, "run-1", rid) for rid in ids[:3]])

    [path] = ack_files(root, "run-1")
    assert path.name == f"{replay}-000001.jsonl"
    assert [orjson.loads(line)["record_id"] for line in lines_of(path)] == ids[:3]
    before = path.read_bytes()
    clock.advance(minutes=5)
    again = store.write_acks("run-1", replay, [_ack(store, "run-1", rid) for rid in ids[:3]])
    assert again == written  # the acknowledgements on disk, not new ones
    assert ack_files(root, "run-1") == [path]
    assert path.read_bytes() == before
    # A batch with one acknowledged and one new record writes the new one only.
    more = store.write_acks("run-1", replay, [_ack(store, "run-1", rid) for rid in ids[2:]])
    assert more[0] == written[2]
    second = root / "acks" / "run-1" / f"{replay}-000002.jsonl"
    assert ack_files(root, "run-1") == [path, second]
    assert [orjson.loads(line)["record_id"] for line in lines_of(second)] == ids[3:]
    assert sorted(store.read_acks("run-1")) == sorted(ids)
    assert verify_store(store) == []


def test_another_ack_of_an_acknowledged_record_is_a_conflict(store: DlqStore, root: Path) -> None:
    with store.open_run("run-1", "load-1") as writer:
        ids = writer.write_chunk(rows(2))
    replay = replay_id_of(PLAN)
    store.write_acks("run-1", replay, [_ack(store, "run-1", ids[0])])
    files = ack_files(root, "run-1")
    for change in (
        {"outcome": "still_rejected"},
        {"idempotency_key": "key-other"},
        {"plan_id": "sha256:" + "8" * 64},
    ):
        batch = [_ack(store, "run-1", ids[1]), _ack(store, "run-1", ids[0], **change)]
        with pytest.raises(DlqAckConflict) as caught:
            store.write_acks("run-1", replay, batch)
        assert caught.value.code == "DPONE_DLQ_ACK_CONFLICT"
    assert ack_files(root, "run-1") == files  # nothing of a refused batch is written
    assert acked_ids(root, "run-1") == [ids[0]]
    assert verify_store(store) == []


# --- retention compaction -----------------------------------------------------------------------


@pytest.fixture
def three_segments(store: DlqStore) -> list[list[str]]:
    """run-1 closed with three segments of four records; every record acknowledged."""
    with store.open_run("run-1", "load-1") as writer:
        chunks = [writer.write_chunk(rows(4, start=1 + 4 * n)) for n in range(3)]
    every = [rid for chunk in chunks for rid in chunk]
    store.write_acks("run-1", replay_id_of(PLAN), [_ack(store, "run-1", r) for r in every])
    return chunks


def test_delete_records_drops_whole_segments_and_compacts_the_rest(
    store: DlqStore, root: Path, three_segments: list[list[str]]
) -> None:
    first, second, third = three_segments
    seg1, seg2, seg3 = segment_files(root, "run-1")
    kept_lines = [lines_of(seg2)[1], lines_of(seg2)[3]]
    third_inode = seg3.stat().st_ino
    doomed = [*first, second[0], second[2]]

    index = store.delete_records("run-1", doomed)

    kept = [second[1], second[3], *third]
    assert index.record_ids == tuple(kept)
    files = segment_files(root, "run-1")
    assert len(files) == 2
    compacted = files[0]
    assert COMPACTED.fullmatch(compacted.name)
    assert compacted.name.startswith("00000002-k")
    assert lines_of(compacted) == kept_lines  # the kept lines, byte for byte
    assert files[1] == seg3
    assert seg3.stat().st_ino == third_inode  # untouched
    assert not seg1.exists()
    assert not seg2.exists()
    listed = [
        (s.name, s.sha256, s.record_count, s.first_record_id, s.last_record_id)
        for s in index.segments
    ]
    assert listed == [
        (compacted.name, _sha(compacted), 2, second[1], second[3]),
        (seg3.name, _sha(seg3), 4, third[0], third[-1]),
    ]
    assert store.read_index("run-1") == index
    assert temp_files(root, "run-1") == []
    assert acked_ids(root, "run-1") == sorted(kept)  # the acks of deleted records went
    assert sorted(store.read_acks("run-1")) == sorted(kept)
    for record_id in kept:
        assert store.read_record("run-1", record_id).record_id == record_id
    # second[2] lies between the first and last ids of the compacted segment, and is gone.
    assert index.segment_of(second[2]) == index.segments[0]
    with pytest.raises(DlqRecordNotFound):
        store.read_record("run-1", second[2])
    assert verify_store(store) == []

    # The same deletion again is a no-op; a compacted segment compacts again by its stem.
    assert store.delete_records("run-1", doomed) == index
    index = store.delete_records("run-1", [second[1]])
    [again, _] = segment_files(root, "run-1")
    assert again.name.startswith("00000002-k")
    assert again.name != compacted.name
    assert lines_of(again) == kept_lines[1:]
    assert index.record_ids == (second[3], *third)
    assert record_ids_on_disk(root, "run-1") == sorted(index.record_ids)
    assert verify_store(store) == []


def test_delete_records_refuses_an_open_run(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    ids = writer.write_chunk(rows(2))
    writer.abort()
    store.delete_records("run-1", ids[:1])  # an aborted run: allowed
    assert record_ids_on_disk(root, "run-1") == ids[1:]
    live = store.open_run("run-2", "load-1")
    live.write_chunk(rows(2))
    with pytest.raises(DlqRunLocked):
        store.delete_records("run-2", [])
    live.close()
    assert verify_store(store) == []


def test_delete_records_of_a_run_left_open_is_refused(make_store: StoreFactory, root: Path) -> None:
    [ids] = run_writer(root, run_id="run-1", chunks=[2], mode="abandon")
    with pytest.raises(DlqRunNotOpen):
        make_store().delete_records("run-1", ids)
    assert record_ids_on_disk(root, "run-1") == sorted(ids)
