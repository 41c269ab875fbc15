"""Log events on stderr: one JSON object per line, or structlog's console renderer on a TTY.

Modules log through :func:`get_logger` (``log.info("run.start", run_id=...)``). Once
:func:`configure` chose JSON (stderr is not a terminal: every scheduled run), an event is
written here as structlog's ``JSONRenderer`` writes it (the event's fields, then ``event``,
``level`` and a UTC ``timestamp``), and the command never imports structlog, which with the
rich and asyncio modules it loads costs a sixth of a second of a run's start-up on a busy core.
Otherwise (the console renderer, or dpone used as a library without :func:`configure`) each
event goes to ``structlog.get_logger(name)`` as structlog is configured, by :func:`configure`
or by the host application.

Fields bound with :func:`bind` (a scale-out task binds its run and partition) go into every
event of the same context until :func:`unbind`, whichever way events are written.

Events carry names, counts and codes; never row values (the DLQ's PII canary test checks).
"""

from __future__ import annotations

import contextlib
import contextvars
import datetime
import json
import logging
import sys
import threading
from collections.abc import Iterator
from typing import Any, TextIO

_NAMES = {
    logging.DEBUG: "debug",
    logging.INFO: "info",
    logging.WARNING: "warning",
    logging.ERROR: "error",
    logging.CRITICAL: "critical",
}


class _JsonLines:
    """Writes events at or above ``level`` to ``stream``, one JSON object per line."""

    def __init__(self, stream: TextIO, level: int) -> None:
        self.stream = stream
        self.level = level
        self._lock = threading.Lock()  # the DLQ pipe's thread logs too

    def emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if level < self.level:
            return
        fields["event"] = event
        fields["level"] = _NAMES.get(level) or logging.getLevelName(level).lower()
        now = datetime.datetime.now(tz=datetime.UTC)
        fields["timestamp"] = now.isoformat().replace("+00:00", "Z")
        line = json.dumps(fields, default=repr) + "\n"
        with self._lock:
            self.stream.write(line)
            self.stream.flush()


class _Captured:
    """Keeps events as dicts (``event``, ``log_level`` and the fields), for :func:`capture`."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        name = _NAMES.get(level) or logging.getLevelName(level).lower()
        self.events.append({**fields, "event": event, "log_level": name})


#: Where events go; None: to structlog (see the module docstring).
_writer: _JsonLines | _Captured | None = None
#: Whether :func:`configure` ran in this process.
_configured = False
#: Fields every event of the current context carries (:func:`bind`).
_bound: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("dpone_log_fields")


class Logger:
    """A named logger: ``log.info(event, **fields)``; see the module docstring."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def debug(self, event: str, **fields: Any) -> None:
        self.log(logging.DEBUG, event, **fields)

    def info(self, event: str, **fields: Any) -> None:
        self.log(logging.INFO, event, **fields)

    def warning(self, event: str, **fields: Any) -> None:
        self.log(logging.WARNING, event, **fields)

    def error(self, event: str, **fields: Any) -> None:
        self.log(logging.ERROR, event, **fields)

    def log(self, level: int, event: str, **fields: Any) -> None:
        for key, value in _bound.get({}).items():
            fields.setdefault(key, value)
        writer = _writer
        if writer is not None:
            writer.emit(level, event, fields)
            return
        import structlog

        structlog.get_logger(self.name).log(level, event, **fields)


def get_logger(name: str) -> Logger:
    return Logger(name)


def bind(**fields: Any) -> None:
    """Add ``fields`` to every event of the current context (thread, task) from here on."""
    _bound.set({**_bound.get({}), **fields})


def unbind(*names: str) -> None:
    """Stop adding the fields ``names`` (see :func:`bind`)."""
    _bound.set({k: v for k, v in _bound.get({}).items() if k not in names})


def is_configured() -> bool:
    """Whether :func:`configure` ran in this process (a fresh worker process: not yet)."""
    return _configured


def configure(*, verbose: bool = False, json: bool | None = None) -> None:
    """Events at INFO (DEBUG with ``verbose``) and above to stderr: JSON lines when ``json``
    (default: when stderr is not a terminal), else structlog's console renderer."""
    global _writer, _configured
    _configured = True
    as_json = (not sys.stderr.isatty()) if json is None else json
    level = logging.DEBUG if verbose else logging.INFO
    if as_json:
        _writer = _JsonLines(sys.stderr, level)
        return
    _writer = None
    import structlog

    structlog.configure(
        processors=[
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty()),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )


def to_stderr() -> None:
    """dpone's events on stderr at info level, as the CLI writes them, unless this process
    configured them already (the CLI does, first thing) or the host application configured
    structlog itself. Every entry point that may run without the CLI calls it: unconfigured,
    structlog prints every event, debug included, to stdout, which is the calling program's
    output (a script printing JSON, an orchestrator task's return value)."""
    if _configured:
        return
    import structlog

    if not structlog.is_configured():
        configure()


@contextlib.contextmanager
def capture() -> Iterator[list[dict[str, Any]]]:
    """Inside the block, every event (DEBUG too) is kept in the list it yields instead of
    written; the configuration before comes back after."""
    global _writer
    before, captured = _writer, _Captured()
    _writer = captured
    try:
        yield captured.events
    finally:
        _writer = before


__all__ = [
    "Logger",
    "bind",
    "capture",
    "configure",
    "get_logger",
    "is_configured",
    "to_stderr",
    "unbind",
]
