"""The rest_api source's bounds on what an API's responses can make it do, at their edges:
same-origin redirects keep working, ``allowed_origins`` gets requests without credentials,
``max_pages`` and ``max_response_bytes`` are exact limits, a repeated page stops the read, a
stop asked for before a page is honoured, and the manifest options are validated. The
attacks themselves (another origin, endless pages and bodies, SIGTERM) run through the CLI in
tests/security/test_rest_api_attacks.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from dpone import stopping
from dpone.connectors import make_source
from dpone.connectors.errors import (
    SourceCrossOrigin,
    SourceMaxPages,
    SourcePaginationLoop,
    SourceResponseTooLarge,
)
from dpone.errors import Interrupted, ManifestError
from dpone.manifest.compiler import compile_text
from dpone.manifest.specs import RestApiSourceSpec
from tests.connectors.restapi import PAGINATORS, OrdersApi, item, rest_source
from tests.connectors.specs import dlt_backed_spec

TOKEN = "tok-51c9a0e2d7"
BEARER = {"type": "bearer", "token": "${API_TOKEN}"}


def read_ids(config: dict[str, Any]) -> list[str]:
    source = make_source(
        dlt_backed_spec(config, Path(".")), read_all_as_text=True, env={"API_TOKEN": TOKEN}
    )
    return [v for c in source.chunks(100) for v in c.batch.column("id").to_pylist()]


def pages(server: HTTPServer, count: int) -> None:
    """``/orders?p=N`` for N < count, each with one item and a json_link to the next."""

    def handle(request: Request) -> Response:
        page = int(request.args.get("p", "0"))
        nxt = server.url_for(f"/orders?p={page + 1}") if page + 1 < count else None
        return Response(json.dumps({"items": [item(page + 1)], "next": nxt}), 200)

    server.expect_request("/orders").respond_with_handler(handle)


@pytest.fixture
def no_stop() -> Iterator[None]:
    stopping.clear()
    yield
    stopping.clear()


def test_a_redirect_within_the_origin_keeps_the_credential(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/orders").respond_with_data(
        "", status=302, headers={"Location": "/v2/orders"}
    )
    httpserver.expect_request("/v2/orders").respond_with_json({"items": [item(1)]})

    assert read_ids(rest_source(httpserver.url_for("/"), "single_page", auth=BEARER)) == ["1"]
    last, _ = httpserver.log[-1]
    assert (last.path, last.headers["Authorization"]) == ("/v2/orders", f"Bearer {TOKEN}")


def test_another_origin_is_refused_before_anything_is_sent(httpserver: HTTPServer) -> None:
    port = httpserver.url_for("/").rstrip("/").rsplit(":", 1)[1]
    elsewhere = f"http://127.0.0.2:{port}/orders?p=2"
    httpserver.expect_request("/orders").respond_with_json({"items": [item(1)], "next": elsewhere})

    with pytest.raises(SourceCrossOrigin) as caught:
        read_ids(rest_source(httpserver.url_for("/"), PAGINATORS["json_link"], auth=BEARER))
    assert caught.value.code == "DPONE_SOURCE_CROSS_ORIGIN"
    assert "allowed_origins" in " ".join(caught.value.fixes)
    assert len(httpserver.log) == 1


def test_an_allowed_origin_gets_no_credential_but_the_other_headers(
    httpserver: HTTPServer,
) -> None:
    """The same server under its other name: ``localhost`` and ``127.0.0.1`` are two
    origins. Authorization and the header holding the secret go; the rest stays."""
    base = httpserver.url_for("/")
    if "localhost" in base:
        other = base.replace("localhost", "127.0.0.1")
    else:
        other = base.replace("127.0.0.1", "localhost")
    assert other != base
    httpserver.expect_request("/orders").respond_with_handler(
        lambda r: Response(
            json.dumps(
                {"items": [item(int(r.args.get("p", "1")))], "next": None}
                if r.args.get("p")
                else {"items": [item(1)], "next": other + "orders?p=2"}
            ),
            200,
        )
    )
    config = rest_source(base, PAGINATORS["json_link"], auth=BEARER)
    config["client"]["headers"] = {"X-Token": "${API_TOKEN}", "X-Client": "dpone-test"}
    config["allowed_origins"] = [other.rstrip("/")]

    assert read_ids(config) == ["1", "2"]
    first, second = (r for r, _ in httpserver.log)
    assert first.headers["Authorization"] == f"Bearer {TOKEN}"
    assert "Authorization" not in second.headers
    assert "X-Token" not in second.headers
    assert second.headers["X-Client"] == "dpone-test"


@pytest.mark.parametrize(("count", "limit"), [(3, 3), (4, 3)])
def test_max_pages_is_the_most_pages_read(httpserver: HTTPServer, count: int, limit: int) -> None:
    pages(httpserver, count)
    config = {**rest_source(httpserver.url_for("/"), PAGINATORS["json_link"]), "max_pages": limit}

    if count <= limit:
        assert read_ids(config) == [str(i) for i in range(1, count + 1)]
    else:
        with pytest.raises(SourceMaxPages) as caught:
            read_ids(config)
        assert "max_pages (3)" in caught.value.message
    assert len(httpserver.log) == min(count, limit)


def test_a_page_asked_for_twice_stops_the_read(httpserver: HTTPServer) -> None:
    """A cursor that does not move asks for the same URL again: the second time is refused
    before it is sent."""
    httpserver.expect_request("/orders").respond_with_json(
        {"items": [item(1)], "next_cursor": "same"}
    )

    with pytest.raises(SourcePaginationLoop):
        read_ids(rest_source(httpserver.url_for("/"), PAGINATORS["cursor"]))
    assert [dict(r.args) for r, _ in httpserver.log] == [{}, {"cursor": "same"}]


def test_a_retried_page_is_not_a_loop(httpserver: HTTPServer) -> None:
    httpserver.expect_oneshot_request("/orders").respond_with_data("busy", status=503)
    api = OrdersApi(httpserver, "json_link", [item(1)])

    assert read_ids(rest_source(api.base_url, PAGINATORS["json_link"])) == ["1"]


@pytest.mark.parametrize("extra", [0, 1])
def test_max_response_bytes_is_the_largest_body_read(httpserver: HTTPServer, extra: int) -> None:
    body = json.dumps({"items": [item(1)], "pad": ""})
    limit = 2048
    body = body.replace('"pad": ""', '"pad": "' + "x" * (limit - len(body) + extra) + '"')
    httpserver.expect_request("/orders").respond_with_data(body, content_type="application/json")
    config = {**rest_source(httpserver.url_for("/"), "single_page"), "max_response_bytes": limit}

    if extra == 0:
        assert read_ids(config) == ["1"]
    else:
        with pytest.raises(SourceResponseTooLarge) as caught:
            read_ids(config)
        assert caught.value.code == "DPONE_SOURCE_RESPONSE_TOO_LARGE"


def test_a_body_without_a_length_is_counted_as_it_arrives(httpserver: HTTPServer) -> None:
    def stream() -> Iterator[bytes]:
        yield b'{"items": [], "pad": "'
        for _ in range(64):
            yield b"x" * 1024
        yield b'"}'

    httpserver.expect_request("/orders").respond_with_response(
        Response(stream(), 200, content_type="application/json")
    )
    config = {**rest_source(httpserver.url_for("/"), "single_page"), "max_response_bytes": 16384}

    with pytest.raises(SourceResponseTooLarge):
        read_ids(config)


def test_a_stop_asked_for_is_honoured_before_the_next_page(
    httpserver: HTTPServer, no_stop: None
) -> None:
    pages(httpserver, 3)
    source = make_source(
        dlt_backed_spec(rest_source(httpserver.url_for("/"), PAGINATORS["json_link"]), Path(".")),
        read_all_as_text=True,
        env={},
    )
    stopping.ask(15)

    with pytest.raises(Interrupted) as caught:
        list(source.chunks(100))
    assert caught.value.exit_code == 130
    assert httpserver.log == []


def test_a_stop_ends_dlts_wait_between_retries(httpserver: HTTPServer, no_stop: None) -> None:
    """The API asks for 30 s between attempts (Retry-After); a stop half a second into the
    wait ends it."""
    asked: list[float] = []

    def busy(request: Request) -> Response:
        threading.Timer(0.5, stopping.ask, args=(15,)).start()
        asked.append(time.monotonic())
        return Response("busy", 503, headers={"Retry-After": "30"})

    httpserver.expect_request("/orders").respond_with_handler(busy)
    config = rest_source(httpserver.url_for("/"), "single_page", attempts=3)

    with pytest.raises(Interrupted):
        read_ids(config)
    # The stop ended the 30 s wait: no second attempt was ever sent (no timing asserted).
    assert len(asked) == 1


MANIFEST = """name: limits
source:
  type: rest_api
  client: {{base_url: "https://api.example.com/v1/"}}
  resource: {{name: orders}}
{extra}
sink: {{type: duckdb, table: t}}
"""


def test_the_options_compile_with_their_defaults() -> None:
    plan = compile_text(MANIFEST.format(extra=""), path="/m/manifest.yaml")
    spec = plan.source.spec
    assert isinstance(spec, RestApiSourceSpec)
    assert (spec.allowed_origins, spec.max_pages, spec.max_response_bytes) == (
        (),
        100_000,
        64 * 1024 * 1024,
    )


@pytest.mark.parametrize(
    "extra",
    [
        "  allowed_origins: ['https://cdn.example.com/path']",
        "  allowed_origins: ['ftp://cdn.example.com']",
        "  allowed_origins: ['https://user@cdn.example.com']",
        "  max_pages: 0",
        "  max_response_bytes: 10",
    ],
)
def test_bad_options_are_refused(extra: str) -> None:
    with pytest.raises(ManifestError) as caught:
        compile_text(MANIFEST.format(extra=extra), path="/m/manifest.yaml")
    assert caught.value.errors[0].line == 6
