"""One production rule (SPEC §2, §5) for the compiler, the plan and the DLQ store."""

from __future__ import annotations

import pytest

from dpone.contracts.dlq import is_production
from dpone.errors import ManifestError
from dpone.manifest.compiler import compile_text
from tests.manifest.helpers import BASE


@pytest.mark.parametrize(
    ("environment", "production"),
    [("production", True), ("prod", True), ("prod-eu", True), ("dev", False), ("pre-prod", False)],
)
def test_plan_and_compiler_use_the_store_rule(environment: str, production: bool) -> None:
    text = f"environment: {environment}\n" + BASE
    plan = compile_text(text, path="/m/manifest.yaml")
    assert plan.is_production is production
    assert is_production(environment) is production
    assert plan.to_json()["production"] is production
    preserve = text.replace("  options:\n", "  options:\n    dlq: {pii_policy: preserve}\n", 1)
    if production:
        with pytest.raises(ManifestError) as info:
            compile_text(preserve, path="/m/manifest.yaml")
        assert [e.code for e in info.value.errors] == ["DPONE_MANIFEST_PII_PRESERVE_IN_PRODUCTION"]
    else:
        assert compile_text(preserve, path="/m/manifest.yaml").sink.dlq.pii_policy == "preserve"
