"""The four built-in assertion types, registered under ``dpone.assertion`` like any plugin.

The compiler reads their names, scopes and config checks from the catalog, so this module
imports Arrow (and the contracts' kernels) only in the methods that look at rows: compiling a
manifest loads no Arrow.
"""

from __future__ import annotations

import hashlib
from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from dpone.assertions.spec import Scope, ValueKind

if TYPE_CHECKING:
    import pyarrow as pa


def _count_problems(name: str, params: Mapping[str, Any], minimum: int) -> list[str]:
    value = params.get("value")
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        return [f"{name} takes an integer >= {minimum}"]
    return []


def _columns_problems(name: str, params: Mapping[str, Any]) -> list[str]:
    value = params.get("value")
    if not (isinstance(value, list) and value and all(isinstance(c, str) for c in value)):
        return [f"{name} takes a non-empty list of column names"]
    return []


class _RowCountLimit(ABC):
    """Batch scope: counts the rows that would load; the verdict comes after the last chunk."""

    name: ClassVar[str]
    scope: ClassVar[Scope] = "batch"
    value_kind: ClassVar[ValueKind] = "count"
    minimum: ClassVar[int]

    @classmethod
    def check_config(cls, params: Mapping[str, Any]) -> list[str]:
        return _count_problems(cls.name, params, cls.minimum)

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.limit = int(params["value"])

    def observe(self, batch: pa.RecordBatch) -> pa.BooleanArray | None:
        return None

    @abstractmethod
    def breaks(self, rows: int) -> bool:
        """Whether ``rows`` breaks this limit."""

    def finalize(self, rows: int) -> str | None:
        if self.breaks(rows):
            return f"{rows} row(s) against {self.name} {self.limit}"
        return None


class MinRowsPerLoad(_RowCountLimit):
    """Fails when the load carries fewer rows than ``value`` (silent empty loads)."""

    name: ClassVar[str] = "min_rows_per_load"
    minimum: ClassVar[int] = 0

    def breaks(self, rows: int) -> bool:
        return rows < self.limit


class MaxRowsPerLoad(_RowCountLimit):
    """Fails when the load carries more rows than ``value`` (runaway extraction)."""

    name: ClassVar[str] = "max_rows_per_load"
    minimum: ClassVar[int] = 1

    def breaks(self, rows: int) -> bool:
        return rows > self.limit


class RequiredColumns:
    """Row: each named key must be present in the row (presence, not non-null).

    Presence is about what the source gave, not what the contract made of it: the contract
    fills an absent declared column with NULLs, so the engine passes the source's own column
    names (``sees_source_columns``) and, from sources with keys (JSONL, Python, REST, dlt),
    a mask per key that some rows of the chunk lack (``sees_key_presence``). A key absent from
    a row fails that row; a key carrying null passes. A CSV or Parquet column is in every row
    of its file or in none.
    """

    name: ClassVar[str] = "required_columns"
    scope: ClassVar[Scope] = "row"
    value_kind: ClassVar[ValueKind] = "columns"
    sees_source_columns: ClassVar[bool] = True
    sees_key_presence: ClassVar[bool] = True

    @classmethod
    def check_config(cls, params: Mapping[str, Any]) -> list[str]:
        return _columns_problems(cls.name, params)

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.columns = list(params["value"])

    def observe(
        self,
        batch: pa.RecordBatch,
        source_columns: Collection[str] | None = None,
        present: Mapping[str, pa.BooleanArray] | None = None,
    ) -> pa.BooleanArray | None:
        import pyarrow as pa
        import pyarrow.compute as pc

        keys = batch.schema.names if source_columns is None else source_columns
        if any(c not in keys for c in self.columns):
            return pa.repeat(pa.scalar(True, pa.bool_()), batch.num_rows)
        masks = [present[c] for c in self.columns if present is not None and c in present]
        if not masks:
            return pa.repeat(pa.scalar(False, pa.bool_()), batch.num_rows)
        has_all = masks[0]
        for mask in masks[1:]:
            has_all = pc.and_(has_all, mask)
        missing: pa.BooleanArray = pc.invert(has_all)
        return missing

    def finalize(self, rows: int) -> str | None:
        return None


class UniqueColumns:
    """Row: a key combination seen before in this run fails; the first occurrence passes.

    A key is encoded injectively before it is hashed: per column, NULL is ``-`` and a value is
    its byte length, ``:`` and its bytes (a netstring), so no separator inside a value and no
    stand-in for NULL can make two different keys equal. Keys are kept as 16-byte BLAKE2b
    digests, never the values: about 83 bytes per distinct key in a Python set (≈ 83 MB per
    million keys; measured in ``make bench``). Uniqueness is within the run; across runs it is
    the sink's job (``strategy: merge`` on ``unique_key``).
    """

    name: ClassVar[str] = "unique_columns"
    scope: ClassVar[Scope] = "row"
    value_kind: ClassVar[ValueKind] = "columns"

    @classmethod
    def check_config(cls, params: Mapping[str, Any]) -> list[str]:
        return _columns_problems(cls.name, params)

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.columns = list(params["value"])
        self.seen: set[bytes] = set()

    def observe(self, batch: pa.RecordBatch) -> pa.BooleanArray | None:
        import pyarrow as pa
        import pyarrow.compute as pc

        present = [c for c in self.columns if c in batch.schema.names]
        if not present:
            return pa.repeat(pa.scalar(False, pa.bool_()), batch.num_rows)
        # The encoded keys are built by Arrow kernels; the only per-row Python is the digest
        # and the set lookup.
        parts = [_netstring(batch.column(c)) for c in present]
        joined = parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, b"")
        seen = self.seen
        out = []
        for key in joined.to_pylist():
            digest = hashlib.blake2b(key, digest_size=16).digest()
            if digest in seen:
                out.append(True)
            else:
                seen.add(digest)
                out.append(False)
        return pa.array(out, pa.bool_())

    def finalize(self, rows: int) -> str | None:
        return None


def _netstring(column: pa.Array) -> pa.Array:
    """Each value as ``<byte length>:<bytes>``, NULL as ``-`` (binary, never NULL)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from dpone.contracts.convert import as_text

    t = column.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t):
        data = column.cast(pa.binary())
    else:
        data = as_text(column).cast(pa.binary())
    length = pc.binary_length(data).cast(pa.string()).cast(pa.binary())
    encoded = pc.binary_join_element_wise(length, data, b":")
    return pc.fill_null(encoded, pa.scalar(b"-", pa.binary()))


BUILTINS: tuple[type[Any], ...] = (MinRowsPerLoad, MaxRowsPerLoad, RequiredColumns, UniqueColumns)
