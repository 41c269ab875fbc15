"""``dpone.__all__`` is the curated public API, and ``import dpone`` stays cheap."""

from __future__ import annotations

import subprocess
import sys

import pytest

import dpone

PUBLIC = {
    "ConfigError",
    "DponeError",
    "ErrorDetail",
    "ManifestError",
    "Plan",
    "RowCounts",
    "RunFailed",
    "RunReport",
    "Validation",
    "__version__",
    "compile",
    "ops",
    "prevalidated_metadata",
    "run",
    "validate",
}
OPS = {
    "replay_plan",
    "replay_execute",
    "retention_plan",
    "retention_apply",
    "verify",
    "release_gate",
    "pipeline_list",
    "pipeline_info",
    "pipeline_reset_check",
    "pipeline_reset",
    "pipeline_drop",
    "ops_report",
}

#: SPEC §11: seed 004's own Python interface, module by module.
SEED_004 = {
    "dpone.contracts.dlq": {"DlqPolicy"},
    "dpone.ops.dlq": {"DlqService", "DlqReplayService", "DlqRecordResolver", "DlqReplaySink"},
    "dpone.ops.dlq_store": {"DlqFileStore"},
    "dpone.readiness.schema_contracts": {"SchemaContract"},
    "dpone.type_system": {"ContractEnforcementService"},
    "dpone.ops.data_contract_evidence": {"DataContractEvidenceBundleWriter"},
}


def test_all_is_the_curated_set() -> None:
    assert set(dpone.__all__) == PUBLIC
    assert len(dpone.__all__) == len(PUBLIC)


def test_every_public_name_imports() -> None:
    for name in dpone.__all__:
        assert getattr(dpone, name) is not None, name
    for name in OPS:
        assert callable(getattr(dpone.ops, name)), name
    assert set(dir(dpone)) >= PUBLIC


def test_errors_are_the_errors_module_classes() -> None:
    from dpone import api, errors

    assert dpone.ConfigError is errors.ConfigError
    assert dpone.RunFailed is api.RunFailed
    assert issubclass(dpone.RunFailed, errors.DponeError)
    assert issubclass(dpone.ManifestError, dpone.ConfigError)
    assert dpone.RunFailed.code == "DPONE_RUN_FAILED"
    assert dpone.ConfigError.code == "DPONE_CONFIG_INVALID"


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no_such_name"):
        dpone.no_such_name  # noqa: B018


def test_import_dpone_loads_no_heavy_module() -> None:
    code = (
        "import sys, dpone, dpone.ops, dpone.api\n"
        "heavy = [m for m in ('pyarrow', 'duckdb', 'dlt') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == ""


def test_the_version_is_the_installed_distributions() -> None:
    """pyproject.toml takes the version from dpone/_version.py: what pip installed says so."""
    from importlib import metadata

    assert dpone.__version__ == metadata.version("dpone")


@pytest.mark.parametrize("module", sorted(SEED_004))
def test_seed_004_modules_export_their_names(module: str) -> None:
    import importlib

    loaded = importlib.import_module(module)
    assert SEED_004[module] <= set(loaded.__all__)
    for name in SEED_004[module]:
        assert getattr(loaded, name) is not None, name
