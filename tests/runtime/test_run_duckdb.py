"""Every end-to-end scenario against a DuckDB database file, and known gaps found with it."""

from __future__ import annotations

import json
import threading
from typing import Any

import duckdb
import pytest

from tests.support.project import Project, good, ts

from .scenarios import SinkScenarios


class TestDuckDbRuns(SinkScenarios):
    kind = "duckdb"

    def assert_no_staging(self, project: Project) -> None:
        assert [t for t in project.duckdb_tables() if t.startswith("_dpone_stage_")] == []


def test_warned_rows_are_rows_not_values_beyond_five_per_column(project: Project) -> None:
    # A bad value in a nullable column loads as NULL: six rows beyond the five positions a
    # diagnostic keeps.
    bad = [(str(i), f"n{i}", "10.00", ts(i), "maybe") for i in range(7, 13)]
    project.write_csv("a.csv", [good(i) for i in range(1, 7)] + bad)
    project.write_manifest(
        enforcement="warn",
        assertions={"custom": [{"predicate": "rules:not_seven", "on_failure": "warn"}]},
    )
    (project.root / "rules.py").write_text("def not_seven(row):\n    return row['id'] != 7\n")

    report = project.run()

    assert report["rows"]["loaded"] == 12
    # Row 7 is warned by the contract and by the predicate: one row.
    assert report["rows"]["warned"] == 6


def test_a_row_with_a_bad_cursor_is_quarantined_once_across_runs(project: Project) -> None:
    naive_cursor = ("7", "n7", "7.00", "2026-01-07T10:00:00", "true")
    project.write_csv("a.csv", [good(1), naive_cursor, good(2)])
    project.write_manifest(enforcement="quarantine", incremental=True)

    first = project.run()
    second = project.run()

    assert first["rows"]["quarantined"] == 1
    standing = [
        run_id
        for run_id in project.dlq().run_ids()
        if project.dlq_index(run_id)["status"] != "aborted"
    ]
    assert standing == [first["run_id"]]
    assert second["rows"]["quarantined"] == 0
    assert second["rows"]["skipped"] == 3

    # A rewritten file is new data: its rows are read again, the bad one quarantined anew.
    project.write_csv("a.csv", [good(1), naive_cursor, good(2), good(3)])
    third = project.run()
    assert third["rows"]["quarantined"] == 1
    assert third["rows"]["loaded"] == 1


def test_a_line_that_does_not_decode_is_dead_lettered_once_across_runs(project: Project) -> None:
    """An incremental pipeline remembers a file's undecodable lines as it remembers rows with
    an unparseable cursor: a rerun over the unchanged file does not dead-letter them again."""
    path = project.write_csv("a.csv", [good(1), good(2)])
    path.write_bytes(path.read_bytes() + b"3,n3,10.00,\xff\xfe,true\n")  # not UTF-8
    project.write_manifest(enforcement="quarantine", incremental=True)

    first = project.run()
    second = project.run()

    assert (first["rows"]["loaded"], first["rows"]["quarantined"]) == (2, 1)
    [(key, lines)] = project.state()["unplaced"].items()
    assert (key.endswith("#lines"), lines) == (True, [4])
    assert (second["rows"]["quarantined"], second["rows"]["skipped"]) == (0, 3)
    assert second["dlq"]["run_id"] is None
    assert project.dlq().run_ids() == [first["run_id"]]

    # A rewritten file is new data: its bad line is dead-lettered anew, and remembered anew.
    path.write_bytes(path.read_bytes() + ",".join(good(4)).encode() + b"\n")
    third = project.run()
    assert (third["rows"]["loaded"], third["rows"]["quarantined"]) == (1, 1)
    assert list(project.state()["unplaced"].values()) == [[4]]
    assert project.run()["rows"]["quarantined"] == 0


def test_a_source_error_in_a_later_chunk_fails_the_run_and_rolls_it_back(
    project: Project,
) -> None:
    """File sources are read one chunk ahead on a thread: an error the reader meets several
    chunks in must still fail the run in order, roll back what the earlier chunks staged and
    quarantined, and leave no reader behind."""
    bad_amount = ("4", "n4", "x", ts(4), "true")
    project.write_csv("a.csv", [good(1), good(2), good(3), bad_amount, good(5), good(6)])
    broken = project.write_csv("b.csv", [good(7), good(8)])
    with broken.open("a", encoding="utf-8") as fh:
        # A dirty line would be quarantined; a row past max_row_bytes fails the run.
        fh.write("9,n9,10.00,2026-01-09T10:00:00Z," + "x" * 2000 + "\n")
    manifest = project.write_manifest(enforcement="quarantine", chunk_size=2)
    doc = json.loads(manifest.read_text())
    doc["source"]["options"]["csv"]["max_row_bytes"] = 1024
    manifest.write_text(json.dumps(doc))

    report = project.run()

    assert report["exit_code"] == 1
    assert report["error"]["code"] == "DPONE_SOURCE_ROW_TOO_LONG"
    # Every chunk of a.csv came through, in order, then b.csv's rows before the long one.
    assert report["rows"]["read"] == 8
    assert project.rows() is None  # the staged rows never reached a table
    assert project.load_markers() == []
    assert project.state_bytes() is None
    run_id = report["run_id"]
    assert project.dlq_index(run_id)["status"] == "aborted"
    assert len(project.dlq_records(run_id)) == 1  # the bad amount, in an aborted run
    assert not [t for t in threading.enumerate() if t.name == "dpone-read-ahead"]


def test_a_run_opens_the_database_file_once(
    project: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recovery, the schema look-up, staging and the commit share one open of the file (each
    open costs a 2-row run about 0.05 s); what they commit is still there for the next run."""
    project.write_csv("a.csv", [good(1), good(2)])
    project.write_manifest(enforcement="quarantine")
    assert project.run()["rows"]["loaded"] == 2  # the table and its markers exist now

    opened: list[str] = []
    connect = duckdb.connect

    def counted(database: str = ":memory:", *args: Any, **kwargs: Any) -> Any:
        opened.append(str(database))
        return connect(database, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", counted)
    project.write_csv("a.csv", [good(3), good(4)])
    report = project.run()
    monkeypatch.undo()

    assert report["exit_code"] == 0
    assert report["rows"]["loaded"] == 2
    assert len(opened) == 1
    assert [int(r[0]) for r in project.rows() or []] == [1, 2, 3, 4]
    assert len(project.load_markers()) == 2
