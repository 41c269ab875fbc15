"""Retention: mark and sweep with a snapshot (SPEC §8), on a real store with a frozen clock."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from dpone.canonical import with_checksum
from dpone.cli.main import cli
from dpone.contracts.reasons import ReasonCode
from dpone.dlq.refs import file_refs
from dpone.dlq.rejects import rejected_rows
from dpone.dlq.store import DlqStore
from dpone.dlq.writer import RunWriter
from dpone.ops.repair import repair_store
from dpone.ops.retention import (
    Cut,
    RetentionEvidenceInvalid,
    RetentionPlan,
    RetentionPlanInvalid,
    RetentionSnapshotDrift,
    apply_retention,
    plan_retention,
)
from dpone.ops.verification import verify_store
from dpone.testing import FrozenClock
from tests.support.dlqfiles import acked_ids, record_ids_on_disk, segment_files
from tests.support.processes import dpone_killed_at
from tests.support.replay_pipeline import T0, assert_valid

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
def clock() -> FrozenClock:
    return FrozenClock(T0)


@pytest.fixture
def store(tmp_path: Path, clock: FrozenClock) -> DlqStore:
    return DlqStore(tmp_path / "dlq", clock=clock)


@pytest.fixture
def seeded(store: DlqStore, clock: FrozenClock) -> Iterator[dict[str, Any]]:
    """run-a closed (4 records, 2 acknowledged), run-b aborted (2), run-c open and live (1);
    then time passes: the store's clock stands at LATER, when every record has expired."""
    with store.open_run("run-a", "load-a", pipeline="orders") as writer:
        ids_a = writer.write_chunk(rows(4))
    ack(store, "run-a", ids_a[:2])
    with store.open_run("run-b", "load-b", pipeline="orders") as writer:
        ids_b = writer.write_chunk(rows(2, "data/b.csv"))
    store.abort_run("run-b")
    live: RunWriter = store.open_run("run-c", "load-c", pipeline="orders")
    live.write_chunk(rows(1, "data/c.csv"))
    clock.set(LATER)
    yield {"a": ids_a, "b": ids_b, "live": live}
    live.abort()


def on_disk(store: DlqStore, run_id: str) -> list[str]:
    """The record ids of the run's segment lines (read without dpone), sorted."""
    return record_ids_on_disk(store.root, run_id)


def acks_on_disk(store: DlqStore, run_id: str) -> list[str]:
    """The record ids acknowledged on disk, sorted."""
    return acked_ids(store.root, run_id)


def segments_of(store: DlqStore, run_id: str) -> list[str]:
    return [p.name for p in segment_files(store.root, run_id)]


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
    [segment] = store.read_index("run-a").segments
    assert runs["run-a"]["delete"] == [
        {
            "segment": "00000001.jsonl",
            "sha256": segment.sha256,
            "expires_at": "2026-03-31T12:00:00.000000Z",
            "whole": False,
            "delete_count": 2,
            "acknowledged": 2,
            "record_ids": seeded["a"][:2],
        }
    ]
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
    [compacted] = segments_of(store, "run-a")  # the kept half, in a segment of its own
    assert compacted.startswith("00000001-k")
    assert acks_on_disk(store, "run-a") == []
    index = store.read_index("run-a")
    assert (index.status, index.record_ids) == ("closed", tuple(seeded["a"][2:]))
    assert result.runs[0].index_fingerprint == index.fingerprint
    assert_valid(index.to_json(), "dpone.dlq-index.v1")
    assert verify_store(store) == []
    assert len(on_disk(store, "run-b")) == 2
    # The remaining records can still be replayed and acknowledged.
    ack(store, "run-a", seeded["a"][2:3])
    assert verify_store(store) == []


def test_include_unacknowledged_deletes_expired_pending_records(
    store: DlqStore, seeded: dict[str, Any]
) -> None:
    plan = plan_retention(store, LATER, include_unacknowledged=True)
    assert plan.to_json()["include_unacknowledged"] is True
    assert plan.delete_count == 6

    result = apply_retention(store, plan, include_unacknowledged=True)

    assert result.deleted == 6
    assert on_disk(store, "run-a") == on_disk(store, "run-b") == []
    assert segments_of(store, "run-a") == segments_of(store, "run-b") == []  # dropped whole
    assert [c["whole"] for c in by_run(plan)["run-a"]["delete"]] == [True]
    aborted = store.read_index("run-b")
    assert (aborted.status, aborted.status_reason, aborted.record_count) == (
        "aborted",
        "run_failed",
        0,
    )
    assert len(on_disk(store, "run-c")) == 1  # active, whatever the flag
    assert verify_store(store) == []


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


def _pin_evidence(store: DlqStore, tmp_path: Path, run_id: str) -> Path:
    """A folder of evidence pinning ``run_id``: <pins>/orders/<run>/data_contract_evidence.json,
    the layout of an evidence output dir (index_ref is relative to the bundle's folder)."""
    pins = tmp_path / "pins"
    folder = pins / "orders" / run_id
    folder.mkdir(parents=True)
    index = store.root / "runs" / run_id / "index.json"
    ref = Path("..", "..", "..", index.relative_to(tmp_path)).as_posix()
    doc = with_checksum({"run_id": run_id, "dlq": {"index_ref": ref}})
    (folder / "data_contract_evidence.json").write_bytes(json.dumps(doc).encode())
    return pins


def test_evidence_pinned_runs_are_kept_whole(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path
) -> None:
    pins = _pin_evidence(store, tmp_path, "run-a")

    plan = plan_retention(store, LATER, include_unacknowledged=True, evidence_dirs=[pins])

    assert plan.pinned_runs == ("run-a",)
    assert by_run(plan)["run-a"]["protected"]["evidence_pinned"] == 4
    assert by_run(plan)["run-a"]["delete"] == []
    apply_retention(store, plan, include_unacknowledged=True)
    assert len(on_disk(store, "run-a")) == 4

    bundle = pins / "orders" / "run-a" / "data_contract_evidence.json"
    doc = json.loads(bundle.read_bytes())
    doc["run_id"] = "changed"  # the checksum no longer matches
    bundle.write_bytes(json.dumps(doc).encode())
    with pytest.raises(RetentionEvidenceInvalid):
        plan_retention(store, LATER, evidence_dirs=[pins])


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
    # Records, not segments, in the delete column: run-a's one segment holds four.
    assert "| run-a | closed | 4 | 4 | 0 | 0 | 0 | 0 |" in md
    assert "| run-c | open | 1 | 0 | 1 | 0 | 0 | 0 |" in md
    assert_valid(json.loads(out.read_bytes()), "dpone.dlq-retention-plan.v1")

    edited = json.loads(out.read_bytes())
    edited["include_unacknowledged"] = False
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(edited), encoding="utf-8")
    code, text = cli_run("ops", "retention", "apply", str(changed), "--format", "json")
    assert code == 2
    assert json.loads(text)["code"] == "DPONE_DLQ_RETENTION_PLAN_INVALID"

    code, text = cli_run(
        "ops", "retention", "apply", str(out), "--include-unacknowledged", "--format", "json"
    )
    assert code == 0
    doc = json.loads(text)
    assert_valid(doc, "dpone.dlq-retention-result.v1")
    assert doc["deleted_records"] == 6
    assert doc["verify"]["clean"] is True

    # Applying a finished plan again is a no-op, not an error.
    code, text = cli_run(
        "ops", "retention", "apply", str(out), "--include-unacknowledged", "--format", "json"
    )
    assert code == 0
    assert json.loads(text)["deleted_records"] == 0
    code, _ = cli_run("ops", "retention", "plan", "--dir", str(store.root), "--now", "tomorrow")
    assert code == 2


# --- plans that must be refused -----------------------------------------------------------------


def _with_cut(
    plan: RetentionPlan, run_id: str, cut: Cut, *, instead: bool = False
) -> RetentionPlan:
    """``plan`` edited to delete ``cut`` too (or only it), with a plan_id that matches again."""
    runs = tuple(
        replace(run, delete=(cut,) if instead else (*run.delete, cut))
        if run.run_id == run_id
        else run
        for run in plan.runs
    )
    edited = replace(plan, runs=runs).to_json()
    return RetentionPlan.from_json(json.loads(json.dumps(edited)))  # it reads as a valid plan


def _whole(store: DlqStore, run_id: str, count: int) -> Cut:
    segments = store.read_index(run_id).segments
    name, sha = (segments[0].name, segments[0].sha256) if segments else ("00000001.jsonl", "")
    return Cut(name, sha or "sha256:" + "0" * 64, "2026-03-31T12:00:00.000000Z", True, count, 0)


def _acked_cut(store: DlqStore, record_ids: list[str]) -> Cut:
    """A cut of the given (acknowledged) records of run-a's only segment."""
    [seg] = store.read_index("run-a").segments
    count = len(record_ids)
    return Cut(seg.name, seg.sha256, seg.expires_at, False, count, count, tuple(record_ids))


@pytest.mark.parametrize("protection", ["pending_replay", "aborted", "active", "unexpired"])
def test_an_edited_plan_that_deletes_protected_records_is_refused(
    store: DlqStore, seeded: dict[str, Any], protection: str
) -> None:
    before = {run: (on_disk(store, run), segments_of(store, run)) for run in ("run-a", "run-b")}
    acks_before = acks_on_disk(store, "run-a")
    later = plan_retention(store, LATER)
    if protection == "pending_replay":  # the two unacknowledged records of run-a as well
        plan = _with_cut(later, "run-a", _whole(store, "run-a", 4), instead=True)
    elif protection == "aborted":  # run-b: expired, never acknowledged
        plan = _with_cut(later, "run-b", _whole(store, "run-b", 2))
    elif protection == "active":  # run-c is being written
        plan = _with_cut(later, "run-c", _whole(store, "run-c", 1))
    else:  # on 2026-03-11 nothing has expired, acknowledged or not
        soon = plan_retention(store, SOON)
        assert soon.delete_count == 0
        plan = _with_cut(soon, "run-a", _acked_cut(store, seeded["a"][:2]))
    assert plan.delete_count > 0

    with pytest.raises(RetentionPlanInvalid) as caught:
        apply_retention(store, plan)

    assert caught.value.code == "DPONE_DLQ_RETENTION_PLAN_INVALID"
    assert "nothing was deleted" in caught.value.message
    assert {run: (on_disk(store, run), segments_of(store, run)) for run in before} == before
    assert acks_on_disk(store, "run-a") == acks_before
    assert len(on_disk(store, "run-c")) == 1
    assert verify_store(store) == []


def test_an_edited_plan_of_a_pinned_run_is_refused(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path
) -> None:
    pins = _pin_evidence(store, tmp_path, "run-a")
    plan = plan_retention(store, LATER, evidence_dirs=[pins])
    assert plan.delete_count == 0
    cut = _acked_cut(store, seeded["a"][:2])

    with pytest.raises(RetentionPlanInvalid, match="evidence bundle pins the run"):
        apply_retention(store, _with_cut(plan, "run-a", cut))

    assert on_disk(store, "run-a") == sorted(seeded["a"])
    assert acks_on_disk(store, "run-a") == sorted(seeded["a"][:2])


def test_an_edited_plan_file_is_refused_by_the_cli(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path
) -> None:
    plan = _with_cut(plan_retention(store, LATER), "run-b", _whole(store, "run-b", 2))
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(plan.to_json()), encoding="utf-8")
    code, text = cli_run("ops", "retention", "apply", str(path), "--format", "json")
    assert code == 2
    assert json.loads(text)["code"] == "DPONE_DLQ_RETENTION_PLAN_INVALID"
    assert on_disk(store, "run-b") == sorted(seeded["b"])


def test_a_plan_whose_now_is_in_the_future_is_refused(
    store: DlqStore, seeded: dict[str, Any], clock: FrozenClock, tmp_path: Path
) -> None:
    early = plan_retention(store, LATER + timedelta(days=1))
    assert early.delete_count == 2

    with pytest.raises(RetentionPlanInvalid, match="in the future"):
        apply_retention(store, early)

    assert on_disk(store, "run-a") == sorted(seeded["a"])
    assert acks_on_disk(store, "run-a") == sorted(seeded["a"][:2])
    clock.advance(days=1)  # once that time has come, the same plan applies
    assert apply_retention(store, early).deleted == 2

    out = tmp_path / "far.json"
    code, shown = cli_run(
        "ops", "retention", "plan", "--dir", str(store.root), "--now", "2099-01-01T00:00:00Z",
        "--include-unacknowledged", "--output", str(out),
    )  # fmt: skip
    assert code == 0
    assert "This plan looks ahead" in shown  # said before apply refuses it
    code, text = cli_run("ops", "retention", "apply", str(out), "--format", "json")
    assert code == 2
    assert json.loads(text)["code"] == "DPONE_DLQ_RETENTION_PLAN_INVALID"
    assert on_disk(store, "run-a") == sorted(seeded["a"][2:])
    assert on_disk(store, "run-b") == sorted(seeded["b"])


# --- an apply killed half-way -------------------------------------------------------------------


def _killed_apply(store: DlqStore, plan: RetentionPlan, point: str, folder: Path) -> Path:
    """``dpone ops retention apply`` in a process of its own, SIGKILLed at ``point``."""
    path = folder / "plan.json"
    path.write_text(json.dumps(plan.to_json()), encoding="utf-8")
    confirm = ["--include-unacknowledged"] if plan.include_unacknowledged else []
    args = ["ops", "retention", "apply", str(path), *confirm]
    dpone_killed_at(point, args, cwd=folder, env={})
    return path


@pytest.mark.parametrize("then", ["apply again", "repair, then apply again"])
def test_an_apply_killed_after_the_compaction(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path, then: str
) -> None:
    plan = plan_retention(store, LATER)
    kept = seeded["a"][2:]
    _killed_apply(store, plan, "retention_after_compact", tmp_path)

    # The compacted segment is published, the index still lists the old one: nothing lost.
    assert store.read_index("run-a").record_ids == tuple(seeded["a"])
    old = "00000001.jsonl"
    [compacted] = [name for name in segments_of(store, "run-a") if name != old]
    assert compacted.startswith("00000001-k")
    assert segments_of(store, "run-a") == sorted([old, compacted])
    assert sorted(on_disk(store, "run-a")) == sorted([*seeded["a"], *kept])
    [finding] = verify_store(store)
    assert (finding.code, finding.path, finding.repairable) == (
        "DPONE_DLQ_SEGMENT_UNLISTED",
        f"runs/run-a/segments/{compacted}",
        True,
    )
    if then.startswith("repair"):
        assert repair_store(store) == [finding]
        assert verify_store(store) == []
        assert segments_of(store, "run-a") == [old]
        assert store.read_index("run-a").record_ids == tuple(seeded["a"])

    result = apply_retention(store, plan)

    assert result.clean
    assert result.deleted == 2
    assert store.read_index("run-a").record_ids == tuple(kept)
    assert segments_of(store, "run-a") == [compacted]
    assert on_disk(store, "run-a") == kept
    assert acks_on_disk(store, "run-a") == []
    assert [r.record_id for r in store.iter_records("run-a")] == kept
    assert verify_store(store) == []


@pytest.mark.parametrize("then", ["apply again", "repair, then apply again"])
@pytest.mark.parametrize("unacknowledged", [False, True], ids=["compacted", "dropped"])
def test_an_apply_killed_after_the_index_replace(
    store: DlqStore, seeded: dict[str, Any], tmp_path: Path, then: str, unacknowledged: bool
) -> None:
    plan = plan_retention(store, LATER, include_unacknowledged=unacknowledged)
    kept = [] if unacknowledged else seeded["a"][2:]
    _killed_apply(store, plan, "retention_after_index", tmp_path)

    # The index lists what is kept; the old segment and the deleted records' acks remain.
    assert store.read_index("run-a").record_ids == tuple(kept)
    assert "00000001.jsonl" in segments_of(store, "run-a")
    for record_id in kept:
        assert store.read_record("run-a", record_id).record_id == record_id
    found = {(f.code, f.repairable) for f in verify_store(store, run_id="run-a")}
    assert ("DPONE_DLQ_SEGMENT_UNLISTED", True) in found
    if then.startswith("repair"):
        repair_store(store)
        assert "00000001.jsonl" not in segments_of(store, "run-a")
        assert store.read_index("run-a").record_ids == tuple(kept)
        # SPEC §8: repair alone finishes a crashed apply (the deleted records' acks too).
        assert verify_store(store) == []
        assert acks_on_disk(store, "run-a") == []

    result = apply_retention(store, plan, include_unacknowledged=unacknowledged)

    assert result.clean, result.findings
    assert ("run-a", True) in [(r.run_id, r.resumed) for r in result.runs]
    assert store.read_index("run-a").record_ids == tuple(kept)
    assert on_disk(store, "run-a") == kept
    assert acks_on_disk(store, "run-a") == []
    assert [r.record_id for r in store.iter_records("run-a")] == kept
    if unacknowledged:
        assert segments_of(store, "run-a") == segments_of(store, "run-b") == []
    assert verify_store(store) == []
    again = apply_retention(store, plan, include_unacknowledged=unacknowledged)
    assert again.deleted == 0  # finished: applying again is a no-op
