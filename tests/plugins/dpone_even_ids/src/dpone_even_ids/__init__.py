"""A third-party assertion type: every value of the named integer columns must be even."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc


class EvenIds:
    name: ClassVar[str] = "even_ids"
    scope: ClassVar[str] = "row"
    value_kind: ClassVar[str] = "columns"

    @classmethod
    def check_config(cls, params: Mapping[str, Any]) -> list[str]:
        value = params.get("value")
        if not (isinstance(value, list) and value):
            return ["even_ids takes a non-empty list of integer columns"]
        return []

    def __init__(self, params: Mapping[str, Any]) -> None:
        self.columns = list(params["value"])

    def observe(self, batch: pa.RecordBatch) -> pa.BooleanArray | None:
        failing = pa.repeat(pa.scalar(False), batch.num_rows)
        for column in self.columns:
            odd = pc.not_equal(pc.bit_wise_and(batch.column(column), 1), 0)
            failing = pc.or_(failing, pc.fill_null(odd, False))
        return failing

    def finalize(self, rows: int) -> str | None:
        return None


def even_id(row: Mapping[str, Any]) -> bool:
    """A row predicate shipped by the plugin: manifests may name it as a custom predicate."""
    return isinstance(row.get("id"), int) and row["id"] % 2 == 0
