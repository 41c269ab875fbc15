"""Typed input (Parquet, JSONL, databases): the same families convert, others only when lossless."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from dpone.contracts.convert import convert
from tests.contracts.corpus import SAME, R
from tests.contracts.helpers import same_value, spec_of

UTC = dt.UTC
# (target, input array, strict outcomes, lenient outcomes); one outcome per input value.
TYPED: list[tuple[str, pa.Array, list[Any], Any]] = [
    ("integer", pa.array([1, -2, None], pa.int32()), [1, -2, None], SAME),
    ("integer", pa.array([2**63 - 1, 2**63], pa.uint64()), [2**63 - 1, R], SAME),
    ("integer", pa.array([3.0, 3.5, -0.0], pa.float64()), [R, R, R], [3, R, 0]),
    (
        "integer",
        pa.array([float("nan"), float("inf"), 2.0**63, -(2.0**63)], pa.float64()),
        [R, R, R, R],
        [R, R, R, -(2**63)],
    ),
    ("integer", pa.array([Decimal("3.00"), Decimal("3.50")], pa.decimal128(5, 2)), [R, R], [3, R]),
    ("integer", pa.array([True], pa.bool_()), [R], [R]),
    ("float", pa.array([1.5, None], pa.float32()), [1.5, None], SAME),
    ("float", pa.array([float("nan"), float("inf"), -float("inf")]), [R, R, R], SAME),
    ("float", pa.array([-0.0]), [-0.0], SAME),
    (
        "float",
        pa.array([2**53, 2**53 + 1, 2**60, 2**63 - 1], pa.int64()),
        [R, R, R, R],
        [float(2**53), R, float(2**60), R],
    ),
    ("float", pa.array([Decimal("12.30")], pa.decimal128(5, 2)), [R], [12.3]),
    (
        "decimal(12,2)",
        pa.array([Decimal("1.23"), Decimal("-99999999.99")], pa.decimal128(10, 2)),
        [Decimal("1.23"), Decimal("-99999999.99")],
        SAME,
    ),
    (
        "decimal(12,2)",
        pa.array([Decimal("1.230"), Decimal("1.234")], pa.decimal128(12, 3)),
        [Decimal("1.23"), R],
        SAME,
    ),
    (
        "decimal(12,2)",
        pa.array([Decimal("12345678901.00")], pa.decimal128(20, 2)),
        [R],
        SAME,
    ),
    ("decimal(12,2)", pa.array([42, 10**11], pa.int64()), [R, R], [Decimal("42.00"), R]),
    ("decimal(12,2)", pa.array([0.1, 1e22, float("nan")]), [R, R, R], [Decimal("0.10"), R, R]),
    ("boolean", pa.array([True, False, None]), [True, False, None], SAME),
    ("boolean", pa.array([0, 1, 2], pa.int8()), [R, R, R], [False, True, R]),
    ("date", pa.array([dt.date(2024, 2, 29)], pa.date32()), [dt.date(2024, 2, 29)], SAME),
    ("date", pa.array([86_400_000, 86_400_001], pa.date64()), [dt.date(1970, 1, 2), R], SAME),
    (
        "date",
        pa.array([dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 1, 0, 0, 1)], pa.timestamp("us")),
        [R, R],
        [dt.date(2024, 1, 1), R],
    ),
    ("date", pa.array([dt.datetime(2024, 1, 1, tzinfo=UTC)], pa.timestamp("us", "UTC")), [R], [R]),
    ("time", pa.array([3600], pa.time32("s")), [dt.time(1)], SAME),
    ("time", pa.array([1_000, 1_001], pa.time64("ns")), [dt.time(0, 0, 0, 1), R], SAME),
    (
        "timestamp(tz)",
        pa.array([1_704_103_200_000_000_000], pa.timestamp("ns", "Europe/Paris")),
        [dt.datetime(2024, 1, 1, 10, tzinfo=UTC)],
        SAME,
    ),
    ("timestamp(tz)", pa.array([1_500], pa.timestamp("ns", "UTC")), [R], SAME),
    ("timestamp(tz)", pa.array([0], pa.timestamp("us")), [R], [R]),
    ("timestamp(tz)", pa.array([10**15], pa.timestamp("s", "UTC")), [R], SAME),
    ("timestamp(tz)", pa.array([dt.date(2024, 1, 1)], pa.date32()), [R], [R]),
    ("timestamp", pa.array([0], pa.timestamp("ms")), [dt.datetime(1970, 1, 1)], SAME),
    ("timestamp", pa.array([0], pa.timestamp("ms", "UTC")), [R], [R]),
    ("timestamp", pa.array([dt.date(2024, 1, 1)], pa.date32()), [R], [dt.datetime(2024, 1, 1)]),
    ("string", pa.array(["x"], pa.large_string()), ["x"], SAME),
    ("string", pa.array([b"ok", "ü".encode()], pa.binary()), ["ok", "ü"], SAME),
    # invalid UTF-8 in binary-as-text
    ("string", pa.array([b"ok", b"\xff\xfe", b"\xc3"], pa.binary()), ["ok", R, R], SAME),
    ("string", pa.array([b"ab"], pa.binary(2)), ["ab"], SAME),
    ("string", pa.array([42, None], pa.int64()), [R, None], ["42", None]),
    ("string", pa.array([True]), [R], ["true"]),
    ("string", pa.array([dt.date(2024, 1, 1)]), [R], ["2024-01-01"]),
    ("json", pa.array([{"a": 1}], pa.struct([("a", pa.int64())])), ['{"a":1}'], SAME),
    ("json", pa.array([[1, 2]], pa.list_(pa.int64())), ["[1,2]"], SAME),
    ("json", pa.array([b'{"a": 1}', b"{x"]), ['{"a": 1}', R], SAME),
    ("json", pa.array([7], pa.int64()), [R], ["7"]),
    ("json", pa.array([1.5, float("nan")]), [R, R], ["1.5", R]),
    ("binary", pa.array(["abc"], pa.large_string()), [b"abc"], SAME),
    ("binary", pa.array([b"\x00\xff"], pa.large_binary()), [b"\x00\xff"], SAME),
    ("binary", pa.array([1], pa.int64()), [R], [R]),
    ("integer", pa.array([None, None], pa.null()), [None, None], SAME),
    (
        "integer",
        pa.array(["1", "x", "1"]).dictionary_encode(),
        [1, R, 1],
        SAME,
    ),
]


def _ids() -> list[str]:
    return [f"{kind}<-{arr.type}:{i}" for i, (kind, arr, _, _) in enumerate(TYPED)]


@pytest.mark.parametrize("lenient", [False, True], ids=["strict", "lenient"])
@pytest.mark.parametrize(("kind", "arr", "strict", "lenient_out"), TYPED, ids=_ids())
def test_typed_input(
    kind: str, arr: pa.Array, strict: list[Any], lenient_out: Any, lenient: bool
) -> None:
    expected = strict if not lenient or lenient_out == SAME else lenient_out
    conv = convert(arr, spec_of(kind), lenient=lenient)
    values = conv.values.to_pylist()
    failed = conv.failed.to_pylist() if conv.failed is not None else [False] * len(arr)
    assert len(values) == len(expected)
    for value, bad, want in zip(values, failed, expected, strict=True):
        if want == R:
            assert bad
            assert value is None
        elif want is None:
            assert value is None
            assert not bad
        else:
            assert not bad, (want, value)
            assert same_value(value, want), (want, value)


def test_arrow_errors_never_escape_with_values() -> None:
    """Casts that would raise (and quote the value) are never called on values that do not fit."""
    arr = pa.array([1_500, 2_000], pa.timestamp("ns", "UTC"))
    conv = convert(arr, spec_of("timestamp(tz)"), lenient=False)
    assert conv.failed is not None
    assert conv.failed.to_pylist() == [True, False]
