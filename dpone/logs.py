"""structlog on stderr: a console renderer on a TTY, one JSON object per line otherwise.

Events carry names, counts and codes; never row values (the DLQ's PII canary test checks).
"""

from __future__ import annotations

import logging
import sys

import structlog


def configure(*, verbose: bool = False, json: bool | None = None) -> None:
    as_json = (not sys.stderr.isatty()) if json is None else json
    level = logging.DEBUG if verbose else logging.INFO
    renderer: structlog.typing.Processor = (
        structlog.processors.JSONRenderer()
        if as_json
        else structlog.dev.ConsoleRenderer(colors=sys.stderr.isatty())
    )
    structlog.configure(
        processors=[
            # Values bound for a stretch of work (a scale-out task binds its partition).
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(level),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
