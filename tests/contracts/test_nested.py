"""Unnesting a root batch into child tables (``contracts/nested.py``): which fields move, the
rows and their links, numbers kept as written, max_nesting, and the contract split by path."""

from __future__ import annotations

import json

import pyarrow as pa

from dpone.contracts.nested import (
    child_contract,
    declared_paths,
    root_contract,
    table_name,
    unnest,
)
from dpone.contracts.spec import ColumnSpec, ContractSpec

CONTRACT = ContractSpec(
    enforcement="quarantine",
    columns=(
        ColumnSpec("id", "integer", nullable=False),
        ColumnSpec("tags", "json"),
        ColumnSpec("orders.sku", "string", nullable=False),
        ColumnSpec("orders.items.n", "integer"),
    ),
)


def text_batch(rows: list[dict[str, object]]) -> pa.RecordBatch:
    """Rows as a JSONL text reader hands them over: every value its JSON text."""
    names = list(dict.fromkeys(k for r in rows for k in r))
    columns = {
        n: pa.array(
            [
                None
                if r.get(n) is None
                else json.dumps(r[n])
                if not isinstance(r[n], str)
                else r[n]
                for r in rows
            ],
            pa.string(),
        )
        for n in names
    }
    return pa.RecordBatch.from_pydict(columns)


def test_the_contract_splits_by_path() -> None:
    assert root_contract(CONTRACT).column_names == ("id", "tags")
    orders = child_contract(CONTRACT, ("orders",))
    assert [(c.name, c.nullable) for c in orders.columns] == [("sku", False)]
    assert orders.enforcement == "quarantine"
    assert child_contract(CONTRACT, ("orders", "items")).column_names == ("n",)
    assert declared_paths(CONTRACT) == {("orders",), ("orders", "items")}
    assert table_name("c", ("orders", "items")) == "c__orders__items"


def test_lists_of_objects_move_with_their_links() -> None:
    batch = text_batch(
        [
            {
                "id": 1,
                "tags": [{"a": 1}],
                "orders": [{"sku": "A", "qty": 1.50, "items": [{"n": 7}]}],
            },
            {"id": 2, "tags": None, "orders": []},
            {"id": 3, "orders": [{"sku": "B"}, {"sku": "C", "items": [{"n": 1}, {"n": 2}]}]},
        ]
    )
    # the text of a JSON number as the line wrote it (json.dumps writes 1.5)
    raw = batch.column("orders").to_pylist()
    raw[0] = raw[0].replace("1.5", "1.50")
    batch = batch.set_column(2, "orders", pa.array(raw, pa.string()))
    out = unnest(
        batch, max_nesting=2, declared=declared_paths(CONTRACT), keep=frozenset({"id", "tags"})
    )
    assert out.root.schema.names == ["id", "tags"]  # a declared json column stays
    assert out.bad == {}
    orders = out.children[("orders",)]
    assert orders.batch.to_pydict() == {"sku": ["A", "B", "C"], "qty": ["1.50", None, None]}
    assert (orders.root, orders.parent, orders.index) == ([0, 2, 2], [0, 2, 2], [0, 0, 1])
    items = out.children[("orders", "items")]
    assert items.batch.to_pydict() == {"n": ["7", "1", "2"]}
    assert (items.root, items.parent, items.index) == ([0, 2, 2], [0, 2, 2], [0, 0, 1])
    assert list(out.children) == [("orders",), ("orders", "items")]  # parents first


def test_below_max_nesting_a_list_stays_json_text() -> None:
    batch = text_batch([{"id": 1, "orders": [{"sku": "A", "items": [{"n": 7}]}]}])
    out = unnest(batch, max_nesting=1, declared=frozenset(), keep=frozenset())
    assert list(out.children) == [("orders",)]
    items = out.children[("orders",)].batch.column("items").to_pylist()
    assert [json.loads(v) for v in items] == [[{"n": 7}]]
    none = unnest(batch, max_nesting=0, declared=frozenset(), keep=frozenset())
    assert none.children == {}
    assert none.root.equals(batch)


def test_a_child_field_of_something_else_marks_its_root() -> None:
    batch = text_batch(
        [{"id": 1, "orders": [{"sku": "A"}]}, {"id": 2, "orders": "none"}, {"id": 3, "orders": [1]}]
    )
    out = unnest(batch, max_nesting=2, declared=frozenset(), keep=frozenset())
    assert out.bad == {1: "orders", 2: "orders"}
    assert out.children[("orders",)].root == [0]


def test_lists_of_scalars_and_objects_stay_in_the_row() -> None:
    batch = text_batch([{"id": 1, "tags": ["a"], "meta": {"k": [{"x": 1}]}}])
    out = unnest(batch, max_nesting=2, declared=frozenset(), keep=frozenset())
    assert out.children == {}
    assert out.root.equals(batch)


def test_objects_without_fields_are_rows_and_typed_lists_unnest() -> None:
    batch = pa.RecordBatch.from_pylist(
        [{"id": 1, "orders": [{"sku": "A", "qty": 2}, {"sku": None, "qty": None}]}]
    )
    out = unnest(batch, max_nesting=1, declared=frozenset(), keep=frozenset())
    assert out.children[("orders",)].batch.to_pydict() == {"sku": ["A", None], "qty": ["2", None]}
    empty = unnest(
        text_batch([{"id": 1, "orders": [{}, {}]}]),
        max_nesting=1,
        declared=frozenset({("orders",)}),
        keep=frozenset(),
    )
    rows = empty.children[("orders",)]
    assert (rows.batch.num_rows, rows.batch.num_columns, rows.index) == (2, 0, [0, 1])
