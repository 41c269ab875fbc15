"""dlt, imported only when a manifest uses it, and kept quiet while dpone drives it.

``import dlt`` costs about 1.7 s, so nothing outside the dlt connectors imports it, and they
import it through :func:`import_dlt` when a run builds them (never at validate time). Two
process-wide habits of dlt do not fit a tool whose stderr is its structured log:

- dlt sends anonymous usage telemetry unless told otherwise. :func:`import_dlt` sets
  ``RUNTIME__DLTHUB_TELEMETRY=false`` before dlt first reads its configuration, unless the
  user set that variable (then theirs wins).
- dlt logs through its own stderr handler and some libraries it drives emit Python warnings;
  either may carry a driver's message, which can quote a row value or a host. Inside
  :func:`quiet_dlt` both become value-free log events (level, where, class name).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any

from dpone.connectors.errors import DltNotInstalled
from dpone.errors import ConfigError
from dpone.logs import get_logger

log = get_logger("dpone.dlt")

#: ``Pipeline.abort_packages`` (what dpone uses to drop a package it will not load) is 1.30's.
MIN_VERSION = (1, 30)
_TELEMETRY_ENV = "RUNTIME__DLTHUB_TELEMETRY"


def import_dlt(error: type[ConfigError] = DltNotInstalled) -> Any:
    """The ``dlt`` module, or ``error`` (exit 2, ``DPONE_DLT_NOT_INSTALLED``) naming the fix.

    A source passes its own configuration error class, so that whoever reads sources catches
    one class for every way a source's configuration cannot become a reader.
    """
    if "dlt" not in sys.modules:
        os.environ.setdefault(_TELEMETRY_ENV, "false")
    try:
        import dlt
    except ImportError:
        raise error(
            "the manifest uses dlt, but dlt is not installed",
            code=DltNotInstalled.code,
            fixes=("pip install 'dpone[dlt]'",),
        ) from None
    try:
        version = importlib.metadata.version("dlt")
    except importlib.metadata.PackageNotFoundError:
        version = str(getattr(dlt, "__version__", "0"))
    if _release(version) < MIN_VERSION:
        raise error(
            f"dlt {version} is older than the {'.'.join(map(str, MIN_VERSION))} dpone needs",
            code=DltNotInstalled.code,
            fixes=("pip install -U 'dpone[dlt]'",),
        )
    return dlt


def _release(version: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in version.split(".")[:2]:
        digits = "".join(c for c in piece if c.isdigit())
        parts.append(int(digits or 0))
    return tuple(parts)


class _Forward(logging.Filter):
    """Turns each record of dlt's logger into a log event without its message, and
    keeps it from dlt's own stderr handler (a logger filter runs before any handler)."""

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        log.log(
            record.levelno,
            "dlt.log",
            where=f"{record.module}.{record.funcName}",
            exception=kind.__name__ if kind is not None else None,
        )
        return False


@contextlib.contextmanager
def quiet_dlt() -> Iterator[None]:
    """Inside the block, dlt's log records and Python warnings (from any thread: the filters
    are process-wide) are log events that name where they came from, never what they
    said. Blocks nest."""
    names = {"dlt"}
    dlt_logger = sys.modules.get("dlt.common.logger")
    current = getattr(dlt_logger, "LOGGER", None)
    if isinstance(current, logging.Logger):
        names.add(current.name)
    loggers = [logging.getLogger(name) for name in sorted(names)]
    forward = _Forward()
    for logger in loggers:
        logger.addFilter(forward)
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield
    finally:
        for logger in loggers:
            logger.removeFilter(forward)
        for warning in caught:
            log.warning(
                "dlt.warning",
                category=warning.category.__name__,
                where=os.path.basename(warning.filename),
            )
