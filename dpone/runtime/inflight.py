"""One background thread with at most ``depth`` tasks in flight: the DLQ pipe's and the
staging's.

The caller's thread hands a task over with :meth:`InFlight.start` only while fewer than
``depth`` are in flight (:meth:`InFlight.result` waits for the oldest and raises its error on
the caller's thread). The thread runs the tasks one at a time, in the order they were handed
over, so the objects the tasks use are the worker's alone while any is in flight and the
caller's again once all are done: ``Future.result()`` orders everything the worker did before
whatever follows.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class InFlight(Generic[T]):
    """A thread named ``name`` (started at the first task), up to ``depth`` tasks queued."""

    def __init__(self, name: str, depth: int = 1) -> None:
        if depth < 1:
            raise ValueError("depth must be at least 1")
        self._name = name
        self.depth = depth
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[Future[T]] = deque()

    @property
    def full(self) -> bool:
        """Whether ``depth`` tasks are in flight (:meth:`result` before the next start)."""
        return len(self._pending) >= self.depth

    @property
    def busy(self) -> bool:
        """Whether any task is in flight."""
        return bool(self._pending)

    def start(self, task: Callable[..., T], *args: Any) -> None:
        """Run ``task(*args)`` on the thread after those in flight; one must be done
        (:meth:`result`) when ``depth`` are in flight."""
        assert not self.full, "result() of the oldest task in flight first"
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=self._name)
        self._pending.append(self._pool.submit(task, *args))

    def result(self) -> T | None:
        """Wait for the oldest task in flight: its result, or its error raised here (None:
        none in flight)."""
        if not self._pending:
            return None
        return self._pending.popleft().result()

    def stop(self) -> None:
        """Let the tasks in flight end (their outcomes are not looked at) and end the thread."""
        pending = list(self._pending)
        self._pending.clear()
        if pending:
            wait(pending)
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


__all__ = ["InFlight"]
