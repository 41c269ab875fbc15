"""Seconds per stage of a run (``dpone.run.v1`` ``timings``), cheap enough to be always on.

``time.perf_counter`` around the steps the stream already takes, on the run's main thread;
the DLQ writer thread measures its own writes (``dlq_pipe.py``). See :class:`StageSeconds`
for what each stage covers.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from time import perf_counter
from typing import TypeVar

T = TypeVar("T")

#: The stages the main thread measures, in the order of a run.
STAGES: tuple[str, ...] = ("read", "enforce", "dlq", "sink_write", "commit")


def stage_seconds() -> dict[str, float]:
    """Zero seconds for every stage (the stream adds to them)."""
    return dict.fromkeys(STAGES, 0.0)


def timed(items: Iterable[T], seconds: dict[str, float], stage: str = "read") -> Iterator[T]:
    """``items`` unchanged; the time spent waiting for each one added to ``stage``."""
    it = iter(items)
    while True:
        start = perf_counter()
        try:
            item = next(it)
        except StopIteration:
            seconds[stage] += perf_counter() - start
            return
        seconds[stage] += perf_counter() - start
        yield item


__all__ = ["STAGES", "stage_seconds", "timed"]
