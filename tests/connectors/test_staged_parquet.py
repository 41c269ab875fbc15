"""SinkLoad.commit_staged_parquet: rows that other processes staged as Parquet (a scale-out run's
tasks) committed in one load, against each real sink (DuckDB reads the files in its commit's
transaction; the others stream the files' batches into the load)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .sinkkit import SCHEMA, Target, batch, spec


def _staged(folder: Path, *batches: pa.RecordBatch) -> list[Path]:
    folder.mkdir(exist_ok=True)
    paths = []
    for i, b in enumerate(batches):
        path = folder / f"p00000-c{i:06d}.parquet"
        pq.write_table(pa.Table.from_batches([b]), path, compression="zstd")
        paths.append(path)
    return paths


def _row(i: int, name: str | None, amount: str | None) -> dict[str, object]:
    return {"id": i, "name": name, "amount": None if amount is None else Decimal(amount)}


def test_first_load_then_append_from_staged_files(target: Target, tmp_path: Path) -> None:
    sink = target.sink()
    files = _staged(tmp_path / "s1", batch([(1, "a", "1.5")]), batch([(2, None, "2")]))
    marker = sink.begin(spec("l1")).commit_staged_parquet(files, cursor_to="7")
    assert (marker.rows, marker.cursor_to) == (2, "7")
    files = _staged(tmp_path / "s2", batch([(3, "c", None)]))
    load = sink.begin(spec("l2"))
    load.write(batch([(4, "d", "4")]))  # rows written to the load count with the files'
    assert load.commit_staged_parquet(files).rows == 2
    assert target.rows() == [
        _row(1, "a", "1.50"),
        _row(2, None, "2.00"),
        _row(3, "c", None),
        _row(4, "d", "4.00"),
    ]
    assert target.last_marker().rows == 2  # type: ignore[union-attr]
    assert target.leftovers() == []


def test_replace_and_merge_from_staged_files(target: Target, tmp_path: Path) -> None:
    sink = target.sink()
    sink.begin(spec("l1")).commit_staged_parquet(
        _staged(tmp_path / "s1", batch([(1, "a", "1"), (2, "b", "2")]))
    )
    sink.begin(spec("l2", "replace")).commit_staged_parquet(
        _staged(tmp_path / "s2", batch([(7, "z", "7")]))
    )
    assert target.rows() == [_row(7, "z", "7.00")]
    # merge: the last occurrence of a key wins, in the files' order
    files = _staged(
        tmp_path / "s3", batch([(7, "old", "0"), (8, "h", "8")]), batch([(7, "new", "1")])
    )
    assert sink.begin(spec("l3", "merge")).commit_staged_parquet(files).rows == 3
    assert target.rows() == [_row(7, "new", "1.00"), _row(8, "h", "8.00")]
    assert target.leftovers() == []


def test_staged_files_of_another_schema_are_conformed(target: Target, tmp_path: Path) -> None:
    other = pa.schema([pa.field("id", pa.int32()), SCHEMA.field("name"), SCHEMA.field("amount")])
    files = _staged(tmp_path / "s", batch([(1, "a", "1")], other))
    assert target.sink().begin(spec("l1")).commit_staged_parquet(files).rows == 1
    assert target.rows() == [_row(1, "a", "1.00")]
