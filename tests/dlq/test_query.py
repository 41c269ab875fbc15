"""docs/dlq.md's DuckDB query runs as written over a store's segment files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb

from dpone.contracts.reasons import ReasonCode
from dpone.dlq.refs import parse_ref
from dpone.dlq.store import DlqStore
from dpone.ops.summary import summarize
from tests.support.dlqrows import rows

DOC = Path(__file__).parents[2] / "docs" / "dlq.md"


def _documented_query(root: Path, which: int = 0) -> str:
    """The ``which``-th query of docs/dlq.md's first SQL block, pointed at ``root`` instead
    of .dpone/dlq."""
    text = DOC.read_text()
    block = text.split("```sql\n", 1)[1].split("```", 1)[0]
    query = block.split(";")[which]
    assert "read_json('.dpone/dlq/runs/*/segments/*.jsonl'" in query
    return query.replace(".dpone/dlq", str(root))


def _fetch(query: str) -> list[tuple[Any, ...]]:
    relation = duckdb.sql(query)
    assert relation is not None  # a SELECT always has a result
    return relation.fetchall()


def test_the_documented_duckdb_query_counts_every_record(store: DlqStore, root: Path) -> None:
    for run_id in ("run-1", "run-2"):
        writer = store.open_run(run_id, "load-1")
        writer.write_chunk(rows(30, start=1))
        writer.write_chunk(rows(12, start=31, reason=ReasonCode.REQUIRED_NULL, column="id"))
        writer.close()
    found = _fetch(_documented_query(root))
    assert sorted(found) == [
        ("schema.required_null", "id", 24),
        ("schema.type_mismatch", "amount", 60),
    ]
    summary = summarize(store)
    assert summary.record_count == sum(n for _, _, n in found)


def test_the_documented_row_query_names_the_rows_the_refs_name(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    ids = writer.write_chunk(rows(3, start=7))
    writer.close()
    query = _documented_query(root, 1).replace("'01J…'", "'run-1'")
    found = _fetch(query)
    assert [(r[0], r[1], r[2]) for r in found] == [
        (record_id, "data/orders.csv", row)
        for record_id, row in zip(sorted(ids), (7, 8, 9), strict=True)
    ]
    refs = {r.record_id: parse_ref(r.record_ref) for r in store.iter_records("run-1")}
    assert [getattr(refs[record_id], "row", None) for record_id, *_ in found] == [7, 8, 9]


def test_a_segment_holds_one_record_per_line_in_id_order(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    ids = writer.write_chunk(rows(25))
    writer.close()
    segments = sorted((root / "runs" / "run-1" / "segments").iterdir())
    assert [p.name for p in segments] == ["00000001.jsonl"]
    lines = _fetch(
        f"SELECT record_id FROM read_json('{segments[0]}', format = 'newline_delimited')"
    )
    assert [r for (r,) in lines] == sorted(ids)
