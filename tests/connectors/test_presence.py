"""Sources with keys tell a key absent from a row apart from one carrying null."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from dpone.connectors.batches import rechunk
from dpone.connectors.presence import PRESENT_PREFIX, rows_batch, split_presence
from dpone.connectors.sources.dlt_source import _typed_or_text
from dpone.connectors.sources.file.jsonl import jsonl_batch
from dpone.connectors.sources.rest_api import _text_batch

ROWS: list[dict[str, Any]] = [{"id": 1, "kind": "a"}, {"id": 2}, {"id": 3, "kind": None}]

BUILDERS: dict[str, Callable[[list[dict[str, Any]]], pa.RecordBatch]] = {
    "python": rows_batch,
    "jsonl_typed": lambda rows: jsonl_batch(rows, False),
    "jsonl_text": lambda rows: jsonl_batch(
        [{k: None if v is None else str(v) for k, v in r.items()} for r in rows], True
    ),
    "rest_api": lambda rows: _text_batch([*rows]),
    "dlt": lambda rows: _typed_or_text([*rows], "resource"),
}


@pytest.mark.parametrize("source", sorted(BUILDERS))
def test_an_absent_key_is_not_a_null(source: str) -> None:
    batch, present = split_presence(BUILDERS[source](ROWS))
    assert batch.schema.names == ["id", "kind"]
    assert batch.column("kind").null_count == 2
    assert list(present) == ["kind"]
    assert present["kind"].to_pylist() == [True, False, True]


@pytest.mark.parametrize("source", sorted(BUILDERS))
def test_rows_with_the_same_keys_carry_no_mask(source: str) -> None:
    batch = BUILDERS[source]([{"id": 1, "kind": None}, {"id": 2, "kind": "b"}])
    assert not any(n.startswith(PRESENT_PREFIX) for n in batch.schema.names)
    assert split_presence(batch) == (batch, {})


def test_a_key_only_in_a_later_row_is_kept() -> None:
    batch, present = split_presence(rows_batch([{"id": 1}, {"id": 2, "kind": "b"}]))
    assert batch.column("kind").to_pylist() == [None, "b"]
    assert present["kind"].to_pylist() == [False, True]


def test_masks_follow_their_rows_through_rechunking() -> None:
    batches = [rows_batch(ROWS), rows_batch(list(reversed(ROWS)))]
    out = [split_presence(b) for b in rechunk(batches, 2)]
    masks = [m["kind"].to_pylist() for _, m in out]
    assert masks == [[True, False], [True, True], [False, True]]


def test_rows_without_any_key_are_still_rows() -> None:
    # JSON `{}` lines (or empty dicts from a python source): Arrow's builders make no row of
    # them, so a chunk of only such rows was lost.
    from dpone.connectors.presence import rows_batch
    from dpone.connectors.sources.file.jsonl import jsonl_batch

    assert rows_batch([{}, {}]).num_rows == 2
    assert jsonl_batch([{}, {}, {}], as_text=True).num_rows == 3
    assert jsonl_batch([{}, {}, {}], as_text=False).num_rows == 3
