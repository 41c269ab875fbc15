"""A Python callable as a source: ``module:attr`` (or ``module.attr``) called with ``args``.

It may yield (or return an iterable of) dicts, Arrow RecordBatches or Tables, in any mix;
they are re-chunked to ``chunk_size`` rows. Dicts are typed by Arrow per chunk. The manifest's
folder is put on ``sys.path`` first, so a ``my_source.py`` next to the manifest imports.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from dpone.connectors._util import rechunk
from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import SourceConfigError, SourceDecodeError, SourceError


def resolve_callable(spec: str, base_dir: Path) -> Callable[..., Any]:
    """Import ``module:attr`` / ``module.attr`` with ``base_dir`` on ``sys.path``."""
    module_name, sep, attr = spec.partition(":")
    if not sep:
        module_name, _, attr = spec.rpartition(".")
    if not module_name or not attr:
        raise SourceConfigError(
            f"callable {spec!r} is not module:attr or module.attr",
            code="DPONE_SOURCE_CALLABLE_IMPORT",
        )
    folder = str(Path(base_dir).resolve())
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise SourceConfigError(
            f"callable {spec!r} does not import ({type(exc).__name__})",
            code="DPONE_SOURCE_CALLABLE_IMPORT",
        ) from None
    if not callable(target):
        raise SourceConfigError(
            f"{spec!r} is not callable", code="DPONE_SOURCE_CALLABLE_NOT_CALLABLE"
        )
    return target  # type: ignore[no-any-return]


class PythonSource:
    """Rows produced by user code; not re-readable, so record refs use the run/load/row form."""

    cursor_pushdown = False

    def __init__(
        self, base_dir: Path, callable_spec: str, args: Mapping[str, Any] | None = None
    ) -> None:
        self.base_dir = Path(base_dir)
        self.callable_spec = callable_spec
        self.args = dict(args or {})
        self.identity = f"python:{callable_spec}"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """Re-chunked output of the callable; ``after`` is ignored (the lifecycle filters)."""
        del after
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        func = resolve_callable(self.callable_spec, self.base_dir)
        row = 1
        batches = self._batches(func, chunk_size)
        for batch in rechunk(batches, chunk_size):
            yield SourceChunk(batch, self.callable_spec, None, row, False)
            row += batch.num_rows

    def _batches(self, func: Callable[..., Any], chunk_size: int) -> Iterator[pa.RecordBatch]:
        try:
            produced = func(**self.args)
            items: Iterable[Any] = [produced] if _is_arrow(produced) else produced
            yield from item_batches(items, chunk_size, self.callable_spec)
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
    try:
        return pa.RecordBatch.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, OverflowError):
        raise SourceDecodeError(
            f"{label} yielded dicts whose values Arrow cannot type together"
        ) from None


def _is_arrow(obj: object) -> bool:
    return isinstance(obj, (pa.RecordBatch, pa.Table))
