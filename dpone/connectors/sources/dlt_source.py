"""``type: dlt``: any dlt source or resource, named ``module:attr`` and imported at run time.

``ref`` may name a ``@dlt.resource`` or ``@dlt.source`` function (called with ``args``), a
resource or source object, or a plain function returning one of them: a user's own resource
next to the manifest, dlt's ``sql_database`` or ``filesystem``, a verified source. A source's
resource is chosen by ``resource`` (required when it has several). Items may be dicts
(typed by Arrow per chunk, as the ``python`` source does; with child tables, their nested
fields first become JSON text: ``_nested``), Arrow tables or batches, or pandas frames;
they are iterated lazily and re-chunked to ``chunk_size`` rows.

The committed cursor is handed to the resource as dlt's incremental (``apply_hints``), typed
as the contract declares the cursor column, so a resource with an ``incremental`` argument
(``sql_table``) pushes it down and any other is filtered by dlt as it yields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.connectors.base import SourceChunk
from dpone.connectors.dltlib import import_dlt
from dpone.connectors.errors import SourceConfigError, SourceError
from dpone.connectors.presence import absent_keys, with_presence
from dpone.connectors.sources import _dlt
from dpone.connectors.sources._nested import nested_as_text
from dpone.connectors.sources.python import item_batches, resolve_callable
from dpone.contracts.spec import ColumnSpec
from dpone.errors import DponeError


class DltSource:
    """A dlt resource read afresh by every :meth:`chunks` call; not re-readable."""

    cursor_pushdown = True

    def __init__(
        self,
        base_dir: Path,
        config: Mapping[str, Any],
        env: Mapping[str, str],
        cursor: ColumnSpec | None = None,
    ) -> None:
        self.base_dir = Path(base_dir)
        self.ref = str(config["ref"])
        self.args = dict(config.get("args") or {})
        self.resource_name: str | None = config.get("resource")
        self.incremental: Mapping[str, Any] | None = config.get("incremental")
        self.env = env
        self.cursor = cursor
        normalize = config.get("normalize") or {}
        self.child_tables = normalize.get("nested") == "child_tables"
        suffix = f"#{self.resource_name}" if self.resource_name else ""
        self.identity = f"dlt:{self.ref}{suffix}"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        resource = self._resource(after)
        partition = self.resource_name or str(resource.name)
        items = _dlt.guarded(_arrow_frames(resource), partition, self._failed)
        to_batch = nested_as_text(_typed_or_text) if self.child_tables else _typed_or_text
        batches = item_batches(items, chunk_size, partition, to_batch)
        yield from _dlt.stream_chunks(batches, partition, chunk_size)

    def _resource(self, after: object | None) -> Any:
        import_dlt(SourceConfigError)
        from dlt.extract import DltResource
        from dlt.extract import DltSource as DltSourceObject

        target: Any = resolve_callable(self.ref, self.base_dir)
        try:
            if not isinstance(target, DltSourceObject) and (
                self.args or not isinstance(target, DltResource)
            ):
                target = target(**_dlt.resolve_references(self.args, self.env))
            resource = self._pick(target, DltResource, DltSourceObject)
            incremental = _dlt.incremental_args(self.incremental, after, self.cursor)
            if incremental is not None:
                import dlt

                resource.apply_hints(incremental=dlt.sources.incremental(**incremental))
        except DponeError:
            raise
        except Exception as exc:
            raise _dlt.translate(exc, self.ref, self._failed) from None
        return resource

    def _pick(self, target: Any, resource_type: Any, source_type: Any) -> Any:
        if isinstance(target, resource_type):
            if self.resource_name not in (None, target.name):
                raise SourceConfigError(
                    f"{self.ref} is the resource '{target.name}', not '{self.resource_name}'",
                    fixes=(f"write resource: {target.name}, or drop the key",),
                )
            return target
        if not isinstance(target, source_type):
            raise SourceConfigError(
                f"{self.ref} gave a {type(target).__name__}, not a dlt source or resource",
                fixes=("name a @dlt.resource or @dlt.source function (or a python source)",),
            )
        names = list(target.resources.keys())
        if self.resource_name is None and len(names) == 1:
            return target.resources[names[0]]
        if self.resource_name in names:
            return target.resources[self.resource_name]
        shown = ", ".join(names[:20]) or "none"
        raise SourceConfigError(
            f"{self.ref} has the resources {shown}; choose one with resource:"
            if self.resource_name is None
            else f"{self.ref} has no resource '{self.resource_name}' (it has {shown})",
            fixes=("set source.resource to one of the source's resources",),
        )

    def _failed(self, cause: BaseException) -> DponeError:
        return SourceError(
            f"{self.ref} raised {type(cause).__name__}", code="DPONE_SOURCE_CALLABLE_FAILED"
        )


def _typed_or_text(rows: list[Mapping[str, Any]], label: str) -> pa.RecordBatch:
    """Dicts as a batch, each column typed by Arrow; a column whose values Arrow cannot type
    together (a number and a word) is kept as text, so the contract judges each value and a
    bad one reaches the DLQ, instead of failing the chunk as a Python source does."""
    del label
    names, absent = absent_keys(rows)
    arrays = {}
    for name in names:
        values = [row.get(name) for row in rows]
        try:
            arrays[name] = pa.array(values)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
            arrays[name] = pa.array([_text(v) for v in values], pa.string())
    batch = pa.RecordBatch.from_pydict(arrays)
    # A key some items lack is told apart from one carrying null (required_columns).
    return with_presence(batch, absent) if absent else batch


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, default=str, ensure_ascii=False, separators=(",", ":"))
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def _arrow_frames(items: Iterable[Any]) -> Iterator[Any]:
    """Items as they come, pandas frames (dlt's pandas backends) as Arrow tables."""
    for item in items:
        if type(item).__module__.startswith("pandas") and hasattr(item, "columns"):
            yield pa.Table.from_pandas(item, preserve_index=False)
        else:
            yield item


__all__ = ["DltSource"]
