"""Python callable sources: generators of dicts, of batches, mixed; errors without values."""

from __future__ import annotations

import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from dpone.connectors.errors import SourceConfigError, SourceDecodeError, SourceError

from .specs import build_source

MODULE = """
import pyarrow as pa

def rows(n, start=1):
    for i in range(start, start + n):
        yield {"id": i, "name": f"n{i}"}

def batches(n, step):
    for lo in range(0, n, step):
        ids = list(range(lo + 1, min(n, lo + step) + 1))
        yield pa.record_batch({"id": pa.array(ids, pa.int64())})

def table():
    return pa.table({"id": [1, 2, 3]})

def mixed():
    yield {"id": 1}
    yield pa.record_batch({"id": pa.array([2, 3], pa.int64())})
    yield {"id": 4}

def broken():
    yield {"id": 1}
    raise RuntimeError("secret-value")

def wrong():
    yield 42

def conflicting():
    yield {"id": 1}
    yield {"id": "x"}

not_callable = 3
"""


@pytest.fixture
def module(tmp_path: Path) -> str:
    name = f"src_{uuid.uuid4().hex}"
    (tmp_path / f"{name}.py").write_text(MODULE)
    return name


def chunks(tmp_path: Path, spec: str, chunk_size: int, **args: object) -> list[pa.RecordBatch]:
    config = {"type": "python", "callable": spec, "args": args}
    source = build_source(config, tmp_path, read_all_as_text=True)
    out = list(source.chunks(chunk_size))
    assert all(not c.rereadable and c.file_sha256 is None and c.partition == spec for c in out)
    rows = 1
    for c in out:
        assert c.first_row == rows
        rows += c.num_rows
    return [c.batch for c in out]


def test_generator_of_dicts_is_rechunked(tmp_path: Path, module: str) -> None:
    out = chunks(tmp_path, f"{module}:rows", 4, n=10)
    assert [b.num_rows for b in out] == [4, 4, 2]
    assert out[0].schema.field("id").type == pa.int64()
    assert [r["id"] for b in out for r in b.to_pylist()] == list(range(1, 11))


def test_generator_of_batches_and_dotted_spec(tmp_path: Path, module: str) -> None:
    out = chunks(tmp_path, f"{module}.batches", 5, n=23, step=7)
    assert [b.num_rows for b in out] == [5, 5, 5, 5, 3]
    assert [v for b in out for v in b.column("id").to_pylist()] == list(range(1, 24))


def test_returned_table_and_mixed_items(tmp_path: Path, module: str) -> None:
    assert [b.num_rows for b in chunks(tmp_path, f"{module}:table", 2)] == [2, 1]
    out = chunks(tmp_path, f"{module}:mixed", 10)
    assert [v for b in out for v in b.column("id").to_pylist()] == [1, 2, 3, 4]


def test_failures_are_typed_and_value_free(tmp_path: Path, module: str) -> None:
    with pytest.raises(SourceError) as info:
        chunks(tmp_path, f"{module}:broken", 10)
    assert info.value.code == "DPONE_SOURCE_CALLABLE_FAILED"
    assert "secret-value" not in str(info.value)
    assert "RuntimeError" in str(info.value)
    with pytest.raises(SourceDecodeError):
        chunks(tmp_path, f"{module}:wrong", 10)
    with pytest.raises(SourceDecodeError):
        chunks(tmp_path, f"{module}:conflicting", 10)
    with pytest.raises(SourceConfigError) as cfg:
        chunks(tmp_path, f"{module}:not_callable", 10)
    assert cfg.value.code == "DPONE_SOURCE_CALLABLE_NOT_CALLABLE"
    with pytest.raises(SourceConfigError) as imp:
        chunks(tmp_path, "no_such_module_xyz:f", 10)
    assert imp.value.code == "DPONE_SOURCE_CALLABLE_IMPORT"
    assert imp.value.exit_code == 2
