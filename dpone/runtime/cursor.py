"""The incremental cursor: compare and filter typed Arrow columns, track a run's window.

The committed cursor is canonical text (``runtime/cursor_values.py``), so resuming never goes
through floats or a locale.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from dpone.connectors.base import DecodeFailure, SourceChunk
from dpone.contracts.enforcer import ContractEnforcementService
from dpone.contracts.spec import ColumnSpec, ContractSpec, EvolutionSpec, TypeInferenceSpec
from dpone.contracts.types import arrow_type
from dpone.errors import DponeError
from dpone.runtime.cursor_values import max_value, to_text
from dpone.runtime.window import Window
from dpone.state.model import Boundary, PipelineState

#: Rows whose cursor cannot be placed that the state remembers, at most (≈ 8 bytes each).
MAX_UNPLACED_ROWS = 50_000
#: The suffix of a state key that lists a file's undecodable lines (not its rows).
LINES = "#lines"


class UnplacedLimit(DponeError):
    code = "DPONE_CURSOR_UNPLACED_LIMIT"
    stage = "read"


@dataclass(slots=True)
class CursorTracker:
    """Skips rows outside this run's window (``runtime/window.py``: ``>=`` the committed cursor
    minus ``lag``, ``<`` ``end_value``, boundary rows a committed run took de-duplicated) and
    tracks the highest cursor value this run processed.

    The cursor column is parsed on its own (the contract's type, warn mode, so a bad value
    is NULL rather than an error) before the whole row is enforced, so rows of an earlier
    window are skipped before they could be quarantined or loaded a second time. Every kept
    row ends loaded or quarantined, so the cursor moves to the highest value among them.

    A row whose cursor cannot be parsed belongs to no window. In a re-readable file it is
    remembered by (file, file SHA-256, row number) in the state once a run committed it, and
    skipped by later runs while the file is unchanged; a rewritten file is new data. A line
    that did not decode has no cursor either: it is remembered the same way, by its line
    number under the key ``<file>@<sha256>#lines`` (:meth:`new_failures`).
    """

    column: str | None
    spec: ColumnSpec | None
    committed: str | int | None
    window: Window | None
    parser: ContractEnforcementService | None
    previous: Mapping[str, list[int]] = field(default_factory=dict)
    highest: Any = None
    #: rows below the window no committed run read (``late_skipped``)
    late: int = 0
    read_keys: dict[str, str] = field(default_factory=dict)
    seen: dict[str, set[int]] = field(default_factory=dict)
    _typed: pa.Array | None = None

    @classmethod
    def create(
        cls, contract: ContractSpec, incremental: Any, state: PipelineState, *, merge: bool = False
    ) -> CursorTracker:
        """``merge``: the sink merges on a unique key, so an outgrown boundary may be loaded
        again rather than fail the run."""
        if incremental is None:
            return cls(None, None, None, None, None)
        declared = contract.column(incremental.cursor_column)
        spec = ColumnSpec(
            name=incremental.cursor_column,
            type=declared.type if declared else "string",
            nullable=True,
            precision=declared.precision if declared else None,
            scale=declared.scale if declared else None,
            timezone=declared.timezone if declared else None,
        )
        parser = ContractEnforcementService(
            ContractSpec(
                enforcement="warn",
                coercion="safe",  # the window reads any form; the contract judges the row
                columns=(spec,),
                evolution=EvolutionSpec(),
                type_inference=TypeInferenceSpec(enabled=False),
            )
        )
        committed = state.cursor.value if state.cursor else None
        window = Window.create(incremental, arrow_type(spec), state, fallback=merge)
        return cls(
            incremental.cursor_column,
            spec,
            committed,
            window,
            parser,
            previous=state.unplaced,
        )

    def pushdown(self) -> str | int | None:
        """The lower bound a database source pushes down (``cursor >= value``)."""
        return None if self.window is None else self.window.pushdown()

    def keep(self, chunk: SourceChunk) -> tuple[pa.RecordBatch, pa.Int64Array | None, int]:
        """The chunk's rows of this window, their positions in the chunk (None: all of them),
        and how many were skipped."""
        batch = chunk.batch
        self._typed = None
        if self.parser is None or self.column not in batch.schema.names:
            return batch, None, 0
        typed = self.parser.enforce(batch.select([self.column])).valid.column(0)
        assert self.window is not None
        self.window.see_file(chunk)
        split = self.window.split(chunk, typed)
        self.late += split.late
        keep = self._unplaced(chunk, typed, split.keep)
        self._typed = typed
        if keep is None:
            return batch, None, 0
        kept = int(pc.sum(keep).as_py() or 0)
        if kept == batch.num_rows:
            return batch, None, 0
        self._typed = typed.filter(keep)
        return batch.filter(keep), pc.indices_nonzero(keep), batch.num_rows - kept - split.late

    def _unplaced(
        self, chunk: SourceChunk, typed: pa.Array, keep: pa.BooleanArray | None
    ) -> pa.BooleanArray | None:
        if not (chunk.rereadable and chunk.file_sha256):
            return keep
        key = f"{chunk.partition}@{chunk.file_sha256}"
        self.read_keys[chunk.partition] = key
        nulls = pc.indices_nonzero(pc.is_null(typed)).to_pylist()
        if not nulls:
            return keep
        done = set(self.previous.get(key, ()))
        flags = [True] * len(typed) if keep is None else keep.to_pylist()
        seen = self.seen.setdefault(key, set())
        for pos in nulls:
            row = chunk.first_row + pos
            if row in done:
                flags[pos] = False
            else:
                seen.add(row)
        return pa.array(flags, pa.bool_())

    def new_failures(self, chunk: SourceChunk) -> tuple[DecodeFailure, ...]:
        """The chunk's undecodable lines that no committed run dead-lettered yet (all of them
        unless the pipeline is incremental and the file re-readable)."""
        if self.column is None or not (chunk.rereadable and chunk.file_sha256):
            return chunk.failures
        key = f"{chunk.partition}@{chunk.file_sha256}"
        self.read_keys[chunk.partition] = key
        done = set(self.previous.get(key + LINES, ()))
        fresh = tuple(f for f in chunk.failures if f.line not in done)
        self.seen.setdefault(key + LINES, set()).update(f.line for f in fresh)
        return fresh

    def observe(self) -> None:
        """The kept rows of the last chunk are accounted for: the cursor covers them."""
        if self._typed is None or len(self._typed) == 0:
            return
        top = max_value(self._typed)
        if top is not None and (self.highest is None or top > self.highest):
            self.highest = top

    def committed_text(self) -> str | None:
        """The cursor once this run commits: its highest row, never below the committed one
        (rows late within the lag load without moving the cursor back)."""
        top = self._top()
        value = to_text(top) if top is not None else self.committed
        return None if value is None else str(value)

    def _top(self) -> Any:
        stored = None if self.window is None else self.window.stored
        if self.highest is None or (stored is not None and stored > self.highest):
            return stored
        return self.highest

    def boundary_after_run(self) -> Boundary | None:
        """The state's boundary once this run commits (None: not incremental)."""
        if self.window is None:
            return None
        return self.window.boundary_after_run(self._top())

    def unplaced_after_run(self) -> dict[str, list[int]]:
        """The state's memory of unplaced rows once this run commits."""
        out: dict[str, list[int]] = {}
        read_partitions = set(self.read_keys)
        for key, rows in self.previous.items():
            partition, file_key = key.rsplit("@", 1)
            read_as = f"{partition}@{file_key.removesuffix(LINES)}"
            if partition not in read_partitions or self.read_keys[partition] == read_as:
                out[key] = list(rows)
        for key, new_rows in self.seen.items():
            out[key] = sorted(new_rows.union(out.get(key, ())))
        total = sum(len(rows) for rows in out.values())
        if total > MAX_UNPLACED_ROWS:
            raise UnplacedLimit(
                f"{total} rows have an incremental cursor that cannot be parsed; the limit "
                f"is {MAX_UNPLACED_ROWS}",
                fixes=(
                    "fix the cursor values in the source, or declare the cursor column so its "
                    "values parse",
                ),
            )
        return out
