"""The fast read paths (index columns, ack columns, the index cache) judge exactly as the full
checks do: what they accept verifies in full, and everything else goes the full way, where a
tampered file is still refused with its own code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from dpone.canonical import checksum
from dpone.dlq.acklines import sealed_ack_columns
from dpone.dlq.acks import ack_segment_ids, parse_ack_segment
from dpone.dlq.compaction import all_identifiers
from dpone.dlq.errors import (
    DlqAckChecksumMismatch,
    DlqError,
    DlqIndexChecksumMismatch,
    DlqIndexInvalid,
    DlqRunLocked,
)
from dpone.dlq.fsio import check_identifier
from dpone.dlq.index import DlqIndex, IndexEntry
from dpone.dlq.store import DlqStore
from dpone.ops.verification import verify_store
from tests.support.dlqfiles import ack_files, reseal_index
from tests.support.dlqrows import rows

ACK = {
    "plan_id": "plan-1",
    "idempotency_key": "key-1",
    "outcome": "applied",
    "resolver_identity": "file",
    "target_identity": "duckdb",
}


def _closed(store: DlqStore, run_id: str, count: int) -> list[str]:
    writer = store.open_run(run_id, "load-1", pipeline="orders")
    ids = writer.write_chunk(rows(count))
    writer.close()
    return ids


def _acknowledge(store: DlqStore, run_id: str, ids: list[str]) -> None:
    index = store.read_index(run_id)
    checksums = index.checksums()
    acks = [
        {**ACK, "record_id": rid, "record_sha256": checksums[rid], "idempotency_key": f"k-{rid}"}
        for rid in ids
    ]
    store.write_acks(run_id, "replay-1", acks, index=index)


@pytest.fixture
def acked(store: DlqStore, root: Path) -> Path:
    """run-1 closed with five records, all acknowledged in one ack segment."""
    ids = _closed(store, "run-1", 5)
    _acknowledge(store, "run-1", ids)
    [path] = ack_files(root, "run-1")
    return path


def test_ack_columns_are_what_the_full_check_reads(store: DlqStore, acked: Path) -> None:
    data = acked.read_bytes()
    found = sealed_ack_columns(data, "run-1")
    assert found is not None
    full = parse_ack_segment(data, "run-1", "x")
    assert found == ([a.record_id for a in full], [a.sha256 for a in full])
    assert store.ack_checksums("run-1") == {a.record_id: a.sha256 for a in full}


def test_every_changed_byte_of_an_ack_segment_is_refused(acked: Path) -> None:
    """Each byte of the first line changed in turn: the fast path never accepts the result,
    and the full check refuses it (as a bad line or one another run's)."""
    data = acked.read_bytes()
    first = data.index(b"\n")
    for at in range(first):
        changed = bytearray(data)
        changed[at] = ord("~") if data[at] != ord("~") else ord("!")
        assert sealed_ack_columns(bytes(changed), "run-1") is None, at
        with pytest.raises(DlqError):
            parse_ack_segment(bytes(changed), "run-1", "x")


def test_a_tampered_ack_segment_is_refused_by_retention_reads(store: DlqStore, acked: Path) -> None:
    assert len(store.ack_checksums("run-1")) == 5  # verified once, remembered by content
    acked.chmod(0o644)
    acked.write_bytes(acked.read_bytes().replace(b"applied", b"still_rejected", 1))
    with pytest.raises(DlqAckChecksumMismatch):
        store.ack_checksums("run-1")
    with pytest.raises(DlqAckChecksumMismatch):
        ack_segment_ids(store, "run-1")


def test_acks_in_another_json_form_are_read_the_full_way(store: DlqStore, acked: Path) -> None:
    """Another tool's valid form (spaces, another key order) verifies, through the full path."""
    lines = acked.read_bytes().splitlines()
    docs = [json.loads(line) for line in lines]
    redone = b"".join(json.dumps(doc, indent=None).encode() + b"\n" for doc in reversed(docs))
    assert sealed_ack_columns(redone, "run-1") is None
    acked.chmod(0o644)
    acked.write_bytes(redone)
    assert store.ack_checksums("run-1") == {d["record_id"]: d["sha256"] for d in docs}
    assert sorted(ack_segment_ids(store, "run-1")[0][2]) == sorted(d["record_id"] for d in docs)


def test_an_ack_of_a_run_whose_id_extends_this_one_is_not_taken(
    store: DlqStore, root: Path
) -> None:
    ids = _closed(store, "run-10", 2)
    _acknowledge(store, "run-10", ids)
    [path] = ack_files(root, "run-10")
    assert sealed_ack_columns(path.read_bytes(), "run-1") is None
    assert sealed_ack_columns(path.read_bytes(), "run-10") is not None


def test_a_second_member_on_a_line_sends_it_the_full_way(acked: Path) -> None:
    """A line whose checksum holds but which names the record twice (a forged extra key)."""
    line = acked.read_bytes().splitlines()[0]
    doc = json.loads(line)
    del doc["sha256"]
    doc["x"] = {"record_id": doc["record_id"]}
    doc["sha256"] = checksum(doc)
    forged = orjson.dumps(doc, option=orjson.OPT_SORT_KEYS) + b"\n"
    assert sealed_ack_columns(forged, "run-1") is None


def test_the_index_cache_never_hides_a_changed_index(
    store: DlqStore, root: Path, closed_many: list[str]
) -> None:
    first = store.read_index("run-1")
    assert store.read_index("run-1") is first  # the same bytes: verified once
    path = root / "runs" / "run-1" / "index.json"
    data = path.read_bytes()
    path.chmod(0o644)
    path.write_bytes(data.replace(b'"pipeline":"orders"', b'"pipeline":"orderz"'))
    with pytest.raises(DlqIndexChecksumMismatch):
        store.read_index("run-1")
    path.write_bytes(data)
    again = store.read_index("run-1")
    assert again == first
    reseal_index(root, "run-1")  # a forger's consistent index: read in full again
    assert store.read_index("run-1") is not first


@pytest.fixture
def closed_many(store: DlqStore) -> list[str]:
    return _closed(store, "run-1", 7)


def test_index_columns_and_entries(store: DlqStore, closed_many: list[str]) -> None:
    index = store.read_index("run-1")
    assert index.record_ids == tuple(closed_many)
    assert index.entries == tuple(
        IndexEntry(e["record_id"], e["sha256"], index.entries[0].code, e["column"])
        for e in index.records_json()
    )
    assert index.checksums() == dict(zip(index.record_ids, index.record_checksums, strict=True))
    gone = set(closed_many[1:3])
    kept = index.records_json(gone)
    assert [e["record_id"] for e in kept] == [r for r in closed_many if r not in gone]
    assert DlqIndex.from_json(index.to_json()) == index


_BAD_ENTRIES: list[tuple[str, Any, str]] = [
    ("record_id", "01ARZ3NDEKTSV4RRFFQ69G5FAI", "/record_id"),  # I is not Crockford
    ("record_id", "81ARZ3NDEKTSV4RRFFQ69G5FAV", "/record_id"),  # beyond the ULID range
    ("record_id", 7, "/record_id"),
    ("sha256", "sha256:" + "A" * 64, "/sha256"),
    ("sha256", "sha256:" + "0" * 64 + "\n", "/sha256"),
    ("sha256", "sha512:" + "0" * 64, "/sha256"),
    ("sha256", "sha256:" + "0" * 63 + "g", "/sha256"),
    ("sha256", "sha256:" + "0" * 63 + "x", "/sha256"),
    ("sha256", "sha256:" + "0" * 63 + "\0", "/sha256"),
    ("sha256", "sha256:" + "0" * 63 + "é", "/sha256"),
    ("sha256", "sha256" + "0" * 65, "/sha256"),
    ("code", "schema.nope", "/code"),
    ("code", ["schema.type_mismatch"], "/code"),
    ("column", "", "/column"),
    ("column", 3, "/column"),
]


@pytest.mark.parametrize(("key", "value", "pointer"), _BAD_ENTRIES)
def test_a_bad_index_entry_is_named(
    store: DlqStore, closed_many: list[str], key: str, value: Any, pointer: str
) -> None:
    doc = store.read_index("run-1").to_json()
    doc["records"][3][key] = value
    with pytest.raises(DlqIndexInvalid, match=f"/records/3{pointer}"):
        DlqIndex.from_json(doc)


def test_an_index_entry_with_another_key_is_named(store: DlqStore, closed_many: list[str]) -> None:
    doc = store.read_index("run-1").to_json()
    doc["records"][2]["extra"] = None
    with pytest.raises(DlqIndexInvalid, match="/records/2"):
        DlqIndex.from_json(doc)
    del doc["records"][2]["extra"]
    del doc["records"][2]["column"]
    with pytest.raises(DlqIndexInvalid, match="/records/2"):
        DlqIndex.from_json(doc)


@pytest.mark.parametrize(
    "values",
    [
        [],
        ["run-1", "01ARZ3NDEKTSV4RRFFQ69G5FAV", "a.b_c-d", "a" * 128],
        ["a\nb"],
        ["a\n"],
        [".a"],
        ["a/b"],
        ["a" * 129],
        [""],
        ["ok", 3],
        ["ok", "é"],
    ],
)
def test_identifiers_checked_at_once_as_one_by_one(values: list[Any]) -> None:
    def one_by_one() -> bool:
        try:
            for value in values:
                check_identifier(value, "record id")
        except DlqError:
            return False
        return True

    assert all_identifiers(values) == one_by_one()


def test_digest_without_is_the_digest_of_the_joined_stripped_bytes() -> None:
    """Every string of a, b and newlines up to 7 bytes, every part cut out of it."""
    import hashlib
    from itertools import product

    from dpone.canonical import digest_without

    for size in range(8):
        for letters in product(b"ab\n", repeat=size):
            data = bytes(letters)
            for start in range(size + 1):
                for stop in range(start, size + 1):
                    body = (data[:start] + data[stop:]).rstrip(b"\n")
                    expected = hashlib.sha256(body).hexdigest() if body else None
                    assert digest_without(data, start, stop) == expected, (data, start, stop)


def test_delete_many_is_delete_records_run_by_run(store: DlqStore, root: Path) -> None:
    """Several runs at once (their removals on worker threads) end as one by one would; a run
    that cannot be deleted from raises once the runs before it are done, and stays as is."""
    runs = {f"run-{n}": _closed(store, f"run-{n}", 6) for n in range(1, 5)}
    for run_id, ids in runs.items():
        _acknowledge(store, run_id, ids[:4])
    live = store.open_run("run-9", "load-1")
    live.write_chunk(rows(2))
    deletes: list[tuple[str, Any, Any]] = [
        ("run-1", runs["run-1"][:4], None),
        ("run-2", runs["run-2"], None),
        ("run-3", runs["run-3"][1:3], store.read_index("run-3")),
        ("run-9", [], None),  # a live writer
        ("run-4", runs["run-4"][:1], None),  # never reached
    ]
    with pytest.raises(DlqRunLocked):
        store.delete_many(deletes)
    live.close()
    assert store.read_index("run-1").record_ids == tuple(runs["run-1"][4:])
    assert store.read_index("run-2").record_ids == ()
    kept = [runs["run-3"][0], *runs["run-3"][3:]]
    assert store.read_index("run-3").record_ids == tuple(kept)
    assert store.read_index("run-4").record_ids == tuple(runs["run-4"])
    assert set(store.ack_checksums("run-1")) == set()
    assert set(store.ack_checksums("run-3")) == {runs["run-3"][0], runs["run-3"][3]}
    assert len(store.ack_checksums("run-4")) == 4
    assert verify_store(store) == []
    again = store.delete_many([("run-1", runs["run-1"][:4], None), ("run-4", [], None)])
    assert [i.record_ids for i in again] == [tuple(runs["run-1"][4:]), tuple(runs["run-4"])]
    assert [f.name for f in (root / "runs" / "run-2" / "segments").iterdir()] == []
