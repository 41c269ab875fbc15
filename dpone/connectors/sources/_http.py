"""The HTTP session under a ``rest_api`` source: where its credentials may go, how many pages
it may ask for, how large a response may be, and stopping when the run is asked to stop.

An API's responses are input: they name the next page (dlt's ``json_link`` and
``header_link`` paginators follow any URL they are given), redirect, and send bodies of any
size. dlt applies the source's auth to every page it asks for, so without these checks a
hostile or compromised API gets the token sent wherever it points, paginates forever, or
exhausts memory. dlt's own session stays in charge of requests and retries; dpone mounts one
adapter under it and wraps its ``send``:

- :class:`Guard.admit` (every request on the wire: each attempt, each redirect hop) lets a
  request go only to the origin (scheme, host, port) of ``base_url``. Another origin is
  ``DPONE_SOURCE_CROSS_ORIGIN`` unless the manifest lists it in ``allowed_origins``; then
  the request goes without credentials (auth and cookie headers, and any header or query
  parameter carrying a value of the source's ``${...}`` references, are removed; a body
  carrying one is refused).
- :meth:`Guard.page` (each page dlt asks for, once however often it is retried) stops a
  paginator that asks for a page (URL, query and body: a cursor) it asked for already
  (``DPONE_SOURCE_PAGINATION_LOOP``) or for more than ``max_pages``
  (``DPONE_SOURCE_MAX_PAGES``).
- every body is streamed and counted while it arrives; past ``max_response_bytes`` the
  connection is closed (``DPONE_SOURCE_RESPONSE_TOO_LARGE``), so an endless chunked body
  costs at most the limit.
- the request runs on a short-lived thread while the calling thread waits in slices and
  looks at :mod:`dpone.stopping` (SIGINT/SIGTERM): a stop is honoured during a request that
  sends nothing, between pages and during dlt's waits between retries (``DPONE_INTERRUPTED``,
  exit 130). The request's thread is a daemon and stops reading at the next piece of body.
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from requests.adapters import HTTPAdapter

from dpone import stopping
from dpone.connectors.errors import (
    SourceCrossOrigin,
    SourceMaxPages,
    SourcePaginationLoop,
    SourceResponseTooLarge,
)
from dpone.errors import Interrupted
from dpone.logs import get_logger
from dpone.records import frozen

log = get_logger("dpone.source")

#: Headers that carry credentials whatever set them.
_AUTH_HEADERS = ("authorization", "proxy-authorization", "cookie")
#: A secret shorter than this is not looked for inside other text (it would match anywhere).
_MIN_SECRET = 4
_PIECE = 64 * 1024
_POLL_S = 0.1
_DEFAULT_PORTS = {"http": 80, "https": 443}
_SHOWN_ORIGIN = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]{1,300}")

Origin = tuple[str, str, int]
T = TypeVar("T")


def origin_of(url: str) -> Origin | None:
    """(scheme, host, port) of an http(s) URL, the port made explicit; None if it has none."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def origin_text(origin: Origin) -> str:
    scheme, host, port = origin
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}" + ("" if _DEFAULT_PORTS[scheme] == port else f":{port}")


@frozen
class Limits:
    """What a source's requests may do (the manifest's options, resolved)."""

    label: str
    base: Origin
    allowed: frozenset[Origin]
    #: the values of the source's ``${...}`` references (never rendered)
    secrets: tuple[str, ...]
    max_pages: int
    max_response_bytes: int


class Guard:
    """One source read's checks (see the module); pages are counted across the read."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.pages = 0
        self._seen: set[bytes] = set()
        self._long_secrets = tuple(s for s in limits.secrets if len(s) >= _MIN_SECRET)

    # --- the session ----------------------------------------------------------------------------

    def install(self, session: Any) -> None:
        """Mount the adapter and wrap ``session.send`` (dlt's retrying send) as page guard."""
        adapter = _Adapter(self)
        session.mount("http://", adapter)
        session.mount("https://", adapter)
        retrying = session.send
        # dlt's retry (tenacity) sleeps between attempts; this sleep notices a stop.
        policy = getattr(retrying, "retry", None)
        if policy is not None:
            policy.sleep = self.sleep

        def send(request: Any, **kwargs: Any) -> Any:
            # requests follows a redirect through ``send(..., allow_redirects=False)``: a hop
            # of the same page, checked by the adapter, not counted as a page.
            if kwargs.get("allow_redirects", True) is not False:
                self.page(request)
            return retrying(request, **kwargs)

        session.send = send

    # --- checks ---------------------------------------------------------------------------------

    def check_stop(self) -> None:
        if stopping.asked():
            raise Interrupted(f"{self.limits.label}: the run was interrupted while reading the API")

    def page(self, request: Any) -> None:
        """A page dlt asks for: not after a stop, not past ``max_pages``, not seen before."""
        self.check_stop()
        limits = self.limits
        self.pages += 1
        if self.pages > limits.max_pages:
            raise SourceMaxPages(
                f"{limits.label}: the API kept paginating past max_pages ({limits.max_pages})",
                fixes=(
                    "raise the source's max_pages if the API really has that many pages",
                    "check the paginator: it may not see the API's last page",
                ),
            )
        key = hashlib.sha256()
        for part in (request.method or "", request.url or "", _body_bytes(request.body)):
            key.update(part.encode() if isinstance(part, str) else part)
            key.update(b"\0")
        digest = key.digest()
        if digest in self._seen:
            raise SourcePaginationLoop(
                f"{limits.label}: the API's pagination asked for a page it had read already "
                f"(page {self.pages}); it would never end",
                fixes=("check the paginator against the API: its next link or cursor repeats",),
            )
        self._seen.add(digest)

    def admit(self, request: Any) -> None:
        """A request about to go on the wire: the base URL's origin, or an allowed one
        without credentials."""
        limits = self.limits
        origin = origin_of(request.url or "")
        if origin == limits.base:
            return
        if origin is None or origin not in limits.allowed:
            shown = origin_text(origin) if origin is not None else ""
            named = f" ({shown})" if _SHOWN_ORIGIN.fullmatch(shown) else ""
            raise SourceCrossOrigin(
                f"{limits.label}: a next-page link or redirect points to another origin"
                f"{named} than client.base_url; nothing was sent there",
                fixes=(
                    "if the API really serves its pages from there, list that origin in the "
                    "source's allowed_origins (requests to it carry no credentials)",
                ),
            )
        self._strip_credentials(request)
        log.info("source.cross_origin_request", source=limits.label, origin=origin_text(origin))

    def _strip_credentials(self, request: Any) -> None:
        secrets = self._long_secrets
        for name in list(request.headers):
            value = str(request.headers[name])
            if name.lower() in _AUTH_HEADERS or _holds(value, secrets):
                del request.headers[name]
        parts = urlsplit(request.url)
        query = parse_qsl(parts.query, keep_blank_values=True)
        kept = [(k, v) for k, v in query if not _holds(k, secrets) and not _holds(v, secrets)]
        if len(kept) != len(query):
            request.url = urlunsplit(parts._replace(query=urlencode(kept)))
        if _holds(_body_bytes(request.body).decode("utf-8", "replace"), secrets):
            raise SourceCrossOrigin(
                f"{self.limits.label}: a request to an allowed other origin would carry a "
                "credential in its body; nothing was sent there",
                fixes=("send credentials in auth or headers, which are removed there",),
            )

    # --- waiting --------------------------------------------------------------------------------

    def sleep(self, seconds: float) -> None:
        """``time.sleep`` that ends early with ``DPONE_INTERRUPTED`` on a stop."""
        deadline = time.monotonic() + max(0.0, float(seconds))
        while (left := deadline - time.monotonic()) > 0:
            self.check_stop()
            time.sleep(min(left, _POLL_S))
        self.check_stop()

    def wait(self, call: Callable[[], T]) -> T:
        """``call()`` on a thread of its own, this thread looking for a stop meanwhile."""
        self.check_stop()
        outcome: list[Any] = []
        done = threading.Event()

        def work() -> None:
            try:
                outcome.append((True, call()))
            except BaseException as exc:  # handed to the waiting thread, raised there
                outcome.append((False, exc))
            finally:
                done.set()

        threading.Thread(target=work, name="dpone-http", daemon=True).start()
        while not done.wait(_POLL_S):
            self.check_stop()
        self.check_stop()
        ok, value = outcome[0]
        if not ok:
            raise value
        result: T = value
        return result

    def read_body(self, response: Any) -> None:
        """The body into ``response`` (as requests would), counted while it arrives."""
        limit = self.limits.max_response_bytes
        length = response.headers.get("Content-Length", "")
        if length.isdigit() and int(length) > limit:
            response.close()
            raise self._too_large()
        body = bytearray()
        for piece in response.iter_content(_PIECE):
            body += piece
            if len(body) > limit:
                response.close()
                raise self._too_large()
            if stopping.asked():
                response.close()
                self.check_stop()
        response._content = bytes(body)

    def _too_large(self) -> SourceResponseTooLarge:
        limit = self.limits.max_response_bytes
        return SourceResponseTooLarge(
            f"{self.limits.label}: a response is larger than max_response_bytes ({limit})",
            fixes=(
                "ask for smaller pages (the endpoint's limit or page size parameter)",
                "raise the source's max_response_bytes if such pages are expected",
            ),
        )


class _Adapter(HTTPAdapter):
    """requests' adapter, sending only what :meth:`Guard.admit` lets go, reading bounded."""

    def __init__(self, guard: Guard) -> None:
        super().__init__()
        self._guard = guard

    def send(
        self,
        request: Any,
        stream: bool = False,
        timeout: Any = None,
        verify: Any = True,
        cert: Any = None,
        proxies: Any = None,
    ) -> Any:
        guard = self._guard
        guard.admit(request)

        def receive() -> Any:
            response = HTTPAdapter.send(
                self,
                request,
                stream=True,
                timeout=timeout,
                verify=verify,
                cert=cert,
                proxies=proxies,
            )
            guard.read_body(response)
            return response

        return guard.wait(receive)


def _body_bytes(body: Any) -> bytes:
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode()
    return b""


def _holds(text: str, secrets: Iterable[str]) -> bool:
    return any(secret in text for secret in secrets)
