"""The assertion gate's log lines: attached once per run, warn violations one by one (the first
five per assertion), and one summary with the totals; never a row value."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dpone import logs
from dpone.assertions.engine import AssertionEngine, AssertionFailed
from dpone.assertions.spec import AssertionSpec, Policy
from tests.support.project import CANARY, Project, good


def _events(stderr: str) -> list[dict[str, Any]]:
    """The JSON log lines of a CLI run (stderr is not a terminal there)."""
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def _spec(kind: str, on_failure: Policy, name: str, **params: Any) -> AssertionSpec:
    return AssertionSpec(
        type=kind, params=params, on_failure=on_failure, pointer="/quality", name=name
    )


def test_a_cli_run_logs_the_gate_each_warning_and_one_summary(project: Project) -> None:
    # Seven rows fail the warn predicate, over two chunks: five are logged one by one, then
    # the summary counts all seven.
    rows = [good(i, name=CANARY) for i in range(1, 11)]
    project.write_csv("a.csv", rows)
    (project.root / "rules.py").write_text("def small(row):\n    return row['id'] > 7\n")
    project.write_manifest(
        chunk_size=4,
        assertions={
            "min_rows_per_load": 1,
            "unique_columns": {"value": ["id"], "on_failure": "quarantine"},
            "custom": [{"predicate": "rules:small", "on_failure": "warn"}],
        },
    )

    result = project.cli()

    assert result.exit_code == 0
    assert CANARY not in result.stderr
    events = _events(result.stderr)
    attached = [e for e in events if e["event"] == "assertion.gate_attached"]
    assert len(attached) == 1
    assert attached[0]["count"] == 3
    assert [(a["name"], a["scope"], a["on_failure"]) for a in attached[0]["assertions"]] == [
        ("min_rows_per_load", "batch", "fail"),
        ("unique_columns", "row", "quarantine"),
        ("custom:rules:small", "row", "warn"),
    ]
    warned = [e for e in events if e["event"] == "assertion.warn"]
    assert [(e["assertion"], e["judged_row"]) for e in warned] == [
        ("custom:rules:small", n) for n in range(1, 6)
    ]
    summaries = [e for e in events if e["event"] == "assertion.warn_summary"]
    assert len(summaries) == 1
    assert summaries[0]["assertions"] == {"custom:rules:small": 7}
    assert summaries[0]["logged"] == 5
    order = [e["event"] for e in events]
    assert order.index("assertion.gate_attached") < order.index("assertion.warn")
    assert order.index("assertion.warn_summary") < order.index("run.finished")


def test_a_run_without_assertions_logs_no_gate(project: Project) -> None:
    project.write_csv("a.csv", [good(1)])
    project.write_manifest()

    result = project.cli()

    assert result.exit_code == 0
    assert not [e for e in _events(result.stderr) if e["event"].startswith("assertion.")]


def test_a_batch_warning_is_logged_and_summed(tmp_path: Path) -> None:
    engine = AssertionEngine(
        [
            _spec("min_rows_per_load", "warn", "min_rows_per_load", value=5),
            _spec("max_rows_per_load", "fail", "max_rows_per_load", value=100),
        ],
        tmp_path,
    )
    batch = pa.record_batch({"id": pa.array([1, 2, 3], pa.int64())})
    with logs.capture() as events:
        engine.observe(batch)
        engine.finalize()

    warned = [e for e in events if e["event"] == "assertion.warn"]
    assert len(warned) == 1
    assert warned[0]["assertion"] == "min_rows_per_load"
    assert warned[0]["batch_rows"] == 3
    assert warned[0]["log_level"] == "warning"
    summary = [e for e in events if e["event"] == "assertion.warn_summary"]
    assert summary == [
        {
            "assertions": {"min_rows_per_load": 3},
            "logged": 1,
            "event": "assertion.warn_summary",
            "log_level": "warning",
        }
    ]


def test_no_warning_no_summary_and_a_batch_failure_still_raises(tmp_path: Path) -> None:
    engine = AssertionEngine(
        [_spec("min_rows_per_load", "fail", "min_rows_per_load", value=5)], tmp_path
    )
    batch = pa.record_batch({"id": pa.array([1], pa.int64())})
    with logs.capture() as events:
        engine.announce(pipeline="p_one", run_id="r1")
        engine.observe(batch)
        with pytest.raises(AssertionFailed):
            engine.finalize()
    assert [e["event"] for e in events] == ["assertion.gate_attached"]
    assert events[0]["run_id"] == "r1"
