"""A paginated orders API on pytest-httpserver, in each of dlt's pagination styles.

:class:`OrdersApi` serves a list of items that a test may grow between runs; every request
the server saw is in ``httpserver.log``, so tests assert what was asked, not what dpone says.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

#: Each style's paginator block, as a manifest writes it (dlt's vocabulary).
PAGINATORS: dict[str, Any] = {
    "page_number": {"type": "page_number", "base_page": 1, "total_path": None},
    "offset": {"type": "offset", "limit": 4},
    "cursor": {"type": "cursor", "cursor_path": "next_cursor", "cursor_param": "cursor"},
    "header_link": "header_link",
    "json_link": {"type": "json_link", "next_url_path": "next"},
}
PER_PAGE = 4


def item(i: int, **overrides: Any) -> dict[str, Any]:
    """Order ``i``: updated at 10:00 UTC on day ``i`` of January 2026."""
    doc: dict[str, Any] = {
        "id": i,
        "name": f"n{i}",
        "amount": round(10 + i / 4, 2),
        "updated_at": f"2026-01-{i:02d}T10:00:00Z",
        "tags": ["a", str(i)],
    }
    doc.update(overrides)
    return doc


@dataclass
class OrdersApi:
    """``GET /orders`` over ``items``; ``since`` (when sent) keeps items updated after it."""

    server: HTTPServer
    style: str
    items: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.server.expect_request("/orders").respond_with_handler(self.handle)

    @property
    def base_url(self) -> str:
        return self.server.url_for("/")

    def requests(self) -> list[dict[str, str]]:
        """The query arguments of every ``/orders`` request, in order."""
        return [dict(r.args) for r, _ in self.server.log if r.path == "/orders"]

    def handle(self, request: Request) -> Response:
        args = request.args
        since = args.get("since")
        items = [i for i in self.items if since is None or i["updated_at"] > since]
        body: dict[str, Any]
        headers: dict[str, str] = {}
        if self.style == "page_number":
            start = (int(args.get("page", "1")) - 1) * PER_PAGE
            body = {"items": items[start : start + PER_PAGE]}
        elif self.style == "offset":
            start, limit = int(args.get("offset", "0")), int(args["limit"])
            body = {"items": items[start : start + limit], "total": len(items)}
        elif self.style == "cursor":
            start = int(args.get("cursor", "0"))
            more = start + PER_PAGE < len(items)
            body = {
                "items": items[start : start + PER_PAGE],
                "next_cursor": str(start + PER_PAGE) if more else None,
            }
        else:
            start = int(args.get("p", "0"))
            nxt = None
            if start + PER_PAGE < len(items):
                nxt = self.server.url_for(f"/orders?p={start + PER_PAGE}")
            body = {"items": items[start : start + PER_PAGE]}
            if self.style == "json_link":
                body["next"] = nxt
            elif nxt is not None:
                headers["Link"] = f'<{nxt}>; rel="next"'
        return Response(json.dumps(body), status=200, headers=headers, mimetype="application/json")


def rest_source(
    base_url: str,
    paginator: Any = "auto",
    *,
    auth: dict[str, Any] | None = None,
    params: dict[str, Any] | None = None,
    incremental: dict[str, Any] | None = None,
    attempts: int = 3,
) -> dict[str, Any]:
    """A manifest's ``source`` block for ``/orders`` (retries without waiting)."""
    endpoint: dict[str, Any] = {"path": "orders", "data_selector": "items"}
    if params:
        endpoint["params"] = params
    client: dict[str, Any] = {"base_url": base_url, "paginator": paginator}
    if auth:
        client["auth"] = auth
    source: dict[str, Any] = {
        "type": "rest_api",
        "client": client,
        "resource": {"name": "orders", "endpoint": endpoint},
        "http": {"request_max_attempts": attempts, "request_backoff_factor": 0},
    }
    if incremental:
        source["incremental"] = incremental
    return source
