"""Child tables (SPEC §13, ``source.normalize: {nested: child_tables}``): a root batch's lists
of objects unnested into the rows of child tables, as dlt lays them out.

A field whose values are lists of objects becomes the child table ``<table>__<field>`` (one
row per object; deeper: ``<table>__<field>__<sub>``, up to ``max_nesting`` levels, below which
a list stays a JSON value). The contract declares a child table's columns by path
(``orders.sku``, ``orders.items.qty``); the root's own columns are the names without a dot.

Pure: the values become text (a JSON number keeps the text the line wrote), which the child
table's contract parses as it parses a JSONL line's. What links a child row to its parent
(``_dpone_parent_id``, ``_dpone_list_idx``, ``_dpone_root_id``) is added by the runtime, which
knows the root rows' record refs.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpone.contracts.spec import ContractSpec

#: Between the names of a child table (``orders__items``), as dlt writes them.
TABLE_SEP = "__"
#: Between the parts of a declared child column's path (``orders.items.qty``).
PATH_SEP = "."

Path = tuple[str, ...]


def root_contract(contract: ContractSpec) -> ContractSpec:
    """The root table's contract: the declared columns whose name has no dot."""
    own = tuple(c for c in contract.columns if PATH_SEP not in c.name)
    return dataclasses.replace(contract, columns=own)


def child_contract(contract: ContractSpec, path: Path) -> ContractSpec:
    """The contract of the child table at ``path``: the columns declared as ``path.<name>``,
    under the root's enforcement, evolution and inference."""
    prefix = PATH_SEP.join(path) + PATH_SEP
    own = tuple(
        dataclasses.replace(c, name=c.name[len(prefix) :], source=None)
        for c in contract.columns
        if c.name.startswith(prefix) and PATH_SEP not in c.name[len(prefix) :]
    )
    return dataclasses.replace(contract, columns=own)


def declared_paths(contract: ContractSpec) -> frozenset[Path]:
    """Every child table path the dotted columns name (``a.b.c``: ``(a,)`` and ``(a, b)``)."""
    out: set[Path] = set()
    for c in contract.columns:
        parts = tuple(c.name.split(PATH_SEP))
        out.update(parts[:i] for i in range(1, len(parts)))
    return frozenset(out)


def table_name(table: str, path: Path) -> str:
    """``<table>__<field>__<sub>``."""
    return TABLE_SEP.join((table, *path))


@dataclass(slots=True)
class ChildRows:
    """The rows of one child table in one chunk, in the order of their parents and lists."""

    path: Path
    #: the objects' own fields as text columns (a field that is a child table itself is not)
    batch: pa.RecordBatch
    #: per row: the position of its root row in the root batch
    root: list[int]
    #: per row: its parent's row (in the root batch at level 1, else in the parent table)
    parent: list[int]
    #: per row: its position in its parent's list
    index: list[int]


@dataclass(slots=True)
class Unnested:
    """A root batch without its child fields, the rows of its child tables (parents before
    their children), and the root rows whose child field holds something else than a list of
    objects (root position -> the field's path)."""

    root: pa.RecordBatch
    children: dict[Path, ChildRows] = field(default_factory=dict)
    bad: dict[int, str] = field(default_factory=dict)


class _Raw(str):
    """A JSON number (or NaN/Infinity) kept as its source text."""

    __slots__ = ()


def unnest(
    batch: pa.RecordBatch, *, max_nesting: int, declared: frozenset[Path], keep: frozenset[str]
) -> Unnested:
    """``batch`` with its lists of objects moved into child tables. ``keep``: root columns
    that stay as they are (those the contract declares: a ``type: json`` list stays JSON)."""
    out = Unnested(batch)
    if max_nesting < 1 or not batch.num_rows:
        return out
    moved: list[str] = []
    for name in batch.schema.names:
        column = batch.column(name)
        if name in keep or not _may_nest(column.type):
            continue
        if (name,) not in declared and not _may_hold_lists(column):
            continue  # no value is a JSON array: nothing to parse
        values = [_value(v) for v in column.to_pylist()]
        if (name,) not in declared and not any(_objects(v) for v in values):
            continue
        moved.append(name)
        owners = [(pos, pos, v) for pos, v in enumerate(values)]
        _collect(out, (name,), owners, 1, max_nesting, declared)
    if moved:
        out.root = batch.drop_columns(moved)
    return out


def _collect(
    out: Unnested,
    path: Path,
    owners: list[tuple[int, int, Any]],
    level: int,
    max_nesting: int,
    declared: frozenset[Path],
) -> None:
    rows: list[dict[str, Any]] = []
    root: list[int] = []
    parent: list[int] = []
    index: list[int] = []
    for root_pos, parent_row, value in owners:
        if value is None or value == []:
            continue
        if not _objects(value):
            out.bad.setdefault(root_pos, PATH_SEP.join(path))
            continue
        for i, obj in enumerate(value):
            rows.append(obj)
            root.append(root_pos)
            parent.append(parent_row)
            index.append(i)
    keys = list(dict.fromkeys(k for obj in rows for k in obj))
    subs: list[str] = []
    if level < max_nesting:
        subs = [
            k
            for k in keys
            if (*path, k) in declared or any(_objects(_value(obj.get(k))) for obj in rows)
        ]
    own = [k for k in keys if k not in subs]
    columns = {k: pa.array([_text(obj.get(k)) for obj in rows], pa.string()) for k in own}
    if columns:
        batch = pa.RecordBatch.from_pydict(columns)
    else:  # objects without a field of their own are still rows
        batch = pa.RecordBatch.from_struct_array(pa.array([{}] * len(rows), type=pa.struct([])))
    out.children[path] = ChildRows(path, batch, root, parent, index)
    for key in subs:
        owned = [(root[r], r, _value(rows[r].get(key))) for r in range(len(rows))]
        _collect(out, (*path, key), owned, level + 1, max_nesting, declared)


def _may_nest(dtype: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(dtype)
        or pa.types.is_large_string(dtype)
        or pa.types.is_list(dtype)
        or pa.types.is_large_list(dtype)
    )


def _may_hold_lists(column: pa.Array) -> bool:
    """Whether some value of ``column`` may be a list (a text one starts with ``[``)."""
    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        return True
    starts = pc.starts_with(pc.utf8_ltrim_whitespace(column), "[")
    return bool(pc.any(starts).as_py())


def _value(value: Any) -> Any:
    """A JSON text that is an array, parsed (its numbers as their text); anything else as is."""
    if isinstance(value, str) and value.lstrip().startswith("["):
        try:
            return json.loads(value, parse_float=_Raw, parse_int=_Raw, parse_constant=_Raw)
        except (ValueError, RecursionError):
            return value
    return value


def _objects(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def _text(value: Any) -> str | None:
    """A field's value as the text a JSONL text column holds (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str):
        return str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return json.dumps(value)
    return _json(value)


def _json(value: Any) -> str:
    if isinstance(value, _Raw):
        return str(value)
    if isinstance(value, dict):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}:{_json(v)}" for k, v in value.items())
        return "{" + ",".join(items) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False, default=str)


__all__ = [
    "PATH_SEP",
    "TABLE_SEP",
    "ChildRows",
    "Unnested",
    "child_contract",
    "declared_paths",
    "root_contract",
    "table_name",
    "unnest",
]
