"""OpenLineage: standard facets in the evidence, run events through the file transport."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dpone.manifest.compiler import compile_text
from dpone.runtime.lifecycle import run_pipeline

MANIFEST = """\
name: lineage_orders
source: {type: file, format: csv, path: orders.csv}
sink:
  type: duckdb
  table: orders
  options:
    schema_contract:
      enforcement: quarantine
      columns:
        id: {type: integer, nullable: false}
        amount: {type: decimal, precision: 8, scale: 2}
quality:
  assertions:
    unique_columns: {value: [id], on_failure: quarantine}
    min_rows_per_load: 1
observability:
  openlineage:
    namespace: shop
    transport: {type: file, log_file_path: .dpone/lineage.jsonl}
"""
CANARY = "canary-7f3a"


def test_run_emits_start_and_complete_with_quality_facets(tmp_path: Path) -> None:
    (tmp_path / "orders.csv").write_text(f"id,amount\n1,1.00\n2,{CANARY}\n1,3.00\n3,4.00\n")
    (tmp_path / "manifest.yaml").write_text(MANIFEST)
    report = run_pipeline(compile_text(MANIFEST, path=tmp_path / "manifest.yaml"))
    assert report.status == "succeeded"
    assert report.rows.quarantined == 2

    raw = (tmp_path / ".dpone" / "lineage.jsonl").read_text()
    assert CANARY not in raw
    assert str(tmp_path) not in raw
    events = [json.loads(line) for line in raw.splitlines() if line.strip()]
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    complete = events[-1]
    assert (complete["job"]["namespace"], complete["job"]["name"]) == ("shop", "lineage_orders")
    facets = complete["inputs"][0]["inputFacets"]
    assertions = {a["name"]: a["success"] for a in facets["dataQualityAssertions"]["assertions"]}
    assert assertions == {"unique_columns": False, "min_rows_per_load": True}
    assert facets["inputStatistics"]["rowCount"] == 4
    assert complete["outputs"][0]["outputFacets"]["outputStatistics"]["rowCount"] == 2

    evidence_path = tmp_path / str(report.evidence)
    evidence = json.loads(evidence_path.read_text())
    ol = evidence["openlineage_facets"]
    assert ol["dataQualityAssertions"]["_schemaURL"].startswith("https://openlineage.io/spec/")
    assert ol["dpone"]["rowsQuarantined"] == 2


def test_failed_run_emits_fail(tmp_path: Path) -> None:
    manifest = MANIFEST.replace("enforcement: quarantine", "enforcement: strict")
    (tmp_path / "orders.csv").write_text("id,amount\n1,1.001\n")
    report = run_pipeline(compile_text(manifest, path=tmp_path / "manifest.yaml"))
    assert report.status == "failed"
    lines = (tmp_path / ".dpone" / "lineage.jsonl").read_text().splitlines()
    assert [json.loads(x)["eventType"] for x in lines if x.strip()] == ["START", "FAIL"]


def test_facets_are_what_the_openlineage_client_serializes() -> None:
    """dpone builds the evidence's standard facets without importing the client (a fifth of
    a second per run); they must stay byte for byte what the client would write."""
    from openlineage.client.facet_v2 import (
        data_quality_assertions_dataset as dq,
    )
    from openlineage.client.facet_v2 import (
        input_statistics_input_dataset,
        output_statistics_output_dataset,
    )
    from openlineage.client.serde import Serde

    from dpone.assertions.spec import AssertionVerdict
    from dpone.evidence.lineage import PRODUCER, facets

    verdicts = [
        AssertionVerdict("ids", "unique_columns", "row", "quarantine", "passed"),
        AssertionVerdict("rows", "min_rows_per_load", "batch", "fail", "failed", 0, 3),
    ]
    built = facets(verdicts, rows_read=7, rows_loaded=5, rows_quarantined=2, enforcement="warn")

    def client(facet: object) -> dict[str, object]:
        return {**Serde.to_dict(facet), "_producer": PRODUCER}

    quality = dq.DataQualityAssertionsDatasetFacet(
        assertions=[
            dq.Assertion(assertion=v.type, success=v.verdict == "passed", name=v.name)
            for v in verdicts
        ]
    )
    assert built["dataQualityAssertions"] == client(quality)
    assert built["inputStatistics"] == client(
        input_statistics_input_dataset.InputStatisticsInputDatasetFacet(rowCount=7)
    )
    assert built["outputStatistics"] == client(
        output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(rowCount=5)
    )


def test_assertion_params_are_their_configured_values_as_the_client_serializes_them() -> None:
    from openlineage.client.facet_v2 import (
        data_quality_assertions_dataset as dq,
    )
    from openlineage.client.serde import Serde

    from dpone.assertions.spec import AssertionVerdict
    from dpone.evidence.lineage import PRODUCER, facets, run_params

    verdicts = [
        AssertionVerdict("rows", "min_rows_per_load", "batch", "fail", "passed", 0, 3),
        AssertionVerdict("keys", "required_columns", "row", "warn", "warned", 1, 3),
        AssertionVerdict("mine", "custom", "row", "fail", "passed", 0, 3),
    ]
    configured: dict[str, dict[str, Any]] = {
        "rows": {"value": 1},
        "keys": {"value": ["id", "amount"]},
        # a nested value is not a plain parameter: left out rather than flattened
        "mine": {"predicate": "checks:positive", "vectorized": True, "options": {"k": 1}},
    }
    params = run_params(manifest_fingerprint="sha256:" + "0" * 64, mode="merge", engine="dask")
    built = facets(
        verdicts,
        rows_read=3,
        rows_loaded=3,
        rows_quarantined=0,
        enforcement="strict",
        params=params,
        assertion_params_by_name=configured,
    )
    expected: list[dict[str, Any]] = [
        {"value": 1},
        {"value": ["id", "amount"]},
        {"predicate": "checks:positive", "vectorized": True},
    ]
    quality = dq.DataQualityAssertionsDatasetFacet(
        assertions=[
            dq.Assertion(assertion=v.type, success=v.verdict == "passed", name=v.name, params=p)
            for v, p in zip(verdicts, expected, strict=True)
        ]
    )
    assert built["dataQualityAssertions"] == {**Serde.to_dict(quality), "_producer": PRODUCER}
    assert built["dpone"]["params"] == {
        "manifestFingerprint": "sha256:" + "0" * 64,
        "mode": "merge",
        "engine": "dask",
    }
