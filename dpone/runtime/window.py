"""The incremental window of a run (SPEC §6): which rows it reads, which of them a committed
run already took, which arrived too late, and what the state remembers for the next run.

dlt's semantics. A run reads the rows whose cursor is ``>= lower`` and ``< end_value``:

- ``lower`` is the committed cursor minus ``lag`` (seconds for a timestamp, days for a date,
  units for a number); on an empty state ``initial_value``. It never goes below the start of
  the committed boundary: the digests know nothing of the rows below it (a lag raised between
  runs widens the window as the cursor moves on, not backwards at once).
- The rows in ``[lower, committed]`` may be rows a committed run loaded or quarantined: each
  such row's digest (BLAKE2b-128 of its values as the source delivered them) is looked up in
  the state's boundary; a match is skipped, anything else is new (a late row within the lag,
  a row updated to the boundary's value) and loads.
- A row below ``lower`` is not loaded. It is ``late_skipped`` unless a committed run read it
  already: a re-read file version the last committed run read whole (its rows are old), or a
  state written before boundaries existed (it cannot tell, so nothing is called late).

The state keeps the digests of every row this run read in ``[new cursor - lag, new cursor]``
(and the earlier ones of that range), at most :data:`MAX_BOUNDARY_ROWS`. Beyond it a merge
pipeline keeps none (its next run loads those rows again; the merge makes that harmless) and
any other run fails before its commit with ``DPONE_CURSOR_BOUNDARY_LIMIT``.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import math
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.base import SourceChunk
from dpone.errors import DponeError
from dpone.manifest.specs import IncrementalPlan
from dpone.records import frozen
from dpone.runtime.cursor_values import to_scalar, to_text
from dpone.state.model import Boundary, PipelineState

#: Committed boundary rows the state remembers, at most (16 bytes of digest each).
MAX_BOUNDARY_ROWS = 100_000
#: Rows a run tracks as boundary candidates before it knows its final cursor; beyond this it
#: stops (they could not fit :data:`MAX_BOUNDARY_ROWS` unless the cursor moved far on).
MAX_CANDIDATES = 10 * MAX_BOUNDARY_ROWS
DIGEST_BYTES = 16
#: Chunks whose candidate rows are kept as rows before they are digested (unsorted input).
MAX_PENDING_CHUNKS = 32


class BoundaryLimit(DponeError):
    code = "DPONE_CURSOR_BOUNDARY_LIMIT"
    stage = "read"


class CursorValueInvalid(DponeError):
    code = "DPONE_CURSOR_VALUE_INVALID"
    stage = "read"


def minus_lag(value: Any, lag: float) -> Any:
    """``value`` moved back by ``lag`` in its unit; rounded so the window only widens."""
    if not lag or value is None:
        return value
    if isinstance(value, dt.datetime):
        return value - dt.timedelta(seconds=lag)
    if isinstance(value, dt.date):
        return value - dt.timedelta(days=math.ceil(lag))
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value - math.ceil(lag)
    if isinstance(value, Decimal):
        return value - Decimal(str(lag))
    if isinstance(value, float):
        return value - lag
    return value  # validation refuses a lag on other cursor types


def typed_value(value: str | int | float, dtype: pa.DataType, what: str) -> Any:
    """A committed or configured cursor value as the Python value of the column's type."""
    try:
        return to_scalar(value, dtype).as_py()
    except (ValueError, TypeError, ArithmeticError, pa.ArrowException):
        raise CursorValueInvalid(
            f"the incremental {what} does not read as the cursor column's type ({dtype})",
            fixes=(f"write the {what} in the cursor column's type, e.g. ISO-8601 for a timestamp",),
        ) from None


def scalar(value: Any, dtype: pa.DataType) -> pa.Scalar:
    """A typed Python value as a scalar of ``dtype`` (a decimal floored to the type's scale)."""
    if pa.types.is_decimal(dtype) and isinstance(value, Decimal):
        value = value.quantize(Decimal(1).scaleb(-dtype.scale), rounding=ROUND_FLOOR)
    return pa.scalar(value, type=dtype)


def row_digests(batch: pa.RecordBatch, rows: pa.Array) -> list[bytes]:
    """The digests of some rows of ``batch``: its columns in name order, the values as the
    source delivered them. Only boundary rows are digested, so the per-row work stays small."""
    taken = batch.take(rows)
    names = taken.schema.names
    order = sorted(range(len(names)), key=lambda i: names[i])
    header = orjson.dumps([names[i] for i in order])
    columns = [taken.column(i).to_pylist() for i in order]
    out = []
    for values in zip(*columns, strict=True):
        digest = hashlib.blake2b(header, digest_size=DIGEST_BYTES)
        digest.update(orjson.dumps(values, default=_plain))
        out.append(digest.digest())
    return out


def _plain(value: Any) -> str:
    """What orjson does not write itself (decimals, bytes): a stable text."""
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _pack(digests: set[bytes]) -> str:
    return base64.b64encode(b"".join(sorted(digests))).decode()


def _unpack(text: str) -> list[bytes]:
    raw = base64.b64decode(text)
    return [raw[i : i + DIGEST_BYTES] for i in range(0, len(raw), DIGEST_BYTES)]


@dataclass(slots=True)
class Split:
    """One chunk's rows by the window: kept (None: all of them), and the counts skipped."""

    keep: pa.BooleanArray | None
    skipped: int = 0
    late: int = 0


@dataclass(slots=True)
class Window:
    """A run's window and what it saw of the boundary (see the module's text)."""

    dtype: pa.DataType
    lag: float
    lower: Any
    upper: Any
    stored: Any
    #: a committed cursor without a boundary (an earlier dpone): rows at it are committed
    legacy: bool
    #: rows below the window are counted as late (a committed cursor with a boundary)
    counts_late: bool
    #: may the boundary be dropped when it outgrows the cap (merge: re-loading is harmless)
    fallback: bool
    known: set[bytes] = field(default_factory=set)
    previous: dict[Any, list[bytes]] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    #: what this run saw: boundary candidates by cursor, the files it read, the highest cursor
    candidates: dict[Any, set[bytes]] = field(default_factory=dict)
    read_files: dict[str, str] = field(default_factory=dict)
    #: candidate rows not digested yet: (the rows as read, their typed cursors)
    pending: list[tuple[pa.RecordBatch, pa.Array]] = field(default_factory=list)
    top: Any = None
    overflow: bool = False

    @classmethod
    def create(
        cls,
        incremental: IncrementalPlan,
        dtype: pa.DataType,
        state: PipelineState,
        *,
        fallback: bool,
    ) -> Window:
        lag = float(incremental.lag or 0)
        upper = None
        if incremental.end_value is not None:
            upper = typed_value(incremental.end_value, dtype, "end_value")
        boundary = state.boundary
        stored = None
        if state.cursor is not None and state.cursor.value is not None:
            stored = typed_value(state.cursor.value, dtype, "committed cursor")
        window = cls(dtype, lag, None, upper, stored, False, False, fallback, top=stored)
        if stored is None:
            if incremental.initial_value is not None:
                window.lower = typed_value(incremental.initial_value, dtype, "initial_value")
            return window
        if boundary is None:  # a state of an earlier dpone: it committed every row <= stored
            window.lower, window.legacy = stored, True
            return window
        lower = minus_lag(stored, lag)
        if boundary.start is not None:
            start = typed_value(boundary.start, dtype, "boundary start")
            lower = max(lower, start)
        window.lower, window.counts_late, window.files = lower, True, dict(boundary.files)
        if boundary.complete:
            for text, packed in boundary.digests.items():
                digests = _unpack(packed)
                window.previous[typed_value(text, dtype, "boundary value")] = digests
                window.known.update(digests)
        return window

    def pushdown(self) -> str | int | None:
        """The lower bound as a database source binds it (``cursor >= value``)."""
        return to_text(self.lower)

    def split(self, chunk: SourceChunk, typed: pa.Array) -> Split:
        """Which rows of ``chunk`` (``typed``: its cursor column, parsed) this run takes."""
        if self.upper is None and self.lower is None:
            self._candidates(chunk, typed, None)
            return Split(None)
        dtype = typed.type
        size = len(typed)
        below = (
            _false(size) if self.lower is None else _flag(pc.less(typed, scalar(self.lower, dtype)))
        )
        beyond = (
            _false(size)
            if self.upper is None
            else _flag(pc.greater_equal(typed, scalar(self.upper, dtype)))
        )
        inside = pc.invert(pc.or_(below, beyond))
        duplicate = self._duplicates(chunk, typed, inside)
        keep = pc.and_(inside, pc.invert(duplicate))
        n_below = _count(below)
        known_file = (
            chunk.rereadable
            and chunk.file_sha256 is not None
            and self.files.get(chunk.partition) == chunk.file_sha256
        )
        late = n_below if (self.counts_late and not known_file) else 0
        skipped = n_below - late + _count(beyond) + _count(duplicate)
        self._candidates(chunk, typed, inside)
        return Split(keep, skipped, late)

    def _duplicates(self, chunk: SourceChunk, typed: pa.Array, inside: pa.Array) -> pa.Array:
        """The rows of ``[lower, stored]`` a committed run took (by digest)."""
        if self.stored is None:
            return _false(len(typed))
        at_or_below = _flag(pc.less_equal(typed, scalar(self.stored, typed.type)))
        region = pc.and_(inside, at_or_below)
        positions = pc.indices_nonzero(region)
        if len(positions) == 0:
            return _false(len(typed))
        digests = row_digests(chunk.batch, positions)
        flags = [self.legacy or d in self.known for d in digests]
        cursors = typed.take(positions).to_pylist()
        for value, digest in zip(cursors, digests, strict=True):
            self._add(value, digest)
        duplicates = positions.filter(pa.array(flags, pa.bool_()))
        if len(duplicates) == 0:
            return _false(len(typed))
        # the positions as a mask, in Arrow: each row's index, checked against the set
        index = pc.subtract(pc.cumulative_sum(pa.repeat(pa.scalar(1, pa.int64()), len(typed))), 1)
        result: pa.Array = pc.is_in(index, value_set=duplicates.cast(pa.int64()))
        return result

    def _candidates(self, chunk: SourceChunk, typed: pa.Array, inside: pa.Array | None) -> None:
        """Digest this chunk's new rows that may end in the next boundary."""
        if self.overflow:
            return
        if self.stored is not None:
            new = _flag(pc.greater(typed, scalar(self.stored, typed.type)))
            inside = new if inside is None else pc.and_(inside, new)
        elif inside is None:
            inside = pc.invert(pc.is_null(typed))
        inside = _flag(inside)
        chunk_top = pc.max(typed.filter(inside)).as_py() if _count(inside) else None
        if chunk_top is not None and (self.top is None or chunk_top > self.top):
            self.top = chunk_top
        if self.top is None:
            return
        threshold = minus_lag(self.top, self.lag)
        near = pc.and_(inside, _flag(pc.greater_equal(typed, scalar(threshold, typed.type))))
        positions = pc.indices_nonzero(near)
        if len(positions):
            # Kept as rows, digested only if they are still near the top at the end: on
            # sorted input most are passed by the next chunk's rows (no per-row work for them).
            self.pending.append((chunk.batch.take(positions), typed.take(positions)))
        self._prune(threshold)

    def _prune(self, threshold: Any) -> None:
        """Drop the candidates below ``threshold`` (the top minus the lag); give up past the
        limit; digest the rows kept once too many chunks hold some."""
        kept: list[tuple[pa.RecordBatch, pa.Array]] = []
        for rows, cursors in self.pending:
            near = _flag(pc.greater_equal(cursors, scalar(threshold, cursors.type)))
            if _count(near) == len(cursors):
                kept.append((rows, cursors))
            elif _count(near):
                kept.append((rows.filter(near), cursors.filter(near)))
        self.pending = kept
        for value in [v for v in self.candidates if v < threshold]:
            del self.candidates[value]
        pending = sum(len(c) for _, c in kept)
        if pending + sum(len(d) for d in self.candidates.values()) > MAX_CANDIDATES:
            self.overflow = True
            self.candidates.clear()
            self.pending.clear()
        elif len(kept) > MAX_PENDING_CHUNKS:
            self.settle()

    def settle(self) -> None:
        """Digest the candidate rows still kept as rows."""
        for rows, cursors in self.pending:
            digests = row_digests(rows, pc.indices_nonzero(pc.is_valid(cursors)))
            for value, digest in zip(cursors.to_pylist(), digests, strict=True):
                self._add(value, digest)
        self.pending.clear()

    def _add(self, value: Any, digest: bytes) -> None:
        if not self.overflow:
            self.candidates.setdefault(value, set()).add(digest)

    def see_file(self, chunk: SourceChunk) -> None:
        if chunk.rereadable and chunk.file_sha256 is not None:
            self.read_files[chunk.partition] = chunk.file_sha256

    def absorb(self, seen: BoundarySeen) -> None:
        """What a task of this run saw of the boundary (``engine: dask``), into this window."""
        if seen.top is not None and (self.top is None or seen.top > self.top):
            self.top = seen.top
        self.overflow = self.overflow or seen.overflow
        if self.overflow:
            self.candidates.clear()
        else:
            for value, digests in seen.candidates.items():
                self.candidates.setdefault(value, set()).update(digests)
        self.read_files.update(seen.read_files)

    def boundary_after_run(self, highest: Any) -> Boundary:
        """The state's boundary once this run commits, its cursor at ``highest``."""
        self.settle()
        top = highest if highest is not None else self.stored
        if top is None:
            return Boundary(start=None, files=dict(self.read_files))
        start = minus_lag(top, self.lag)
        if self.lower is not None and self.lower > start:
            start = self.lower
        start_text = to_text(scalar(start, self.dtype).as_py())
        rows: dict[Any, set[bytes]] = {}
        for value, digests in self.previous.items():
            if start <= value <= top:
                rows.setdefault(value, set()).update(digests)
        for value, found in self.candidates.items():
            if start <= value <= top:
                rows.setdefault(value, set()).update(found)
        total = sum(len(d) for d in rows.values())
        if self.overflow or total > MAX_BOUNDARY_ROWS:
            if not self.fallback:
                raise BoundaryLimit(
                    f"more than {MAX_BOUNDARY_ROWS} rows share the boundary window of the "
                    "incremental cursor; the state cannot remember them all",
                    fixes=(
                        "lower source.incremental.lag, or use a finer cursor (a timestamp "
                        "rather than a date)",
                        "or load with strategy merge and a unique_key: a merge pipeline loads "
                        "such a window again instead (harmless under the merge)",
                    ),
                )
            return Boundary(start=start_text, files=dict(self.read_files), complete=False)
        packed = {str(to_text(value)): _pack(found) for value, found in rows.items()}
        return Boundary(start=start_text, digests=packed, files=dict(self.read_files))


@frozen
class BoundarySeen:
    """What one scale-out task saw of the boundary: its candidates (each task prunes them by
    its own highest cursor, a superset of what the run's highest keeps), its files, its top."""

    top: Any
    overflow: bool
    candidates: dict[Any, set[bytes]]
    read_files: dict[str, str]

    @classmethod
    def of(cls, window: Window) -> BoundarySeen:
        window.settle()
        return cls(window.top, window.overflow, dict(window.candidates), dict(window.read_files))


def _flag(mask: pa.Array) -> pa.Array:
    """A comparison's result with NULL (a NULL cursor) as False."""
    return pc.fill_null(mask, False)


def _false(size: int) -> pa.Array:
    return pa.repeat(pa.scalar(False), size)


def _count(mask: pa.Array) -> int:
    return int(pc.sum(mask).as_py() or 0)


__all__ = [
    "MAX_BOUNDARY_ROWS",
    "BoundaryLimit",
    "BoundarySeen",
    "CursorValueInvalid",
    "Split",
    "Window",
    "minus_lag",
    "row_digests",
]
