"""A Ctrl-C or SIGTERM that a library swallowed still stops the run.

The CLI turns both signals into ``KeyboardInterrupt``. Raised asynchronously, wherever the
main thread happens to be, that exception can land inside library code that swallows it
(pyarrow importing an optional module lazily, for one), and the run would go on to commit as
if no one had asked it to stop. While a run is under way, :class:`InterruptWatch` also
remembers that the signal came; the lifecycle checks between chunks and before the sink
commit, and stops there as interrupted (exit 130).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

WATCHED = (signal.SIGINT, signal.SIGTERM)


class InterruptWatch:
    """Wraps the Python handlers of SIGINT and SIGTERM from :meth:`start` to :meth:`stop`
    (or for a ``with`` block).

    Only handlers installed from Python are wrapped: a signal left at its default action or
    ignored (``nohup``) keeps that disposition. Outside the main thread it watches nothing.
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self._previous: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in WATCHED:
            previous = signal.getsignal(signum)
            if callable(previous):
                self._previous[signum] = previous
                signal.signal(signum, self._wrap(previous))

    def stop(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()

    def __enter__(self) -> InterruptWatch:
        self.start()
        return self

    def _wrap(
        self, previous: Callable[[int, FrameType | None], Any]
    ) -> Callable[[int, FrameType | None], Any]:
        def handler(signum: int, frame: FrameType | None) -> Any:
            self.received = signum
            return previous(signum, frame)

        return handler

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a watched signal came since the block began."""
        if self.received is not None:
            raise KeyboardInterrupt

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
