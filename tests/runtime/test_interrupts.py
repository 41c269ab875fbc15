"""The two-stage stop: the first signal is remembered and checked at safe points, the second
falls through to the handler that was there before. Real signals, sent to this process."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from types import FrameType

import pytest

from dpone.runtime.interrupts import STOPPING, InterruptWatch


class Stopped(Exception):
    """Raised by the test's own 'previous' handler."""


def _previous(signum: int, frame: FrameType | None) -> None:
    raise Stopped(signal.Signals(signum).name)


@pytest.fixture
def handlers() -> Iterator[None]:
    """SIGINT and SIGTERM handled from Python for the test, restored afterwards."""
    saved = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for signum in saved:
        signal.signal(signum, _previous)
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.mark.usefixtures("handlers")
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_the_first_signal_waits_for_a_check_the_second_stops_at_once(signum: int) -> None:
    notices: list[str] = []
    with InterruptWatch(notify=notices.append) as watch:
        watch.check()  # nothing yet
        os.kill(os.getpid(), signum)  # the handler runs before kill() returns to Python code
        assert watch.received == signum
        assert notices == [STOPPING]
        with pytest.raises(KeyboardInterrupt):
            watch.check()
        with pytest.raises(Stopped, match=signal.Signals(signum).name):
            os.kill(os.getpid(), signum)
    assert notices == [STOPPING]  # told once


@pytest.mark.usefixtures("handlers")
def test_stop_restores_the_previous_handlers() -> None:
    watch = InterruptWatch()
    watch.start()
    assert signal.getsignal(signal.SIGINT) != _previous
    watch.stop()
    assert signal.getsignal(signal.SIGINT) is _previous
    assert signal.getsignal(signal.SIGTERM) is _previous


def test_a_signal_left_at_its_default_or_ignored_is_not_taken_over() -> None:
    saved = signal.getsignal(signal.SIGTERM)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # nohup
    try:
        with InterruptWatch():
            assert signal.getsignal(signal.SIGTERM) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGTERM, saved)
