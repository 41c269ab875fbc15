"""Fakes for unit tests, yours and dpone's (STYLE: IO behind small Protocols, fakes in the package).

- :class:`FrozenClock`: a clock that stands still until told to move.
- :class:`MemorySource`: rows you give, in chunks, optionally failing at chunk N.
- :class:`MemorySink`: a sink in memory that keeps the real sinks' promises (staged rows
  invisible until the commit, a load marker committed with them, a load id committed once,
  idempotency keys), optionally failing when a load begins, stages or commits.
- :func:`run_plan`: one run of a compiled plan with them in place of the manifest's source
  and sink.

Unit-testing a manifest's contract and assertions without its real source and sink::

    import dpone
    from dpone.testing import MemorySink, MemorySource, run_plan

    def test_an_amount_with_three_decimals_is_quarantined():
        plan = dpone.compile("pipelines/orders/manifest.yaml")  # amount: decimal(12, 2)
        sink = MemorySink()
        report = run_plan(
            plan,
            source=MemorySource([{"id": "1", "amount": "9.50"}, {"id": "2", "amount": "1.005"}]),
            sink=sink,
        )
        assert report.rows.quarantined == 1
        assert sink.table.column("id").to_pylist() == [1]

The DLQ, the state, the run journal and the evidence are still real files under the
manifest's ``runtime.work_dir`` (compile a copy of the manifest in a temporary folder, or
the text of one with :func:`dpone.manifest.compiler.compile_text` and a ``path`` there).
Each fake has its own section; none imports a test framework.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from dpone.clock import iso_utc, utc_now
from dpone.connectors.base import LoadMarker, LoadSpec, Sink, Source, SourceChunk
from dpone.connectors.batches import conform, position_mask, rechunk
from dpone.connectors.errors import SinkUnavailable, SourceUnavailable
from dpone.connectors.sinks.loadstate import LoadState, keys_committed_twice
from dpone.records import frozen

if TYPE_CHECKING:
    from dpone.manifest.plan import Plan
    from dpone.runtime.report import RowCounts, RunReport

# --- clock (used by the DLQ store, the lifecycle and anything else that reads time) ---------


class FrozenClock:
    """A clock that stands still until told to move. Call it to read the time.

    >>> clock = FrozenClock("2026-01-01T00:00:00Z")
    >>> clock.advance(seconds=5).isoformat()
    '2026-01-01T00:00:05+00:00'
    """

    def __init__(self, at: datetime | str = "2026-01-01T00:00:00Z") -> None:
        self._now = self._aware(at)

    @staticmethod
    def _aware(at: datetime | str) -> datetime:
        moment = datetime.fromisoformat(at) if isinstance(at, str) else at
        if moment.tzinfo is None or moment.utcoffset() is None:
            raise ValueError("FrozenClock needs a timezone-aware time")
        return moment.astimezone(UTC)

    def __call__(self) -> datetime:
        return self._now

    def set(self, at: datetime | str) -> datetime:
        self._now = self._aware(at)
        return self._now

    def advance(self, **delta: float) -> datetime:
        """Move forward by ``timedelta(**delta)`` (``days=``, ``seconds=``, ...)."""
        self._now += timedelta(**delta)
        return self._now


# --- source ---------------------------------------------------------------------------------------

Rows: TypeAlias = "pa.Table | pa.RecordBatch | Sequence[Mapping[str, Any]]"


def _batches(data: Rows | Sequence[pa.Table | pa.RecordBatch]) -> list[pa.RecordBatch]:
    batches: list[pa.RecordBatch] = []
    if isinstance(data, pa.Table):
        batches = data.to_batches()
        return batches
    if isinstance(data, pa.RecordBatch):
        return [data]
    items = list(data)
    if all(isinstance(item, Mapping) for item in items):
        # Typed together, so every chunk of the dicts has the same column types.
        if items:
            batches = pa.Table.from_pylist(items).to_batches()
        return batches
    for item in items:
        if isinstance(item, pa.Table):
            batches.extend(item.to_batches())
        elif isinstance(item, pa.RecordBatch):
            batches.append(item)
        else:
            raise TypeError("MemorySource takes a Table, a RecordBatch, dicts, or Tables")
    return batches


class MemorySource:
    """A source of the rows you give: an Arrow ``Table`` or ``RecordBatch``, a list of dicts
    (typed by Arrow together), or a list of Tables/RecordBatches read one after the other.

    The run reads them in chunks of the manifest's ``runtime.chunk_size``, as it reads any
    source (``connectors/base.py: Source``). Like a Python source they cannot be read again,
    so a quarantined row is referred to by run, load and row number (``dpone://run/...``).
    With ``fail_at=N`` the source raises ``error`` (default: a transient
    ``DPONE_SOURCE_UNAVAILABLE``) instead of yielding its N-th chunk (1-based), after the
    N-1 before it; ``error`` may be any exception, ``KeyboardInterrupt()`` too.

    ``chunks_read`` counts the chunks the last read has yielded so far. A source with fewer
    than ``fail_at`` chunks fails where that chunk would have come, after its last one.

    >>> source = MemorySource([{"id": 1}, {"id": 2}, {"id": 3}])
    >>> [c.num_rows for c in source.chunks(2)]
    [2, 1]
    >>> failing = MemorySource([{"id": 1}, {"id": 2}], fail_at=2)
    >>> [c.num_rows for c in failing.chunks(1)]
    Traceback (most recent call last):
    ...
    dpone.connectors.errors.SourceUnavailable: DPONE_SOURCE_UNAVAILABLE: the memory source ...
    """

    cursor_pushdown = False

    def __init__(
        self,
        rows: Rows | Sequence[pa.Table | pa.RecordBatch],
        *,
        name: str = "memory",
        fail_at: int | None = None,
        error: BaseException | None = None,
    ) -> None:
        if fail_at is not None and fail_at < 1:
            raise ValueError("fail_at counts chunks from 1")
        self.name = name
        self.identity = f"memory:{name}"
        self.fail_at = fail_at
        self.error = error
        self.chunks_read = 0
        self._batches = _batches(rows)

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        """The rows in chunks of ``chunk_size``; ``after`` is ignored (the run filters)."""
        del after
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        self.chunks_read = 0
        row = 1
        for number, batch in enumerate(rechunk(iter(self._batches), chunk_size), 1):
            if number == self.fail_at:
                raise self._error(number)
            self.chunks_read = number
            yield SourceChunk(batch, self.name, None, row, False)
            row += batch.num_rows
        if self.fail_at is not None and self.fail_at > self.chunks_read:
            raise self._error(self.chunks_read + 1)

    def _error(self, number: int) -> BaseException:
        if self.error is not None:
            return self.error
        return SourceUnavailable(
            f"the memory source {self.name} was told to fail at chunk {number}"
        )


# --- sink -----------------------------------------------------------------------------------------

FailurePoint = Literal["begin", "stage", "commit"]


@frozen
class CommittedLoad:
    """A load :class:`MemorySink` committed: its marker, its rows and idempotency keys."""

    marker: LoadMarker
    rows: pa.Table
    keys: tuple[str, ...] = ()


class MemorySink:
    """A sink that keeps its table in memory and the promises of ``connectors/base.py``:

    - rows staged by a load are invisible (:attr:`table` does not change) until it commits;
    - the commit applies the load's strategy (``append``; ``replace``; ``merge`` on its
      ``unique_key``, the last staged row of a key winning) and records its
      :class:`~dpone.connectors.base.LoadMarker` in the same step, so "committed" means
      "marker present" (:meth:`committed_load`); committing a load id again applies nothing;
    - a load's idempotency keys (``LoadSpec.keys``) commit with it (:meth:`committed_keys`),
      and a key committed twice is refused;
    - an abort drops what was staged.

    ``fail_at`` makes it raise ``error`` (default: a transient ``DPONE_SINK_UNAVAILABLE``)
    when a load ``begin`` s, when it ``stage`` s rows (its first non-empty write) or when it
    ``commit`` s (before anything is applied: nothing of the load is visible). Set
    ``fail_at = None`` to let the next run through.

    What happened is kept for your assertions: :attr:`loads` (every committed load, in
    order), :attr:`aborted` (the load ids aborted) and :attr:`staged` (the loads begun and
    not ended yet, by load id).

    >>> import pyarrow as pa
    >>> from dpone.connectors.base import LoadSpec
    >>> sink = MemorySink()
    >>> load = sink.begin(LoadSpec("p", "run-1", "load-1", pa.schema([("id", pa.int64())])))
    >>> load.write(pa.record_batch({"id": [1, 2]}))
    >>> sink.table is None
    True
    >>> load.commit().rows
    2
    >>> sink.table.column("id").to_pylist()
    [1, 2]
    """

    def __init__(
        self,
        *,
        dataset: str = "memory",
        table: str = "rows",
        fail_at: FailurePoint | None = None,
        error: BaseException | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.dataset = dataset
        self.table_name = table
        self.target = f"{dataset}.{table}"
        self.identity = f"memory:{self.target}"
        self.fail_at = fail_at
        self.error = error
        self._clock = clock or utc_now
        self.table: pa.Table | None = None
        self.loads: list[CommittedLoad] = []
        self.aborted: list[str] = []
        self.staged: dict[str, _MemoryLoad] = {}

    # --- the Sink protocol -----------------------------------------------------------------------

    def existing_schema(self) -> pa.Schema | None:
        return None if self.table is None else self.table.schema

    def committed_load(self, load_id: str) -> LoadMarker | None:
        for load in self.loads:
            if load.marker.load_id == load_id:
                return load.marker
        return None

    def begin(self, load: LoadSpec) -> _MemoryLoad:
        self._maybe_fail("begin")
        self.staged.pop(load.load_id, None)  # anything staged earlier under the id goes
        staged = _MemoryLoad(self, load)
        self.staged[load.load_id] = staged
        return staged

    def cleanup_abandoned(self, pipeline: str, keep_load_id: str | None = None) -> list[str]:
        dropped = [
            load_id
            for load_id, load in self.staged.items()
            if load.spec.pipeline == pipeline and load_id != keep_load_id
        ]
        for load_id in dropped:
            self.staged.pop(load_id).abort()
        return dropped

    # --- the KeyedSink protocol ------------------------------------------------------------------

    def session(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def committed_keys(self, keys: Collection[str]) -> set[str]:
        held = {key for load in self.loads for key in load.keys}
        return {key for key in keys if key in held}

    def existing_keys(self, columns: Sequence[str], probe: pa.Table) -> pa.BooleanArray:
        if self.table is None or not probe.num_rows:
            return position_mask([], probe.num_rows)
        held = self.table.select(list(columns)).group_by(list(columns)).aggregate([])
        positioned = probe.select(list(columns)).append_column(
            "_dpone_pos", pa.array(range(probe.num_rows), pa.int64())
        )
        hits = positioned.join(held, list(columns), join_type="inner")
        return position_mask(sorted(hits.column("_dpone_pos").to_pylist()), probe.num_rows)

    # --- inside --------------------------------------------------------------------------------

    def _maybe_fail(self, point: FailurePoint) -> None:
        if self.fail_at == point:
            raise self.error or SinkUnavailable(
                f"the memory sink {self.target} was told to fail at {point}"
            )

    def _apply(self, load: _MemoryLoad) -> LoadMarker:
        spec = load.spec
        self._maybe_fail("commit")
        found = self.committed_load(spec.load_id)
        if found is not None:
            return found
        held = self.committed_keys(spec.keys)
        if held:
            raise keys_committed_twice(spec.load_id)
        rows = pa.Table.from_batches(load.batches, schema=spec.schema)
        if spec.mode == "merge":
            rows = _last_per_key(rows, spec.unique_key)
        if self.table is None or spec.mode == "replace":
            table = rows
        else:
            old = self.table
            if spec.mode == "merge":
                old = old.filter(pc.invert(_keys_in(old, rows, spec.unique_key)))
            table = pa.concat_tables([old, rows], promote_options="default")
        marker = load.new_marker(self.target, iso_utc(self._clock()))
        self.table = table
        self.loads.append(CommittedLoad(marker, rows, spec.keys))
        return marker


def _last_per_key(rows: pa.Table, keys: Sequence[str]) -> pa.Table:
    """The last row of each key, in the order the rows came."""
    last = (
        rows.select(list(keys))
        .append_column("_dpone_pos", pa.array(range(rows.num_rows), pa.int64()))
        .group_by(list(keys))
        .aggregate([("_dpone_pos", "max")])
        .column("_dpone_pos_max")
    )
    return rows.take(pc.take(last, pc.sort_indices(last)))


def _keys_in(old: pa.Table, rows: pa.Table, keys: Sequence[str]) -> pa.BooleanArray:
    """For each row of ``old``: whether ``rows`` holds its key."""
    positioned = old.select(list(keys)).append_column(
        "_dpone_pos", pa.array(range(old.num_rows), pa.int64())
    )
    staged = rows.select(list(keys)).group_by(list(keys)).aggregate([])
    hits = positioned.join(staged, list(keys), join_type="inner")
    return position_mask(sorted(hits.column("_dpone_pos").to_pylist()), old.num_rows)


class _MemoryLoad(LoadState):
    """One load of :class:`MemorySink`: its batches, staged in a list until the commit."""

    def __init__(self, sink: MemorySink, spec: LoadSpec) -> None:
        super().__init__(spec)
        self._sink = sink
        self.batches: list[pa.RecordBatch] = []

    def _stage(self, batch: pa.RecordBatch) -> None:
        if not self.batches:
            self._sink._maybe_fail("stage")
        self.batches.append(batch)

    def _widen(self, spec: LoadSpec, added: list[pa.Field]) -> None:
        self.batches = [conform(b, spec.schema) for b in self.batches]

    def _commit(self) -> LoadMarker:
        return self._sink._apply(self)

    def _abort(self) -> None:
        self.batches.clear()
        self._sink.aborted.append(self.spec.load_id)

    def _close(self) -> None:
        self._sink.staged.pop(self.spec.load_id, None)


# --- running a plan with them ---------------------------------------------------------------------


def run_plan(
    plan: Plan,
    *,
    source: Source | None = None,
    sink: Sink | None = None,
    run_id: str | None = None,
    env: Mapping[str, str] | None = None,
    clock: Callable[[], datetime] | None = None,
    on_progress: Callable[[RowCounts], None] | None = None,
) -> RunReport:
    """Run ``plan`` once with ``source`` and/or ``sink`` in place of the manifest's (any
    object keeping the ``Source`` / ``Sink`` protocol: a :class:`MemorySource`, a
    :class:`MemorySink`). Installs no signal handler; returns the report as
    :func:`dpone.run` with ``check=False`` does."""
    from dpone.runtime.context import environment
    from dpone.runtime.lifecycle import RunOptions, run_pipeline

    options = RunOptions(
        run_id=run_id,
        env=environment(env),
        progress=on_progress,
        watch_signals=False,
        clock=clock or utc_now,
        source=source,
        sink=sink,
    )
    return run_pipeline(plan, options)


__all__ = [
    "CommittedLoad",
    "FrozenClock",
    "MemorySink",
    "MemorySource",
    "run_plan",
]
