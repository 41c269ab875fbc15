"""One background thread with at most one task in flight: the DLQ pipe's and the staging's.

The caller's thread hands a task over with :meth:`InFlight.start` only once the one before is
done (:meth:`InFlight.result`, which raises that task's error on the caller's thread), so the
objects a task uses are the worker's alone while it runs and the caller's again afterwards:
``Future.result()`` orders everything the worker did before whatever follows.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class InFlight(Generic[T]):
    """A thread named ``name`` (started at the first task), one task at a time."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[T] | None = None

    def start(self, task: Callable[..., T], *args: Any) -> None:
        """Run ``task(*args)`` on the thread; the task before must be done (:meth:`result`)."""
        assert self._pending is None, "result() of the task in flight first"
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        self._pending = self._pool.submit(task, *args)

    def result(self) -> T | None:
        """Wait for the task in flight: its result, or its error raised here (None: none)."""
        pending, self._pending = self._pending, None
        return None if pending is None else pending.result()

    def stop(self) -> None:
        """Let the task in flight end (its outcome is not looked at) and end the thread."""
        pending, self._pending = self._pending, None
        if pending is not None:
            wait([pending])
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


__all__ = ["InFlight"]
