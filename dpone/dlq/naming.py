"""Where a run writer's timestamps, record ids and segment names come from.

A run's own writer stamps records with the store's clock, makes new ULIDs after the run's
last id and numbers its segments on (:class:`SequentialNaming`); a scale-out partition's
writer derives all three from the run and the row's place instead
(:class:`dpone.dlq.partition.PartitionNaming`), so that a task run twice writes the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from dpone.dlq import segments
from dpone.ids import UlidSequence


class Naming(Protocol):
    """What a :class:`dpone.dlq.writer.RunWriter` asks, in this order, for each chunk."""

    def next_chunk(self) -> None:
        """A chunk begins (called once per ``write_chunk``, a retried one included)."""

    def now(self) -> datetime:
        """The time the chunk's new records are created at."""

    def ids(self, count: int, now: datetime) -> list[str]:
        """``count`` new record ids, ascending, after every id given before."""

    def segment_name(self) -> str:
        """The name of the next segment the writer publishes."""


class SequentialNaming:
    """The clock's time, ULIDs after ``after`` (the run's last id), segments from ``seq`` on."""

    def __init__(self, clock: Callable[[], datetime], *, after: str | None, seq: int) -> None:
        self._clock = clock
        self._ids = UlidSequence(after=after)
        self._seq = seq

    def next_chunk(self) -> None:
        return None

    def now(self) -> datetime:
        return self._clock()

    def ids(self, count: int, now: datetime) -> list[str]:
        return self._ids.batch(count, now)

    def segment_name(self) -> str:
        name = segments.segment_name(self._seq)
        self._seq += 1
        return name


def seq_of(name: str) -> int:
    """The sequence number of a segment this writer names (0 for any other name)."""
    stem = name.removesuffix(".jsonl")
    return int(stem) if stem.isdigit() else 0


__all__ = ["Naming", "SequentialNaming", "seq_of"]
