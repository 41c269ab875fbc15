"""Attacks by an API that controls its responses, against ``dpone run`` of a rest_api manifest
(a process of its own): the credential goes nowhere but the base URL's origin, pagination
always ends, a response cannot exhaust memory, and SIGTERM stops a run stuck in a request.

The API is :class:`Hostile` on 127.0.0.1; "elsewhere" is a second server on 127.0.0.2 (another
loopback address, so another origin). Each test asserts the exit code, the typed code, what
the servers received and what landed in the DuckDB file.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.security.hostile_http import Handler, Hostile
from tests.support.processes import wait_until

TOKEN = "tok-e3a9c1f07b52"
ENV = {"API_TOKEN": TOKEN}
MB = 1024 * 1024
#: The child's peak RSS must stay far below what buffering the attack would take.
RSS_BOUND = 600 * MB

AUTHS: dict[str, dict[str, Any]] = {
    "bearer": {"client": {"auth": {"type": "bearer", "token": "${API_TOKEN}"}}},
    "api_key_header": {
        "client": {
            "auth": {"type": "api_key", "name": "X-Api-Key", "api_key": "${API_TOKEN}"},
        }
    },
    "api_key_query": {
        "client": {
            "auth": {
                "type": "api_key",
                "name": "key",
                "api_key": "${API_TOKEN}",
                "location": "query",
            }
        }
    },
    "header": {"client": {"headers": {"X-Token": "${API_TOKEN}"}}},
}


@dataclass
class Outcome:
    code: int
    report: dict[str, Any]
    stderr: str
    seconds: float
    peak_rss: int


def write_project(root: Path, api: Hostile, **source: Any) -> Path:
    client: dict[str, Any] = {
        "base_url": api.url("/"),
        "paginator": {"type": "json_link", "next_url_path": "next"},
        **source.pop("client", {}),
    }
    manifest = {
        "name": "hostile_api",
        "runtime": {"chunk_size": source.pop("chunk_size", 1000)},
        "source": {
            "type": "rest_api",
            "client": client,
            "resource": {
                "name": "orders",
                "endpoint": {"path": "orders", "data_selector": "items"},
            },
            "http": {"request_max_attempts": 1, "request_timeout": 30},
            **source,
        },
        "sink": {
            "type": "duckdb",
            "dataset": "analytics",
            "table": "orders",
            "options": {
                "schema_contract": {
                    "enforcement": "quarantine",
                    "columns": {"id": {"type": "integer", "nullable": False}},
                }
            },
        },
    }
    (root / "manifest.yaml").write_text(json.dumps(manifest, indent=2))
    return root


def start(root: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update(ENV)
    with (root / "stdout").open("wb") as out, (root / "stderr").open("wb") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "dpone", "run", "manifest.yaml", "--format", "json"],
            cwd=root,
            env=env,
            stdout=out,
            stderr=err,
        )


def _peak_rss(pid: int, peak: list[int], done: threading.Event) -> None:
    """The child's high-water RSS (``VmHWM``, of its own address space since exec), sampled
    until it exits. Not ``wait4``'s ``ru_maxrss``: Linux carries the parent's high-water mark
    across fork and exec into it, and a pytest worker late in the suite is larger than the
    bound itself."""
    status = Path(f"/proc/{pid}/status")
    while not done.is_set():
        try:
            text = status.read_text()
        except OSError:
            return
        for line in text.splitlines():
            if line.startswith("VmHWM:"):
                peak[0] = max(peak[0], int(line.split()[1]) * 1024)
        done.wait(0.02)


def finish(root: Path, proc: subprocess.Popen[bytes], began: float, limit: float) -> Outcome:
    """Wait for the child (SIGKILLed after ``limit`` seconds), sampling its peak RSS."""
    peak = [0]
    done = threading.Event()
    sampler = threading.Thread(target=_peak_rss, args=(proc.pid, peak, done), daemon=True)
    sampler.start()
    killer = threading.Timer(limit, proc.kill)
    killer.start()
    try:
        proc.wait()
    finally:
        killer.cancel()
        done.set()
        sampler.join()
    seconds = time.monotonic() - began
    stdout = (root / "stdout").read_text()
    report = json.loads(stdout) if stdout.strip() else {}
    stderr = (root / "stderr").read_text()
    return Outcome(proc.returncode, report, stderr, seconds, peak[0])


def run(root: Path, limit: float = 120) -> Outcome:
    began = time.monotonic()
    return finish(root, start(root), began, limit)


def code_of(outcome: Outcome) -> str:
    error = outcome.report.get("error") or outcome.report
    return str(error["code"])


def loaded_ids(root: Path) -> list[int] | None:
    path = root / ".dpone" / "hostile_api.duckdb"
    if not path.exists():
        return None
    with duckdb.connect(str(path), read_only=True) as con:
        tables = con.sql(
            "SELECT count(*) FROM information_schema.tables WHERE table_name = 'orders'"
        ).fetchall()
        if not tables[0][0]:
            return None
        return [r[0] for r in con.sql("SELECT id FROM analytics.orders ORDER BY id").fetchall()]


def carries_token(headers: dict[str, str], path: str) -> bool:
    return TOKEN in path or any(TOKEN in v for v in headers.values())


@pytest.fixture
def servers() -> Iterator[list[Hostile]]:
    made: list[Hostile] = []
    yield made
    for server in made:
        server.close()


def serve(servers: list[Hostile], host: str, answer: Any) -> Hostile:
    server = Hostile(host, answer)
    servers.append(server)
    return server


# --- credentials ------------------------------------------------------------------------------


def _elsewhere(servers: list[Hostile]) -> Hostile:
    return serve(servers, "127.0.0.2", lambda h, _: h.json({"items": [{"id": 2}], "next": None}))


@pytest.mark.parametrize("auth", sorted(AUTHS))
@pytest.mark.parametrize("how", ["next_link", "redirect"])
def test_the_credential_never_goes_to_another_origin(
    tmp_path: Path, servers: list[Hostile], auth: str, how: str
) -> None:
    elsewhere = _elsewhere(servers)

    def answer(handler: Handler, _: Hostile) -> None:
        if how == "redirect":
            handler.redirect(elsewhere.url("/orders?p=2"))
        else:
            handler.json({"items": [{"id": 1}], "next": elsewhere.url("/orders?p=2")})

    api = serve(servers, "127.0.0.1", answer)
    outcome = run(write_project(tmp_path, api, **AUTHS[auth]))

    assert outcome.code == 1, outcome.stderr
    assert code_of(outcome) == "DPONE_SOURCE_CROSS_ORIGIN"
    assert elsewhere.seen == []
    assert all(carries_token(s.headers, s.path) for s in api.seen)  # the API itself got it
    assert loaded_ids(tmp_path) is None
    assert TOKEN not in outcome.stderr + json.dumps(outcome.report)


@pytest.mark.parametrize("auth", sorted(AUTHS))
def test_an_allowed_origin_is_followed_without_the_credential(
    tmp_path: Path, servers: list[Hostile], auth: str
) -> None:
    elsewhere = _elsewhere(servers)
    api = serve(
        servers,
        "127.0.0.1",
        lambda h, _: h.json({"items": [{"id": 1}], "next": elsewhere.url("/orders?p=2")}),
    )
    project = write_project(tmp_path, api, allowed_origins=[elsewhere.origin], **AUTHS[auth])

    outcome = run(project)

    assert outcome.code == 0, outcome.stderr
    assert loaded_ids(tmp_path) == [1, 2]
    assert [s.path for s in elsewhere.seen] == ["/orders?p=2"]
    assert not carries_token(elsewhere.seen[0].headers, elsewhere.seen[0].path)
    assert "authorization" not in elsewhere.seen[0].headers


# --- pagination always ends ------------------------------------------------------------------


def test_a_next_link_to_itself_stops_at_once(tmp_path: Path, servers: list[Hostile]) -> None:
    api = serve(
        servers,
        "127.0.0.1",
        lambda h, s: h.json({"items": [{"id": 1}], "next": s.url("/orders?p=1")}),
    )

    outcome = run(write_project(tmp_path, api))

    assert outcome.code == 1, outcome.stderr
    assert code_of(outcome) == "DPONE_SOURCE_PAGINATION_LOOP"
    assert [s.path for s in api.seen] == ["/orders", "/orders?p=1"]
    assert outcome.seconds < 60
    assert loaded_ids(tmp_path) is None


def test_a_cursor_that_repeats_stops_at_once(tmp_path: Path, servers: list[Hostile]) -> None:
    api = serve(servers, "127.0.0.1", lambda h, _: h.json({"items": [{"id": 1}], "cursor": "c7"}))
    paginator = {"type": "cursor", "cursor_path": "cursor", "cursor_param": "after"}

    outcome = run(write_project(tmp_path, api, client={"paginator": paginator}))

    assert code_of(outcome) == "DPONE_SOURCE_PAGINATION_LOOP"
    assert [s.path for s in api.seen] == ["/orders", "/orders?after=c7"]


def _endless(handler: Handler, server: Hostile) -> None:
    """Always one more page, each with a new link."""
    page = int(handler.path.partition("p=")[2] or 0)
    handler.json({"items": [{"id": page}], "next": server.url(f"/orders?p={page + 1}")})


def test_max_pages_ends_an_endless_pagination(tmp_path: Path, servers: list[Hostile]) -> None:
    api = serve(servers, "127.0.0.1", _endless)

    outcome = run(write_project(tmp_path, api, max_pages=25))

    assert outcome.code == 1, outcome.stderr
    assert code_of(outcome) == "DPONE_SOURCE_MAX_PAGES"
    assert len(api.seen) == 25
    assert loaded_ids(tmp_path) is None


# --- bounded responses -----------------------------------------------------------------------


def test_a_150_mb_page_is_refused_with_bounded_memory(
    tmp_path: Path, servers: list[Hostile]
) -> None:
    api = serve(servers, "127.0.0.1", lambda h, s: h.sized(150 * MB, s.deadline))

    outcome = run(write_project(tmp_path, api))

    assert outcome.code == 1, outcome.stderr
    assert code_of(outcome) == "DPONE_SOURCE_RESPONSE_TOO_LARGE"
    assert 0 < outcome.peak_rss < RSS_BOUND, outcome.peak_rss
    assert loaded_ids(tmp_path) is None


def test_an_endless_chunked_body_is_cut_off_at_the_limit(
    tmp_path: Path, servers: list[Hostile]
) -> None:
    api = serve(servers, "127.0.0.1", lambda h, s: h.chunked(s.deadline, b"x" * 65536))

    outcome = run(write_project(tmp_path, api))

    assert outcome.code == 1, outcome.stderr
    assert code_of(outcome) == "DPONE_SOURCE_RESPONSE_TOO_LARGE"
    assert 0 < outcome.peak_rss < RSS_BOUND, outcome.peak_rss
    assert outcome.seconds < 50  # cut off, not read until the server gave up


# --- SIGTERM --------------------------------------------------------------------------------


def _sigterm_after_requests(root: Path, api: Hostile, requests: int) -> Outcome:
    began = time.monotonic()
    proc = start(root)
    wait_until(lambda: len(api.seen) >= requests, "the API was asked", timeout=60)
    time.sleep(0.5)
    proc.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    outcome = finish(root, proc, began, limit=60)
    outcome.seconds = time.monotonic() - signalled
    return outcome


@pytest.mark.parametrize("answer", ["trickle", "silence"])
def test_sigterm_stops_a_run_stuck_in_a_request(
    tmp_path: Path, servers: list[Hostile], answer: str
) -> None:
    def slow(handler: Handler, server: Hostile) -> None:
        if answer == "trickle":
            handler.chunked(server.deadline, b"x", pause=0.2)
        else:
            time.sleep(max(0.0, server.deadline - time.monotonic()))

    api = serve(servers, "127.0.0.1", slow)

    outcome = _sigterm_after_requests(write_project(tmp_path, api), api, 1)

    assert outcome.code == 130, outcome.stderr
    assert code_of(outcome) == "DPONE_INTERRUPTED"
    assert outcome.seconds < 10
    assert "Traceback" not in outcome.stderr


def test_sigterm_stops_a_run_between_pages(tmp_path: Path, servers: list[Hostile]) -> None:
    """Pages of one item and chunks of 100,000: without the source's own check, the stop
    would wait for a chunk that takes 100,000 pages."""
    api = serve(servers, "127.0.0.1", _endless)

    outcome = _sigterm_after_requests(write_project(tmp_path, api, chunk_size=100_000), api, 20)

    assert outcome.code == 130, outcome.stderr
    assert code_of(outcome) == "DPONE_INTERRUPTED"
    assert outcome.seconds < 10
    assert loaded_ids(tmp_path) is None
