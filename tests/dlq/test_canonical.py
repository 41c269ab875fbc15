"""The checksum basis: our canonical JSON is byte-for-byte the rfc8785 package's."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone.canonical import (
    CanonicalizationError,
    canonical_json,
    checksum,
    verify_checksum,
    with_checksum,
)
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.refs import file_ref, run_row_ref
from dpone.dlq.rejects import (
    RejectedRow,
    build_record_doc,
    check_reject,
    record_canonical_json,
    sealed_record_bytes,
)

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**60), max_value=2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


def _reference(doc: Any) -> bytes | None:
    try:
        return rfc8785.dumps(doc)
    except rfc8785.CanonicalizationError:
        return None


@settings(max_examples=300, deadline=None)
@given(JSON)
def test_canonical_json_is_rfc8785(doc: Any) -> None:
    expected = _reference(doc)
    if expected is None:
        with pytest.raises(CanonicalizationError):
            canonical_json(doc)
    else:
        assert canonical_json(doc) == expected


def test_orjson_escapes_every_code_point_like_rfc8785() -> None:
    # The fast path rests on this: string escaping is the same for every scalar value.
    step = 4096
    for start in range(0, 0x110000, step):
        text = "".join(
            chr(cp)
            for cp in range(start, min(start + step, 0x110000))
            if not 0xD800 <= cp <= 0xDFFF
        )
        assert orjson.dumps(text) == rfc8785.dumps(text), hex(start)


def test_keys_sort_by_utf16_not_by_code_point() -> None:
    # U+FF61 sorts after U+1F600 in UTF-16 (surrogates are 0xD83D...), before it by code point.
    doc = {"\U0001f600": 1, "\uff61": 2, "a": 3}
    assert canonical_json(doc) == rfc8785.dumps(doc)
    assert canonical_json(doc).index("\U0001f600".encode()) < canonical_json(doc).index(
        "\uff61".encode()
    )


def test_out_of_range_integers_and_nan_are_refused() -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json({"n": 2**53})
    with pytest.raises(CanonicalizationError):
        canonical_json([float("nan")])


def test_checksum_round_trip() -> None:
    doc = with_checksum({"b": 1, "a": "x"})
    assert doc["sha256"].startswith("sha256:")
    assert doc["sha256"] == checksum({"a": "x", "b": 1})
    assert verify_checksum(doc)
    assert not verify_checksum({**doc, "a": "y"})
    assert not verify_checksum({"a": "x"})


NAMES = st.text(min_size=1, max_size=40)
TOKENS = st.from_regex(r"[A-Za-z0-9 _.,:;()\[\]<>=+/-]{1,30}", fullmatch=True)
ROWS = st.dictionaries(st.text(max_size=10), JSON, max_size=5)


@settings(max_examples=200, deadline=None)
@given(
    row_number=st.integers(min_value=1, max_value=10**12),
    reason=st.sampled_from(list(ReasonCode)),
    column=st.none() | NAMES,
    actual=st.none() | TOKENS,
    offset=st.none() | st.integers(min_value=0, max_value=2**53 - 1),
    partition=st.none() | NAMES,
    file_source=st.booleans(),
    policy=st.sampled_from(["reference_only", "masked", "preserve"]),
    value=st.none() | ROWS,
)
def test_record_fast_path_is_rfc8785(
    row_number: int,
    reason: ReasonCode,
    column: str | None,
    actual: str | None,
    offset: int | None,
    partition: str | None,
    file_source: bool,
    policy: Any,
    value: dict[str, Any] | None,
) -> None:
    ref = (
        file_ref("data/ä b.csv", "0" * 64, row_number)
        if file_source
        else run_row_ref("run-1", "load-1", row_number)
    )
    row = RejectedRow(ref, reason, column, actual, "integer", None, offset, partition, value)
    doc = build_record_doc(
        record_id="01KJK000000000000000000000",
        run_id="run-1",
        load_id="load-1",
        row=row,
        code=check_reject(row),
        policy=policy,
        created_at="2026-03-01T12:00:00.000000Z",
        expires_at="2026-03-31T12:00:00.000000Z",
    )
    expected = _reference(doc)
    assert expected is not None  # preserve turns every value into something canonicalizable
    assert record_canonical_json(doc) == expected
    sha = checksum(doc)
    sealed = sealed_record_bytes(expected, sha)
    assert sealed == rfc8785.dumps({**doc, "sha256": sha}) + b"\n"
