"""End-to-end runs that every sink must pass; ``test_run_<sink>.py`` binds them to one sink.

Each test writes a manifest and CSV files, runs ``dpone run`` and then reads the outcome back
from the real target (a DuckDB file, a PostgreSQL schema, committed Parquet files), from the
state file's bytes and from the DLQ and evidence files on disk: the report is never the proof.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, ClassVar

from tests.support.project import CANARY, HEADER, Project, good, loaded, ts

# Bad rows of the quarantine and warn scenarios; the canary sits in every one of them.
LOSSY_AMOUNT = ("4", CANARY, "12.345", ts(4), "true")  # scale 3 into decimal(10, 2)
NULL_ID = (None, CANARY, "5.00", ts(5), "false")  # id is not nullable
THREE_BAD = ("6", CANARY, CANARY, "2026-01-06T10:00:00", "maybe")  # amount, updated_at, active


def violations(evidence: dict[str, Any]) -> dict[tuple[str, str], int]:
    return {(v["column"], v["reason"]): v["count"] for v in evidence["violations"]}


def cursor_moment(state: dict[str, Any]) -> datetime:
    cursor = state["cursor"]
    assert cursor["column"] == "updated_at"
    assert cursor["type"] == "timestamp"
    return datetime.fromisoformat(cursor["value"].replace("Z", "+00:00"))


class SinkScenarios:
    """Bound to a sink by subclasses: ``kind`` is ``duckdb``, ``postgres`` or ``filesystem``."""

    kind: ClassVar[str]
    #: the strategy of the coerce scenarios: a re-read must not load a row twice
    coerce_strategy: ClassVar[dict[str, Any]] = {"mode": "merge", "unique_key": ["id"]}
    #: how the target names a variant column (dlt's naming drops the leading underscores)
    variant_prefix: ClassVar[str] = "__dpone__nc__"

    # --- strict -------------------------------------------------------------------------------

    def test_strict_loads_every_row(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), good(2), good(3)])
        project.write_manifest(enforcement="strict")

        report = project.run()

        assert report["exit_code"] == 0
        assert report["status"] == "succeeded"
        assert report["data_outcome"] == "passed"
        assert project.rows() == [loaded(1), loaded(2), loaded(3)]
        assert project.dlq().run_ids() == []
        assert project.state()["revision"] == 1
        evidence = project.evidence(report["run_id"])
        assert project.root / report["evidence"] == project.evidence_path(report["run_id"])
        assert evidence["execution_status"] == "succeeded"
        assert evidence["summary"]["rows_loaded"] == 3
        assert evidence["sink"]["load_id"] == report["load_id"]
        project.check_artifacts()

    def test_strict_failure_leaves_sink_and_state_as_they_were(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), good(2)])
        project.write_manifest(enforcement="strict", chunk_size=2)
        assert project.run()["exit_code"] == 0
        rows_before, state_before = project.rows(), project.state_bytes()
        assert rows_before == [loaded(1), loaded(2)]
        # Two valid chunks are staged before the third one breaks the contract.
        project.write_csv("b.csv", [good(3), good(4), good(5), (" 6 ", CANARY, "1", ts(6), "t")])

        report = project.run()

        assert report["exit_code"] == 1
        assert report["status"] == "failed"
        assert report["error"]["code"] == "DPONE_CONTRACT_VIOLATION"
        assert report["sink"]["committed"] is False
        assert report["rows"]["loaded"] == 0
        assert project.rows() == rows_before
        assert project.state_bytes() == state_before
        assert report["run_id"] not in project.dlq().run_ids()
        evidence = project.evidence(report["run_id"])
        assert evidence["execution_status"] == "failed"
        assert evidence["data_outcome"] == "failed_quality_gate"
        assert evidence["state"]["advanced"] is False
        self.assert_no_staging(project)
        project.check_artifacts()

    def test_failed_assertion_after_quarantine_aborts_the_dlq_run(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1)])
        project.write_manifest(enforcement="quarantine", assertions={"max_rows_per_load": 2})
        assert project.run()["exit_code"] == 0
        rows_before, state_before = project.rows(), project.state_bytes()
        project.write_csv("b.csv", [good(2), LOSSY_AMOUNT, good(3)])

        # Three rows would load (1, 2, 3): the batch verdict fails after the DLQ records of
        # the lossy row are durable, and before the sink commits.
        report = project.run()

        assert report["exit_code"] == 1
        assert report["error"]["code"] == "DPONE_ASSERTION_FAILED"
        assert report["rows"]["loaded"] == 0
        assert project.rows() == rows_before
        assert project.state_bytes() == state_before
        index = project.dlq_index(report["run_id"])
        assert index["status"] == "aborted"
        assert [e["code"] for e in index["records"]] == ["schema.type_mismatch"]
        assert project.evidence(report["run_id"])["dlq"]["run_status"] == "aborted"
        self.assert_no_staging(project)
        project.check_artifacts()

    # --- coerce -------------------------------------------------------------------------------

    def test_coerce_loads_lossless_variants(self, project: Project) -> None:
        project.write_csv(
            "a.csv",
            [
                (" 7 ", "g", " 3.5 ", "2026-01-07 15:30+05:30", "yes"),
                ("8", "h", "1e2", "2026-01-08T10:00:00Z", "0"),
                good(9),
            ],
        )
        project.write_manifest(enforcement="coerce", **self.coerce_strategy)

        report = project.run()

        assert report["exit_code"] == 0
        assert report["data_outcome"] == "passed"
        assert project.rows() == [
            (7, "g", "3.50", "2026-01-07T10:00:00+00:00", True),
            (8, "h", "100.00", "2026-01-08T10:00:00+00:00", False),
            loaded(9),
        ]
        assert report["state"]["advanced"] is True
        project.check_artifacts()

    def test_coerce_dead_letters_a_lossy_row_and_holds_the_state(self, project: Project) -> None:
        lossy = (" 2 ", CANARY, "12.345", ts(2), "yes")  # scale 3 into decimal(10, 2)
        project.write_csv("a.csv", [good(1), lossy, good(3)])
        project.write_manifest(enforcement="coerce", **self.coerce_strategy)

        report = project.run()

        # Like quarantine: the valid rows load, the lossy one is a durable DLQ record, exit 0.
        assert report["exit_code"] == 0
        assert report["status"] == "succeeded"
        assert report["data_outcome"] == "passed_with_quarantine"
        assert report["rows"]["loaded"] == 2
        assert report["rows"]["quarantined"] == 1
        assert project.rows() == [loaded(1), loaded(3)]
        (record,) = project.dlq_records(report["run_id"])
        assert record["record_ref"] == project.file_ref("a.csv", 2)
        assert record["reason"]["code"] == "schema.type_mismatch"
        assert record["reason"]["column"] == "amount"
        # The state is held: the next run reads the rejected row again.
        assert report["state"]["advanced"] is False
        assert project.state_bytes() is None
        evidence = project.evidence(report["run_id"])
        assert evidence["state"]["advanced"] is False
        assert evidence["data_outcome"] == "passed_with_quarantine"
        assert evidence["dlq"]["record_count"] == 1
        assert violations(evidence) == {("amount", "schema.type_mismatch"): 1}

        # The re-read under merge (replace where the sink cannot merge) loads no row twice.
        again = project.run()
        assert again["exit_code"] == 0
        assert again["rows"]["loaded"] == 2
        assert project.rows() == [loaded(1), loaded(3)]
        assert project.state_bytes() is None

        # Fixed at the source: every row loads once, the state advances.
        project.write_csv("a.csv", [good(1), (" 2 ", "n2", "10.00", ts(2), "no"), good(3)])
        fixed = project.run()
        assert fixed["exit_code"] == 0
        assert fixed["data_outcome"] == "passed"
        assert fixed["state"]["advanced"] is True
        assert project.rows() == [loaded(1), loaded(2), loaded(3)]
        assert project.state()["last_run_id"] == fixed["run_id"]
        project.check_artifacts()

    def test_coerce_without_a_dlq_counts_the_rejected_rows(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), ("2", CANARY, "12.345", ts(2), "2")])
        project.write_manifest(enforcement="coerce", dlq={"enabled": False}, **self.coerce_strategy)

        report = project.run()

        assert report["exit_code"] == 0
        assert report["data_outcome"] == "passed_with_quarantine"
        assert report["rows"]["loaded"] == 1
        assert report["rows"]["dropped"] == 1
        assert report["rows"]["quarantined"] == 0
        assert report["state"]["advanced"] is False
        assert project.rows() == [loaded(1)]
        assert not project.dlq_root.exists()
        evidence = project.evidence(report["run_id"])
        assert evidence["summary"]["rows_dropped"] == 1
        assert violations(evidence) == {
            ("amount", "schema.type_mismatch"): 1,
            ("active", "schema.type_mismatch"): 1,
        }
        project.check_artifacts()

    def test_coerce_with_append_is_a_validate_error(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1)])
        project.write_manifest(enforcement="coerce", mode="append")

        result = project.cli()

        assert result.exit_code == 2
        error = result.doc
        assert error["code"] == "DPONE_MANIFEST_COERCE_APPEND"
        assert error["pointer"] == "/sink/strategy/mode"
        assert error["line"] >= 1
        assert any("merge" in fix and "unique_key" in fix for fix in error["fixes"])
        assert any("quarantine" in fix for fix in error["fixes"])
        assert project.rows() is None
        assert project.state_bytes() is None

    # --- quarantine ---------------------------------------------------------------------------

    def test_quarantine_loads_good_rows_and_records_each_bad_one(self, project: Project) -> None:
        project.write_csv("a.csv", [good(1), LOSSY_AMOUNT, good(2), NULL_ID, THREE_BAD, good(3)])
        project.write_manifest(enforcement="quarantine")

        report = project.run()

        assert report["exit_code"] == 0
        assert report["data_outcome"] == "passed_with_quarantine"
        assert report["rows"] == {
            "read": 6,
            "loaded": 3,
            "quarantined": 3,
            "warned": 0,
            "skipped": 0,
            "late_skipped": 0,
            "chunks": 1,
        }
        assert project.rows() == [loaded(1), loaded(2), loaded(3)]

        run_id = report["run_id"]
        assert project.dlq().run_ids() == [run_id]
        records = project.dlq_records(run_id)
        expected = [
            (2, "schema.type_mismatch", "amount", "decimal(10,2)"),
            (4, "schema.required_null", "id", "integer"),
            (5, "schema.type_mismatch", "amount", "decimal(10,2)"),  # first in column order
        ]
        assert [
            (
                r["record_ref"],
                r["reason"]["code"],
                r["reason"]["column"],
                r["diagnostics"]["expected_type"],
            )
            for r in records
        ] == [(project.file_ref("a.csv", row), code, col, typ) for row, code, col, typ in expected]
        for record in records:
            assert record["run_id"] == run_id
            assert record["load_id"] == report["load_id"]
            assert record["payload"] == {"policy": "reference_only", "value": None}
            assert record["diagnostics"]["source_partition"] == "data/a.csv"
            assert record["replay"] == {"status": "pending", "replayable": True}
        assert [r["diagnostics"]["source_offset"] for r in records] == [2, 4, 5]

        index = project.dlq_index(run_id)
        assert index["status"] == "closed"
        assert index["record_count"] == 3
        assert sorted(e["record_id"] for e in index["records"]) == sorted(
            r["record_id"] for r in records
        )
        evidence = project.evidence(run_id)
        assert evidence["dlq"]["record_count"] == 3
        assert evidence["dlq"]["reasons"] == {"schema.required_null": 1, "schema.type_mismatch": 2}
        assert evidence["dlq"]["index_fingerprint"] == index["fingerprint"]
        bundle = project.evidence_path(run_id).parent
        assert (bundle / evidence["dlq"]["index_ref"]).resolve() == project.dlq_index_path(run_id)
        # Every violation of a row counts, not only the first.
        assert violations(evidence) == {
            ("amount", "schema.type_mismatch"): 2,
            ("id", "schema.required_null"): 1,
            ("updated_at", "schema.type_mismatch"): 1,
            ("active", "schema.type_mismatch"): 1,
        }
        assert project.state()["last_run_id"] == run_id
        project.check_artifacts()

    # --- warn ---------------------------------------------------------------------------------

    def test_warn_loads_every_row_with_nulls_where_values_do_not_fit(
        self, project: Project
    ) -> None:
        project.write_csv(
            "a.csv",
            [
                good(1),
                ("2", CANARY, "2.00", ts(2), "maybe"),  # active is nullable: NULL, a warning
                ("3", "n3", "12.345", ts(3), "true"),  # amount is NOT NULL: the row is rejected
                (None, "n4", "4.00", ts(4), "false"),  # id is NOT NULL: the row is rejected
                good(5),
            ],
        )
        project.write_manifest(enforcement="warn")

        report = project.run()

        assert report["exit_code"] == 0
        assert report["data_outcome"] == "passed_with_quarantine"
        assert report["rows"]["loaded"] == 3
        assert report["rows"]["warned"] == 1
        assert report["rows"]["quarantined"] == 2
        assert project.rows() == [
            loaded(1),
            (2, CANARY, "2.00", "2026-01-02T10:00:00+00:00", None),
            loaded(5),
        ]
        # The table keeps the contract's NOT NULL (a dlt table has its own columns too).
        nullable = project.nullable()
        assert {name: nullable[name] for name in HEADER} == {
            "id": False,
            "name": True,
            "amount": False,
            "updated_at": False,
            "active": True,
        }
        records = project.dlq_records(report["run_id"])
        assert [(r["record_ref"], r["reason"]["code"], r["reason"]["column"]) for r in records] == [
            (project.file_ref("a.csv", 3), "schema.type_mismatch", "amount"),
            (project.file_ref("a.csv", 4), "schema.required_null", "id"),
        ]
        evidence = project.evidence(report["run_id"])
        assert evidence["summary"]["rows_warned"] == 1
        assert evidence["summary"]["rows_quarantined"] == 2
        assert violations(evidence) == {
            ("amount", "schema.type_mismatch"): 1,
            ("active", "schema.type_mismatch"): 1,
            ("id", "schema.required_null"): 1,
        }
        assert project.state()["revision"] == 1
        # The canary is a valid name here, so it is in the sink, but in none of dpone's files.
        project.check_artifacts()

    def test_warned_counts_rows_warned_by_assertions(self, project: Project) -> None:
        project.write_csv(
            "a.csv", [good(1), good(2, name="n1"), ("3", "n3", "3.00", ts(3), "maybe"), good(4)]
        )
        project.write_manifest(
            enforcement="warn",
            assertions={"unique_columns": {"value": ["name"], "on_failure": "warn"}},
        )

        report = project.run()

        # Row 2 repeats a name (an assertion's warning), row 3 has a value nulled (the
        # contract's): two rows warned.
        assert report["exit_code"] == 0
        assert report["data_outcome"] == "passed_with_warnings"
        assert report["rows"]["loaded"] == 4
        assert report["rows"]["warned"] == 2
        evidence = project.evidence(report["run_id"])
        assert evidence["summary"]["rows_warned"] == 2
        project.check_artifacts()

    # --- strict failures name rows ------------------------------------------------------------

    def test_strict_failure_names_the_first_ten_failing_rows(self, project: Project) -> None:
        bad = [(str(i), CANARY, CANARY, ts(i), "true") for i in range(2, 14)]  # 12 bad rows
        project.write_csv("a.csv", [good(1), *bad, good(14)])
        project.write_manifest(enforcement="strict")

        report = project.run()

        assert report["exit_code"] == 1
        error = report["error"]
        assert error["code"] == "DPONE_CONTRACT_VIOLATION"
        expected = [project.file_ref("a.csv", row) for row in range(2, 12)]
        assert error["record_refs"] == expected
        assert "12 row(s)" in error["message"]
        evidence = project.evidence(report["run_id"])
        assert evidence["failure_record_refs"] == expected
        assert project.rows() is None
        text = project.cli("--format", "text").stdout
        assert f"row: {expected[0]}" in text
        assert CANARY not in text
        project.check_artifacts()

    # --- strategies ---------------------------------------------------------------------------

    def test_merge_twice_updates_overlapping_keys(self, project: Project) -> None:
        project.write_manifest(enforcement="strict", mode="merge", unique_key=["id"])
        project.write_csv("a.csv", [good(1), good(2), good(3)])
        assert project.run()["exit_code"] == 0

        project.write_csv(
            "a.csv",
            [
                good(3, name="n3-v2", amount="33.00"),
                good(4, name="n4-v1"),
                good(4, name="n4-v2", amount="44.00"),  # the later row of a key wins
                good(2),
            ],
        )
        report = project.run()

        assert report["exit_code"] == 0
        assert project.rows() == [
            loaded(1),
            loaded(2),
            loaded(3, name="n3-v2", amount="33.00"),
            loaded(4, name="n4-v2", amount="44.00"),
        ]
        project.check_artifacts()

    def test_replace_swaps_the_whole_table(self, project: Project) -> None:
        project.write_manifest(enforcement="strict", mode="replace")
        project.write_csv("a.csv", [good(1), good(2), good(3)])
        assert project.run()["exit_code"] == 0
        assert project.rows() == [loaded(1), loaded(2), loaded(3)]

        project.write_csv("a.csv", [good(4), good(5)])
        report = project.run()

        assert report["exit_code"] == 0
        assert project.rows() == [loaded(4), loaded(5)]
        assert project.state()["revision"] == 2
        project.check_artifacts()

    # --- incremental --------------------------------------------------------------------------

    def test_incremental_runs_pick_up_only_new_rows(self, project: Project) -> None:
        project.write_manifest(enforcement="quarantine", incremental=True)
        project.write_csv("a.csv", [good(1), good(3), good(2)])
        first = project.run()
        assert first["exit_code"] == 0
        assert cursor_moment(project.state()) == datetime(2026, 1, 3, 10, tzinfo=UTC)

        # A new file with later cursors, plus a row older than the window: not loaded, and
        # counted as late (no committed run read it); a.csv's rows are old, not late.
        project.write_csv("b.csv", [good(4), good(9, day=2), good(5)])
        second = project.run()

        assert second["exit_code"] == 0
        assert second["rows"]["read"] == 6
        assert second["rows"]["loaded"] == 2
        assert (second["rows"]["skipped"], second["rows"]["late_skipped"]) == (3, 1)
        assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5)]
        state = project.state()
        assert cursor_moment(state) == datetime(2026, 1, 5, 10, tzinfo=UTC)
        assert state["revision"] == 2
        assert state["last_run_id"] == second["run_id"]
        assert second["state"]["to"] == state["cursor"]["value"]

        # Nothing new: nothing loads and the cursor stays where it is.
        third = project.run()
        assert third["exit_code"] == 0
        assert third["rows"]["loaded"] == 0
        assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5)]
        assert cursor_moment(project.state()) == datetime(2026, 1, 5, 10, tzinfo=UTC)

        # Rows with later cursors appended to a file that was already read.
        project.write_csv("b.csv", [good(4), good(9, day=2), good(5), good(6), good(7)])
        fourth = project.run()
        assert fourth["rows"]["loaded"] == 2
        # The rewritten file is a version no committed run read: its rows older than the
        # window count as late; its row at the committed cursor is a known boundary row.
        assert (fourth["rows"]["skipped"], fourth["rows"]["late_skipped"]) == (4, 2)
        assert project.rows() == [loaded(i) for i in (1, 2, 3, 4, 5, 6, 7)]
        assert cursor_moment(project.state()) == datetime(2026, 1, 7, 10, tzinfo=UTC)
        project.check_artifacts()

    # --- variant columns -----------------------------------------------------------------------

    def variant_run(self, project: Project, *, chunk_size: int, mode: str) -> dict[str, Any]:
        """``conflict_policy: variant_column`` over a CSV whose conflicting values come after
        the first chunk: ``score`` (undeclared, an integer in its 2-row sample) at row 3,
        ``active`` (declared boolean) at row 4; a run that creates the table."""
        path = project.write_csv("a.csv", [])
        rows = [
            (*good(1), "5"),
            (*good(2), "6"),
            (*good(3), "many"),
            (*good(4)[:4], "maybe", "8"),
        ]
        header = ",".join((*HEADER, "score"))
        path.write_text("\n".join([header, *(",".join(r) for r in rows)]) + "\n", "utf-8")
        project.write_manifest(
            chunk_size=chunk_size, mode=mode, unique_key=["id"] * (mode == "merge")
        )
        doc = json.loads(project.manifest_path.read_text("utf-8"))
        doc["sink"]["options"]["type_inference"] = {
            "conflict_policy": "variant_column",
            "sample_rows": 2,
        }
        project.manifest_path.write_text(json.dumps(doc), "utf-8")
        return project.run()

    def test_a_variant_column_first_needed_after_the_first_chunk_loads(
        self, project: Project
    ) -> None:
        """The user's report: ``chunk_size: 1`` failed with DPONE_SINK_SCHEMA_MISMATCH
        (column '__dpone__nc__...' is not in the load schema) where 10000 succeeded."""
        report = self.variant_run(project, chunk_size=1, mode="append")

        assert report["exit_code"] == 0, report.get("error")
        assert report["data_outcome"] == "passed_with_warnings", report["data_outcome"]
        active, score = (self.variant_prefix + c for c in ("active", "score"))
        table = project.read_table()
        assert table is not None
        # The one-chunk order: the columns, then the variant columns in their columns' order
        # (score's variant came first in the file).
        names = table.column_names
        assert names[names.index("score") + 1 :][:2] == [active, score], names
        rows = sorted(table.to_pylist(), key=lambda r: r["id"])
        got = [(r["id"], r["active"], r[active]) for r in rows]
        assert got == [(1, True, None), (2, False, None), (3, True, None), (4, None, "maybe")], got
        assert [(r["score"], r[score]) for r in rows] == [
            (5, None),
            (6, None),
            (None, "many"),
            (8, None),
        ]
        changes = [(c["change"], c["column"]) for c in report["schema_changes"]]
        # (reports name an undeclared CSV column by its position, not its header)
        assert [c for c, _ in changes] == ["table_created", *["variant_column_created"] * 2]
        assert changes[1] == ("variant_column_created", "__dpone__nc__active")
        project.check_artifacts()

    def test_a_merge_widened_mid_load_keeps_the_last_row_per_key(self, project: Project) -> None:
        report = self.variant_run(project, chunk_size=2, mode="merge")

        assert report["exit_code"] == 0, report.get("error")
        active, score = (self.variant_prefix + c for c in ("active", "score"))
        table = project.read_table()
        assert table is not None
        rows = sorted(table.to_pylist(), key=lambda r: r["id"])
        assert [(r["id"], r[active], r[score]) for r in rows] == [
            (1, None, None),
            (2, None, None),
            (3, None, "many"),
            (4, "maybe", None),
        ]
        self.assert_no_staging(project)

    # --- per sink -----------------------------------------------------------------------------

    def assert_no_staging(self, project: Project) -> None:
        """Nothing staged by a failed run is left behind (overridden per sink)."""
