"""The rest_api source against a real local HTTP server: dlt's paginators, auth from the
environment, dlt's retries, and dlt's errors as dpone errors without secrets."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pytest_httpserver import HTTPServer

from dpone.connectors import make_source
from dpone.connectors.errors import SourceConfigError, SourceError, SourceUnavailable
from dpone.errors import SecretError, TransientError
from tests.connectors.restapi import PAGINATORS, PER_PAGE, OrdersApi, item, rest_source
from tests.connectors.specs import dlt_backed_spec

TOKEN = "tok-4b2e9f0c"


def read(source_config: dict[str, Any], chunk_size: int = 3, **env: str) -> list[pa.RecordBatch]:
    source = make_source(dlt_backed_spec(source_config, Path(".")), read_all_as_text=True, env=env)
    chunks = list(source.chunks(chunk_size))
    row = 1
    for chunk in chunks:
        assert (chunk.partition, chunk.file_sha256, chunk.rereadable) == ("orders", None, False)
        assert chunk.first_row == row
        row += chunk.num_rows
    return [c.batch for c in chunks]


def ids(batches: list[pa.RecordBatch]) -> list[str]:
    return [v for b in batches for v in b.column("id").to_pylist()]


@pytest.mark.parametrize("style", sorted(PAGINATORS))
def test_every_paginator_reads_every_page(httpserver: HTTPServer, style: str) -> None:
    api = OrdersApi(httpserver, style, [item(i) for i in range(1, 11)])

    batches = read(rest_source(api.base_url, PAGINATORS[style]))

    # 10 items over 3 pages of 4 arrive as chunks of exactly 3 rows, across page breaks.
    assert [b.num_rows for b in batches] == [3, 3, 3, 1]
    assert ids(batches) == [str(i) for i in range(1, 11)]
    pages = {
        "page_number": [{"page": str(p)} for p in (1, 2, 3, 4)],  # page 4 is the empty one
        "offset": [{"offset": str(o), "limit": "4"} for o in (0, 4, 8)],
        "cursor": [{}, {"cursor": "4"}, {"cursor": "8"}],
        "header_link": [{}, {"p": "4"}, {"p": "8"}],
        "json_link": [{}, {"p": "4"}, {"p": "8"}],
    }[style]
    assert api.requests() == pages


def test_items_become_text_rows_like_jsonl(httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "json_link", [item(1), item(2, extra=True, tags=None)])

    (batch,) = read(rest_source(api.base_url, PAGINATORS["json_link"]), chunk_size=10)

    assert batch.schema == pa.schema(
        [(n, pa.string()) for n in ("id", "name", "amount", "updated_at", "tags", "extra")]
    )
    assert batch.to_pylist()[0] == {
        "id": "1",
        "name": "n1",
        "amount": "10.25",
        "updated_at": "2026-01-01T10:00:00Z",
        "tags": '["a","1"]',
        "extra": None,
    }
    assert batch.to_pylist()[1]["extra"] == "true"
    assert batch.to_pylist()[1]["tags"] is None


def test_bearer_token_from_the_environment(httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "json_link", [item(1)])
    config = rest_source(
        api.base_url, PAGINATORS["json_link"], auth={"type": "bearer", "token": "${API_TOKEN}"}
    )

    assert ids(read(config, API_TOKEN=TOKEN)) == ["1"]
    (request, _) = httpserver.log[0]
    assert request.headers["Authorization"] == f"Bearer {TOKEN}"


def test_api_key_in_the_query_from_the_environment(httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "json_link", [item(1)])
    auth = {"type": "api_key", "name": "key", "api_key": "${API_KEY}", "location": "query"}

    assert ids(read(rest_source(api.base_url, PAGINATORS["json_link"], auth=auth), API_KEY=TOKEN))
    assert api.requests() == [{"key": TOKEN}]


def test_api_key_header_and_missing_variable(httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "json_link", [item(1)])
    auth = {"type": "api_key", "name": "X-Api-Key", "api_key": "${API_KEY}"}
    config = rest_source(api.base_url, PAGINATORS["json_link"], auth=auth)

    with pytest.raises(SecretError) as caught:
        read(config)
    assert caught.value.code == "DPONE_SECRET_UNRESOLVED"
    assert httpserver.log == []

    read(config, API_KEY=TOKEN)
    assert httpserver.log[0][0].headers["X-Api-Key"] == TOKEN


@pytest.mark.parametrize("status", [429, 503])
def test_a_retryable_status_then_200_is_retried_by_dlt(httpserver: HTTPServer, status: int) -> None:
    # A one-shot handler answers the first request before the API's permanent one.
    httpserver.expect_oneshot_request("/orders").respond_with_data("busy", status=status)
    api = OrdersApi(httpserver, "json_link", [item(i) for i in range(1, 6)])

    assert ids(read(rest_source(api.base_url, PAGINATORS["json_link"]))) == list("12345")
    statuses = [response.status_code for _, response in httpserver.log]
    assert statuses == [status, 200, 200]


def test_a_status_that_stays_is_transient_after_the_attempts(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/orders").respond_with_data("down", status=503)
    config = rest_source(httpserver.url_for("/"), "json_link", attempts=2)

    with pytest.raises(SourceUnavailable) as caught:
        read(config)
    assert caught.value.code == "DPONE_SOURCE_UNAVAILABLE"
    assert isinstance(caught.value, TransientError)
    assert "503" in caught.value.message
    assert len(httpserver.log) == 2


def test_an_error_status_is_terminal_and_names_no_secret(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/orders").respond_with_data("nope", status=401)
    auth = {"type": "api_key", "name": "key", "api_key": "${API_KEY}", "location": "query"}
    config = rest_source(httpserver.url_for("/"), "json_link", auth=auth)

    with pytest.raises(SourceError) as caught:
        read(config, API_KEY=TOKEN)
    error = caught.value
    assert error.code == "DPONE_SOURCE_HTTP_STATUS"
    assert not isinstance(error, TransientError)
    assert "401" in error.message
    assert TOKEN not in json.dumps(error.to_json())
    assert error.__cause__ is None
    assert error.__suppress_context__
    assert len(httpserver.log) == 1  # a 401 is not retried


def test_unreachable_api_is_transient() -> None:
    config = rest_source("http://127.0.0.1:9/", "json_link", attempts=1)
    with pytest.raises(SourceUnavailable):
        read(config)


def test_a_response_that_is_not_json_is_a_decode_error(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/orders").respond_with_data("<html>", content_type="text/html")
    with pytest.raises(SourceError) as caught:
        read(rest_source(httpserver.url_for("/"), "single_page"))
    assert caught.value.code == "DPONE_SOURCE_DECODE_FAILED"
    assert "not JSON" in caught.value.message


def test_an_item_that_is_not_an_object_is_a_decode_error(httpserver: HTTPServer) -> None:
    httpserver.expect_request("/orders").respond_with_json({"items": [1, 2]})
    with pytest.raises(SourceError) as caught:
        read(rest_source(httpserver.url_for("/"), "single_page"))
    assert caught.value.code == "DPONE_SOURCE_DECODE_FAILED"


def test_the_committed_cursor_goes_to_dlt_incremental(httpserver: HTTPServer) -> None:
    api = OrdersApi(httpserver, "page_number", [item(i) for i in range(1, 10)])
    config = rest_source(
        api.base_url,
        PAGINATORS["page_number"],
        params={"since": "{incremental.start_value}"},
        incremental={"cursor_column": "updated_at", "initial_value": "2026-01-02T10:00:00Z"},
    )
    source = make_source(dlt_backed_spec(config, Path(".")), read_all_as_text=True, env={})
    assert source.cursor_pushdown

    first = [v for c in source.chunks(100) for v in c.batch.column("id").to_pylist()]
    assert first == [str(i) for i in range(3, 10)]
    committed = "2026-01-07T10:00:00.500000Z"
    later = [
        v for c in source.chunks(100, after=committed) for v in c.batch.column("id").to_pylist()
    ]

    assert later == ["7", "8", "9"]  # dlt's filter is by text; dpone's typed one drops "7"
    sent = [r.get("since") for r in api.requests()]
    # 7 newer items fill two pages of PER_PAGE (and an empty third); 3 fill one (and a second).
    assert PER_PAGE == 4
    assert sent == ["2026-01-02T10:00:00Z"] * 3 + [committed] * 2


def test_dlt_refusing_the_config_is_a_config_error(httpserver: HTTPServer) -> None:
    config = rest_source(httpserver.url_for("/"), {"type": "offset", "limit": 2})
    config["client"]["paginator"]["nonsense"] = 1  # what `dpone validate` would refuse
    with pytest.raises(SourceConfigError) as caught:
        read(config)
    assert caught.value.exit_code == 2


def test_without_dlt_installed_a_run_gets_a_clear_error(
    httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "dlt", None)  # `import dlt` now raises ImportError
    with pytest.raises(SourceConfigError) as caught:
        read(rest_source(httpserver.url_for("/"), "json_link"))
    assert caught.value.code == "DPONE_DLT_NOT_INSTALLED"
    assert caught.value.exit_code == 2
    assert httpserver.log == []
