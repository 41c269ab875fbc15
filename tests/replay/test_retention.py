"""Retention: mark and sweep with a snapshot (SPEC §8), on a real store with a frozen clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.cli.main import cli
from dpone.contracts.reasons import ReasonCode
from dpone.dlq import store as store_module
from dpone.dlq.canonical import with_checksum
from dpone.dlq.errors import DlqStorageError
from dpone.dlq.model import rejected_rows
from dpone.dlq.refs import file_refs
from dpone.dlq.retention import (
    RetentionEvidenceInvalid,
    RetentionPlan,
    RetentionSnapshotDrift,
    apply_retention,
    plan_retention,
)
from dpone.dlq.store import DlqStore
from dpone.dlq.writer import RunWriter
from dpone.testing import FrozenClock

from .conftest import T0, assert_valid

SOON = datetime.fromisoformat("2026-03-11T00:00:00Z")  # everything unexpired (30 days)
LATER = datetime.fromisoformat("2026-04-15T00:00:00Z")  # everything expired


def rows(count: int, path: str = "data/orders.csv") -> Any:
    return rejected_rows(
        file_refs(path, "ab" * 32, range(1, count + 1)), ReasonCode.TYPE_MISMATCH, columns="x"
    )


def ack(store: DlqStore, run_id: str, record_ids: list[str]) -> None:
    for record_id in record_ids:
        store.write_ack(
            run_id,
            record_id,
            {
                "record_sha256": store.read_record(run_id, record_id).sha256,
                "plan_id": "sha256:" + "0" * 64,
                "idempotency_key": f"replay-{record_id.lower()}",
                "outcome": "applied",
                "resolver_identity": "test-resolver",
                "target_identity": "test-sink",
            },
        )


@pytest.fixture
def store(tmp_path: Path) -> DlqStore:
    return DlqStore(tmp_path / "dlq", clock=FrozenClock(T0))


@pytest.fixture
def seeded(store: DlqStore) -> Iterator[dict[str, Any]]:
    """run-a closed (4 records, 2 acknowledged), run-b aborted (2), run-c open and live (1)."""
    with store.open_run("run-a", "load-a", pipeline="orders") as writer:
        ids_a = writer.write_chunk(rows(4))
    ack(store, "run-a", ids_a[:2])
    with store.open_run("run-b", "load-b", pipeline="orders") as writer:
        ids_b = writer.write_chunk(rows(2, "data/b.csv"))
    store.abort_run("run-b")
    live: RunWriter = store.open_run("run-c", "load-c", pipeline="orders")
    live.write_chunk(rows(1, "data/c.csv"))
    yield {"a": ids_a, "b": ids_b, "live": live}
    live.abort()


def on_disk(store: DlqStore, run_id: str) -> list[str]:
    return sorted(p.stem for p in (store.root / "runs" / run_id / "records").glob("*.json"))


def acks_on_disk(store: DlqStore, run_id: str) -> list[str]:
    return sorted(p.stem for p in (store.root / "acks" / run_id).glob("*.json"))


def by_run(plan: RetentionPlan) -> dict[str, Any]:
    return {run["run_id"]: run for run in plan.to_json()["runs"]}


def test_nothing_unexpired_or_pending_is_deleted(store: DlqStore, seeded: dict[str, Any]) -> None:
    soon = plan_retention(store, SOON)
    assert soon.delete_count == 0
    assert soon.protected() == {
        "active": 1,
        "evidence_pinned": 0,
        "unexpired": 6,
        "pending_replay": 0,
    }
    result = apply_retention(store, soon)
    assert result.deleted == 0
    assert len(on_disk(store, "run-a")) == 4

    later = plan_retention(store, LATER)
    runs = by_run(later)
    assert [d["record_id"] for d in runs["run-a"]["delete"]] == seeded["a"][:2]
    assert runs["run-a"]["protected"]["pending_replay"] == 2
    assert runs["run-b"]["protected"]["pending_replay"] == 2
    assert runs["run-c"]["protected"]["active"] == 1
    assert runs["run-b"]["delete"] == runs["run-c"]["delete"] == []


def test_expired_acknowledged_records_go_and_verify_stays_clean(
    store: DlqStore, seeded: dict[str, Any]
) -> None:
    plan = plan_retention(store, LATER)
    doc = plan.to_json()
    assert_valid(doc, "dpone.dlq-retention-plan.v1")
    assert RetentionPlan.from_json(json.loads(json.dumps(doc))) == plan

    result = apply_retention(store, plan)

    assert_valid(result.to_json(), "dpone.dlq-retention-result.v1")
    assert (result.deleted, result.deleted_acks, result.clean) == (2, 2, True)
    assert on_disk(store, "run-a") == seeded["a"][2:]
    assert acks_on_disk(store, "run-a") == []
    index = store.read_index("run-a")
    assert (index.status, index.record_ids) == ("closed", tuple(seeded["a"][2:]))
    assert result.runs[0].index_fingerprint == index.fingerprint
    assert_valid(index.to_json(), "dpone.dlq-index.v1")
    assert store.verify() == []
    assert len(on_disk(store, "run-b")) == 2
    # The remaining records can still be replayed and acknowledged.
    ack(store, "run-a", seeded["a"][2:3])
    assert store.verify() == []


def test_include_unacknowledged_deletes_expired_pending_records(
    store: DlqStore, seeded: dict[str, Any]
) -> None:
    plan = plan_retention(store, LATER, include_unacknowledged=True)
    assert plan.to_json()["include_unacknowledged"] is True
    assert plan.delete_count == 6

    result = apply_retention(store, plan)

    assert result.deleted == 6
    assert on_disk(store, "run-a") == on_disk(store, "run-b") == []
    aborted = store.read_index("run-b")
    assert (aborted.status, aborted.status_reason, aborted.record_count) == (
        "aborted",
        "run_failed",
        0,
    )
    assert len(on_disk(store, "run-c")) == 1  # active, whatever the flag
    assert store.verify() == []


@pytest.mark.parametrize("change", ["ack", "new_run", "open_run_grows"])
def test_drift_between_plan_and_apply_is_refused(
    store: DlqStore, seeded: dict[str, Any], change: str
) -> None:
    plan = plan_retention(store, LATER)
    if change == "ack":
        ack(store, "run-a", seeded["a"][2:3])
    elif change == "new_run":
        with store.open_run("run-d", "load-d", pipeline="orders") as writer:
            writer.write_chunk(rows(1, "data/d.csv"))
    else:
        seeded["live"].write_chunk(rows(2, "data/c2.csv"))

    with pytest.raises(RetentionSnapshotDrift) as caught:
        apply_retention(store, plan)

    assert caught.value.code == "DPONE_DLQ_RETENTION_SNAPSHOT_DRIFT"
    assert len(on_disk(store, "run-a")) == 4
    assert len(acks_on_disk(store, "run-a")) >= 2


def test_evidence_pinned_runs_are_kept_whole(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path
) -> None:
    pins = tmp_path / "pins"
    # <pins>/orders/<run>/data_contract_evidence.json, the layout of an evidence output dir;
    # index_ref is relative to the bundle's folder.
    folder = pins / "orders" / "run-a"
    folder.mkdir(parents=True)
    index = store.root / "runs" / "run-a" / "index.json"
    ref = Path("..", "..", "..", index.relative_to(tmp_path)).as_posix()
    doc = with_checksum({"run_id": "run-a", "dlq": {"index_ref": ref}})
    (folder / "data_contract_evidence.json").write_bytes(json.dumps(doc).encode())

    plan = plan_retention(store, LATER, include_unacknowledged=True, evidence_dirs=[pins])

    assert plan.pinned_runs == ("run-a",)
    assert by_run(plan)["run-a"]["protected"]["evidence_pinned"] == 4
    assert by_run(plan)["run-a"]["delete"] == []
    apply_retention(store, plan)
    assert len(on_disk(store, "run-a")) == 4

    doc["run_id"] = "changed"  # the checksum no longer matches
    (folder / "data_contract_evidence.json").write_bytes(json.dumps(doc).encode())
    with pytest.raises(RetentionEvidenceInvalid):
        plan_retention(store, LATER, evidence_dirs=[pins])


def test_an_interrupted_apply_is_finished_by_applying_again(
    store: DlqStore, seeded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = plan_retention(store, LATER)
    real = store_module._unlink_all

    def crash(dir_fd: int, record_ids: list[str], where: str) -> None:
        raise DlqStorageError(f"cannot remove in {where}: EIO")

    monkeypatch.setattr(store_module, "_unlink_all", crash)
    with pytest.raises(DlqStorageError):
        apply_retention(store, plan)
    # The index was rewritten first; the files and their acknowledgements are still there,
    # and verify says so.
    assert store.read_index("run-a").record_count == 2
    assert {f.code for f in store.verify()} == {"DPONE_DLQ_INDEX_DRIFT", "DPONE_DLQ_ACK_ORPHAN"}

    monkeypatch.setattr(store_module, "_unlink_all", real)
    result = apply_retention(store, plan)

    assert [(r.run_id, r.resumed) for r in result.runs] == [("run-a", True)]
    assert result.clean
    assert on_disk(store, "run-a") == seeded["a"][2:]
    assert store.verify() == []


def cli_run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.stdout


def test_the_cli_plans_writes_and_applies(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path
) -> None:
    out = tmp_path / "plan.json"
    code, md = cli_run(
        "ops",
        "retention",
        "plan",
        "--dir",
        str(store.root),
        "--now",
        "2026-04-15T00:00:00Z",
        "--include-unacknowledged",
        "--output",
        str(out),
    )
    assert code == 0
    assert "--include-unacknowledged" in md
    assert_valid(json.loads(out.read_bytes()), "dpone.dlq-retention-plan.v1")

    edited = json.loads(out.read_bytes())
    edited["include_unacknowledged"] = False
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(edited), encoding="utf-8")
    code, text = cli_run("ops", "retention", "apply", str(changed), "--format", "json")
    assert code == 2
    assert json.loads(text)["code"] == "DPONE_DLQ_RETENTION_PLAN_INVALID"

    code, text = cli_run("ops", "retention", "apply", str(out), "--format", "json")
    assert code == 0
    doc = json.loads(text)
    assert_valid(doc, "dpone.dlq-retention-result.v1")
    assert doc["deleted_records"] == 6
    assert doc["verify"]["clean"] is True

    # Applying a finished plan again is a no-op, not an error.
    code, text = cli_run("ops", "retention", "apply", str(out), "--format", "json")
    assert code == 0
    assert json.loads(text)["deleted_records"] == 0
    code, _ = cli_run("ops", "retention", "plan", "--dir", str(store.root), "--now", "tomorrow")
    assert code == 2
