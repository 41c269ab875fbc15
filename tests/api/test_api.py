"""``dpone.validate``, ``dpone.compile`` and ``dpone.run``: one error contract (SPEC §11)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import dpone
from dpone.published import schema_errors
from tests.support.paths import EXAMPLES

INVALID = sorted((EXAMPLES / "invalid").glob("*.yaml"))


def test_validate_ok(orders: Path) -> None:
    result = dpone.validate(orders)
    assert result.ok
    assert result.errors == ()
    assert result.name == "orders_csv"
    doc = result.to_json()
    assert doc["valid"] is True
    assert doc["manifests"][0]["fingerprint"] == result.fingerprint
    assert schema_errors(doc, "dpone.validation.v1") == []


def test_validate_invalid_lists_every_error_and_never_raises() -> None:
    result = dpone.validate(INVALID[0])
    assert not result.ok
    assert result.errors
    assert all(e.code.startswith("DPONE_") for e in result.errors)
    doc = result.to_json()
    assert doc["valid"] is False
    assert doc["manifests"][0]["errors"] == [e.to_json() for e in result.errors]
    assert schema_errors(doc, "dpone.validation.v1") == []


def test_validate_missing_file(tmp_path: Path) -> None:
    result = dpone.validate(tmp_path / "nope.yaml")
    assert not result.ok
    assert result.errors[0].code == "DPONE_MANIFEST_NOT_FOUND"


def test_compile_returns_a_plan(orders: Path) -> None:
    plan = dpone.compile(orders)
    assert isinstance(plan, dpone.Plan)
    assert plan.name == "orders_csv"


def test_compile_raises_config_error_for_an_invalid_manifest() -> None:
    with pytest.raises(dpone.ConfigError) as caught:
        dpone.compile(INVALID[0])
    assert isinstance(caught.value, dpone.ManifestError)
    assert caught.value.errors


def test_compile_refuses_a_bad_evolution_override(orders: Path) -> None:
    with pytest.raises(dpone.ConfigError) as caught:
        dpone.compile(orders, evolution="sometimes")
    assert caught.value.code == "DPONE_USAGE_EVOLUTION"


def test_run_a_path_returns_the_report_and_quarantine_is_success(orders: Path) -> None:
    report = dpone.run(str(orders))
    assert isinstance(report, dpone.RunReport)
    assert report.status == "succeeded"
    assert report.data_outcome == "passed_with_quarantine"
    assert report.exit_code == 0
    assert (report.rows.read, report.rows.loaded, report.rows.quarantined) == (40, 36, 4)
    assert schema_errors(report.to_json(), "dpone.run.v1") == []


def test_run_a_plan_with_a_run_id_and_progress(orders: Path) -> None:
    seen: list[tuple[int, int]] = []
    report = dpone.run(
        dpone.compile(orders),
        run_id="nightly-1",
        on_progress=lambda counts: seen.append((counts.read, counts.quarantined)),
    )
    assert report.run_id == "nightly-1"
    assert seen
    assert seen[-1][0] == 40


def test_a_failed_run_raises_run_failed_with_its_report(strict_orders: Path) -> None:
    with pytest.raises(dpone.RunFailed) as caught:
        dpone.run(strict_orders)
    report = caught.value.report
    assert report is not None
    assert report.status == "failed"
    assert report.exit_code == 1
    assert caught.value.exit_code == 1
    assert report.error is not None
    assert report.error.code in str(caught.value)
    assert report.sink.committed is False


def test_check_false_returns_the_failed_report(strict_orders: Path) -> None:
    report = dpone.run(strict_orders, check=False)
    assert report.status == "failed"
    assert report.data_outcome == "failed_quality_gate"
    assert report.exit_code == 1


def test_a_bad_run_id_is_a_config_error(orders: Path) -> None:
    with pytest.raises(dpone.ConfigError):
        dpone.run(orders, run_id="../escape")


def test_a_missing_secret_is_a_config_error(tmp_path: Path) -> None:
    manifest = EXAMPLES / "orders_postgres" / "manifest.yaml"
    plan = dpone.compile(manifest)
    assert plan.secret_names
    with pytest.raises(dpone.ConfigError) as caught:
        dpone.compile(manifest, env={})
    assert caught.value.code == "DPONE_SECRET_UNRESOLVED"
    with pytest.raises(dpone.ConfigError):
        dpone.run(plan, env={})


def _handlers() -> tuple[Any, Any]:
    return signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)


def test_handle_signals_false_installs_no_handler(orders: Path) -> None:
    before = _handlers()
    during: list[tuple[Any, Any]] = []
    dpone.run(orders, on_progress=lambda _: during.append(_handlers()))
    assert during
    assert set(during) == {before}
    assert _handlers() == before


def test_handle_signals_true_watches_while_running_and_restores(orders: Path) -> None:
    before = _handlers()
    during: list[tuple[Any, Any]] = []
    dpone.run(orders, handle_signals=True, on_progress=lambda _: during.append(_handlers()))
    assert during
    assert during[0][0] != before[0]
    assert _handlers() == before


SCRIPT_RUN = """
import json, sys
import dpone
report = dpone.run(sys.argv[1])
dpone.ops.verify(sys.argv[2])
print(json.dumps({"status": report.status}))
"""

SCRIPT_OWN_LOGGING = """
import sys
import structlog
seen = []
structlog.configure(processors=[lambda _l, _m, event: seen.append(event) or event],
                    logger_factory=structlog.ReturnLoggerFactory())
import dpone
dpone.run(sys.argv[1], check=False)
print(sorted({e["event"] for e in seen} & {"run.start", "run.failed"}))
"""


def test_a_script_keeps_its_stdout_and_its_own_logging(orders: Path) -> None:
    """Unconfigured, structlog prints every event (debug too) to stdout: a script's output.
    dpone's events go to stderr at info level instead, unless the caller configured structlog."""
    dlq = orders.parent / ".dpone" / "dlq"
    first = subprocess.run(
        [sys.executable, "-c", SCRIPT_RUN, str(orders), str(dlq)],
        capture_output=True,
        text=True,
        check=False,
    )
    own = subprocess.run(
        [sys.executable, "-c", SCRIPT_OWN_LOGGING, str(orders)],
        capture_output=True,
        text=True,
        check=False,
    )

    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == {"status": "succeeded"}
    events = [json.loads(line) for line in first.stderr.splitlines()]
    assert events[0]["event"] == "run.start"
    assert {e["level"] for e in events} <= {"info", "warning", "error"}
    assert own.returncode == 0, own.stderr
    # The second run of the example reads no new row and fails its min_rows_per_load.
    assert own.stdout.strip() == "['run.failed', 'run.start']"
    assert own.stderr == ""
