"""``dpone run`` as users and schedulers see it: exit codes, JSON on stdout, JSON logs on
stderr, and no row value anywhere (SPEC §9, §5 ``reference_only``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from dpone.published import schema_errors
from tests.support.project import CANARY, Project, good, loaded, ts

from .scenarios import LOSSY_AMOUNT, THREE_BAD


def log_lines(stderr: str) -> list[dict[str, Any]]:
    """stderr as JSON log events; fails on any line that is not one (a traceback, a print)."""
    events = []
    for line in stderr.splitlines():
        if not line.strip():
            continue
        event = json.loads(line)
        assert isinstance(event, dict)
        assert {"event", "level", "timestamp"} <= event.keys()
        events.append(event)
    return events


def edit_manifest(project: Project, **top: Any) -> None:
    doc = json.loads(project.manifest_path.read_text(encoding="utf-8"))
    doc.update(top)
    project.manifest_path.write_text(json.dumps(doc), encoding="utf-8")


@pytest.mark.parametrize(
    ("enforcement", "outcome"),
    [
        ("strict", "passed"),
        ("quarantine", "passed_with_quarantine"),
        ("warn", "passed_with_warnings"),
    ],
)
def test_a_successful_run_exits_0(project: Project, enforcement: str, outcome: str) -> None:
    rows = {
        "strict": [good(1)],
        "quarantine": [good(1), LOSSY_AMOUNT, THREE_BAD],
        # a value that does not fit a nullable column: NULL and a warning
        "warn": [good(1), ("2", "n2", "2.00", ts(2), "maybe")],
    }[enforcement]
    project.write_csv("a.csv", rows)
    project.write_manifest(enforcement=enforcement)

    result = project.cli()

    assert result.exit_code == 0
    doc = result.doc  # stdout is exactly one JSON document
    assert schema_errors(doc, "dpone.run.v1") == []
    assert doc["status"] == "succeeded"
    assert doc["data_outcome"] == outcome
    events = [e["event"] for e in log_lines(result.stderr)]
    assert events[0] == "run.start"
    assert events[-1] == "run.finished"
    assert CANARY not in result.stdout + result.stderr
    project.check_artifacts()


def test_a_failed_run_exits_1(project: Project) -> None:
    project.write_csv("a.csv", [good(1), LOSSY_AMOUNT])
    project.write_manifest(enforcement="strict")

    result = project.cli()

    assert result.exit_code == 1
    doc = result.doc
    assert schema_errors(doc, "dpone.run.v1") == []
    assert doc["status"] == "failed"
    assert doc["exit_code"] == 1
    assert schema_errors(doc["error"], "dpone.error.v1") == []
    assert doc["error"]["code"] == "DPONE_CONTRACT_VIOLATION"
    assert "run.failed" in [e["event"] for e in log_lines(result.stderr)]
    assert CANARY not in result.stdout + result.stderr
    assert project.rows() is None
    project.check_artifacts()


@pytest.mark.parametrize("fmt", ["json", "text"])
def test_an_invalid_manifest_exits_2_before_reading_anything(project: Project, fmt: str) -> None:
    project.write_csv("a.csv", [good(1)])
    project.write_manifest()
    edit_manifest(project, schedule="daily")

    result = project.cli("--format", fmt)

    assert result.exit_code == 2
    if fmt == "json":
        doc = result.doc
        assert schema_errors(doc, "dpone.error.v1") == []
        assert doc["code"] == "DPONE_MANIFEST_UNKNOWN_KEY"
    else:
        assert "DPONE_MANIFEST_UNKNOWN_KEY" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert not project.work_dir.exists()
    assert project.rows() is None


def test_a_missing_secret_exits_2_before_reading_anything(project: Project) -> None:
    project.write_csv("a.csv", [good(1)])
    project.sink = {
        "type": "postgres",
        "connection": "${DPONE_TEST_UNSET_SECRET}",
        "dataset": "analytics",
        "table": "orders",
    }
    project.write_manifest()

    result = project.cli(env={"DPONE_TEST_UNSET_SECRET": None})

    assert result.exit_code == 2
    doc = result.doc
    assert schema_errors(doc, "dpone.error.v1") == []
    assert doc["code"] == "DPONE_SECRET_UNRESOLVED"
    assert "DPONE_TEST_UNSET_SECRET" in doc["message"]
    assert "Traceback" not in result.stdout + result.stderr
    assert not project.work_dir.exists()


def test_a_reused_run_id_is_refused_before_anything_loads(project: Project) -> None:
    project.write_csv("a.csv", [good(1), LOSSY_AMOUNT, good(2)])
    project.write_manifest(enforcement="quarantine")
    assert project.cli("--run-id", "nightly").exit_code == 0
    rows_before, state_before = project.rows(), project.state_bytes()

    result = project.cli("--run-id", "nightly")

    assert result.exit_code == 2
    assert result.doc["code"] == "DPONE_USAGE"
    assert project.rows() == rows_before
    assert project.state_bytes() == state_before
    # The pipeline is not wedged: the next run has nothing to recover and succeeds.
    report = project.run()
    assert report["exit_code"] == 0
    assert report["recovered"] == []
    project.check_artifacts()


def test_text_format_prints_the_summary(project: Project) -> None:
    project.write_csv("a.csv", [good(1), LOSSY_AMOUNT])
    project.write_manifest(enforcement="quarantine")

    result = project.cli("--format", "text")

    assert result.exit_code == 0
    assert result.stdout.startswith("dpone run orders_rt succeeded (passed_with_quarantine)")
    assert "quarantined 1" in result.stdout
    assert CANARY not in result.stdout + result.stderr


def dpone_process(project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DPONE_")}
    env.update(project.env)
    return subprocess.run(
        [sys.executable, "-m", "dpone", "run", str(project.manifest_path), *args],
        cwd=project.root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_real_process_prints_the_report_and_logs_json_without_row_values(
    project: Project,
) -> None:
    project.write_csv("a.csv", [good(1), LOSSY_AMOUNT, good(2), THREE_BAD])
    project.write_manifest(enforcement="quarantine")

    proc = dpone_process(project, "--format", "json")

    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert schema_errors(doc, "dpone.run.v1") == []
    assert doc["data_outcome"] == "passed_with_quarantine"
    assert doc["rows"]["quarantined"] == 2
    events = log_lines(proc.stderr)
    assert {"run.start", "dlq.run.closed", "state.advanced", "run.finished"} <= {
        e["event"] for e in events
    }
    assert CANARY not in proc.stdout + proc.stderr
    assert project.rows() == [loaded(1), loaded(2)]
    project.check_artifacts()


def test_real_process_exits_2_on_a_missing_secret_without_a_traceback(project: Project) -> None:
    project.write_csv("a.csv", [good(1)])
    project.sink = {
        "type": "postgres",
        "connection": "${DPONE_TEST_UNSET_SECRET}",
        "dataset": "analytics",
        "table": "orders",
    }
    project.write_manifest()

    proc = dpone_process(project)

    assert proc.returncode == 2
    assert "DPONE_SECRET_UNRESOLVED" in proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not project.work_dir.exists()


def test_the_text_report_names_the_cursor_in_words(project: Project) -> None:
    project.write_csv("a.csv", [good(1, day=1), good(2, day=2)])
    project.write_manifest(incremental=True)

    first = project.cli("--format", "text")
    again = project.cli("--format", "text")
    project.write_csv("a.csv", [good(1, day=1), ("3", "a line with too few fields")])
    project.write_manifest(enforcement="strict", incremental=True)
    failed = project.cli("--format", "text")

    assert first.exit_code == 0, first.stdout
    assert f"dpone run {project.name} succeeded (passed)" in first.stdout
    assert "state      advanced  cursor none → 2026-01-02T" in first.stdout
    assert again.exit_code == 0, again.stdout
    assert "state      advanced  cursor stays 2026-01-02T" in again.stdout
    assert failed.exit_code == 1, failed.stdout
    assert "DPONE_SOURCE_DECODE_FAILED" in failed.stdout
    # A failed run's header does not call its data "passed"; the error line says why.
    assert f"dpone run {project.name} FAILED\n" in failed.stdout
    assert "state      unchanged  cursor 2026-01-02T" in failed.stdout
    for result in (first, again, failed):
        assert "None" not in result.stdout
        assert "'" not in result.stdout.split("state")[1].splitlines()[0]
