"""The column-wise record encoder writes exactly the canonical record bytes.

Every line the encoder builds for a chunk must be ``sealed_record_bytes(record_canonical_json(
build_record_doc(...)))`` of its row, and that must be the ``rfc8785`` package's bytes of the
record with its checksum: chunks mix shapes (reasons, columns, types, files), ref forms (file
rows, file lines, run rows; one shared prefix or many), offsets (null, large) and payloads.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import orjson
import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from dpone.canonical import checksum
from dpone.contracts.dlq import DlqPolicy
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.encode import RecordEncoder
from dpone.dlq.errors import DlqInvalidReject
from dpone.dlq.index import entry
from dpone.dlq.refs import file_line_refs, file_ref, run_row_ref
from dpone.dlq.rejects import (
    RejectedRow,
    build_record_doc,
    check_reject,
    record_canonical_json,
    sealed_record_bytes,
)
from dpone.ids import UlidSequence
from dpone.testing import FrozenClock

CREATED = "2026-03-01T12:00:00.000000Z"
EXPIRES = "2026-03-31T12:00:00.000000Z"
SHA = "0" * 64
CLOCK = FrozenClock()

NAMES = st.text(min_size=1, max_size=12) | st.sampled_from(["amount", "a b", "é", "\U0001f600"])
TOKENS = st.from_regex(r"[A-Za-z0-9 _.,:;()\[\]<>=+/-]{1,20}", fullmatch=True)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=8)
)
VALUES = st.dictionaries(
    st.text(max_size=6),
    st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3), max_leaves=6),
    max_size=4,
)
REFS = st.one_of(
    st.builds(lambda n: file_ref("data/ä b.csv", SHA, n), st.integers(1, 10**17)),
    st.builds(lambda n: file_ref("/abs/x.csv", "1" * 64, n), st.integers(1, 10**6)),
    st.builds(lambda n: file_line_refs("data/x.csv", SHA, [n])[0], st.integers(1, 10**6)),
    st.builds(lambda n: run_row_ref("run-1", "load-1", n), st.integers(1, 10**12)),
)


@st.composite
def chunks(draw: st.DrawFn) -> list[RejectedRow]:
    """Rows drawn from small pools, so that shapes repeat within the chunk."""
    reasons = st.sampled_from(draw(st.lists(st.sampled_from(list(ReasonCode)), min_size=1)))
    pick = {
        "column": st.sampled_from(draw(st.lists(st.none() | NAMES, min_size=1, max_size=3))),
        "actual": st.sampled_from(draw(st.lists(st.none() | TOKENS, min_size=1, max_size=2))),
        "expected": st.sampled_from(draw(st.lists(st.none() | TOKENS, min_size=1, max_size=2))),
        "rule": st.sampled_from(draw(st.lists(st.none() | TOKENS, min_size=1, max_size=2))),
        "partition": st.sampled_from(draw(st.lists(st.none() | NAMES, min_size=1, max_size=2))),
    }
    same_file = draw(st.booleans())
    count = draw(st.integers(1, 25))
    rows = []
    for number in range(count):
        ref = file_ref("data/o.csv", SHA, number + 1) if same_file else draw(REFS)
        rows.append(
            RejectedRow(
                ref,
                draw(reasons),
                draw(pick["column"]),
                draw(pick["actual"]),
                draw(pick["expected"]),
                draw(pick["rule"]),
                draw(st.none() | st.integers(0, 2**53 - 1)),
                draw(pick["partition"]),
                draw(st.none() | VALUES),
            )
        )
    return rows


def _encoder(policy: Any, **limits: Any) -> RecordEncoder:
    return RecordEncoder(
        run_id="run-1",
        load_id="load-1",
        policy=DlqPolicy(directory="/unused", pii_policy=policy, **limits),
        created_at=CREATED,
        expires_at=EXPIRES,
    )


def _expected(row: RejectedRow, record_id: str, policy: Any) -> tuple[bytes, str]:
    doc = build_record_doc(
        record_id=record_id,
        run_id="run-1",
        load_id="load-1",
        row=row,
        code=check_reject(row),
        policy=policy,
        created_at=CREATED,
        expires_at=EXPIRES,
    )
    sha = checksum(doc)
    sealed = sealed_record_bytes(record_canonical_json(doc), sha)
    assert sealed == rfc8785.dumps({**doc, "sha256": sha}) + b"\n"
    return sealed, sha


@settings(max_examples=200, deadline=None)
@given(rows=chunks(), policy=st.sampled_from(["reference_only", "masked", "preserve"]))
def test_every_line_is_the_canonical_record(rows: list[RejectedRow], policy: Any) -> None:
    ids = UlidSequence().batch(len(rows), CLOCK())
    built = _encoder(policy).encode(rows, ids)
    assert len(built) == len(rows)
    assert built.record_ids == ids
    assert built.refs == [row.record_ref for row in rows]
    lines = []
    for i, row in enumerate(rows):
        sealed, sha = _expected(row, ids[i], policy)
        assert built.line(i) == sealed
        assert built.sha256s[i] == sha
        assert built.codes[i] == ReasonCode(row.reason).value
        assert built.columns[i] == row.column
        size = len(orjson.dumps(entry(ids[i], sha, built.codes[i], row.column))) + 1
        assert built.entry_sizes[i] == size
        lines.append(sealed)
    assert bytes(built.data()) == b"".join(lines)


@settings(max_examples=100, deadline=None)
@given(rows=chunks(), limit=st.integers(1, 4000))
def test_cuts_are_the_greedy_groups_of_at_most_the_limit(
    rows: list[RejectedRow], limit: int
) -> None:
    ids = UlidSequence().batch(len(rows), CLOCK())
    built = _encoder("reference_only").encode(rows, ids)
    cuts = built.cuts(limit)
    assert [i for start, stop in cuts for i in range(start, stop)] == list(range(len(rows)))
    for start, stop in cuts:
        size = len(built.data(start, stop))
        assert size <= limit or stop == start + 1  # a line longer than the limit goes alone
    for (start, stop), (after, _) in pairwise(cuts):
        # Greedy: the next line would not have fitted.
        assert len(built.data(start, after + 1)) > limit
        assert stop == after


def test_refs_of_one_file_and_of_many_are_checked_alike() -> None:
    encoder = _encoder("reference_only")
    good = [file_ref("data/o.csv", SHA, n) for n in (1, 2, 30)]
    bad_tails = ["0", "01", "1x", "", "1234567890123456789", "1\n"]
    for tail in bad_tails:
        refs = [*good, f"dpone://file/data/o.csv?sha256={SHA}&row={tail}"]
        rows = [RejectedRow(ref, ReasonCode.TYPE_MISMATCH) for ref in refs]
        with pytest.raises(DlqInvalidReject):
            encoder.encode(rows, UlidSequence().batch(len(rows), CLOCK()))
    other = [*good, "dpone://file/other.csv?sha256=" + SHA + "&row=5", run_row_ref("r", "l", 1)]
    rows = [RejectedRow(ref, ReasonCode.TYPE_MISMATCH) for ref in other]
    built = encoder.encode(rows, UlidSequence().batch(len(rows), CLOCK()))
    replay = [orjson.loads(built.line(i))["replay"]["replayable"] for i in range(len(rows))]
    assert replay == [True, True, True, True, False]


def test_offsets_are_integers_in_range() -> None:
    encoder = _encoder("reference_only")
    for offset in (-1, 2**53, True, 1.0, "1"):
        ref = file_ref("a.csv", SHA, 1)
        row = RejectedRow(ref, ReasonCode.TYPE_MISMATCH, source_offset=offset)  # type: ignore[arg-type]
        with pytest.raises(DlqInvalidReject):
            encoder.encode([row], UlidSequence().batch(1, CLOCK()))
