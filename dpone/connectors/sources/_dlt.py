"""What the dlt-backed sources (``rest_api``, ``dlt``) share: the
``${ENV_VAR}`` resolution of their config, the hand-over of the committed cursor to dlt's
incremental, streaming a resource into chunks, and dlt's exceptions as dpone errors.

``import dlt`` costs over a second, so these sources import it through
:func:`dpone.connectors.dltlib.import_dlt` inside a run that reads them, and nowhere else (a
test proves ``import dpone`` and ``dpone validate`` of other manifests leave it out of
``sys.modules``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import pyarrow as pa

from dpone.connectors.base import SourceChunk
from dpone.connectors.errors import (
    SourceConfigError,
    SourceDecodeError,
    SourceError,
    SourceUnavailable,
)
from dpone.contracts.spec import ColumnSpec
from dpone.contracts.types import arrow_type
from dpone.errors import DponeError
from dpone.manifest.secrets import SecretRef


def resolve_references(value: Any, env: Mapping[str, str]) -> Any:
    """``value`` with every ``${NAME}`` in its strings replaced from ``env`` (a copy).

    Validation allowed references only where credentials go; the resolved values live in this
    copy, handed to dlt, and are never logged or written anywhere.
    """
    if isinstance(value, dict):
        return {key: resolve_references(sub, env) for key, sub in value.items()}
    if isinstance(value, list):
        return [resolve_references(sub, env) for sub in value]
    if isinstance(value, str) and "${" in value:
        return SecretRef(value).resolve(env)
    return value


def incremental_args(
    incremental: Mapping[str, Any] | None, after: object | None, cursor: ColumnSpec | None
) -> dict[str, Any] | None:
    """dlt's incremental arguments for dpone's cursor: the run's lower bound (the committed
    value minus ``lag``, else the manifest's ``initial_value``) as dlt's ``initial_value``,
    and the manifest's ``end_value``, so dlt asks the source only for the run's window.

    dlt's own convention, as dpone's: ``range_start: closed`` (``>=``, the boundary's items
    come back and dpone de-duplicates them) and the end exclusive. An item without a cursor is
    kept (dpone keeps a NULL cursor too). The lifecycle still filters the typed column after
    enforcement: dlt's filter only saves reading, dpone's decides. ``cursor`` (the contract's
    column) types the values for sources that yield typed values; None hands them over as
    written (text or a number, what JSON items compare with).
    """
    if incremental is None:
        return None
    start = after if after is not None else incremental.get("initial_value")
    args: dict[str, Any] = {
        "cursor_path": incremental["cursor_column"],
        "on_cursor_value_missing": "include",
        "range_start": "closed",
    }

    def value(bound: object) -> Any:
        return api_text(bound) if cursor is None else typed_cursor(bound, cursor)

    if start is not None:
        args["initial_value"] = value(start)
        end = incremental.get("end_value")
        if end is not None:  # dlt takes an end only with a start
            args["end_value"] = value(end)
            args["range_end"] = "open"
    return args


_WHOLE_SECOND = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.0{6}Z$")


def api_text(value: object) -> object:
    """A committed cursor as an API writes it: dpone commits timestamps with microseconds
    (``...T10:00:00.000000Z``), most APIs write whole seconds (``...T10:00:00Z``). Both are
    compared as text by the API and by dlt, where ``.000000Z`` sorts before ``Z``: the item
    at the cursor would come back once more (dpone would skip it, but read it)."""
    if isinstance(value, str) and (match := _WHOLE_SECOND.match(value)):
        return f"{match.group(1)}Z"
    return value


def typed_cursor(value: object, cursor: ColumnSpec) -> Any:
    """A committed cursor (canonical text or a number) as the Python value of its column type."""
    if cursor.type in ("string", "json", "binary", "boolean"):
        return value
    try:
        return pa.array([value]).cast(arrow_type(cursor))[0].as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        raise SourceConfigError(
            f"the committed cursor of '{cursor.name}' does not read as {cursor.type}",
            fixes=("check the type of the cursor column in the contract",),
        ) from None


def stream_chunks(
    batches: Iterator[pa.RecordBatch], partition: str, chunk_size: int
) -> Iterator[SourceChunk]:
    """Re-chunked batches as not re-readable chunks, rows numbered across the resource."""
    from dpone.connectors.batches import rechunk
    from dpone.connectors.presence import split_presence

    row = 1
    for batch in rechunk(batches, chunk_size):
        batch, present = split_presence(batch)
        yield SourceChunk(batch, partition, None, row, False, present=present)
        row += batch.num_rows


def guarded(
    items: Iterable[Any], label: str, on_other: Callable[[BaseException], DponeError]
) -> Iterator[Any]:
    """``items``, with any exception of dlt (or under it) turned into a dpone error."""
    try:
        yield from items
    except DponeError:
        raise
    except Exception as exc:
        raise translate(exc, label, on_other) from None


def translate(
    exc: BaseException, label: str, on_other: Callable[[BaseException], DponeError]
) -> DponeError:
    """A dpone error for an exception out of dlt. Never its message: dlt's messages quote
    request URLs (an API key in a query string) and item values.

    HTTP 429, 5xx and dropped connections after dlt's retries are transient; any other error
    status is terminal; a response that is not JSON is a decode error; an incremental that
    cannot compare the committed cursor with the items' is a configuration error. The root
    cause of anything else goes to ``on_other``.
    """
    import requests

    chain = _chain(exc)
    for cause in chain:
        if isinstance(cause, DponeError):  # dpone's own check under dlt (a limit, a stop)
            return cause
        if isinstance(cause, requests.HTTPError) and cause.response is not None:
            # The error keeps the response, and with it the connection's socket, alive.
            cause.response.close()
            return _http_error(cause.response.status_code, label)
        if isinstance(cause, (requests.ConnectionError, requests.Timeout)):
            return SourceUnavailable(
                f"{label}: the API could not be reached ({type(cause).__name__})",
                fixes=("check that the API is up and reachable, then run again",),
            )
        if isinstance(cause, requests.JSONDecodeError):
            return SourceDecodeError(f"{label}: a response is not JSON")
        if type(cause).__name__ == "IncrementalCursorInvalidCoercion":
            return SourceConfigError(
                f"{label}: the items' cursor values do not compare with the committed cursor",
                fixes=(
                    "declare the cursor column in the contract with the type the source yields",
                ),
            )
    return on_other(chain[-1])


def _http_error(status: int, label: str) -> DponeError:
    if status == 429 or status >= 500:
        return SourceUnavailable(
            f"{label}: the API answered HTTP {status} after every retry",
            fixes=("run again later, or raise source.http.request_max_attempts",),
        )
    fixes = (
        ("check the credentials the manifest's ${...} references resolve to",)
        if status in (401, 403)
        else ("check client.base_url and the endpoint path and parameters",)
    )
    return SourceError(
        f"{label}: the API answered HTTP {status}", code="DPONE_SOURCE_HTTP_STATUS", fixes=fixes
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes, outermost first (dlt wraps a resource's error in its own)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen) and len(seen) < 32:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen
