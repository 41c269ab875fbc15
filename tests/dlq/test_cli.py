"""``dpone ops dlq verify|summary``: exit codes and output."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from dpone.cli.ops_dlq import dlq_group
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.store import DlqStore
from tests.support.dlqfiles import lines_of, rewrite_line, segment_files
from tests.support.dlqrows import rows


def _populate(store: DlqStore) -> None:
    with store.open_run("run-1", "load-1", pipeline="orders") as writer:
        writer.write_chunk(rows(3))
        writer.write_chunk(rows(2, start=4, column="id", reason=ReasonCode.REQUIRED_NULL))
    with store.open_run("run-2", "load-2", pipeline="orders") as writer:
        writer.write_chunk(rows(1, column=None, reason=ReasonCode.DECODE_FAILED))


def test_verify_clean_store(store: DlqStore, root: Path) -> None:
    _populate(store)
    result = CliRunner().invoke(dlq_group, ["verify", "--dir", str(root)])
    assert result.exit_code == 0
    assert "verifies" in result.output
    result = CliRunner().invoke(
        dlq_group, ["verify", "--dir", str(root), "--run-id", "run-1", "--format", "json"]
    )
    assert result.exit_code == 0
    assert json.loads(result.output)["clean"] is True


def test_verify_lists_findings_by_code(store: DlqStore, root: Path) -> None:
    _populate(store)
    first = segment_files(root, "run-1")[0]
    rewrite_line(first, 2, lines_of(first)[1].replace(b"amount", b"AMOUNT"))
    (root / "runs" / "run-2" / "index.json").write_text("{}")
    result = CliRunner().invoke(dlq_group, ["verify", "--dir", str(root)])
    assert result.exit_code == 1
    assert f"DPONE_DLQ_CHECKSUM_MISMATCH: runs/run-1/segments/{first.name} line 2 " in (
        result.output
    )
    assert "DPONE_DLQ_INDEX_CHECKSUM_MISMATCH" in result.output
    assert "2 finding(s)" in result.output
    only = CliRunner().invoke(dlq_group, ["verify", "--dir", str(root), "--run-id", "run-2"])
    assert only.exit_code == 1
    assert "CHECKSUM_MISMATCH: runs/run-1" not in only.output


def test_verify_usage_errors(root: Path) -> None:
    result = CliRunner().invoke(dlq_group, ["verify", "--dir", str(root), "--format", "json"])
    assert result.exit_code == 2
    assert json.loads(result.output)["code"] == "DPONE_DLQ_DIR_NOT_FOUND"
    root.mkdir()
    result = CliRunner().invoke(
        dlq_group, ["verify", "--dir", str(root), "--run-id", "nope", "--format", "json"]
    )
    assert result.exit_code == 2
    assert json.loads(result.output)["code"] == "DPONE_DLQ_RUN_NOT_FOUND"
    result = CliRunner().invoke(dlq_group, ["verify", "--dir", str(root), "--run-id", "../x"])
    assert result.exit_code == 1
    assert "DPONE_DLQ_PATH_ESCAPE" in result.output
    for run_id, code in (("nope/../x", "DPONE_DLQ_PATH_ESCAPE"), ("a b", "DPONE_DLQ_INVALID_ID")):
        args = ["summary", "--dir", str(root), "--run-id", run_id, "--format", "json"]
        doc = json.loads(CliRunner().invoke(dlq_group, args).output)
        assert doc["code"] == code
        assert any("dpone ops dlq summary" in fix for fix in doc["fixes"])
        assert run_id not in doc["message"]  # the message never repeats the value


def test_summary_markdown_and_json(store: DlqStore, root: Path) -> None:
    _populate(store)
    result = CliRunner().invoke(dlq_group, ["summary", "--dir", str(root)])
    assert result.exit_code == 0
    assert "| run-1 | `orders` | closed | 5 |" in result.output
    assert "| schema.type_mismatch | `amount` | 3 |" in result.output
    assert "| schema.required_null | `id` | 2 |" in result.output
    assert "| source.decode_failed | - | 1 |" in result.output
    result = CliRunner().invoke(
        dlq_group, ["summary", "--dir", str(root), "--run-id", "run-1", "--format", "json"]
    )
    assert result.exit_code == 0
    doc = json.loads(result.output)
    assert doc["record_count"] == 5
    assert doc["by_reason"] == {"schema.required_null": 2, "schema.type_mismatch": 3}
    assert doc["runs"][0]["by_reason_column"] == [
        {"code": "schema.required_null", "column": "id", "count": 2},
        {"code": "schema.type_mismatch", "column": "amount", "count": 3},
    ]


def test_summary_counts_an_open_run_from_its_records(store: DlqStore, root: Path) -> None:
    writer = store.open_run("run-1", "load-1")
    writer.write_chunk(rows(4))
    result = CliRunner().invoke(dlq_group, ["summary", "--dir", str(root), "--format", "json"])
    assert json.loads(result.output)["runs"][0] | {"by_reason_column": None} == {
        "run_id": "run-1",
        "load_id": "load-1",
        "pipeline": None,
        "status": "open",
        "record_count": 4,
        "by_reason": {"schema.type_mismatch": 4},
        "by_reason_column": None,
        "hints": [],
        "evidence_found": False,
    }
    writer.close()


def test_summary_refuses_a_tampered_index(store: DlqStore, root: Path) -> None:
    _populate(store)
    (root / "runs" / "run-1" / "index.json").write_text("[]")
    result = CliRunner().invoke(dlq_group, ["summary", "--dir", str(root), "--format", "json"])
    assert result.exit_code == 1
    assert json.loads(result.output)["code"] == "DPONE_DLQ_INDEX_CHECKSUM_MISMATCH"


def test_wired_into_the_dpone_cli(store: DlqStore, root: Path) -> None:
    from dpone.cli.main import cli

    _populate(store)
    result = CliRunner().invoke(cli, ["ops", "dlq", "verify", "--dir", str(root)])
    assert result.exit_code == 0, result.output
