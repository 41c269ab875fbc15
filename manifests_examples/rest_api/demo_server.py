"""A small orders API for the rest_api example: `python demo_server.py [--port 8765]`.

GET /v1/orders?since=<ISO-8601>&status=<status>  -> {"items": [...], "next": <url or null>}

Pages of 50 orders, linked by a `next` URL in the body (dlt's json_link paginator). Every
request needs `Authorization: Bearer $DEMO_API_TOKEN` (default `demo-token`). `since` keeps
orders updated after it, as real APIs do for incremental loads. Two orders are broken on
purpose (an amount that is not a number, a status the contract does not allow) so the run
shows the DLQ at work. Standard library only; stop it with Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlsplit

PAGE = 50
START = datetime(2026, 1, 1, tzinfo=UTC)


def orders(count: int = 240) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for i in range(1, count + 1):
        rows.append(
            {
                "id": i,
                "customer": {"id": 1000 + i % 37, "country": ["DE", "FR", "US", "JP"][i % 4]},
                "amount": f"{(i * 37) % 500 + 9.99:.2f}",
                "currency": "EUR",
                "status": ["open", "paid", "shipped"][i % 3],
                "updated_at": (START + timedelta(hours=i)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            }
        )
    rows[41]["amount"] = "n/a"  # order 42: not a decimal -> DLQ
    rows[99]["status"] = "lost"  # order 100: not an allowed status -> DLQ
    return rows


ORDERS = orders()


class Handler(BaseHTTPRequestHandler):
    server_version = "dpone-demo-api/1"

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        if url.path != "/v1/orders":
            return self.reply(404, {"error": "not found"})
        token = os.environ.get("DEMO_API_TOKEN", "demo-token")
        if self.headers.get("Authorization") != f"Bearer {token}":
            return self.reply(401, {"error": "missing or wrong bearer token"})
        args = {k: v[0] for k, v in parse_qs(url.query).items()}
        since = args.get("since", "")
        matching = [o for o in ORDERS if str(o["updated_at"]) > since]
        start = int(args.get("offset", "0"))
        page = matching[start : start + PAGE]
        following = None
        if start + PAGE < len(matching):
            query = urlencode({**args, "offset": start + PAGE})
            following = f"http://{self.headers['Host']}/v1/orders?{query}"
        return self.reply(200, {"items": page, "next": following})

    def reply(self, status: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        print(f"demo-api: {self.command} {self.path} -> {args[1] if len(args) > 1 else ''}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8765)
    port = parser.parse_args().port
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"demo-api: serving http://127.0.0.1:{server.server_port}/v1/orders", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
