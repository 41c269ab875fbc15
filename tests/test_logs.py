"""dpone.logs: JSON lines as structlog's JSONRenderer wrote them, bound fields, capture."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from dpone import logs


@pytest.fixture(autouse=True)
def _restore(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test configures logging for itself; the process's configuration comes back."""
    monkeypatch.setattr(logs, "_writer", logs._writer)
    monkeypatch.setattr(logs, "_configured", logs._configured)


def _lines(err: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in err.splitlines()]


def test_json_lines_carry_fields_event_level_and_a_utc_timestamp(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(json=True)
    log = logs.get_logger("dpone.test")
    log.debug("not.shown", n=0)
    log.info("run.start", pipeline="p", rows=3)
    log.warning("run.stopping", signal="SIGINT")
    log.log(40, "dlt.log", where="a.b", exception=None)
    first, second, third = _lines(capsys.readouterr().err)
    assert list(first) == ["pipeline", "rows", "event", "level", "timestamp"]
    assert (first["event"], first["level"], first["rows"]) == ("run.start", "info", 3)
    stamp = str(first["timestamp"])
    assert stamp.endswith("Z")
    assert datetime.fromisoformat(stamp.replace("Z", "+00:00")).utcoffset() is not None
    assert (second["event"], second["level"]) == ("run.stopping", "warning")
    assert (third["level"], third["exception"]) == ("error", None)
    assert logs.is_configured()


def test_verbose_shows_debug_events(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json=True, verbose=True)
    logs.get_logger("dpone.test").debug("dlq.chunk.durable", rows=2)
    (line,) = _lines(capsys.readouterr().err)
    assert (line["event"], line["level"]) == ("dlq.chunk.durable", "debug")


def test_bound_fields_join_every_event_until_unbound(capsys: pytest.CaptureFixture[str]) -> None:
    logs.configure(json=True)
    log = logs.get_logger("dpone.test")
    logs.bind(run_id="r1", partition=3)
    try:
        log.info("partition.start", kind="rows")
        log.info("partition.finished", partition=4)  # the event's own value wins
    finally:
        logs.unbind("run_id", "partition")
    log.info("run.finished")
    start, finished, after = _lines(capsys.readouterr().err)
    assert (start["run_id"], start["partition"], start["kind"]) == ("r1", 3, "rows")
    assert finished["partition"] == 4
    assert set(after) == {"event", "level", "timestamp"}


def test_capture_keeps_events_and_gives_the_writer_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs.configure(json=True)
    with logs.capture() as events:
        logs.get_logger("dpone.test").debug("dlq.run.opened", run_id="r")
    assert events == [{"run_id": "r", "event": "dlq.run.opened", "log_level": "debug"}]
    logs.get_logger("dpone.test").info("after")
    assert [line["event"] for line in _lines(capsys.readouterr().err)] == ["after"]
