"""``dpone.ops`` on a real run of the orders example: verify, replay, retention, gate."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import dpone
from dpone.published import schema_errors


@pytest.fixture
def ran(orders: Path) -> tuple[Path, dpone.RunReport]:
    """The example after one run: 36 rows loaded, 4 DLQ records."""
    return orders, dpone.run(orders)


def _dlq(manifest: Path) -> Path:
    return manifest.parent / ".dpone" / "dlq"


def test_verify_a_clean_store(ran: tuple[Path, dpone.RunReport]) -> None:
    manifest, report = ran
    result = dpone.ops.verify(_dlq(manifest))
    assert result.clean
    assert result.findings == ()
    one = dpone.ops.verify(_dlq(manifest), run_id=report.run_id, repair=True)
    assert one.clean
    assert one.to_json()["run_id"] == report.run_id


def test_verify_refuses_a_folder_that_is_not_a_store(ran: tuple[Path, dpone.RunReport]) -> None:
    manifest, _ = ran
    with pytest.raises(dpone.ConfigError) as caught:
        dpone.ops.verify(manifest.parent)
    assert caught.value.code == "DPONE_DLQ_NOT_A_STORE"


def test_replay_plans_unbound_and_bound(ran: tuple[Path, dpone.RunReport]) -> None:
    manifest, report = ran
    unbound = dpone.ops.replay_plan(report.run_id, dlq_dir=_dlq(manifest)).to_json()
    assert unbound["item_count"] == 4
    assert unbound["resolver_identity"] == "unbound"
    assert schema_errors(unbound, "dpone.dlq-replay-plan.v1") == []
    bound = dpone.ops.replay_plan(report.run_id, manifest=manifest).to_json()
    assert bound["item_count"] == 4
    assert bound["resolver_identity"] != "unbound"


def test_replay_execute_applies_nothing_while_the_rows_are_still_bad(
    ran: tuple[Path, dpone.RunReport],
) -> None:
    manifest, report = ran
    result = dpone.ops.replay_execute(manifest, report.run_id).to_json()
    assert result["counts"]["applied"] == 0
    assert result["pending"] == 4


def test_retention_plan_and_apply(ran: tuple[Path, dpone.RunReport], tmp_path: Path) -> None:
    manifest, _ = ran
    plan_file = tmp_path / "retention.json"
    plan = dpone.ops.retention_plan(_dlq(manifest), output=plan_file)
    doc = plan.to_json()
    assert schema_errors(doc, "dpone.dlq-retention-plan.v1") == []
    assert doc["totals"]["records"] == 4
    assert doc["totals"]["delete"] == 0  # nothing expired, nothing acknowledged
    assert plan_file.is_file()
    later = datetime.now(UTC) + timedelta(days=400)
    everything = dpone.ops.retention_plan(
        _dlq(manifest), now=later, include_unacknowledged=True
    ).to_json()
    assert everything["totals"]["delete"] == 4
    result = dpone.ops.retention_apply(plan_file)
    assert result.clean
    assert result.to_json()["deleted_records"] == 0


def test_retention_plan_refuses_a_time_without_zone(ran: tuple[Path, dpone.RunReport]) -> None:
    manifest, _ = ran
    with pytest.raises(dpone.ConfigError):
        dpone.ops.retention_plan(_dlq(manifest), now="2026-01-01T00:00:00")


def test_release_gate_passes_the_run(ran: tuple[Path, dpone.RunReport], tmp_path: Path) -> None:
    manifest, report = ran
    assert report.evidence is not None
    bundle = manifest.parent / report.evidence
    gate = dpone.ops.release_gate(
        [bundle], roots=[manifest.parent], output=tmp_path, max_quarantine_ratio=1
    )
    assert gate.decision == "pass"
    assert (tmp_path / "release_gate.json").is_file()
    blocked = dpone.ops.release_gate(
        [bundle], roots=[manifest.parent], allowed_outcomes=["passed"], max_quarantine_ratio=1
    )
    assert blocked.decision == "blocked"
