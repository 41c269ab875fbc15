"""Pure helpers: re-chunking to exact sizes, conforming batches to a schema."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpone.connectors.batches import conform, rechunk
from dpone.connectors.errors import SinkSchemaError


@given(
    sizes=st.lists(st.integers(min_value=0, max_value=40), max_size=12),
    chunk=st.integers(min_value=1, max_value=25),
)
def test_rechunk_is_exact_and_keeps_order(sizes: list[int], chunk: int) -> None:
    batches, start = [], 0
    for n in sizes:
        batches.append(pa.record_batch({"v": pa.array(range(start, start + n), pa.int64())}))
        start += n
    out = list(rechunk(batches, chunk))
    assert all(b.num_rows == chunk for b in out[:-1])
    assert all(0 < b.num_rows <= chunk for b in out)
    assert [v for b in out for v in b.column("v").to_pylist()] == list(range(start))


def test_rechunk_flushes_on_schema_change() -> None:
    a = pa.record_batch({"v": pa.array([1, 2, 3], pa.int64())})
    b = pa.record_batch({"v": pa.array(["x"], pa.string())})
    assert [x.num_rows for x in rechunk([a, b, a], 2)] == [2, 1, 1, 2, 1]


def test_conform_casts_fills_and_refuses_lossy_casts() -> None:
    schema = pa.schema([pa.field("id", pa.int32(), False), pa.field("v", pa.string())])
    out = conform(pa.record_batch({"id": pa.array([1, 2], pa.int64())}), schema)
    assert out.schema == schema
    assert out.column("v").null_count == 2
    with pytest.raises(SinkSchemaError) as info:
        conform(pa.record_batch({"id": pa.array([2**40], pa.int64())}), schema)
    assert str(2**40) not in str(info.value)
