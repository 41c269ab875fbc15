"""Whether a stop (SIGINT, SIGTERM) was asked for in this process, readable from any thread.

The run's signal watch (``runtime/interrupts.py``) records the first signal here as well as on
itself. The lifecycle stops between chunks; code that may spend unbounded time inside one
chunk, on a thread of its own (a REST source paginating, a response still arriving), looks
here between pages and while it waits, and stops with ``DPONE_INTERRUPTED``. A plain module
variable, not a lock: the signal handler that sets it may run while the main thread holds
any lock.
"""

from __future__ import annotations

_signal: int | None = None


def ask(signum: int) -> None:
    """Record that a stop was asked for (called from a signal handler: nothing else)."""
    global _signal
    _signal = signum


def clear() -> None:
    """Forget an earlier stop (a new run begins)."""
    global _signal
    _signal = None


def asked() -> bool:
    """Whether a stop was asked for since the last :func:`clear`."""
    return _signal is not None
