"""A hostile HTTP API for attack tests: a server on a loopback address (127.0.0.0/8 only) whose
answers a test scripts, recording every request it received (path and headers).

Each server stops by itself after ``lifetime`` seconds, and every endless answer it gives
(pages, bodies, trickles) ends by then too, so a test that fails never leaves one running.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Answer = Callable[["Handler", "Hostile"], None]


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]


class Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        hostile = self.server.hostile
        hostile.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}))
        # The client giving up on the answer is what the tests want.
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            hostile.answer(self, hostile)

    def log_message(self, format: str, *args: Any) -> None:
        pass

    # --- answers --------------------------------------------------------------------------------

    def json(self, doc: Any, status: int = 200) -> None:
        body = json.dumps(doc).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def redirect(self, location: str) -> None:
        self.send_response(302)
        self.send_header("Location", location)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def sized(self, size: int, deadline: float) -> None:
        """``size`` bytes of one JSON document, sent with its Content-Length."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(size))
        self.end_headers()
        head, tail = b'{"items": [], "pad": "', b'"}'
        self.wfile.write(head)
        left = size - len(head) - len(tail)
        block = b"x" * 65536
        while left > 0 and time.monotonic() < deadline:
            piece = block[: min(left, len(block))]
            self.wfile.write(piece)
            left -= len(piece)
        self.wfile.write(tail)

    def chunked(self, deadline: float, piece: bytes, pause: float = 0.0) -> None:
        """A chunked body that never ends (until ``deadline``): ``piece`` after ``piece``."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(b'{"items": [], "pad": "')
        while time.monotonic() < deadline:
            self._chunk(piece)
            if pause:
                time.sleep(pause)
        self.close_connection = True

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    hostile: Hostile


@dataclass
class Hostile:
    """One server on ``host`` answering every GET with ``answer``."""

    host: str
    answer: Answer
    lifetime: float = 60.0
    seen: list[Seen] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.deadline = time.monotonic() + self.lifetime
        self._server = _Server((self.host, 0), Handler)
        self._server.hostile = self
        self.port: int = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()

    @property
    def origin(self) -> str:
        return f"http://{self.host}:{self.port}"

    def url(self, path: str) -> str:
        return self.origin + path

    def close(self) -> None:
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
