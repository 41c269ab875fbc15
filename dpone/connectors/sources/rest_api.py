"""``type: rest_api``: dlt's declarative REST API source, configured with dlt's vocabulary.

The manifest's ``client`` and ``resource`` blocks are dlt's ``RESTAPIConfig`` ``client`` and
one item of its ``resources``, passed through after their ``${ENV_VAR}`` references are
resolved; dlt does the requests, pagination, authentication and retries. dpone adds four
things: the HTTP session's retry settings (``source.http``, dlt's ``request_*`` names), the
committed cursor as dlt's incremental ``initial_value``, the streaming (the resource is
iterated lazily, page by page, its items grouped into Arrow chunks of ``chunk_size`` rows),
and the bounds on what the API's responses can make the session do (``_http``: credentials
only to ``base_url``'s origin, pagination that ends, bodies of bounded size, stops honoured).

Items are JSON objects, so they become rows as a JSONL line does (``file/jsonl.py``): columns are
the union of keys, every value its JSON text (strings as they are, integers and booleans as
JSON writes them, a fraction in the shortest form that reads back as the same number, nested
values as compact JSON), so an item of the wrong shape reaches the contract, and the DLQ,
instead of failing the chunk. API rows cannot be read again: their ``record_ref`` is the
run/load/row form.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa

from dpone.connectors.base import SourceChunk
from dpone.connectors.dltlib import import_dlt
from dpone.connectors.errors import SourceConfigError, SourceDecodeError, SourceError
from dpone.connectors.presence import absent_keys, with_presence
from dpone.connectors.sources import _dlt, _http
from dpone.connectors.sources.file.jsonl import value_text
from dpone.errors import DponeError


class RestApiSource:
    """One dlt REST API resource, read afresh by every :meth:`chunks` call."""

    #: the committed cursor goes to dlt's incremental (and from there into the requests)
    cursor_pushdown = True

    def __init__(
        self,
        config: Mapping[str, Any],
        env: Mapping[str, str],
        *,
        allowed_origins: tuple[str, ...],
        max_pages: int,
        max_response_bytes: int,
    ) -> None:
        self.config = copy.deepcopy(dict(config))
        self.env = env
        self.allowed_origins = allowed_origins
        self.max_pages = max_pages
        self.max_response_bytes = max_response_bytes
        self.name = str(self.config["resource"]["name"])
        # Scheme, host and path only: a query string or user info may carry a credential.
        url = urlsplit(str(self.config["client"]["base_url"]))
        self.identity = f"rest_api:{url.scheme}://{url.hostname}{_port(url.port)}{url.path}"
        self.identity += f"#{self.name}"

    def chunks(self, chunk_size: int, after: object | None = None) -> Iterator[SourceChunk]:
        if chunk_size < 1:
            raise ValueError("chunk_size must be positive")
        resource, session = self._resource(after)
        try:
            items = _dlt.guarded(resource, self.name, self._failed)
            batches = _text_batches(items, chunk_size, self.name)
            yield from _dlt.stream_chunks(batches, self.name, chunk_size)
        finally:
            session.close()

    def _resource(self, after: object | None) -> tuple[Any, Any]:
        """dlt's resource for the manifest's block, with the secrets and the cursor in it."""
        import_dlt(SourceConfigError)
        from dlt.sources.helpers.requests import Client
        from dlt.sources.rest_api import rest_api_resources

        client = _dlt.resolve_references(self.config["client"], self.env)
        resource = _dlt.resolve_references(self.config["resource"], self.env)
        endpoint = resource.get("endpoint") or {"path": self.name}
        resource["endpoint"] = {"path": endpoint} if isinstance(endpoint, str) else endpoint
        # JSON cursors are text or numbers: the committed value is handed over as committed.
        incremental = _dlt.incremental_args(self.config.get("incremental"), after, None)
        if incremental is not None:
            resource["endpoint"]["incremental"] = incremental
        http = self.config.get("http") or {}
        # dlt's REST client otherwise builds a session with its built-in retry defaults; this
        # one carries the manifest's (dlt's own Client, so the retry rules stay dlt's).
        session = client["session"] = Client(raise_for_status=False, **http).session
        self._guard().install(session)
        try:
            (built,) = rest_api_resources({"client": client, "resources": [resource]})
        except DponeError:
            raise
        except Exception as exc:
            raise SourceConfigError(
                f"dlt refused the rest_api configuration of '{self.name}' ({type(exc).__name__})",
                fixes=("run `dpone validate`; see docs/sources.md for the keys dlt takes",),
            ) from None
        return built, session

    def _guard(self) -> _http.Guard:
        """Where this read's requests may go, how many pages, how large (``_http``)."""
        from dpone.manifest.dltblocks import secret_refs

        base = _http.origin_of(str(self.config["client"]["base_url"]))
        if base is None:
            raise SourceConfigError(
                f"{self.name}: client.base_url is not an http(s) URL with a host",
                fixes=("write client.base_url as https://host[:port]/path",),
            )
        allowed = (_http.origin_of(origin) for origin in self.allowed_origins)
        names = {n for ref in secret_refs(self.config) for n in ref.names}
        limits = _http.Limits(
            label=self.name,
            base=base,
            allowed=frozenset(o for o in allowed if o is not None),
            secrets=tuple(self.env[n] for n in sorted(names) if self.env.get(n)),
            max_pages=self.max_pages,
            max_response_bytes=self.max_response_bytes,
        )
        return _http.Guard(limits)

    def _failed(self, cause: BaseException) -> DponeError:
        return SourceError(f"{self.name}: reading the API failed ({type(cause).__name__})")


def _port(port: int | None) -> str:
    return "" if port is None else f":{port}"


def _text_batches(items: Iterable[Any], chunk_size: int, label: str) -> Iterator[pa.RecordBatch]:
    """Batches of up to ``chunk_size`` items, every value as its JSON text (see the module)."""
    group: list[Mapping[str, Any]] = []
    for item in items:
        if not isinstance(item, Mapping):
            raise SourceDecodeError(
                f"{label}: an item is a {type(item).__name__}, not a JSON object",
                fixes=("point the endpoint's data_selector at the list of objects",),
            )
        group.append(item)
        if len(group) == chunk_size:
            yield _text_batch(group)
            group = []
    if group:
        yield _text_batch(group)


def _text_batch(items: list[Mapping[str, Any]]) -> pa.RecordBatch:
    """Columns in order of first appearance, a missing key NULL; built column by column, so
    a column of one JSON kind (the usual case) converts in one Arrow call."""
    names, absent = absent_keys(items)
    batch = pa.RecordBatch.from_pydict(
        {name: _text_column([item.get(name) for item in items]) for name in names}
    )
    # A key some items lack is told apart from one carrying null (required_columns).
    return with_presence(batch, absent) if absent else batch


def _text_column(values: list[Any]) -> pa.Array:
    kinds = set(map(type, values))
    kinds.discard(type(None))
    if kinds <= {str}:
        return pa.array(values, pa.string())
    if kinds == {int}:
        with contextlib.suppress(OverflowError, pa.ArrowInvalid):
            return pa.array(values, pa.int64()).cast(pa.string())
    if kinds == {bool}:
        return pa.array(values, pa.bool_()).cast(pa.string())  # true / false
    return pa.array([_value_text(v) for v in values], pa.string())


def _value_text(value: Any) -> str | None:
    if type(value) is float:
        # The shortest text that reads back as the same number (JSON's own NaN spelling).
        return repr(value) if math.isfinite(value) else json.dumps(value)
    return value_text(value)  # None, text, true/false, integers, nested values as JSON text
