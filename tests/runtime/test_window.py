"""The incremental window's arithmetic and limits (``dpone.runtime.window``), on typed values:
``lag`` in the cursor's unit, the lower bound a database pushes down, the boundary the state
keeps, and what happens past the cap."""

from __future__ import annotations

import base64
import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from dpone.connectors.base import SourceChunk
from dpone.manifest.specs import IncrementalPlan
from dpone.runtime import window as window_module
from dpone.runtime.window import BoundaryLimit, CursorValueInvalid, Window, minus_lag
from dpone.state.model import Boundary, Cursor, PipelineState


def state(value: str | int, kind: str, boundary: Boundary | None) -> PipelineState:
    return PipelineState("p_window", 1, Cursor("c", kind, value), boundary=boundary)


def plan(lag: float = 0, end: str | int | None = None) -> IncrementalPlan:
    return IncrementalPlan("c", None, lag, end)


def chunk(values: list[int]) -> tuple[SourceChunk, pa.Array]:
    typed = pa.array(values, pa.int64())
    batch = pa.record_batch({"c": typed, "v": pa.array([f"v{x}" for x in values])})
    if len(set(values)) < len(values):  # rows with the same cursor differ by their position
        batch = batch.append_column("i", pa.array(range(len(values)), pa.int64()))
    return SourceChunk(batch, "part", None, 1, False), typed


def test_lag_is_counted_in_the_cursors_unit() -> None:
    moment = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    assert minus_lag(moment, 3600) == dt.datetime(2026, 1, 1, 23, tzinfo=dt.UTC)
    assert minus_lag(dt.date(2026, 1, 2), 1.5) == dt.date(2025, 12, 31)  # widened: 2 days
    assert minus_lag(10, 2.5) == 7
    assert minus_lag(Decimal("10.00"), 0.25) == Decimal("9.75")
    assert minus_lag(1.5, 0.5) == 1.0
    assert minus_lag("b", 0) == "b"


def test_the_pushed_down_bound_is_the_cursor_minus_lag_never_below_the_boundary() -> None:
    dates = pa.date32()
    fresh = Window.create(
        plan(lag=3), dates, state("2026-01-10", "date", Boundary("2026-01-09")), fallback=False
    )
    assert fresh.pushdown() == "2026-01-09"  # the digests know nothing below their start
    wide = Window.create(
        plan(lag=3), dates, state("2026-01-10", "date", Boundary("2026-01-01")), fallback=False
    )
    assert wide.pushdown() == "2026-01-07"
    legacy = Window.create(plan(lag=3), dates, state("2026-01-10", "date", None), fallback=False)
    assert (legacy.pushdown(), legacy.legacy) == ("2026-01-10", True)


def test_a_committed_value_of_another_type_is_a_typed_error() -> None:
    with pytest.raises(CursorValueInvalid):
        Window.create(
            plan(), pa.int64(), state("yesterday", "integer", Boundary(1)), fallback=False
        )


def test_the_boundary_keeps_the_rows_near_the_top_and_the_earlier_ones_of_its_range() -> None:
    first = Window.create(plan(lag=2), pa.int64(), PipelineState("p_window"), fallback=False)
    batch, typed = chunk([1, 5, 9, 8, 7, 9])
    assert first.split(batch, typed).keep is None
    boundary = first.boundary_after_run(9)
    assert (boundary.start, sorted(boundary.digests)) == (7, ["7", "8", "9"])
    assert len(base64.b64decode(boundary.digests["9"])) == 2 * 16

    second = Window.create(plan(lag=2), pa.int64(), state(9, "integer", boundary), fallback=False)
    typed = pa.array([9, 10, 6, 8], pa.int64())  # committed 9 (row 2), new 10, late 6, 8
    rows = {"c": typed, "v": pa.array(["v9", "v10", "v6", "v8"]), "i": pa.array([2, 0, 0, 3])}
    batch = SourceChunk(pa.record_batch(rows), "part", None, 1, False)
    split = second.split(batch, typed)
    assert split.keep is not None
    assert split.keep.to_pylist() == [False, True, False, False]
    assert (split.skipped, split.late) == (2, 1)
    after = second.boundary_after_run(10)
    # 8 was re-read; 9 was committed earlier (one of its two rows re-read): both kept
    assert (after.start, sorted(after.digests)) == (8, ["10", "8", "9"])
    assert len(base64.b64decode(after.digests["9"])) == 2 * 16


@pytest.mark.parametrize("merge", [False, True])
def test_past_the_cap_an_append_fails_and_a_merge_keeps_no_digests(
    monkeypatch: pytest.MonkeyPatch, merge: bool
) -> None:
    monkeypatch.setattr(window_module, "MAX_CANDIDATES", 3)
    win = Window.create(plan(), pa.int64(), PipelineState("p_window"), fallback=merge)
    batch, typed = chunk([4, 4, 4, 4])
    win.split(batch, typed)
    assert win.overflow
    if not merge:
        with pytest.raises(BoundaryLimit):
            win.boundary_after_run(4)
        return
    assert win.boundary_after_run(4) == Boundary(start=4, complete=False)


def test_end_value_is_exclusive() -> None:
    win = Window.create(plan(end=5), pa.int64(), PipelineState("p_window"), fallback=False)
    batch, typed = chunk([4, 5, 6])
    split = win.split(batch, typed)
    assert split.keep is not None
    assert (split.keep.to_pylist(), split.skipped, split.late) == ([True, False, False], 2, 0)
