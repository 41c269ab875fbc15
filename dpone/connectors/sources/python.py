"""A Python callable as a source: ``module:attr`` (or ``module.attr``) called with ``args``.

It may yield (or return an iterable of) dicts, Arrow RecordBatches or Tables, in any mix;
they are re-chunked to ``chunk_size`` rows. Dicts are typed by Arrow per chunk (with child
tables, their nested fields first become JSON text: ``_nested``). A
``my_source.py`` next to the manifest is found first (``dpone.usercode``), without leaving the
manifest's folder on ``sys.path``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.connectors.base import SourceChunk
from dpone.connectors.batches import rechunk
from dpone.connectors.errors import SourceConfigError, SourceDecodeError, SourceError
from dpone.connectors.presence import rows_batch, split_presence
from dpone.connectors.sources._nested import nested_as_text
from dpone.manifest.specs import PythonSourceSpec
from dpone.usercode import UserCodeError, load_callable


def resolve_callable(spec: str, base_dir: Path) -> Callable[..., Any]:
    """Import ``module:attr`` / ``module.attr``, the manifest's folder first."""
    try:
        return load_callable(spec, base_dir)
    except UserCodeError as err:
        if err.failure == "not_callable":
            raise SourceConfigError(
                f"{spec!r} is not callable", code="DPONE_SOURCE_CALLABLE_NOT_CALLABLE"
            ) from None
        what = (
            "is not module:attr or module.attr"
            if err.failure == "malformed"
            else f"does not import ({err.cause})"
        )
        raise SourceConfigError(
            f"callable {spec!r} {what}", code="DPONE_SOURCE_CALLABLE_IMPORT"
        ) from None


class PythonSource:
    """Rows produced by user code; not re-readable, so record refs use the run/load/row form."""

    cursor_pushdown = False

    def __init__(self, spec: PythonSourceSpec) -> None:
        self.base_dir = spec.base_dir
        self.callable_spec = spec.callable
        self.args = dict(spec.args)
        self.child_tables = spec.child_tables
        self.identity = f"python:{spec.callable}"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Re-chunked output of the callable; ``after`` is ignored (the lifecycle filters)."""
        del after
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        func = resolve_callable(self.callable_spec, self.base_dir)
        row = 1
        batches = self._batches(func, chunk_size)
        for batch in rechunk(batches, chunk_size):
            batch, present = split_presence(batch)
            yield SourceChunk(batch, self.callable_spec, None, row, False, present=present)
            row += batch.num_rows

    def _batches(self, func: Callable[..., Any], chunk_size: int) -> Iterator[pa.RecordBatch]:
        try:
            produced = func(**self.args)
            items: Iterable[Any] = [produced] if _is_arrow(produced) else produced
            to_batch = nested_as_text(_from_rows) if self.child_tables else None
            yield from item_batches(items, chunk_size, self.callable_spec, to_batch)
        except SourceError:
            raise
        except Exception as exc:
            raise SourceError(
                f"{self.callable_spec} raised {type(exc).__name__}",
                code="DPONE_SOURCE_CALLABLE_FAILED",
            ) from None


def item_batches(
    items: Iterable[Any],
    chunk_size: int,
    label: str,
    rows_batch: Callable[[list[Mapping[str, Any]], str], pa.RecordBatch] | None = None,
) -> Iterator[pa.RecordBatch]:
    """Dicts (typed by Arrow per group of ``chunk_size``, by ``rows_batch`` when given),
    RecordBatches and Tables, in order."""
    to_batch = rows_batch or _from_rows
    rows: list[Mapping[str, Any]] = []
    for item in items:
        if isinstance(item, Mapping):
            rows.append(item)
            if len(rows) == chunk_size:
                yield to_batch(rows, label)
                rows = []
            continue
        if rows:
            yield to_batch(rows, label)
            rows = []
        if isinstance(item, pa.RecordBatch):
            yield item
        elif isinstance(item, pa.Table):
            yield from item.to_batches(max_chunksize=chunk_size)
        else:
            raise SourceDecodeError(
                f"{label} yielded a {type(item).__name__}; expected a dict, a RecordBatch or a "
                "Table"
            )
    if rows:
        yield to_batch(rows, label)


def _from_rows(rows: list[Mapping[str, Any]], label: str) -> pa.RecordBatch:
    """Every key of every dict a column; a key some dicts lack gets a presence column."""
    try:
        return rows_batch(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        raise SourceDecodeError(
            f"{label} yielded dicts whose values Arrow cannot type together"
        ) from None


def _is_arrow(obj: object) -> bool:
    return isinstance(obj, (pa.RecordBatch, pa.Table))
