"""record_ref helpers, safe identifiers and ULID record ids."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ulid import ULID

from dpone.dlq.errors import DlqInvalidIdentifier, DlqInvalidRef, DlqPathEscape
from dpone.dlq.fsio import check_identifier
from dpone.dlq.refs import (
    FileLineRef,
    FileRef,
    RunRowRef,
    all_have_ref_shape,
    file_line_refs,
    file_ref,
    file_refs,
    has_ref_shape,
    is_replayable,
    is_valid_ref,
    parse_ref,
    run_row_ref,
    run_row_refs,
)
from dpone.ids import UlidSequence, is_ulid, new_ulid, ulid_time_ms, ulid_to_uuid

SHA = "0123456789abcdef" * 4


def test_file_ref_round_trip_with_quoting() -> None:
    ref = file_ref("data/2026 Q1/orders%ä.csv", SHA, 7)
    assert ref == f"dpone://file/data/2026%20Q1/orders%25%C3%A4.csv?sha256={SHA}&row=7"
    assert parse_ref(ref) == FileRef("data/2026 Q1/orders%ä.csv", SHA, 7)
    assert is_replayable(ref)
    assert has_ref_shape(ref)


@pytest.mark.parametrize(
    ("path", "uri_path"),
    [
        ("../shared/a.csv", "../shared/a.csv"),
        ("/data/landing/a b.csv", "/data/landing/a%20b.csv"),
        ("~/landing/a.csv", "~/landing/a.csv"),
    ],
)
def test_file_refs_keep_the_manifest_spelling(path: str, uri_path: str) -> None:
    ref = file_ref(path, SHA, 3)
    assert ref == f"dpone://file/{uri_path}?sha256={SHA}&row=3"
    assert parse_ref(ref) == FileRef(path, SHA, 3)
    (line_ref,) = file_line_refs(path, SHA, [4])
    assert line_ref == f"dpone://file/{uri_path}?sha256={SHA}&line=4"
    assert parse_ref(line_ref) == FileLineRef(path, SHA, 4)
    assert is_replayable(ref)
    assert not is_replayable(line_ref)
    assert has_ref_shape(line_ref)


@pytest.mark.parametrize(
    ("uri", "spelled"),
    [
        ("s3://bucket/landing/a.csv", "s3://bucket/landing/a.csv"),
        ("gs://bucket_1/2026 Q1/ä:b.csv.gz", "gs://bucket_1/2026%20Q1/%C3%A4%3Ab.csv.gz"),
        ("az://container/x/y.parquet", "az://container/x/y.parquet"),
    ],
)
def test_object_refs_carry_the_uri(uri: str, spelled: str) -> None:
    ref = file_ref(uri, SHA, 3)
    assert ref == f"dpone://file/{spelled}?sha256={SHA}&row=3"
    assert parse_ref(ref) == FileRef(uri, SHA, 3)
    assert is_replayable(ref)
    assert has_ref_shape(ref)
    assert all_have_ref_shape([ref, file_ref("local/a.csv", SHA, 1), run_row_ref("r", "l", 1)])
    (line_ref,) = file_line_refs(uri, SHA, [4])
    assert parse_ref(line_ref) == FileLineRef(uri, SHA, 4)
    assert not is_replayable(line_ref)


def test_a_local_path_that_looks_like_a_scheme_stays_local() -> None:
    """``s3:`` as a local folder name is encoded, so it never reads as an object URI."""
    ref = file_ref("s3:/x.csv", SHA, 1)
    assert ref == f"dpone://file/s3%3A/x.csv?sha256={SHA}&row=1"
    assert parse_ref(ref) == FileRef("s3:/x.csv", SHA, 1)


def test_run_row_ref_round_trip() -> None:
    ref = run_row_ref("run-1", "load.2", 3)
    assert ref == "dpone://runs/run-1/loads/load.2/rows/3"
    assert parse_ref(ref) == RunRowRef("run-1", "load.2", 3)
    assert not is_replayable(ref)


def test_bulk_builders_match_single() -> None:
    assert file_refs("a.csv", SHA, [1, 2]) == [file_ref("a.csv", SHA, 1), file_ref("a.csv", SHA, 2)]
    assert run_row_refs("r", "l", range(1, 3)) == [run_row_ref("r", "l", n) for n in (1, 2)]


@pytest.mark.parametrize(
    ("path", "sha", "row"),
    [
        ("~bob/x.csv", SHA, 1),
        ("data/", SHA, 1),
        ("/", SHA, 1),
        ("~/", SHA, 1),
        ("a\\b.csv", SHA, 1),
        ("http://host/a.csv", SHA, 1),
        ("s3://bucket/a/../b.csv", SHA, 1),
        ("s3://bucket//a.csv", SHA, 1),
        ("s3://Bucket/a.csv", SHA, 1),
        ("s3://bucket/", SHA, 1),
        ("gs://b*/a.csv", SHA, 1),
        ("a/./b.csv", SHA, 1),
        ("a//b.csv", SHA, 1),
        ("a.csv", "XYZ", 1),
        ("a.csv", SHA, 0),
    ],
)
def test_unsafe_file_refs_are_refused(path: str, sha: str, row: int) -> None:
    with pytest.raises(DlqInvalidRef):
        file_ref(path, sha, row)


@pytest.mark.parametrize(
    "ref",
    [
        "http://example.com/x",
        f"dpone://file/a%2e%2e/b.csv?sha256={SHA}&row=1",  # not canonical
        f"dpone://file/..%2Fx?sha256={SHA}&row=1",
        f"dpone://file/a.csv?sha256={SHA}&row=01",
        "dpone://runs/../loads/l/rows/1",
        "dpone://file/%FF.csv?sha256=" + SHA + "&row=1",
        # An object URI is spelled with its scheme as is, never encoded, and only s3/gs/az.
        f"dpone://file/s3%3A//bucket/a.csv?sha256={SHA}&row=1",
        f"dpone://file/http://bucket/a.csv?sha256={SHA}&row=1",
        f"dpone://file/S3://bucket/a.csv?sha256={SHA}&row=1",
        f"dpone://file/s3://bucket/a/../b.csv?sha256={SHA}&row=1",
        f"dpone://file/s3://bucket/a%2F..%2Fb.csv?sha256={SHA}&row=1",
        f"dpone://file/s3://bucket?sha256={SHA}&row=1",
        f"dpone://file/s3:/bucket/a.csv?sha256={SHA}&row=1",
    ],
)
def test_parse_refuses_non_canonical_refs(ref: str) -> None:
    assert not is_valid_ref(ref)
    with pytest.raises(DlqInvalidRef):
        parse_ref(ref)


@pytest.mark.parametrize("value", ["a", "run-01.J_x", "0" * 128])
def test_identifiers_accepted(value: str) -> None:
    assert check_identifier(value, "run id") == value


@pytest.mark.parametrize("value", ["..", ".", "../x", "/etc/passwd", "a/b", "a\\b", ".hidden"])
def test_identifiers_that_move_paths_are_escapes(value: str) -> None:
    with pytest.raises(DlqPathEscape):
        check_identifier(value, "run id")


@pytest.mark.parametrize("value", ["", "a b", "ä", "x" * 129, 5, None])
def test_other_unsafe_identifiers(value: object) -> None:
    with pytest.raises(DlqInvalidIdentifier):
        check_identifier(value, "run id")


def test_ulid_sequence_is_monotonic_and_carries_the_clock() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    seq = UlidSequence()
    ids = seq.batch(1000, now) + seq.batch(5, now) + seq.batch(5, now - timedelta(seconds=1))
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    for value in ids[:3] + ids[-3:]:
        assert is_ulid(value)
        assert ULID.from_str(value).datetime == now
    later = seq.batch(1, now + timedelta(milliseconds=1))[0]
    assert later > ids[-1]
    assert ulid_time_ms(later) == int(now.timestamp() * 1000) + 1


def test_ulid_sequence_resumes_after_existing_id() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    last = UlidSequence().batch(3, now)[-1]
    assert UlidSequence(after=last).batch(1, now)[0] > last


def test_new_ulid_is_a_safe_identifier_with_the_time() -> None:
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    value = new_ulid(now)
    assert check_identifier(value, "run id") == value
    assert ULID.from_str(value).datetime == now
    assert new_ulid(now) != value


def test_ulid_to_uuid_keeps_the_128_bits() -> None:
    # The ULID spec's example, and python-ulid as the oracle for fresh ids in either case.
    assert str(ulid_to_uuid("01ARZ3NDEKTSV4RRFFQ69G5FAV")) == "01563e3a-b5d3-d676-4c61-efb99302bd5b"
    value = new_ulid(datetime(2026, 3, 1, 12, tzinfo=UTC))
    assert ulid_to_uuid(value) == ULID.from_str(value).to_uuid()
    assert ulid_to_uuid(value.lower()) == ulid_to_uuid(value)


@pytest.mark.parametrize(
    "value", ["nightly-2026-01-31", "8ZZZZZZZZZZZZZZZZZZZZZZZZZ", "01ARZ3NDEKTSV4RRFFQ69G5FAI", ""]
)
def test_ulid_to_uuid_refuses_what_is_not_a_ulid(value: str) -> None:
    with pytest.raises(ValueError, match="not a ULID"):
        ulid_to_uuid(value)


@pytest.mark.parametrize(
    ("start", "count"),
    [(0, 1), (1023, 2), (1000, 3000), (2**79 - 2000, 1999), (0x5A5A5A5A5A5A5A5A5A5, 1025)],
)
def test_ulid_batches_are_the_base32_of_consecutive_numbers(start: int, count: int) -> None:
    # Against the ``ulid`` package: each id is the time prefix and the random part start + i.
    now = datetime(2026, 3, 1, 12, tzinfo=UTC)
    seq = UlidSequence()
    seq._ms, seq._next = int(now.timestamp() * 1000), start
    ids = seq.batch(count, now)
    for i in (0, 1, count // 2, count - 2, count - 1):
        if 0 <= i < count:
            expected = ULID.from_bytes(
                int(now.timestamp() * 1000).to_bytes(6, "big") + (start + i).to_bytes(10, "big")
            )
            assert ids[i] == str(expected)
    assert ids == sorted(ids)
    assert len(set(ids)) == count
