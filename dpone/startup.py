"""The ``dpone`` command's start-up without the cyclic garbage collector.

Starting a command imports some 400 modules (dpone's, pyarrow's, DuckDB's, jsonschema's) and
compiles the manifest: a few hundred thousand objects that live as long as the process, and
no garbage. Each time allocations pass the collector's threshold it walks what is young, and
now and then everything: on a 2-row run that was about 0.03 s of start-up spent finding
nothing. The command's entry point pauses the collector (:func:`pause`); once the command's
modules are loaded (for ``dpone run``, when the run's connectors are wired), :func:`resume`
moves every object made so far into the permanent generation (``gc.freeze``), which later
collections leave alone, and turns the collector on again. Code that imports dpone as a
library is never touched: :func:`resume` does nothing unless :func:`pause` turned the
collector off.
"""

from __future__ import annotations

import gc

_paused = False


def pause() -> None:
    """Turn the collector off for the start-up of a command (if it was on)."""
    global _paused
    if gc.isenabled():
        gc.disable()
        _paused = True


def resume() -> None:
    """Start-up is over: what it made is frozen, and the collector is on again, if
    :func:`pause` turned it off; otherwise nothing happens."""
    global _paused
    if _paused:
        _paused = False
        gc.freeze()
        gc.enable()


__all__ = ["pause", "resume"]
