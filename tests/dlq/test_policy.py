"""The DLQ policy helpers the store relies on."""

from __future__ import annotations

import pytest

from dpone.contracts.dlq import DlqPolicy, is_production
from dpone.dlq.errors import DlqPolicyInvalid
from tests.support.dlqrows import StoreFactory


@pytest.mark.parametrize(
    ("environment", "production"),
    [("production", True), ("prod", True), ("PROD-eu", True), ("dev", False), ("staging", False)],
)
def test_is_production(environment: str, production: bool) -> None:
    # What the rule refuses (preserve in production) is the compiler's check, tested through
    # compiled manifests in tests/manifest/test_environment.py.
    assert is_production(environment) is production


def test_unknown_pii_policy_is_refused(make_store: StoreFactory) -> None:
    with pytest.raises(DlqPolicyInvalid):
        make_store(pii_policy="everything")


def test_defaults_are_the_seed_defaults() -> None:
    policy = DlqPolicy(directory="dlq")
    assert (
        policy.retention_days,
        policy.pii_policy,
        policy.max_record_bytes,
        policy.max_diagnostic_bytes,
        policy.max_records_per_run,
        policy.max_index_bytes,
    ) == (30, "reference_only", 262_144, 16_384, 100_000, 67_108_864)
    assert policy.out_of_range() == []
