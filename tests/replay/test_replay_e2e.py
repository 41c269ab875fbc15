"""Replay end to end: a real quarantine run, a contract fix, then ``quarantine-replay``
(SPEC §8) against DuckDB and PostgreSQL, read back independently of dpone."""

from __future__ import annotations

import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest

from dpone.ops.replay import KEY_PATTERN
from dpone.ops.verification import verify_store
from tests.support.replay_pipeline import (
    CANARY,
    FIRST_LOAD,
    REPLAYED,
    ROWS,
    Pipeline,
    assert_acks_valid,
    assert_valid,
    make_pipeline,
)


def test_replay_loads_exactly_the_rows_that_now_pass_once(pipeline: Pipeline) -> None:
    run_id = pipeline.quarantine_run()
    loads_before = pipeline.load_ids()

    first = pipeline.execute(run_id)

    assert first.exit_code == 0, first.stdout + first.stderr
    doc = first.doc
    assert_valid(doc, "dpone.dlq-replay-result.v1")
    assert doc["counts"] == {
        "applied": 2,
        "already_acknowledged": 0,
        "still_rejected": 1,
        "not_replayable": 0,
    }
    assert doc["still_rejected_by_reason"] == {"schema.type_mismatch": 1}
    assert doc["pending"] == 1
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED
    applied = sorted(i["idempotency_key"] for i in doc["items"] if i["outcome"] == "applied")
    # One sink load for the batch, committing the key of each of its rows.
    new_loads = sorted(set(pipeline.load_ids()) - set(loads_before))
    assert len(new_loads) == 1
    assert pipeline.committed_keys() == dict.fromkeys(applied, new_loads[0])
    assert len(pipeline.acked(run_id)) == 2
    applied_ids = sorted(i["record_id"] for i in doc["items"] if i["outcome"] == "applied")
    assert pipeline.acked_ids(run_id) == applied_ids  # each applied row acknowledged once
    assert_acks_valid(pipeline, run_id)
    assert verify_store(pipeline.store()) == []

    second = pipeline.execute(run_id)

    assert second.exit_code == 0
    assert second.doc["counts"] == {
        "applied": 0,
        "already_acknowledged": 2,
        "still_rejected": 1,
        "not_replayable": 0,
    }
    assert second.doc["plan_id"] == doc["plan_id"]
    assert pipeline.acked_ids(run_id) == applied_ids  # nothing acknowledged a second time
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED
    assert pipeline.load_ids() == sorted(loads_before + new_loads)
    # reference_only: the replay read the rows, and still no value left the sink.
    plan = pipeline.replay(run_id, "--manifest", str(pipeline.manifest), "--format", "json")
    for result in (first, second, plan):
        assert CANARY not in result.stdout + result.stderr
    for path in pipeline.dlq_dir.rglob("*.json*"):
        assert CANARY not in path.read_text(encoding="utf-8"), path


def test_a_replay_killed_between_commit_and_acks_loads_each_row_once(
    pipeline: Pipeline,
) -> None:
    run_id = pipeline.quarantine_run()
    loads_before = pipeline.load_ids()

    pipeline.execute_killed(run_id, "replay_after_batch_commit")

    # The batch committed with its keys, its acknowledgements never came.
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED
    assert len(pipeline.committed_keys()) == 2
    assert pipeline.acked(run_id) == []

    result = pipeline.execute(run_id)

    assert result.exit_code == 0, result.stdout
    assert result.doc["counts"]["applied"] == 2  # acknowledged now, not loaded again
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED
    assert len(pipeline.load_ids()) == len(loads_before) + 1
    assert len(pipeline.acked(run_id)) == 2
    assert len(set(pipeline.acked_ids(run_id))) == 2  # on disk, each acknowledged once
    assert verify_store(pipeline.store()) == []
    again = pipeline.execute(run_id)
    assert again.doc["counts"]["applied"] == 0
    assert pipeline.amounts() == FIRST_LOAD | REPLAYED


def test_the_plan_is_bounded_stable_and_says_when_it_is_unbound(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    unbound = [
        duck.replay(run_id, "--dir", str(duck.dlq_dir), "--format", "json").doc for _ in "ab"
    ]
    bound = duck.replay(run_id, "--manifest", str(duck.manifest), "--format", "json").doc

    for doc in (*unbound, bound):
        assert_valid(doc, "dpone.dlq-replay-plan.v1")
    assert unbound[0]["plan_id"] == unbound[1]["plan_id"]
    assert unbound[0]["items"] == unbound[1]["items"]
    assert unbound[0]["resolver_identity"] == unbound[0]["target_identity"] == "unbound"
    assert bound["plan_id"] != unbound[0]["plan_id"]
    assert bound["target_identity"] == "duckdb:warehouse.duckdb:analytics.orders"
    assert bound["resolver_identity"] == "dpone-file:orders_rp:file:csv:data/*.csv"
    assert bound["max_items"] == 100_000
    items = bound["items"]
    assert [i["record_id"] for i in items] == sorted(i["record_id"] for i in items)
    assert len(items) == 3
    assert len({i["idempotency_key"] for i in items}) == 3
    assert all(re.match(KEY_PATTERN, i["idempotency_key"]) for i in items)
    md = duck.replay(run_id, "--dir", str(duck.dlq_dir))
    assert md.exit_code == 0
    assert "This plan is unbound" in md.stdout
    too_small = duck.replay(run_id, "--dir", str(duck.dlq_dir), "--max-items", "2")
    assert too_small.exit_code == 1
    assert "DPONE_DLQ_REPLAY_PLAN_TOO_LARGE" in too_small.stderr


def test_yes_without_an_executor_exits_4_and_applies_nothing(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    for args in (
        ("--dir", str(duck.dlq_dir), "--yes"),
        ("--dir", str(duck.dlq_dir), "--execute"),
        ("--manifest", str(duck.manifest), "--yes"),
    ):
        result = duck.replay(run_id, *args, "--format", "json")
        assert result.exit_code == 4, args
        assert result.doc["code"] == "DPONE_DLQ_REPLAY_EXECUTOR_REQUIRED"
        assert "nothing was applied" in result.doc["message"]
        assert_valid(result.doc, "dpone.error.v1")
    assert duck.amounts() == FIRST_LOAD
    assert duck.acked(run_id) == []


def test_a_changed_source_file_refuses_the_whole_replay(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    duck.write_csv((*ROWS, ("7", "g", "1.00")))

    result = duck.execute(run_id)

    assert result.exit_code == 1
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_SOURCE_CHANGED"
    assert duck.amounts() == FIRST_LOAD
    assert duck.acked(run_id) == []


def test_a_tampered_record_stops_the_replay_before_any_row(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    victim = duck.segment_files(run_id)[-1]
    data = bytearray(victim.read_bytes())
    data[data.rindex(b'"column":"amount"') + 10] ^= 0x01  # one byte of one record
    victim.write_bytes(bytes(data))

    result = duck.execute(run_id)

    assert result.exit_code == 1
    assert result.doc["code"] == "DPONE_DLQ_CHECKSUM_MISMATCH"
    assert duck.amounts() == FIRST_LOAD
    assert duck.acked(run_id) == []


def test_an_aborted_run_is_refused(duck: Pipeline) -> None:
    run_id = duck.quarantine_run()
    duck.store().abort_run(run_id)

    for result in (
        duck.replay(run_id, "--dir", str(duck.dlq_dir), "--format", "json"),
        duck.execute(run_id),
    ):
        assert result.exit_code == 1
        assert result.doc["code"] == "DPONE_DLQ_REPLAY_RUN_ABORTED"
    assert duck.amounts() == FIRST_LOAD


def test_a_run_whose_load_never_committed_is_refused(duck: Pipeline) -> None:
    """A run killed between its DLQ close and its sink commit leaves a closed DLQ run whose
    rows the next run reads again: replaying them too would load them twice."""
    duck.write_csv()
    duck.write_manifest()
    duck.run()
    duck.write_csv((*ROWS, ("7", "g", "9.999")))
    dead = duck.run_killed("before_sink_commit")
    assert json.loads((duck.dlq_dir / "runs" / dead / "index.json").read_bytes())["status"] == (
        "closed"
    )
    duck.write_manifest(scale=3)

    result = duck.execute(dead)

    assert result.exit_code == 1
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_LOAD_NOT_COMMITTED"


def test_a_changed_plan_key_or_target_is_refused_before_any_row(
    duck: Pipeline, tmp_path: Path
) -> None:
    run_id = duck.quarantine_run()
    bound = duck.replay(run_id, "--manifest", str(duck.manifest), "--format", "json").doc
    unbound = duck.replay(run_id, "--dir", str(duck.dlq_dir), "--format", "json").doc
    changed_key = json.loads(json.dumps(bound))
    changed_key["items"][0]["idempotency_key"] = "replay-" + "0" * 64
    changed_ref = json.loads(json.dumps(bound))
    changed_ref["items"][0]["record_ref"] = changed_ref["items"][1]["record_ref"]
    plans = {"key": changed_key, "ref": changed_ref, "unbound": unbound}
    for name, doc in plans.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(doc), encoding="utf-8")
        result = duck.execute(run_id, "--plan", str(path))
        assert result.exit_code == 1, name
        assert result.doc["code"] == "DPONE_DLQ_REPLAY_PLAN_MISMATCH", name

    # The plan pins where rows come from and go to: another table refuses it.
    good = tmp_path / "good.json"
    good.write_text(json.dumps(bound), encoding="utf-8")
    moved = json.loads(duck.manifest.read_text(encoding="utf-8"))
    moved["sink"]["table"] = "orders_v2"
    duck.manifest.write_text(json.dumps(moved), encoding="utf-8")
    result = duck.execute(run_id, "--plan", str(good))
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_PLAN_MISMATCH"
    assert duck.amounts() == FIRST_LOAD
    assert duck.acked(run_id) == []

    # Not the contract: its keys stay valid when the contract is fixed once more.
    duck.write_manifest(scale=3, quality={"assertions": {"min_rows_per_load": 1}})
    result = duck.execute(run_id, "--plan", str(good))
    assert result.exit_code == 0
    assert result.doc["plan_id"] == bound["plan_id"]
    assert duck.amounts() == FIRST_LOAD | REPLAYED


def test_a_retry_under_a_changed_contract_still_loads_each_row_once(duck: Pipeline) -> None:
    """Killed after the batch's commit; the contract then changes again before the retry: the
    keys do not depend on the contract, so the committed row is not loaded a second time."""
    run_id = duck.quarantine_run()
    duck.execute_killed(run_id, "replay_after_batch_commit")
    duck.write_manifest(scale=3, quality={"assertions": {"min_rows_per_load": 1}})

    result = duck.execute(run_id)

    assert result.doc["counts"]["applied"] == 2
    assert duck.amounts() == FIRST_LOAD | REPLAYED


def test_a_value_the_target_cannot_hold_stays_pending(duck: Pipeline) -> None:
    """Scale 3 in the contract but the column still DECIMAL(12,2): loading would round."""
    duck.write_csv()
    duck.write_manifest()
    run_id = duck.run()
    duck.write_manifest(scale=3)

    result = duck.execute(run_id, "--format", "md")
    doc = duck.execute(run_id).doc

    assert "sink.row_rejected" in result.stdout
    assert "widen the table's column" in result.stdout  # what to do about it
    assert doc["counts"]["applied"] == 0
    assert doc["still_rejected_by_reason"] == {
        "schema.type_mismatch": 1,
        "sink.row_rejected": 2,
    }
    assert duck.amounts() == FIRST_LOAD
    assert duck.acked(run_id) == []


def test_merge_replays_by_key(duck: Pipeline) -> None:
    duck.write_csv()
    duck.write_manifest(mode="merge")
    run_id = duck.run()
    duck.write_manifest(scale=3, mode="merge")
    duck.migrate_amount()

    assert duck.execute(run_id).doc["counts"]["applied"] == 2
    assert duck.amounts() == FIRST_LOAD | REPLAYED


def test_replace_pipelines_are_not_replayed(duck: Pipeline) -> None:
    duck.write_csv()
    duck.write_manifest(mode="replace")
    run_id = duck.run()

    result = duck.execute(run_id)

    assert result.exit_code == 2
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_UNSUPPORTED"


@pytest.mark.parametrize("fmt", ["md", "json"])
def test_the_runbook_flow_ends_with_a_clean_store(duck: Pipeline, fmt: str) -> None:
    """docs/runbook.md: summary, fix, replay, verify, retention."""
    run_id = duck.quarantine_run()
    summary = duck.cli("ops", "dlq", "summary", "--dir", str(duck.dlq_dir), "--format", fmt)
    assert summary.exit_code == 0
    assert duck.execute(run_id).exit_code == 0
    assert duck.cli("ops", "dlq", "verify", "--dir", str(duck.dlq_dir)).exit_code == 0
    plan_file = duck.root / "retention.json"
    planned = duck.cli(
        "ops",
        "retention",
        "plan",
        "--dir",
        str(duck.dlq_dir),
        "--now",
        "2026-06-01T00:00:00Z",
        "--output",
        str(plan_file),
        "--format",
        fmt,
    )
    assert planned.exit_code == 0
    applied = duck.cli("ops", "retention", "apply", str(plan_file), "--format", fmt)
    assert applied.exit_code == 0, applied.stdout
    # The two replayed (acknowledged) records went; the one still rejected stays pending.
    assert len(duck.record_ids(run_id)) == 1
    assert duck.acked(run_id) == []
    assert verify_store(duck.store()) == []
    assert duck.amounts() == FIRST_LOAD | REPLAYED


#: Row 4 repeats id 3 (quarantined by unique_columns); rows 5 and 6 share id 9 and both fail
#: the contract (scale 3), so the run's unique check never saw them.
DUPLICATES: tuple[tuple[str, str, str], ...] = (
    ("1", "a", "10.50"),
    ("2", "b", "12.345"),
    ("3", "c", "7.25"),
    ("3", CANARY, "7.25"),
    ("9", "x", "1.234"),
    ("9", CANARY, "2.345"),
)
UNIQUE = {"assertions": {"unique_columns": {"value": ["id"], "on_failure": "quarantine"}}}


def test_a_duplicate_key_stays_out_of_the_target_and_of_the_batch(pipeline: Pipeline) -> None:
    pipeline.write_csv(DUPLICATES)
    pipeline.write_manifest(quality=UNIQUE)
    run_id = pipeline.run()
    assert pipeline.amounts() == {1: Decimal("10.50"), 3: Decimal("7.25")}
    pipeline.write_manifest(scale=3, quality=UNIQUE)
    pipeline.migrate_amount()

    doc = pipeline.execute(run_id).doc

    assert_valid(doc, "dpone.dlq-replay-result.v1")
    assert doc["counts"]["applied"] == 2
    assert doc["still_rejected_by_reason"] == {"quality.rule_failed": 2}
    rejected = [i for i in doc["items"] if i["outcome"] == "still_rejected"]
    assert {i["rule_id"] for i in rejected} == {"unique_columns"}
    # id 3 is already in the target; the second id 9 repeats the first one of the batch.
    assert pipeline.amounts() == {
        1: Decimal("10.50"),
        2: Decimal("12.345"),
        3: Decimal("7.25"),
        9: Decimal("1.234"),
    }
    again = pipeline.execute(run_id).doc
    assert again["counts"] == {
        "applied": 0,
        "already_acknowledged": 2,
        "still_rejected": 2,
        "not_replayable": 0,
    }
    assert CANARY not in json.dumps(doc)


def test_row_predicates_apply_to_replayed_rows_batch_verdicts_do_not(duck: Pipeline) -> None:
    """A row predicate failing under `fail` keeps that row pending (it does not abort the
    replay); min_rows_per_load, a batch verdict, is not applied to a replay."""
    run_id = duck.quarantine_run()
    (duck.root / "checks.py").write_text(
        "def not_four(row):\n    return row['id'] != 4\n", encoding="utf-8"
    )
    quality = {
        "assertions": {
            "min_rows_per_load": 1000,
            "custom": [{"predicate": "checks:not_four", "on_failure": "fail"}],
        }
    }
    duck.write_manifest(scale=3, quality=quality)

    doc = duck.execute(run_id).doc

    assert doc["counts"]["applied"] == 1
    four = [i for i in doc["items"] if i["reason_code"] == "quality.rule_failed"]
    assert len(four) == 1
    assert four[0]["rule_id"]
    assert duck.amounts() == FIRST_LOAD | {2: REPLAYED[2]}


@pytest.mark.parametrize(
    "kind",
    ["duckdb", pytest.param("postgres", marks=pytest.mark.postgres), "filesystem"],
)
def test_more_rows_than_chunk_size_split_into_batch_loads(
    kind: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    pipeline = make_pipeline(request, tmp_path, kind)
    rows = tuple((str(i), f"n{i}", "1.005" if i % 2 else "2.00") for i in range(1, 24))
    pipeline.write_csv(rows)
    pipeline.write_manifest(chunk_size=5)
    run_id = pipeline.run()
    loads_before = pipeline.load_ids()
    pipeline.write_manifest(scale=3, chunk_size=5)
    pipeline.migrate_amount()

    doc = pipeline.execute(run_id).doc

    assert doc["counts"]["applied"] == 12
    new_loads = sorted(set(pipeline.load_ids()) - set(loads_before))
    assert len(new_loads) == 3  # 12 rows in batches of at most 5
    per_load = Counter(pipeline.committed_keys().values())
    assert sorted(per_load.values()) == [2, 5, 5]
    applied = {i["idempotency_key"] for i in doc["items"] if i["outcome"] == "applied"}
    assert set(pipeline.committed_keys()) == applied
    assert len(pipeline.amounts()) == 23
    assert len(pipeline.acked(run_id)) == 12
    assert pipeline.execute(run_id).doc["counts"]["already_acknowledged"] == 12
    assert len(pipeline.load_ids()) == len(loads_before) + 3


def test_a_dlt_sink_is_refused_with_what_to_do(duck: Pipeline) -> None:
    duck.write_csv()
    duck.write_manifest(mode="merge")
    doc = json.loads(duck.manifest.read_text(encoding="utf-8"))
    doc["sink"] = {k: v for k, v in doc["sink"].items() if k != "database"}
    doc["sink"] |= {"type": "dlt", "destination": "duckdb"}
    duck.manifest.write_text(json.dumps(doc), encoding="utf-8")
    run_id = duck.run()

    result = duck.execute(run_id)

    assert result.exit_code == 2
    assert result.doc["code"] == "DPONE_DLQ_REPLAY_UNSUPPORTED"
    assert "dlt sink" in result.doc["message"]
    assert any("duckdb, postgres or filesystem" in fix for fix in result.doc["fixes"])
    assert duck.acked(run_id) == []


@pytest.mark.parametrize("command", [("quarantine-replay",), ("dlq", "verify"), ("dlq", "summary")])
def test_an_unknown_run_id_says_where_to_find_the_runs(
    duck: Pipeline, command: tuple[str, ...]
) -> None:
    duck.write_csv()
    duck.write_manifest()
    duck.run()
    unknown = "01M8XFGK3SJXA7TGVADXN088WX"

    result = duck.cli(
        "ops", *command, "--dir", str(duck.dlq_dir), "--run-id", unknown, "--format", "json"
    )

    assert result.exit_code == 2
    assert result.doc["code"] == "DPONE_DLQ_RUN_NOT_FOUND"
    assert any("dpone ops dlq summary --dir" in fix for fix in result.doc["fixes"])
