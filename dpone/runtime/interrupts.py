"""Ctrl-C and SIGTERM stop a run at its next safe point; a second one stops it at once.

A ``KeyboardInterrupt`` raised asynchronously lands wherever the main thread happens to be:
inside a driver that turns it into its own error (DuckDB's "Query interrupted", ADBC's
cancelled statement), inside library code that swallows it, or in the middle of the failure
path itself, between "wait for the DLQ writer thread" and "write the aborted index". Each of
those was a real bug of the first version (an aborted DLQ index that missed records the
writer thread was still creating). So while a run is under way the first signal only
*records* that a stop was asked for; the lifecycle looks between chunks, after recovery and
just before the sink commit (:meth:`InterruptWatch.check`), and stops there through its
ordinary failure path: staging dropped, DLQ run aborted with every record, exit 130.

The wait is bounded by one chunk (read, enforce, stage). For a run stuck in a long driver
call, a second signal falls through to the handler that was there before (Python's
``KeyboardInterrupt``): the run dies where it is, and the next run recovers it exactly as it
recovers a killed one.

A signal that arrives once the sink has committed does not stop anything: the evidence and
the state take milliseconds, and finishing is the only way to leave no work to recovery.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any

from dpone import stopping
from dpone.logs import get_logger

log = get_logger("dpone.run")

WATCHED = (signal.SIGINT, signal.SIGTERM)
STOPPING = "stopping after the current chunk; Ctrl-C again stops at once"


def tty_notice(text: str) -> None:
    """For a person at a terminal: one line straight to fd 2. ``os.write`` bypasses the
    buffered ``sys.stderr`` the interrupted code may be in the middle of writing to."""
    with contextlib.suppress(OSError):
        os.write(2, f"\n  {text}\n".encode())


class InterruptWatch:
    """Defers SIGINT and SIGTERM from :meth:`start` to :meth:`stop` (or for a ``with`` block).

    Only handlers installed from Python are replaced: a signal left at its default action or
    ignored (``nohup``) keeps that disposition. Outside the main thread it watches nothing.
    """

    def __init__(self, notify: Callable[[str], None] | None = None) -> None:
        self.received: int | None = None
        self._notify = notify
        self._previous: dict[int, Callable[[int, FrameType | None], Any]] = {}

    def start(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        stopping.clear()
        for signum in WATCHED:
            previous = signal.getsignal(signum)
            if callable(previous):
                self._previous[signum] = previous
                signal.signal(signum, self._handler)

    def stop(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        stopping.clear()

    def __enter__(self) -> InterruptWatch:
        self.start()
        return self

    def _handler(self, signum: int, frame: FrameType | None) -> Any:
        # Nothing but a flag: a handler runs between two bytecodes of whatever the main thread
        # was doing, even in the middle of a buffered write to stderr, so it must not log.
        if self.received is None:
            self.received = signum
            stopping.ask(signum)  # for a source reading on a thread of its own
            if self._notify is not None:
                self._notify(STOPPING)
            return None
        return self._previous[signum](signum, frame)

    def check(self) -> None:
        """Raise ``KeyboardInterrupt`` if a watched signal came since :meth:`start`."""
        if self.received is not None:
            log.warning("run.stopping", signal=signal.Signals(self.received).name)
            raise KeyboardInterrupt

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
