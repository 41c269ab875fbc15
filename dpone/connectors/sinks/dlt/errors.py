"""dlt's exceptions as typed dpone errors: the exception classes along the chain, never their
text (a driver's message may quote a row value, a host or a credential)."""

from __future__ import annotations

from dpone.connectors.errors import SinkConfigError, SinkError, SinkUnavailable
from dpone.connectors.sinks._common import os_error
from dpone.errors import DponeError

#: dlt and driver exception class names that say "try again later", not "this cannot work".
_TRANSIENT = (
    "DestinationTransientException",
    "DestinationConnectionError",
    "LoadClientJobRetry",
    "OperationalError",
    "InterfaceError",
    "ConnectionError",
    "TimeoutError",
)


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        inner = getattr(current, "exception", None)
        current = (
            inner if isinstance(inner, BaseException) else current.__cause__ or current.__context__
        )
    return seen


def dlt_error(exc: BaseException, doing: str) -> DponeError:
    """A typed error for a dlt failure: the exception classes along its chain, never their
    text (a driver's message may quote a row value, a host or a credential)."""
    chain = _chain(exc)
    names = [type(e).__name__ for e in chain]
    what = f"{doing} failed ({' <- '.join(dict.fromkeys(names))})"
    if any(n in ("ConfigFieldMissingException", "ConfigurationValueError") for n in names):
        missing = [
            str(f)
            for e in chain
            for f in getattr(e, "fields", ()) or ()
            if isinstance(f, str) and f.isidentifier()
        ]
        return SinkConfigError(
            f"{doing}: dlt's configuration is incomplete"
            + (f" (missing {', '.join(missing)})" if missing else ""),
            fixes=(
                "give the destination's credentials in the sink's credentials (as ${ENV_VAR}) "
                "or through dlt's own configuration",
            ),
        )
    if any(isinstance(e, OSError) for e in chain) and not any(n in _TRANSIENT for n in names):
        oserror = next(e for e in chain if isinstance(e, OSError))
        return os_error(oserror, doing)
    if any(n in _TRANSIENT for n in names):
        return SinkUnavailable(what, fixes=("rerun once the destination is reachable",))
    return SinkError(
        what,
        fixes=(
            "check the destination and its table (column types, constraints, grants), then rerun",
        ),
    )
