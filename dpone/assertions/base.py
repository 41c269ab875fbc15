"""The assertion protocol: what a registered assertion type implements.

Types observe rows and return verdicts; they never see ``on_failure``, never write to the
DLQ and never touch a sink — the engine owns policy. One instance serves one configured
assertion for one run, so a type may keep bounded state (``unique_columns`` keeps digests).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from dpone.assertions.spec import Scope, ValueKind

if TYPE_CHECKING:
    import pyarrow as pa


@runtime_checkable
class AssertionType(Protocol):
    #: The registry name: the manifest key and the entry-point name.
    name: ClassVar[str]
    scope: ClassVar[Scope]
    #: How the compiler checks the value: a row count, contract column names, or anything.
    value_kind: ClassVar[ValueKind]

    @classmethod
    def check_config(cls, params: Mapping[str, Any]) -> list[str]:
        """Problems with ``params`` (value-free messages); called by ``dpone validate``."""
        ...

    def __init__(self, params: Mapping[str, Any]) -> None: ...

    def observe(self, batch: pa.RecordBatch) -> pa.BooleanArray | None:
        """Row scope: a mask of the failing rows of ``batch``. Batch scope: None.

        ``batch`` holds only the rows that would load, after the contract and the earlier
        assertions. A type that sets ``sees_source_columns = True`` (a ClassVar) is called as
        ``observe(batch, source_columns=...)`` with the keys the source really gave; one that
        sets ``sees_key_presence = True`` as ``observe(batch, source_columns=..., present=...)``,
        ``present`` mapping a key some rows lack to a boolean mask (true: the row has it), or
        None when every row has every key.
        """
        ...

    def finalize(self, rows: int) -> str | None:
        """Batch scope: a failure message after the last chunk, or None when it holds."""
        ...
