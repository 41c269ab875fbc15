"""``type: json`` columns as the database's own JSON type (SPEC §13).

The contract carries a JSON column as Arrow ``string`` whose field says ``dpone.type = json``
(``contracts/types.py``): the enforcer has already checked that every value is valid JSON
text. A database sink that has a native JSON type loads such a column through Arrow's
canonical ``arrow.json`` extension type, which DuckDB maps to ``JSON`` and the PostgreSQL
sink to ``jsonb``. The filesystem sink keeps the plain string (Parquet has no JSON column
that every reader understands).
"""

from __future__ import annotations

import pyarrow as pa

from dpone.contracts.types import TYPE_METADATA_KEY

JSON_LABEL = b"json"
JSON_TYPE = pa.json_(pa.string())


def is_json_field(field: pa.Field) -> bool:
    """A column the contract (or an earlier load) says holds JSON text."""
    if isinstance(field.type, pa.JsonType):
        return True
    label = (field.metadata or {}).get(TYPE_METADATA_KEY)
    return label == JSON_LABEL and pa.types.is_string(field.type)


def native_field(field: pa.Field) -> pa.Field:
    """``field`` typed ``arrow.json`` when it holds JSON text; else unchanged."""
    if isinstance(field.type, pa.JsonType) or not is_json_field(field):
        return field
    return field.with_type(JSON_TYPE)


def native_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` with every JSON column typed ``arrow.json`` (see the module docstring)."""
    if not any(is_json_field(f) and not isinstance(f.type, pa.JsonType) for f in schema):
        return schema
    return pa.schema([native_field(f) for f in schema], metadata=schema.metadata)


__all__ = ["JSON_TYPE", "is_json_field", "native_field", "native_schema"]
